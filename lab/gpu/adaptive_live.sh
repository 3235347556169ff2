#!/usr/bin/env bash
# A live adaptive sweep (`sizer sweep --strategy adaptive`) of resnet50-train on a 1-GPU host in one
# call, then its answer against the repository's grid sweep of that workload on that GPU kind: the
# pick (instance and disk class) and the knee of each, and whether they agree.
#
# The grid is the example's: vCPU {2,4,8,12,16} x disk class {local-nvme, ssd, standard} x RAM
# {8G, 32G}. The sweep gets what is left of MAX_TIME after the set-up (`--max-time`), so the whole
# call ends within MAX_TIME and a few seconds of comparing; it measures at most MAX_POINTS points.
#
# usage: bash lab/gpu/adaptive_live.sh [more sizer sweep options]
# env:   OUT (default ./adaptive-live), SIZER_DATA (default /root/sizer-data), MAX_TIME (default 9m),
#        MAX_POINTS (default 12), GRID (default examples/h100/sizer.sqlite), GPU (default H100),
#        WORKLOAD (default resnet50-train), VCPUS, RAM, DISKS, BUDGET (default 10),
#        PROFILE (empty: the host's; cpu-small to try it on a host without a GPU)
# prints: the sweep's adaptive record (points measured, shapes predicted, why it stopped), then per
#        workload entry the live and the grid answer and "pick ... agrees: yes|no; knee within the
#        grid's range: yes|no"; exit 0 where both agree, 1 where not, 2 where the sweep failed.
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-$PWD/adaptive-live}; mkdir -p "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
GRID=${GRID:-examples/h100/sizer.sqlite}
source lab/gpu/setup.sh
limit_s=$(python3 -c "from sizer.units import parse_duration as p; print(int(p('${MAX_TIME:-9m}', 'MAX_TIME')))")
left=$(( limit_s - ($(date +%s) - T0) ))
profile=()
[ -n "${PROFILE:-}" ] && profile=(--profile "$PROFILE")
echo "== $(date -u +%FT%TZ) adaptive sweep of ${WORKLOAD:-resnet50-train}, ${left}s left of ${MAX_TIME:-9m}"
nvidia-smi -L 2>/dev/null
sizer sweep --workloads "${WORKLOAD:-resnet50-train}" --strategy adaptive --max-points "${MAX_POINTS:-12}" \
  --vcpus "${VCPUS:-2,4,8,12,16}" --ram "${RAM:-8G,32G}" --disks "${DISKS:-local-nvme,ssd,standard}" \
  --budget "${BUDGET:-10}" --max-time "${left}s" --gpu "${GPU:-H100}" --data "$DATA" "${profile[@]}" \
  --store "$OUT/sizer.sqlite" --out "$OUT/report" --json "$@" > "$OUT/sweep.json" 2> "$OUT/sweep.log"
rc=$?
tail -n 25 "$OUT/sweep.log"
echo "== sweep exit $rc after $(( $(date +%s) - T0 ))s"
[ -s "$OUT/sizer.sqlite" ] || { echo "no store: the sweep measured nothing"; exit 2; }
python3 - "$OUT/sweep.json" <<'EOF'
import json, sys
try:
    summary = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit("no sweep summary (see sweep.log)")
for label, r in (summary.get("adaptive") or {}).items():
    shapes = "; ".join(f"{m['shape']} x{m['measurements']}" for m in r["measured"])
    print(f"{label}: {r['points']} points, {len(r['measured'])} of {r['grid_shapes']} shapes measured "
          f"({shapes}), {len(r['predicted'])} predicted; stopped: {r['stopped']}: {r['why']}")
EOF
python3 lab/benchmarks/adaptive_replay.py --compare "$OUT/sizer.sqlite" "$GRID"
status=$?
echo "== done after $(( $(date +%s) - T0 ))s"
exit $status
