#!/usr/bin/env bash
# The default sweep (plain `sizer sweep`, as `make sweep` runs it) on a lent GPU machine, across
# calls of at most 10 minutes: the first call prints the dry run and starts the sweep in its own
# session; every call waits up to WAIT seconds, prints the log's new lines and copies the store
# (and, once the sweep has ended, its report) to OUT. Call it again until it prints "sweep done".
# usage: OUT=DIR [WAIT=560] [RUN=/root/default-sweep] bash lab/gpu/default_sweep.sh
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=lab/gpu/setup.sh
source lab/gpu/setup.sh
RUN=${RUN:-/root/default-sweep}
WAIT=${WAIT:-560}
OUT=${OUT:-$RUN/out}
mkdir -p "$RUN" "$OUT"

if [ ! -e "$RUN/started" ]; then
  nproc; nvidia-smi -L 2>/dev/null
  sizer sweep --out "$RUN/results" --dry-run | tee "$OUT/dry-run.txt"
  date +%s > "$RUN/started"
  setsid bash -c "sizer sweep --out '$RUN/results' > '$RUN/sweep.log' 2>&1; echo \$? > '$RUN/rc'" \
    < /dev/null > /dev/null 2>&1 &
fi

shown=$(cat "$RUN/shown" 2>/dev/null || echo 0)
deadline=$(( $(date +%s) + WAIT ))
while [ ! -e "$RUN/rc" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
lines=$(wc -l < "$RUN/sweep.log" 2>/dev/null || echo 0)
tail -n +"$((shown + 1))" "$RUN/sweep.log" 2>/dev/null | tr '\r' '\n' | grep -v '^\s*$' | tail -40
echo "$lines" > "$RUN/shown"
echo "elapsed: $(( $(date +%s) - $(cat "$RUN/started") )) s"

# A consistent copy of the store even while the sweep writes to it.
python3 - "$RUN/results/sizer.sqlite" "$OUT/sizer.sqlite" <<'PY'
import sqlite3, sys, os
if os.path.exists(sys.argv[1]):
    source = sqlite3.connect(sys.argv[1], timeout=30)
    with sqlite3.connect(sys.argv[2]) as target:
        source.backup(target)
PY
if [ -e "$RUN/rc" ]; then
  cp "$RUN/sweep.log" "$OUT/sweep.log"
  for f in report.html results.json points.csv; do [ -e "$RUN/results/$f" ] && cp "$RUN/results/$f" "$OUT/"; done
  echo "sweep done: exit $(cat "$RUN/rc")"
fi
