#!/usr/bin/env bash
# A short real sweep on a GPU host, under real limits (cgroup v2 there), ending in the report:
# resnet50-train with CPU decoding over vCPU {4, 8, 16} x {local-nvme, standard}, its GPU ceiling
# (input already on the device) and the per-vCPU calibration; plus the plain PyTorch loop for the
# harness-fidelity ratio, measured in the same run. Results land in $OUT (or ./gpu-out).
# usage: bash lab/gpu/example_sweep.sh [extra sizer sweep options]
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
source lab/gpu/setup.sh
DATA=${SIZER_DATA:-/root/sizer-data}
{
  sizer probe --path "$(dirname "$DATA")" --json > "$OUT/probe.json"
  python3 lab/benchmarks/plain_resnet50.py --json > "$OUT/plain_resnet50.json"
  cat "$OUT/plain_resnet50.json"
  time sizer sweep --workloads resnet50-train --vcpus 4,8,16 --disks local-nvme,standard \
    --budget "${BUDGET:-18}" --passes 1 --data "$DATA" --store "$OUT/sizer.sqlite" --out "$OUT" --gpu H200 "$@"
  sizer fit --store "$OUT/sizer.sqlite"
  sizer recommend --store "$OUT/sizer.sqlite" --gpu H200
} 2>&1 | tee "$OUT/example_sweep.log"
ls /sys/fs/cgroup/sizer 2>/dev/null && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
