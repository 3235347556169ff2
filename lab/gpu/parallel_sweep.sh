#!/usr/bin/env bash
# A parallel sweep against the same plan run serially, on a host with 2 or more GPUs (one call of
# an nvidia-h100-x2 or x4 machine, under 600 s): resnet50-train at vCPUs 4,8 x local-nvme,standard,
# one RAM level, budget 10 s, first one point at a time, then `--parallel <the host's GPUs>` (its
# interference check measuring 2 shapes alone as well). Prints the wall time of each, the per-point
# difference parallel against alone (the parallel sweep's points against the serial sweep's, and
# its own interference check), and where the check ran (slot, GPU, CPUs, NUMA node).
#
# usage: bash lab/gpu/parallel_sweep.sh [extra sizer sweep options for both runs]
# env:   OUT (default ./gpu-out/parallel), SIZER_DATA (default /root/sizer-data), PARALLEL (default:
#        the host's GPUs, at most 4), WORKLOADS, VCPUS, DISKS, RAM, BUDGET, INTERFERENCE (default 2),
#        NO_SETUP=1 (skip lab/gpu/setup.sh: a dev host whose sizer is installed already)
# On a host without a GPU it runs as a test of itself, e.g.:
#   NO_SETUP=1 PARALLEL=2 WORKLOADS=cpu-spin VCPUS=1 RAM=256M BUDGET=1.5 bash lab/gpu/parallel_sweep.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out/parallel}; mkdir -p "$OUT"
[ -n "${NO_SETUP:-}" ] || source lab/gpu/setup.sh
DATA=${SIZER_DATA:-/root/sizer-data}
GPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU')
PARALLEL=${PARALLEL:-$(( GPUS > 4 ? 4 : GPUS ))}
[ "$PARALLEL" -ge 2 ] || { echo "parallel_sweep.sh: this host has $GPUS GPU(s); give PARALLEL=2 or more"; exit 2; }
PLAN=(--workloads "${WORKLOADS:-resnet50-train}" --vcpus "${VCPUS:-4,8}" --disks "${DISKS:-local-nvme,standard}"
      --ram "${RAM:-32G}" --budget "${BUDGET:-10}" --passes 1 --no-calibrate --data "$DATA" "$@")
rm -rf "$OUT/serial" "$OUT/parallel"
echo "== $(date -u +%FT%TZ) $GPUS GPU(s); plan: ${PLAN[*]}"
nvidia-smi -L 2>/dev/null

run() {  # run NAME [options]: one sweep into $OUT/NAME, its wall seconds in $OUT/NAME/wall_s
  local name=$1; shift
  mkdir -p "$OUT/$name"
  local t0; t0=$(date +%s.%N)
  sizer sweep "${PLAN[@]}" --store "$OUT/$name/sizer.sqlite" --out "$OUT/$name" --json "$@" \
    > "$OUT/$name/sweep.json" 2> "$OUT/$name/sweep.log"
  local rc=$?
  python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)" > "$OUT/$name/wall_s"
  tail -n 4 "$OUT/$name/sweep.log"
  echo "== $name: exit $rc, $(cat "$OUT/$name/wall_s") s"
}
# The serial run first: it generates the dataset, which the parallel run then copies for its slots.
run serial --parallel 1
run parallel --parallel "$PARALLEL" --interference "${INTERFERENCE:-2}"

python3 - "$OUT" <<'EOF'
import json, statistics, sqlite3, sys
from pathlib import Path

out = Path(sys.argv[1])

def rows(name):
    conn = sqlite3.connect(out / name / "sizer.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return {r["key"]: {**dict(r), "extra": json.loads(r["result"]).get("extra", {})}
                for r in conn.execute("SELECT key, status, throughput, started, finished, result FROM points")}
    finally:
        conn.close()

def spread(diffs):
    return (f"median {statistics.median(diffs):+.1%}, max {max(diffs, key=abs):+.1%} over {len(diffs)} point(s)"
            if diffs else "no point to compare")

def difference(a, b):  # a against b, where both are usable
    usable = ("ok", "noisy")
    if a["status"] in usable and b["status"] in usable and b["throughput"] > 0:
        return a["throughput"] / b["throughput"] - 1
    return None

serial, parallel = rows("serial"), rows("parallel")
try:  # the sweep's own summary (empty where the sweep failed after its points, at its report)
    summary = json.loads((out / "parallel" / "sweep.json").read_text()).get("parallel") or {}
except ValueError:
    summary = {}
wall = {name: float((out / name / "wall_s").read_text()) for name in ("serial", "parallel")}
# From the first point's start to the last one's end: no start-up, dataset generation or copies.
span = {name: max(r["finished"] for r in got.values()) - min(r["started"] for r in got.values())
        for name, got in (("serial", serial), ("parallel", parallel))}
alone_s = sum(r["finished"] - r["started"] for k, r in parallel.items() if k.endswith("#alone"))
print(f"== measuring (first point's start to last point's end): serial {span['serial']:.0f} s, parallel "
      f"{span['parallel']:.0f} s ({span['parallel'] / span['serial']:.2f}x), of which the interference check's "
      f"alone measurements {alone_s:.0f} s")
print(f"== wall time of each command: serial {wall['serial']:.0f} s (it generated the dataset where missing), "
      f"parallel {wall['parallel']:.0f} s (the slots' dataset copies {summary.get('copy_seconds', '?')} s of it)")
pairs = [(k, parallel[k], serial[k]) for k in sorted(parallel) if k in serial]
print("== parallel sweep against the serial sweep, point by point: "
      + spread([d for _, a, b in pairs if (d := difference(a, b)) is not None]))
for k, a, b in pairs:
    mark = a["extra"].get("parallel") or {}
    print(f"   {k}: serial {b['throughput']:,.1f}, parallel {a['throughput']:,.1f} "
          f"(slot {mark.get('slot')}, GPU {mark.get('gpu')}, CPUs {a['extra'].get('cpus')})")
checks = [(k[: -len("#alone")], r) for k, r in sorted(parallel.items()) if k.endswith("#alone")]
found = [d for k, r in checks if (d := difference(parallel[k], r)) is not None]
print(f"== interference check in the parallel sweep (alone in the same slot, nothing else running): {spread(found)}")
for k, r in checks:
    d = difference(parallel[k], r)
    where = r["extra"].get("alone") or {}
    print(f"   {k}: parallel {parallel[k]['throughput']:,.1f}, alone {r['throughput']:,.1f}, difference "
          f"{'-' if d is None else format(d, '+.1%')}; slot {where.get('slot')}, GPU {where.get('gpu')}, "
          f"CPUs {r['extra'].get('cpus')}")
for s in summary.get("slots") or []:
    print(f"   slot {s['slot']}: GPU {s['gpu']} ({s['pci_bus']}), {len(s['cpus'])} CPUs {s['cpus'][0]}-{s['cpus'][-1]}, "
          f"NUMA node {s['numa_node']}")
EOF
ls /sys/fs/cgroup/sizer 2>/dev/null | grep -q '^sizer-' && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
