#!/usr/bin/env bash
# One call of a lent GPU machine during a campaign longer than a call (lab/gpu/campaign.sh).
#
# The first call starts the campaign in its own session (setsid), so it runs on between calls while
# the machine stays lent; every call then waits up to WAIT seconds (default 540), prints what the
# campaign logged since the last call and a count of stored points, and leaves a consistent copy of
# the store, the log and the reports under $OUT. Calls made back to back keep the same machine; on a
# fresh machine the campaign starts again from its first step (a sweep never spans two machines).
# A call near the end of the machine's 30 minutes waits less, so that its copy still comes back.
#
# usage: bash lab/gpu/lease.sh STEP...      (the campaign's steps; ignored once it runs; a call
#        without steps where no campaign runs exits 2)
set -uo pipefail
WAIT=${WAIT:-540}
# A lent machine goes back after 30 minutes held (HOLD), taking whatever this call has not copied out
# yet; the VM's uptime is about its time held, so a call waits no longer than leaves its copy
# HOLD_MARGIN seconds to come back (UPTIME_S stands in for /proc/uptime in tests).
HOLD=${HOLD:-1800}; HOLD_MARGIN=${HOLD_MARGIN:-90}
uptime_s=${UPTIME_S:-$(cut -d. -f1 /proc/uptime)}
hold_left=$(( HOLD - HOLD_MARGIN - uptime_s ))
if [ "$hold_left" -lt "$WAIT" ]; then
  WAIT=$(( hold_left > 0 ? hold_left : 0 ))
  echo "== this call waits at most ${WAIT}s: the machine goes back $(( HOLD - uptime_s ))s from now (held ${uptime_s}s of ${HOLD}s)"
fi
RUNS=${RUNS:-/root/gpu-runs}; mkdir -p "$RUNS"
OUT=${OUT:-$RUNS/lease-out}; mkdir -p "$OUT"
export RUNS
LOG=$RUNS/campaign.log
touch "$LOG"
pid=$(cat "$RUNS/campaign.pid" 2>/dev/null || true)
if [ -e "$RUNS/campaign.done" ]; then
  echo "== campaign already done"
elif [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
  if [ $# -eq 0 ]; then
    # A call meant to follow a running campaign found none: the machine is a fresh one (the last
    # went back), and a campaign of no steps would only mark itself done.
    echo "== no campaign on this machine (a fresh one?) and no steps given: call again with the steps"
    exit 2
  fi
  setsid nohup bash lab/gpu/campaign.sh "$@" >> "$LOG" 2>&1 < /dev/null &
  echo $! > "$RUNS/campaign.pid"
  echo "== started the campaign (pid $!): $*"
fi
t0=$(date +%s)
while kill -0 "$(cat "$RUNS/campaign.pid" 2>/dev/null)" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$WAIT" ]; do
  sleep 5
done
seen=$(cat "$RUNS/log.offset" 2>/dev/null || echo 0)
size=$(stat -c %s "$LOG")
tail -c +$((seen + 1)) "$LOG" | grep -v '^\s*$' | tail -n 150
echo "$size" > "$RUNS/log.offset"
# A consistent snapshot of the store while the sweep may be writing to it (SQLite's backup API).
python3 - "$RUNS/sizer.sqlite" "$OUT/sizer.sqlite" <<'EOF'
import sqlite3, sys, os
if os.path.exists(sys.argv[1]):
    src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
    src.backup(dst)
    for workload, status, n in src.execute("select workload, status, count(*) from points group by 1, 2"):
        print(f"   stored: {workload:<24} {status:<7} {n}")
    dst.close(); src.close()
EOF
cp "$LOG" "$OUT/campaign.log"
tar czf "$OUT/runs.tgz" -C "$RUNS" --exclude 'sizer.sqlite*' --exclude lease-out --exclude out . 2>/dev/null
cp "$RUNS/out/gpu_sweep.log" "$OUT/" 2>/dev/null
[ -e "$RUNS/campaign.done" ] && echo "== campaign done" || echo "== campaign running ($(( ($(date +%s) - $(stat -c %Y "$RUNS/campaign.pid")) / 60 )) min since it started)"
