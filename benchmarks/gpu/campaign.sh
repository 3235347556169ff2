#!/usr/bin/env bash
# A GPU-host campaign, step by step, in one store: each step is a workload entry for
# benchmarks/gpu_sweep.sh (run slice after slice, each slice `sizer sweep --max-time` then
# `--resume`, until that sweep is complete), `variants` (benchmarks/loader_variants.py: the
# CPU-decoding pipeline's variants at a few vCPU counts) or `overhead` (benchmarks/loader_overhead.py:
# the loader against the calibration, alone or step by step up to training; OVERHEAD_WORKERS, default
# 4; OVERHEAD_VARIANTS, default the script's; OVERHEAD_CONSUMER_CPU own or shared; OVERHEAD_REPEATS,
# default 3) or `start` (benchmarks/worker_start.py: a worker's first training and inference steps with
# and without cuDNN's autotuning; START_PARTS, default train,infer; START_REPEATS, default 2). Ends with the
# report, sweep cost and held-out accuracy of the whole store (as measured and with --cpu-cost), and
# touches $RUNS/campaign.done.
#
# usage: bash benchmarks/gpu/campaign.sh STEP...    e.g. resnet50-train variants resnet50-infer:split=train
# env:   RUNS (default ./gpu-runs), SLICE (default 9m), VARIANT_VCPUS (default 4,16), VARIANT_RAM
#        (default 32G), VARIANTS, VARIANT_BUDGET (seconds, default 14), VARIANT_CALIB_BUDGET (seconds,
#        default sizer's), VARIANT_REPEATS (default 1)
set -uo pipefail
RUNS=${RUNS:-$PWD/gpu-runs}; mkdir -p "$RUNS"
export RUNS OUT=$RUNS/out
source benchmarks/gpu/setup.sh
echo "== campaign $(date -u +%FT%TZ): $*"
nvidia-smi -L 2>/dev/null
python3 -c 'import lmdb; print("lmdb", lmdb.__version__)' || echo "lmdb missing: imagenet-preprocess (format lmdb) will fail"
for step in "$@"; do
  if [ "$step" = variants ]; then
    [ -s "$RUNS/loader_variants.json" ] && continue
    echo "== $(date -u +%T) loader variants at ${VARIANT_VCPUS:-4,16} vCPUs"
    python3 benchmarks/loader_variants.py --vcpus "${VARIANT_VCPUS:-4,16}" --ram "${VARIANT_RAM:-32G}" \
      --variants "${VARIANTS:-default,worker,quota,calib,calib-worker}" --budget "${VARIANT_BUDGET:-14}" ${VARIANT_CALIB_BUDGET:+--calib-budget "$VARIANT_CALIB_BUDGET"} --repeats "${VARIANT_REPEATS:-1}" --data "${SIZER_DATA:-/root/sizer-data}" \
      --out "$RUNS/loader_variants.json"
    continue
  fi
  if [ "$step" = start ]; then
    [ -s "$RUNS/worker_start.json" ] && continue
    echo "== $(date -u +%T) a worker's start: ${START_PARTS:-train,infer}"
    python3 benchmarks/worker_start.py --parts "${START_PARTS:-train,infer}" --repeats "${START_REPEATS:-2}" \
      --json > "$RUNS/worker_start.json.part" && mv "$RUNS/worker_start.json.part" "$RUNS/worker_start.json" \
      && python3 benchmarks/worker_start.py --from "$RUNS/worker_start.json"
    continue
  fi
  if [ "$step" = overhead ]; then
    [ -s "$RUNS/loader_overhead.json" ] && continue
    echo "== $(date -u +%T) the loader against the calibration, ${OVERHEAD_WORKERS:-4} workers, consumer CPU ${OVERHEAD_CONSUMER_CPU:-own}"
    # The sweep's own image set (as `sizer run` and `sizer sweep` make it), when no step made it yet.
    [ -d "${SIZER_DATA:-/root/sizer-data}/imagenet/train" ] \
      || sizer data imagenet --out "${SIZER_DATA:-/root/sizer-data}/imagenet" --images 50000 > /dev/null
    python3 benchmarks/loader_overhead.py --data "${SIZER_DATA:-/root/sizer-data}" --workers "${OVERHEAD_WORKERS:-4}" \
      --batch 256 --repeats "${OVERHEAD_REPEATS:-3}" --consumer-cpu "${OVERHEAD_CONSUMER_CPU:-own}" \
      ${OVERHEAD_VARIANTS:+--variants "$OVERHEAD_VARIANTS"} --json > "$RUNS/loader_overhead.json" \
      && python3 benchmarks/loader_overhead.py --from "$RUNS/loader_overhead.json"
    continue
  fi
  for slice in 1 2 3 4 5 6; do
    echo "== $(date -u +%T) $step: slice $slice"
    REPORT=0 bash benchmarks/gpu_sweep.sh "$step"
    rc=$?
    [ $rc -eq 0 ] && break
    [ $rc -ne 3 ] && { echo "== $step: gpu_sweep.sh failed (rc $rc)"; break; }
  done
done
if [ -e "$RUNS/sizer.sqlite" ]; then  # steps that only ran the benchmarks store nothing
  sizer report --store "$RUNS/sizer.sqlite" --out "$RUNS/report" --json > "$RUNS/report.json" || true
  python3 benchmarks/sweep_cost.py --store "$RUNS/sizer.sqlite" || true
  python3 benchmarks/model_accuracy.py --store "$RUNS/sizer.sqlite" || true
  # The same with each window's CPU cost taken out: a sweep measured after that rule was chosen tests it.
  python3 benchmarks/model_accuracy.py --store "$RUNS/sizer.sqlite" --cpu-cost || true
  python3 benchmarks/pipeline_fidelity.py --store "$RUNS/sizer.sqlite" --plain "$RUNS/plain_resnet50.json" || true
fi
echo "== campaign done $(date -u +%FT%TZ)"
touch "$RUNS/campaign.done"
