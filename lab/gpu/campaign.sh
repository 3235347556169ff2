#!/usr/bin/env bash
# A GPU-host campaign, step by step, in one store: each step is a workload entry for
# lab/benchmarks/gpu_sweep.sh, run slice after slice (each slice `sizer sweep --max-time`, then
# `--resume`) until that sweep is complete. Ends with the report, sweep cost, held-out accuracy (as
# measured and with --cpu-cost) and pipeline fidelity of the whole store, and touches
# $RUNS/campaign.done.
#
# usage: bash lab/gpu/campaign.sh STEP...    e.g. resnet50-train resnet50-infer:split=train
# env:   RUNS (default ./gpu-runs), and those of lab/benchmarks/gpu_sweep.sh (SLICE, SWEEP_ARGS, REPEAT, ...)
set -uo pipefail
RUNS=${RUNS:-$PWD/gpu-runs}; mkdir -p "$RUNS"
export RUNS OUT=$RUNS/out
source lab/gpu/setup.sh
echo "== campaign $(date -u +%FT%TZ): $*"
nvidia-smi -L 2>/dev/null
python3 -c 'import lmdb; print("lmdb", lmdb.__version__)' || echo "lmdb missing: imagenet-preprocess (format lmdb) will fail"
for step in "$@"; do
  for slice in 1 2 3 4 5 6; do
    echo "== $(date -u +%T) $step: slice $slice"
    REPORT=0 bash lab/benchmarks/gpu_sweep.sh "$step"
    rc=$?
    [ $rc -eq 0 ] && break
    [ $rc -ne 3 ] && { echo "== $step: gpu_sweep.sh failed (rc $rc)"; break; }
  done
done
if [ -e "$RUNS/sizer.sqlite" ]; then  # sweeps that failed before their first point store nothing
  sizer report --store "$RUNS/sizer.sqlite" --out "$RUNS/report" --json > "$RUNS/report.json" || true
  python3 lab/benchmarks/sweep_cost.py --store "$RUNS/sizer.sqlite" || true
  python3 lab/benchmarks/model_accuracy.py --store "$RUNS/sizer.sqlite" || true
  # The same with each window's CPU cost taken out, as `sizer report --cpu-cost` fits.
  python3 lab/benchmarks/model_accuracy.py --store "$RUNS/sizer.sqlite" --cpu-cost || true
  python3 lab/benchmarks/pipeline_fidelity.py --store "$RUNS/sizer.sqlite" --plain "$RUNS/plain_resnet50.json" || true
fi
echo "== campaign done $(date -u +%FT%TZ)"
touch "$RUNS/campaign.done"
