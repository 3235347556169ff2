#!/usr/bin/env bash
# Two jobs on one GPU, in one call of a lent 1-GPU machine (under 8 minutes): seven pairs among
# resnet50-train (JPEGs decoded by CPU workers), resnet50-train:decode=gpu, resnet50-infer,
# ptb-lstm-train and a command job (a PyTorch matmul loop reporting through sizer_progress), each job
# on half of one instance (default 16 vCPUs, 24 GiB, local NVMe: 8 vCPUs as whole cores and 12 GiB
# each), the GPU time-sliced (SHARE=mps where the host allows it), then each job alone on its half:
# its solo profile. One `sizer colocate` run, so each job alone is measured once for all its pairs.
# Prints the pairs' table (lab/gpu/colocate_table.py: r_AB, r_BA, shared faster or not, GPU busy
# alone and shared, each slowdown predicted with its pair held out and the error) and the held-out
# error over the pairs (lab/benchmarks/colocation_error.py). The host's NCCL_* variables reach every
# process as set. The store, the run's JSON and log, both tables (JSON) and the report land in $OUT.
#
# usage: OUT=DIR bash lab/gpu/colocate.sh
#   env: VCPUS (16; all the host's threads where it has fewer), RAM (24G: the machine's MemTotal starts low), BUDGET (8), SHARE (time),
#        MAX_TIME (start nothing after this, default 330s), SIZER_DATA (/root/sizer-data), OUT,
#        PROFILE (gpu; cpu-small tries the script on a host without a GPU, without the matmul job's GPU)
set -uo pipefail
T0=$(date +%s)
source lab/gpu/setup.sh
OUT=${OUT:-$PWD/colocate-out}; mkdir -p "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
PROFILE=${PROFILE:-gpu}
THREADS=$(nproc)
# 16 vCPUs (8 a job) where the host has them, else all its threads as sizer halves them (`sizer colocate`'s default).
VCPU_ARGS=(); if [ -n "${VCPUS:-}" ]; then VCPU_ARGS=(--vcpus "$VCPUS"); elif [ "$THREADS" -ge 16 ]; then VCPU_ARGS=(--vcpus 16); fi
if [ "$PROFILE" = gpu ]; then
  nvidia-smi --query-gpu=index,name,memory.total,compute_mode --format=csv,noheader
  IMAGES=50000  # the dataset a gpu-profile run reads (sizer.sweep.data.DATASET_IMAGES): it would make this size anyway
  DEVICE=cuda; SIZE=4096
else
  IMAGES=2048
  DEVICE=cpu; SIZE=256
fi
echo "== $(date -u +%FT%TZ) $THREADS threads; instance ${VCPU_ARGS[1]:-all} vCPUs / ${RAM:-24G} / local-nvme, halves for two jobs; share ${SHARE:-time}; profile $PROFILE"
echo "== host NCCL settings (kept in every process): $(env | grep '^NCCL_' | tr '\n' ' ')"

# The command job: square matrix products on the GPU, ten a step, each step reported to sizer.
cat >"$OUT/matmul_loop.py" <<EOF
import torch
import sizer_progress

device = "$DEVICE"
a = torch.randn($SIZE, $SIZE, device=device)
b = torch.randn($SIZE, $SIZE, device=device)
while True:
    for _ in range(10):
        c = a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    sizer_progress.step(10)
EOF

# The dataset first, so its time is its own (the run finds it made with the same parameters).
T1=$(date +%s)
sizer data imagenet --images "$IMAGES" --out "$DATA/imagenet" --seed 0 >"$OUT/data.log" 2>&1 \
  || { tail -5 "$OUT/data.log"; echo "dataset generation failed"; exit 4; }
echo "== dataset: $IMAGES images under $DATA/imagenet, $(( $(date +%s) - T1 )) s"

A=resnet50-train; B=resnet50-train:decode=gpu; C=resnet50-infer; D=ptb-lstm-train; E=matmul
[ "$PROFILE" = gpu ] || B=resnet50-train:decode=cpu  # decode=gpu needs a GPU: the same job under another name stands in
PAIRS="$B+$D,$C+$D,$A+$E,$C+$E,$B+$C,$D+$E"
sizer colocate "$A" "$D" --pair "$PAIRS" "${VCPU_ARGS[@]}" --ram "${RAM:-24G}" --disk local-nvme \
  --share "${SHARE:-time}" --budget "${BUDGET:-8}" --profile "$PROFILE" --max-time "${MAX_TIME:-330s}" \
  --command "python3 $OUT/matmul_loop.py" --name "$E" --unit matmuls/s \
  --data "$DATA" --store "$OUT/sizer.sqlite" --json >"$OUT/colocate.json" 2> >(tee "$OUT/colocate.log" >&2)
rc=$?
echo "== colocate exit $rc after $(( $(date +%s) - T0 )) s"
python3 lab/gpu/colocate_table.py "$OUT/sizer.sqlite" --json-out "$OUT/colocate_table.json"
python3 lab/benchmarks/colocation_error.py --store "$OUT/sizer.sqlite"
python3 lab/benchmarks/colocation_error.py --store "$OUT/sizer.sqlite" --json >"$OUT/colocation_error.json"
sizer report --store "$OUT/sizer.sqlite" --out "$OUT/report" >"$OUT/report.log" 2>&1 || true
ls /sys/fs/cgroup/sizer /sys/fs/cgroup/*/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
echo "== done in $(( $(date +%s) - T0 )) s"
exit "$rc"
