#!/usr/bin/env bash
# The full sweep on a GPU host, in slices: vCPU {2,4,8,12,16} x disk class {local-nvme, ssd,
# standard} x RAM {8G: cannot hold the 5.5 GB dataset beside the workload, 32G: holds it} for
# resnet50-train (JPEG decoding on CPU workers, and on the GPU with nvjpeg), resnet50-infer
# (streaming the 45,000-image train split once, as batch inference over a large corpus does: the
# 5,000-image val split would sit in the page cache after the warm-up), imagenet-preprocess and
# ptb-lstm-train. One sweep per workload, all in one store.
#
# Each run stops starting points SLICE (default 9m) after it began (`sizer sweep --max-time`), and
# the next run goes on where it stopped (`--resume`): run it again until it prints "complete".
# A sweep never spans two machines (sizer refuses to resume one on another host, exit 2): on a
# lent machine, make the calls back to back so it stays the same one; on a fresh machine, finish an
# interrupted workload in a new RUNS folder and gather the stores with `sizer merge`.
#
# usage: bash lab/benchmarks/gpu_sweep.sh [workload entries...]   (default: all five)
# env:   RUNS (store and per-workload reports; default ./gpu-runs), OUT (copies for the caller),
#        SIZER_DATA (datasets, on the disk to throttle; default /root/sizer-data), SLICE, GPU,
#        REPORT=0 (skip the store-wide report, cost and accuracy after the slice), PLAIN=0 (skip the
#        plain PyTorch loop), SWEEP_ARGS (more `sizer sweep` options, e.g. "--budget 12 --no-calibrate"),
#        REPEAT (measure a point again when its windows spread by more; default 0.2, empty: never;
#        never with --passes in SWEEP_ARGS)
#        On a shared VM host whose speed drifts, measure in passes instead of repeats:
#        REPEAT= SWEEP_ARGS="--passes 2 --budget 10" (resnet50-infer: 60 points in 28 min on an H200)
#        and, to measure once more the shapes the model then predicts worst, add --refine 3
#        (resnet50-train: 64 points in 19.1 min on an H200, held out 2.7% / 7.0%)
# exit:  0 every entry complete, 3 a slice ended with points left (run it again), 4 a sweep failed
set -uo pipefail
T0=$(date +%s)
RUNS=${RUNS:-$PWD/gpu-runs}; OUT=${OUT:-$RUNS/out}; mkdir -p "$RUNS" "$OUT"
SLICE=${SLICE:-9m}
STORE=$RUNS/sizer.sqlite
DATA=${SIZER_DATA:-/root/sizer-data}
VCPUS=${VCPUS:-2,4,8,12,16}
DISKS=${DISKS:-local-nvme,ssd,standard}
RAM=${RAM:-8G,32G}
REPEAT=${REPEAT-0.2}
# Passes measure every shape again anyway; repeats on top cost the time the last pass needs.
# Without --passes, one pass: sizer's own default would choose two on a VM.
PASSES="--passes 1"
case " ${SWEEP_ARGS:-} " in *" --passes "*) REPEAT= ; PASSES= ;; esac
if [ $# -gt 0 ]; then ENTRIES=("$@"); else
  ENTRIES=(resnet50-train resnet50-train:decode=gpu resnet50-infer:split=train imagenet-preprocess ptb-lstm-train)
fi
source lab/gpu/setup.sh
GPU=${GPU:-}  # GPU model to recommend for (default: the host's)
slice_s=$(python3 -c "from sizer.units import parse_duration as p; print(int(p('$SLICE', 'SLICE')))")
log=$OUT/gpu_sweep.log
{
  echo "== $(date -u +%FT%TZ) slice ${SLICE} on $(hostname)"
  [ -s "$RUNS/probe.json" ] || sizer probe --path "$(dirname "$DATA")" --json > "$RUNS/probe.json"
  # Harness fidelity, once per store: a plain PyTorch loop next to the sweep's synthetic-input point.
  [ "${PLAIN:-1}" = 0 ] || [ -s "$RUNS/plain_resnet50.json" ] || python3 lab/benchmarks/plain_resnet50.py --json > "$RUNS/plain_resnet50.json"
  complete=1
  for entry in "${ENTRIES[@]}"; do
    left=$(( slice_s - ($(date +%s) - T0) ))
    if [ "$left" -lt 60 ]; then complete=0; echo "== slice used up before $entry"; break; fi
    name=${entry//[:=]/_}
    echo "== $entry: up to ${left}s"
    timeout -s INT -k 60 $(( left + 120 )) sizer sweep --workloads "$entry" --vcpus "$VCPUS" --disks "$DISKS" \
      --ram "$RAM" --data "$DATA" --store "$STORE" --out "$RUNS/$name" --resume --max-time "${left}s" \
      ${GPU:+--gpu "$GPU"} ${REPEAT:+--repeat-noisy "$REPEAT"} $PASSES ${SWEEP_ARGS:-} --json > "$RUNS/$name.json"
    rc=$?
    python3 - "$RUNS/$name.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)
for p in d.get("points", []):
    if not p.get("stored"):
        print(f"  {p['key']:<62} {p['status']:<7} {p['throughput']:>10.1f} {p['unit']:<9} {p['bottleneck']:<6} {p['wall_s']:>5.1f} s")
for note in d.get("notes", []):
    print("  note:", note)
print("  left:", d.get("left", 0))
EOF
    if [ $rc -ne 0 ] && [ $rc -ne 130 ]; then complete=failed; echo "== $entry: failed, rc $rc"; break; fi
    if [ $rc -ne 0 ] || grep -q '"left"' "$RUNS/$name.json"; then complete=0; echo "== $entry: rc $rc, not finished"; break; fi
  done
  if [ $complete = 1 ]; then echo "== complete"; fi
  echo $complete > "$RUNS/.complete"
  if [ "${REPORT:-1}" != 0 ]; then
    sizer report --store "$STORE" ${GPU:+--gpu "$GPU"} --out "$RUNS/report" --json > "$RUNS/report.json" || true
    python3 lab/benchmarks/sweep_cost.py --store "$STORE" || true
    python3 lab/benchmarks/model_accuracy.py --store "$STORE" || true
  fi
} 2>&1 | tee -a "$log"
[ "${REPORT:-1}" != 0 ] && cp -r "$STORE" "$RUNS"/*.json "$RUNS/report" "$OUT"/ 2>/dev/null
ls /sys/fs/cgroup/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
case "$(cat "$RUNS/.complete" 2>/dev/null)" in 1) exit 0 ;; 0) exit 3 ;; *) exit 4 ;; esac
