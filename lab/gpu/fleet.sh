#!/usr/bin/env bash
# A fleet sweep through Ray on this GPU host, in one call (docs/fleet.md): a local Ray head (the
# driver, no sizer-slot) and one node offering host:<GPU model> and a sizer-slot, both started with
# `ray start` in sessions of their own; then `sizer sweep --ray` of resnet50-train at vCPUs 4,8,16 x
# 32G x local-nvme, budget 10 s, with --fleet-whole-node (one point of the whole machine, marked
# real). Prints each point (target, shape, rate, real or emulated, the CPUs it ran on) and the
# report's answer per host; stops the two nodes by their sessions.
# Two hosts side by side (one H100, one H200 call): sizer merge H100/sizer.sqlite H200/sizer.sqlite
# --store both.sqlite && sizer report --store both.sqlite --out both   (a section per host).
#
# usage: bash lab/gpu/fleet.sh [extra sizer sweep options]
# env:   OUT (default ./gpu-out/fleet), SIZER_DATA (default /root/sizer-data), NAME (the node's target,
#        default host:<GPU model>), WORKLOADS, VCPUS, RAM, DISKS, BUDGET, PROFILE,
#        NO_SETUP=1 (skip lab/gpu/setup.sh: a dev host whose sizer is installed already)
# Ray must be importable: on a host without network, carry its wheels in .whl/ (setup.sh installs them).
# On a host without a GPU it runs as a test of itself, e.g.:
#   NO_SETUP=1 PROFILE=cpu-small WORKLOADS=cpu-spin VCPUS=1,2 RAM=512M BUDGET=1 bash lab/gpu/fleet.sh
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out/fleet}; mkdir -p "$OUT"
[ -n "${NO_SETUP:-}" ] || source lab/gpu/setup.sh
python3 -c 'import ray' 2>/dev/null || {
  echo "fleet.sh: Ray is not importable: pip install 'sizer[ray]' (no network: its wheels in .whl/)"; exit 2; }
DATA=${SIZER_DATA:-/root/sizer-data}
RAY=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/ray
GPU=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true) | head -n 1 | tr ' ' '-')
NAME=${NAME:-host:${GPU:-cpu}}
TMP=$(mktemp -d /tmp/sfXXXXXX)  # short: Ray's socket paths live under it
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

start() {  # start NAME [ray start options]: one node in a session of its own, until its runtime runs
  local name=$1; shift
  # In a subshell: not a job of this shell, which would report its end when stop() kills it.
  ( setsid "$RAY" start --block --disable-usage-stats --include-log-monitor false --node-ip-address 127.0.0.1 "$@" \
      > "$TMP/$name.log" 2>&1 & echo $! > "$TMP/$name.sid" )
  for _ in $(seq 240); do
    grep -q "Ray runtime started" "$TMP/$name.log" && return 0
    kill -0 "$(cat "$TMP/$name.sid")" 2>/dev/null || break
    sleep 0.5
  done
  echo "fleet.sh: ray node $name did not start:"; tail -n 20 "$TMP/$name.log"; return 1
}
stop() {  # every process of the nodes' sessions, and nothing else
  for file in "$TMP"/*.sid; do
    [ -e "$file" ] || continue
    for pid in $(ps -eo pid=,sid= | awk -v sid="$(cat "$file")" '$2 == sid {print $1}'); do kill -9 "$pid" 2>/dev/null; done
  done
  rm -rf "$TMP"
}
trap stop EXIT

echo "== $(date -u +%FT%TZ) fleet sweep on $NAME"
nvidia-smi -L 2>/dev/null
start head --head --port "$PORT" --temp-dir "$TMP/ray" --include-dashboard false --num-cpus 1 || exit 1
start node --address "127.0.0.1:$PORT" --num-cpus 1 --resources "{\"$NAME\": 1, \"sizer-slot\": 1}" || exit 1
rm -f "$OUT/sizer.sqlite"
PROFILE_ARGS=(); [ -n "${PROFILE:-}" ] && PROFILE_ARGS=(--profile "$PROFILE")
t0=$(date +%s)
sizer sweep --ray "127.0.0.1:$PORT" --fleet-targets "$NAME" --fleet-whole-node --workloads "${WORKLOADS:-resnet50-train}" \
  --vcpus "${VCPUS:-4,8,16}" --ram "${RAM:-32G}" --disks "${DISKS:-local-nvme}" --budget "${BUDGET:-10}" --passes 1 \
  "${PROFILE_ARGS[@]}" --data "$DATA" --store "$OUT/sizer.sqlite" --out "$OUT" --json "$@" \
  > "$OUT/sweep.json" 2> "$OUT/sweep.log"
rc=$?
tail -n 12 "$OUT/sweep.log"
echo "== fleet sweep: exit $rc in $(( $(date +%s) - t0 )) s"

python3 - "$OUT" <<'EOF'
import json, sqlite3, sys
from pathlib import Path

out = Path(sys.argv[1])
if not (out / "sizer.sqlite").exists():
    sys.exit("no store: the sweep stored nothing")
conn = sqlite3.connect(out / "sizer.sqlite")
for key, status, rate, unit, result, config, info in conn.execute(
        "SELECT p.key, p.status, p.throughput, p.unit, p.result, s.config, h.info FROM points p "
        "JOIN sweeps s ON s.id = p.sweep_id JOIN hosts h ON h.id = s.host_id ORDER BY p.id"):
    extra = json.loads(result).get("extra", {})
    kind = "real" if extra.get("real_instance") else "emulated"
    print(f"{json.loads(config)['fleet']['target']:<28} {key:<48} {status:<6} {rate:>12,.1f} {unit:<13} {kind:<8} "
          f"CPUs {extra.get('cpus')}  on {json.loads(info).get('hostname')}")
try:
    results = json.loads((out / "results.json").read_text())
except (OSError, ValueError):
    sys.exit("no results.json: the report was not written")
for wl in results["workloads"]:
    chosen = (wl.get("recommendation") or {}).get("chosen") or {}
    real = sum(1 for p in wl["points"] if p.get("real_instance"))
    print(f"== {wl['workload']}: pick {chosen.get('instance_type')} ({chosen.get('disk_class')}), knee "
          f"{wl['knee']['predicted_vcpus']} vCPUs, ceiling {wl['ceiling'] or 0:,.1f} {wl['unit']}; "
          f"{real} real, {len(wl['points']) - real} emulated point(s)")
EOF
exit $rc
