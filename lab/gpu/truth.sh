#!/usr/bin/env bash
# One answer per instance sold: what the cross-host and pipeline-cost benchmarks need from one lent
# H200 machine (nvidia-h200 or nvidia-h200-x4), in one call of under 9 minutes from a bare machine.
#   1. the host's fingerprint: `sizer calibrate` (per-vCPU rates with one and every vCPU busy, memory
#      bandwidth, CPU layout), $OUT/fingerprint.json;
#   2. resnet50-train (CPU decoding) alone at 8, 16 and, where the host has the threads, 24 vCPUs, on
#      local NVMe with RAM that caches the dataset, one pass, with its GPU ceiling and the sweep's
#      calibration and fingerprint: $OUT/alone/sizer.sqlite;
#   3. on a host of 4 GPUs or more (PARALLEL): the 4-GPU whole-node data-parallel point at 16 vCPUs per
#      GPU (into the same store), and the 16-vCPU shape with every slot busy (`--parallel 4`, its four
#      passes side by side, the first measured alone again: the load factor), $OUT/loaded/sizer.sqlite;
#   4. the pipeline-cost benchmark (lab/benchmarks/pipeline_cost.py) at 4 and 8 vCPUs, where time is left;
#   5. `sizer recommend --gpu H200` of the alone store, and a short table.
# Each step starts only where the time left (LIMIT_S, default 530 s from the start) holds its estimate;
# STEPS names the steps to run (default: calibrate alone whole loaded pipeline), so a second call of
# an x4 machine can run what the first had no time for (STEPS=pipeline).
#
# usage: OUT=DIR bash lab/gpu/truth.sh
#   env: SIZER_DATA (/root/sizer-data), LIMIT_S (530), BUDGET (10), PARALLEL (4), PROFILE (gpu; cpu-small
#        tries the script on a host without a GPU: tiny shapes; GPUS=2 PARALLEL=2 each "GPU" a CPU
#        process), NO_SETUP=1 (sizer installed already)
set -uo pipefail
T0=$(date +%s)
[ -n "${NO_SETUP:-}" ] || source lab/gpu/setup.sh
OUT=${OUT:-$PWD/truth-out}; mkdir -p "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
LIMIT_S=${LIMIT_S:-530}
PROFILE=${PROFILE:-gpu}
THREADS=$(nproc)
if [ "$PROFILE" = gpu ]; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  IMAGES=50000; RAM=48G; LEVELS=8,16; [ "$THREADS" -ge 24 ] && LEVELS=8,16,24; SLOT=16; PC_VCPUS=4,8
  BUDGET=${BUDGET:-10}; PARALLEL=${PARALLEL:-4}
else  # a try of the script itself on a CPU host: GPUS=2 PARALLEL=2 tries the multi-GPU steps (CPU processes)
  GPUS=${GPUS:-1}; IMAGES=2048; RAM=2G; LEVELS=1,2; SLOT=1; PC_VCPUS=1; BUDGET=${BUDGET:-4}; PARALLEL=${PARALLEL:-2}
fi
elapsed() { echo $(( $(date +%s) - T0 )); }
STEPS=${STEPS:-calibrate alone whole loaded pipeline}
fits() {  # fits SECONDS NAME [STEP]: whether STEP is asked for and a step of about SECONDS still fits the limit
  case " $STEPS " in *" ${3:-}"*) ;; *) return 1 ;; esac
  if [ $(( $(elapsed) + $1 )) -le "$LIMIT_S" ]; then return 0; fi
  echo "== skipped $2: about $1 s, $(( LIMIT_S - $(elapsed) )) s left"; return 1
}
COMMON=(--workloads resnet50-train --disks local-nvme --ram "$RAM" --budget "$BUDGET" --passes 1 --refine 0
        --profile "$PROFILE" --data "$DATA" --gpu H200)
echo "== $(date -u +%FT%TZ) $GPUS GPU(s), $THREADS threads; levels $LEVELS, RAM $RAM, profile $PROFILE"

sizer data imagenet --images "$IMAGES" --out "$DATA/imagenet" --seed 0 >"$OUT/data.log" 2>&1 \
  || { tail -5 "$OUT/data.log"; echo "dataset generation failed"; exit 4; }
echo "== dataset: $IMAGES images, $(elapsed) s"

if fits 60 "the fingerprint" calibrate; then
  sizer calibrate --out "$OUT/fingerprint.json" --json >"$OUT/calibrate.json" 2>"$OUT/calibrate.log" \
    || { tail -3 "$OUT/calibrate.log"; echo "calibrate failed"; }
  echo "== calibrate: $(elapsed) s"
fi

mkdir -p "$OUT/alone" "$OUT/loaded"
if fits 200 "the points alone" alone; then
  sizer sweep "${COMMON[@]}" --vcpus "$LEVELS" --store "$OUT/alone/sizer.sqlite" --out "$OUT/alone" --json \
    >"$OUT/alone/sweep.json" 2>"$OUT/alone.log" || tail -3 "$OUT/alone.log"
  echo "== alone: $(elapsed) s"
fi
if [ "$GPUS" -ge "$PARALLEL" ] && [ "$PARALLEL" -ge 2 ] && fits 90 "the $PARALLEL-GPU whole-node point" whole; then
  sizer sweep "${COMMON[@]}" --gpus "$PARALLEL" --vcpus-per-gpu "$SLOT" --ram $(( ${RAM%G} * PARALLEL ))G --no-calibrate \
    --store "$OUT/alone/sizer.sqlite" --out "$OUT/whole_node" --json >"$OUT/whole_node.json" 2>"$OUT/whole_node.log"
  rc=$?  # 3: its own report has no one-GPU point to size with; the store's recommend below has them
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || tail -3 "$OUT/whole_node.log"
  echo "== whole node: $(elapsed) s"
fi
if [ "$GPUS" -ge "$PARALLEL" ] && [ "$PARALLEL" -ge 2 ] && fits 150 "the $SLOT-vCPU shape with every slot busy" loaded; then
  sizer sweep "${COMMON[@]}" --vcpus "$SLOT" --passes "$PARALLEL" --parallel "$PARALLEL" --interference 1 --no-calibrate \
    --store "$OUT/loaded/sizer.sqlite" --out "$OUT/loaded" --json >"$OUT/loaded/sweep.json" 2>"$OUT/loaded.log" \
    || tail -3 "$OUT/loaded.log"
  echo "== loaded: $(elapsed) s"
fi
PC_BUDGET=$(( BUDGET < 8 ? BUDGET : 8 ))
if fits 280 "the pipeline cost, cold and warm" pipeline; then
  python3 lab/benchmarks/pipeline_cost.py --profile "$PROFILE" --vcpus "$PC_VCPUS" --repeats 1 --ram "$RAM" \
    --budget "$PC_BUDGET" --data "$DATA" --json-out "$OUT/pipeline_cost.json" 2>"$OUT/pipeline_cost.log" \
    | tee "$OUT/pipeline_cost.txt"
elif fits 150 "the pipeline cost, cold only" pipeline; then
  python3 lab/benchmarks/pipeline_cost.py --profile "$PROFILE" --vcpus "$PC_VCPUS" --repeats 1 --ram "$RAM" \
    --budget "$PC_BUDGET" --data "$DATA" --conditions cold --json-out "$OUT/pipeline_cost.json" \
    2>"$OUT/pipeline_cost.log" | tee "$OUT/pipeline_cost.txt"
fi
rm -rf /dev/shm/pipeline-cost
[ -f "$OUT/alone/sizer.sqlite" ] && sizer recommend --store "$OUT/alone/sizer.sqlite" --gpu H200 --json \
  >"$OUT/recommend.json" 2>"$OUT/recommend.log"
python3 lab/gpu/truth_table.py "$OUT"
ls /sys/fs/cgroup/sizer /sys/fs/cgroup/*/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
echo "== done in $(elapsed) s"
