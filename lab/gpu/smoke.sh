#!/usr/bin/env bash
# First look at a GPU host: probe, disks, limits on its cgroup hierarchy, one ceiling point.
# usage: OUT=DIR bash lab/gpu/smoke.sh    (from the repository root; results land in DIR)
source lab/gpu/setup.sh
set -x
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
cat /proc/self/cgroup; ls /sys/fs/cgroup | head -40; cat /sys/fs/cgroup/cgroup.subtree_control
df -h / /tmp "$PWD"; lsblk 2>/dev/null | head; python3 -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)'
sizer probe --path "$PWD" --json | tee $OUT/probe.json
timeout 120 sizer disks probe /tmp --seconds 3 --json | tee $OUT/disks_probe.json
timeout 120 sizer disks verify --class standard /tmp --json | tee $OUT/verify_standard.json
timeout 120 sizer disks verify --class ssd /tmp --json | tee $OUT/verify_ssd.json
timeout 300 python3 -m pytest -q -x -m cgroup tests/test_limits.py tests/test_runner.py 2>&1 | tail -30
ls /sys/fs/cgroup/sizer 2>&1
