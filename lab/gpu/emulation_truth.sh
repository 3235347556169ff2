#!/usr/bin/env bash
# Emulation truth on a lent GPU machine: resnet50-train at 8 and 16 vCPUs, each shape once per round,
# the per-core calibration before the first round and after every round
# (lab/benchmarks/emulation_truth.py measure). Run it on a larger host, where 8 and 16 vCPUs are
# emulated, and on a host of 16 hardware threads, where 16 is the whole host; then compare the files:
#   python3 lab/benchmarks/emulation_truth.py compare LARGER.json WHOLE.json
# The file lands in $OUT, named after this host's thread count.
#
# usage: bash lab/gpu/emulation_truth.sh
#   env: VCPUS (default 8,16), ROUNDS (3), BUDGET (10 s a point), CAL_BUDGET (8 s), RAM (32G), SIZER_DATA, OUT
set -uo pipefail
source lab/gpu/setup.sh
OUT=${OUT:-$PWD/emulation-out}; mkdir -p "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
FILE="$OUT/emulation_truth-$(nproc)threads.json"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 lab/benchmarks/emulation_truth.py measure resnet50-train --vcpus "${VCPUS:-8,16}" --ram "${RAM:-32G}" \
  --rounds "${ROUNDS:-3}" --budget "${BUDGET:-10}" --calibration-budget "${CAL_BUDGET:-8}" --data "$DATA" \
  --out "$FILE" 2>&1 | tee "$OUT/emulation_truth.log"
rc=${PIPESTATUS[0]}
ls /sys/fs/cgroup/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
exit "$rc"
