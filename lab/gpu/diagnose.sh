#!/usr/bin/env bash
# Two checks on a GPU host: (1) the per-vCPU calibration under each way of pinning (sizer's cgroup,
# affinity only, a plain taskset on the first and last CPU), to explain a calibration that differs
# between runs; (2) the measured-window rule: resnet50-train at 16 vCPUs behind the `standard`
# throttle must report a rate whose bytes per second stay at or under the 140 MB/s cap.
# usage: bash lab/gpu/diagnose.sh    env: OUT (default ./gpu-out), SIZER_DATA (default /root/sizer-data)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
source lab/gpu/setup.sh
DATA=${SIZER_DATA:-/root/sizer-data}
last=$(( $(nproc) - 1 ))
spec='{"workload": "cpu-calibrate", "profile": "gpu", "vcpus": 1, "time_budget_s": 10}'
{
  for how in cgroup affinity; do
    lim=""; [ $how = affinity ] && lim="--limits affinity"
    sizer run cpu-calibrate --vcpus 1 --budget 10 $lim --json > "$OUT/calib_$how.json"
  done
  for cpu in 0 $last; do
    echo "$spec" > /tmp/spec.json
    taskset -c $cpu python3 -m workloads run --spec /tmp/spec.json --out "$OUT/calib_taskset$cpu.json"
  done
  for disk in standard local-nvme; do
    sizer run resnet50-train --vcpus 16 --ram 31G --disk $disk --budget 30 --data "$DATA" --json > "$OUT/r50_16_$disk.json"
  done
  python3 lab/gpu/summarize.py "$OUT"
} 2>&1 | tee "$OUT/diagnose.log"
