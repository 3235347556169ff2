#!/usr/bin/env bash
# Scaling with the GPU count on a multi-GPU host, in one call of a lent machine (<= 600 s):
# resnet50-train (JPEGs decoded by CPU workers) at 1, 2 and, where the host has them, 4 GPUs, at two
# vCPU-per-GPU levels (8 and 16: a shape of N GPUs gets N x 8 and N x 16 vCPUs), on local NVMe with
# RAM that holds the dataset, one pass, --budget 10. Training runs data-parallel (one process per
# GPU, NCCL, DistributedDataParallel) inside each shape's one cpuset, memory limit and disk. The
# host's NCCL_* variables (NCCL_NVLS_ENABLE=0 keeps NVLink multicast off) reach every process as set.
# Prints the scaling table: GPUs, vCPUs per GPU, rate, per-GPU rate, efficiency against one GPU at
# the same vCPUs per GPU, the old per-GPU-share prediction and the gap (lab/gpu/multi_gpu_table.py).
# The store, report.html, results.json, points.csv, the log and the table (JSON) land in $OUT.
#
# usage: OUT=DIR bash lab/gpu/multi_gpu.sh
#   env: GPUS (default 1,2 and 4 where present), LEVELS (vCPUs per GPU, default 8,16, fewer where
#        the host has too few threads), RAM (default 48G per GPU of the largest count), BUDGET (10),
#        MAX_TIME (start no point after this, default 420s), SIZER_DATA (/root/sizer-data), OUT,
#        PROFILE (gpu; cpu-small tries the script on a host without a GPU: each GPU a CPU process)
set -uo pipefail
T0=$(date +%s)
source lab/gpu/setup.sh
OUT=${OUT:-$PWD/multi-gpu-out}; mkdir -p "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
PROFILE=${PROFILE:-gpu}
THREADS=$(nproc)
if [ "$PROFILE" = gpu ]; then
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
  HOST_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  IMAGES=50000  # the dataset a gpu-profile sweep reads (sizer.sweep.data.DATASET_IMAGES): it would make this size anyway
else
  HOST_GPUS=${HOST_GPUS:-2}
  IMAGES=2048
fi
if [ -z "${GPUS:-}" ]; then
  GPUS=1; [ "$HOST_GPUS" -ge 2 ] && GPUS=1,2; [ "$HOST_GPUS" -ge 4 ] && GPUS=1,2,4
fi
MAXG=${GPUS##*,}
if [ -z "${LEVELS:-}" ]; then
  TOP=$(( THREADS / MAXG )); [ "$TOP" -gt 16 ] && TOP=16
  LEVELS=$(( TOP / 2 )),$TOP
fi
RAM=${RAM:-$(( 48 * MAXG ))G}
echo "== $(date -u +%FT%TZ) $HOST_GPUS GPU(s), $THREADS threads; GPUs $GPUS x vCPUs per GPU $LEVELS, RAM $RAM, profile $PROFILE"
echo "== host NCCL settings (kept in every process): $(env | grep '^NCCL_' | tr '\n' ' ')"

# The dataset first, so its time is its own (a sweep finds it made with the same parameters).
T1=$(date +%s)
sizer data imagenet --images "$IMAGES" --out "$DATA/imagenet" --seed 0 >"$OUT/data.log" 2>&1 \
  || { tail -5 "$OUT/data.log"; echo "dataset generation failed"; exit 4; }
echo "== dataset: $IMAGES images under $DATA/imagenet, $(( $(date +%s) - T1 )) s"

sizer sweep --profile "$PROFILE" --workloads resnet50-train --gpus "$GPUS" --vcpus-per-gpu "$LEVELS" \
  --ram "$RAM" --disks local-nvme --budget "${BUDGET:-10}" --passes 1 --refine 0 --no-calibrate \
  --max-time "${MAX_TIME:-420s}" --data "$DATA" --out "$OUT/results" 2>&1 | tee "$OUT/sweep.log"
rc=${PIPESTATUS[0]}
echo "== sweep exit $rc after $(( $(date +%s) - T0 )) s"
python3 lab/gpu/multi_gpu_table.py "$OUT/results/results.json" --json-out "$OUT/multi_gpu_table.json"
ls /sys/fs/cgroup/sizer /sys/fs/cgroup/*/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
echo "== done in $(( $(date +%s) - T0 )) s"
exit "$rc"
