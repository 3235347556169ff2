#!/usr/bin/env bash
# Own jobs next to the built-in one, in one store: resnet50-train, the stock PyTorch ImageNet
# pipeline (examples/own-jobs/imagenet_stock.py, reporting through sizer_progress) and a text job
# that tokenises in its DataLoader (examples/own-jobs/text_transformer.py, read through
# --metric-regex), each over the same vCPU counts at one RAM size that holds the dataset, on
# local-nvme, one pass; then a table of each job's rate per vCPU count, its share of the job's own
# plateau and its knee (sizer's results.json: measured, and predicted with its range).
#
# Each part is one call of a lent machine (under 8 minutes on an H100); make the calls back to
# back so that the machine, its datasets and the store stay the same:
#   bash lab/gpu/own_jobs.sh data       # 50,000 JPEGs (17 s on an H200 host) and the PTB-like text
#   bash lab/gpu/own_jobs.sh builtin    # resnet50-train: calibration, GPU ceiling, 4 points
#   bash lab/gpu/own_jobs.sh stock      # imagenet-stock: 4 points
#   bash lab/gpu/own_jobs.sh text       # text-transformer: 4 points
#   bash lab/gpu/own_jobs.sh table      # report and table
# Several parts may share a call (`... data builtin`). A part that ends with points left (the
# --max-time slice, exit 3) goes on where it stopped when called again. Every part leaves a copy of
# the store and the log under $OUT.
#
# env: RUNS (store, logs; default /root/own-jobs), SIZER_DATA (default /root/sizer-data), OUT,
#      VCPUS (2,4,8,16), RAM (32G), DISK (local-nvme), BUDGET (10), SLICE (8m), IMAGES (50000: what
#      resnet50-train's gpu profile asks for, so the sweep reuses the set), SWEEP_ARGS (more options)
#      OWN_JOBS_SMALL=1 shrinks everything for a CPU host: cpu-small profile, 1,2 vCPUs, 4 s budgets,
#      2,048 images and small models (ResNet-18 at 112 px, as cpu-small's resnet50-train); with
#      SKIP_SETUP=1 it uses the sizer and python3 on PATH, e.g. PATH=$PWD/.venv/bin:$PATH on a dev host.
set -uo pipefail
SMALL=${OWN_JOBS_SMALL:-0}
RUNS=${RUNS:-/root/own-jobs}; OUT=${OUT:-$RUNS/out}; mkdir -p "$RUNS" "$OUT"
DATA=${SIZER_DATA:-/root/sizer-data}
STORE=$RUNS/sizer.sqlite
LOG=$RUNS/own_jobs.log
SLICE=${SLICE:-8m}
TEXT_REGEX='(?P<rate>[0-9][0-9,]*(?:\.[0-9]+)?) tokens/s'
if [ "$SMALL" = 1 ]; then
  VCPUS=${VCPUS:-1,2}; RAM=${RAM:-4G}; BUDGET=${BUDGET:-4}; IMAGES=${IMAGES:-2048}; PROFILE=cpu-small
  STOCK_ARGS="--arch resnet18 --image-size 112 --batch-size 16 --device cpu"
  TEXT_ARGS="--d-model 64 --layers 1 --heads 2 --seq-len 32 --batch-size 8 --log-interval 5 --device cpu"
else
  VCPUS=${VCPUS:-2,4,8,16}; RAM=${RAM:-32G}; BUDGET=${BUDGET:-10}; IMAGES=${IMAGES:-50000}; PROFILE=gpu
  STOCK_ARGS=""
  TEXT_ARGS=""
fi
DISK=${DISK:-local-nvme}
[ $# -gt 0 ] || { echo "usage: bash lab/gpu/own_jobs.sh data|builtin|stock|text|table ..." >&2; exit 2; }
for part in "$@"; do
  case $part in data|builtin|stock|text|table) ;; *) echo "own_jobs.sh: unknown part '$part' (data, builtin, stock, text, table)" >&2; exit 2 ;; esac
done
[ "${SKIP_SETUP:-0}" = 1 ] || source lab/gpu/setup.sh  # SKIP_SETUP=1: sizer and python3 already on PATH

ensure_data() {  # the datasets, generated once (sizer reuses a set already there with the same parameters)
  local t0=$(date +%s)
  sizer data imagenet --images "$IMAGES" --seed 0 --out "$DATA/imagenet" --json > "$RUNS/imagenet.json" || return 1
  sizer data ptb --out "$DATA/ptb" --json > "$RUNS/ptb.json" || return 1
  echo "== datasets ready in $(( $(date +%s) - t0 )) s: $DATA/imagenet ($IMAGES images), $DATA/ptb"
}

sweep() {  # part name, then what the sweep measures
  local name=$1; shift
  echo "== $(date -u +%T) $name: vCPUs $VCPUS, RAM $RAM, $DISK, ${BUDGET} s budgets"
  local t0=$(date +%s) rc
  sizer sweep "$@" --vcpus "$VCPUS" --ram "$RAM" --disks "$DISK" --budget "$BUDGET" --passes 1 --refine 0 \
    --profile "$PROFILE" --store "$STORE" --out "$RUNS/$name" --resume --max-time "$SLICE" ${SWEEP_ARGS:-} \
    --json > "$RUNS/$name.json"
  rc=$?
  python3 - "$RUNS/$name.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)
for p in d.get("points", []):
    print(f"  {p['key']:<60} {p['status']:<7} {p['throughput']:>10.1f} {p['unit']:<9} {p['wall_s']:>5.1f} s"
          + (f"  {p.get('error') or ''}"[:200] if p['status'] not in ('ok', 'noisy') else ''))
for note in d.get("notes", []):
    print("  note:", note)
if d.get("left"):
    print(f"  left: {d['left']} point(s): call this part again")
EOF
  echo "== $name: rc $rc in $(( $(date +%s) - t0 )) s"
  return $rc
}

table() {  # sizer's report over the whole store, then one line per job and vCPU count
  sizer report --store "$STORE" --out "$RUNS/report" --json > "$RUNS/report.json" || return 1
  python3 lab/gpu/own_jobs_table.py "$RUNS/report/results.json" | tee "$RUNS/table.txt"
}

copy_out() {  # a consistent copy of the store while nothing writes it, the log and the latest part's files
  [ -e "$STORE" ] && python3 -c "import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" "$STORE" "$OUT/sizer.sqlite"
  cp "$LOG" "$OUT/own_jobs.log"
  for f in "$@"; do [ -e "$f" ] && cp "$f" "$OUT/"; done
  true
}

status=0
for part in "$@"; do
  {
    echo "== $(date -u +%FT%TZ) part $part on $(hostname) ($(nvidia-smi -L 2>/dev/null | head -n 1 || echo no GPU))"
    case $part in
      data) ensure_data ;;
      builtin) ensure_data && sweep builtin --workloads resnet50-train --data "$DATA" ;;
      stock) ensure_data && sweep stock --name imagenet-stock --unit images/s --data "$DATA/imagenet/train" \
               --command "python3 examples/own-jobs/imagenet_stock.py --data {data} --workers {workers} $STOCK_ARGS" ;;
      text) ensure_data && sweep text --name text-transformer --unit tokens/s --data "$DATA/ptb" --metric-regex "$TEXT_REGEX" \
              --command "python3 examples/own-jobs/text_transformer.py --data {data} --workers {workers} $TEXT_ARGS" ;;
      table) table ;;
    esac
    echo "part_rc=$?"
  } 2>&1 | tee -a "$LOG" | tee "$RUNS/part.log"
  rc=$(sed -n 's/^part_rc=//p' "$RUNS/part.log" | tail -n 1)
  copy_out "$RUNS/$part.json" "$RUNS/table.txt" "$RUNS/report/results.json" "$RUNS/report/report.html"
  [ "${rc:-1}" = 0 ] || status=$rc
done
ls /sys/fs/cgroup/sizer 2>/dev/null | grep -q . && echo "LEFTOVER sizer cgroups" || echo "no sizer cgroup left"
exit "$status"
