#!/usr/bin/env bash
# The noise floor of one GPU host: the same shape measured again and again on one machine, each
# point with its host-speed probe, steal share and the training process's own CPU use. What the
# same shape gives from one minute to the next bounds how close any model of the sweep can get.
#
# usage: bash lab/gpu/noise_floor.sh    env: REPEATS (default 8), SIZER_DATA, OUT
set -uo pipefail
source lab/gpu/setup.sh
OUT=${OUT:-$PWD/noise-out}; mkdir -p "$OUT/noise"
DATA=${SIZER_DATA:-/root/sizer-data}
REPEATS=${REPEATS:-8}
i=0
run() {  # label, then sizer run arguments
  local label=$1; shift
  i=$((i + 1))
  sizer run "$@" --data "$DATA" --json > "$OUT/noise/$(printf %02d $i)-$label.json" 2> "$OUT/noise/$(printf %02d $i)-$label.err" \
    || echo "run $i ($label) failed: $(tail -n 3 "$OUT/noise/$(printf %02d $i)-$label.err")"
}
run train16 resnet50-train --vcpus 16 --ram 32G --disk local-nvme
for r in $(seq 1 "$REPEATS"); do run pre4 imagenet-preprocess --vcpus 4 --ram 32G --disk local-nvme; done
run train16 resnet50-train --vcpus 16 --ram 32G --disk local-nvme
run train8 resnet50-train --vcpus 8 --ram 32G --disk local-nvme
python3 - "$OUT/noise" <<'PY' | tee "$OUT/noise_floor.txt"
import json, statistics, sys
from pathlib import Path
rows = []
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    try:
        d = json.loads(path.read_text())
    except ValueError:
        continue
    r = d.get("result", d)
    c, x = r.get("counters", {}), r.get("extra", {})
    hs = x.get("host_speed", {})
    n = c.get("measured_samples") or 0
    rows.append((path.stem, r.get("throughput", 0.0), r.get("spread", 0.0), 1000 * c.get("cpu_seconds", 0) / n if n else 0,
                 hs.get("before_mbps"), hs.get("after_mbps"), c.get("steal_share"), c.get("main_cpu_cores")))
print(f"{'point':<14} {'rate':>8} {'spread':>7} {'cpu ms':>7} {'probe before/after':>19} {'steal':>6} {'main cores':>10}")
for name, rate, spread, ms, b, a, steal, main in rows:
    print(f"{name:<14} {rate:>8.1f} {spread:>7.1%} {ms:>7.2f} {b!s:>9}/{a!s:<9} {steal if steal is None else f'{steal:.1%}':>6} "
          f"{'-' if main is None else f'{main:.2f}':>10}")
pre = [r[1] for r in rows if "pre4" in r[0]]
if len(pre) > 1:
    print(f"imagenet-preprocess 4 vCPU x {len(pre)}: {min(pre):.0f}-{max(pre):.0f} images/s, "
          f"max/min {max(pre) / min(pre):.3f}, stdev/mean {statistics.stdev(pre) / statistics.fmean(pre):.1%}")
PY
# $OUT returns at most 8 files: the points go back as one archive.
tar czf "$OUT/noise.tgz" -C "$OUT" noise && rm -rf "$OUT/noise"
ls /sys/fs/cgroup/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
