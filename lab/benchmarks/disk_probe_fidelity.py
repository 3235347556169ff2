"""How close is `sizer disks probe` to fio run by hand on the same path?

Runs `sizer disks probe PATH --json` and the two fio commands a person would type (fio lays its own
file out), back to back, alternating which goes first over several rounds, and prints the median
of sizer's figures and of fio's, the ratio of those medians, each round's ratio and their median
(the paired ratio). Disks on shared machines drift, so only figures
taken within one run are compared. Exits 1 when a paired ratio leaves the tolerance (default 20%)
or a scratch file is left behind.

Usage: .venv/bin/python lab/benchmarks/disk_probe_fidelity.py [--path /tmp] [--seconds 5] [--size 1G] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path


def run_sizer(path: str, seconds: int, size: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "sizer.cli", "disks", "probe", path, "--json", "--seconds", str(seconds), "--size", size],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def run_fio_by_hand(path: str, seconds: int, size: str) -> dict:
    """The fio command lines from fio's documentation, parsed with plain json (not sizer's parser)."""
    target = Path(path) / f"fio-by-hand-{uuid.uuid4().hex[:8]}.dat"
    common = f"--filename={target} --size={size} --direct=1 --ioengine=libaio --runtime={seconds} --time_based"
    commands = {
        "seq": f"fio --name=seqread --rw=read --bs=1M --iodepth=16 {common} --output-format=json",
        "rand": f"fio --name=randread --rw=randread --bs=4k --iodepth=32 {common} --output-format=json",
    }
    figures = {}
    try:
        for key, command in commands.items():
            out = subprocess.run(command.split(), capture_output=True, text=True, check=True).stdout
            read = json.loads(out[out.index("{") :])["jobs"][0]["read"]
            figures[key] = {"mbps": read["bw_bytes"] / 1e6, "iops": read["iops"], "command": command}
    finally:
        target.unlink(missing_ok=True)
    return figures


FIGURES = (
    ("sequential 1 MiB read, MB/s", lambda s: s["sequential_read"]["read_mbps"], lambda h: h["seq"]["mbps"]),
    ("sequential 1 MiB read, IOPS", lambda s: s["sequential_read"]["read_iops"], lambda h: h["seq"]["iops"]),
    ("random 4 KiB read, IOPS", lambda s: s["random_read"]["read_iops"], lambda h: h["rand"]["iops"]),
    ("random 4 KiB read, MB/s", lambda s: s["random_read"]["read_mbps"], lambda h: h["rand"]["mbps"]),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default="/tmp")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--rounds", type=int, default=6, help="sizer/fio pairs, who goes first alternated")
    parser.add_argument("--tolerance", type=float, default=0.20)
    args = parser.parse_args()

    def scratch() -> set[str]:  # other programs may write to a shared PATH; count only ours
        return {n for n in os.listdir(args.path) if n.startswith((".sizer-fio-", "fio-by-hand-"))}

    before = scratch()
    pairs = []
    for round_no in range(args.rounds):
        # Alternate who goes first so a drifting disk does not favour one side.
        if round_no % 2 == 0:
            ours = run_sizer(args.path, args.seconds, args.size)
            theirs = run_fio_by_hand(args.path, args.seconds, args.size)
        else:
            theirs = run_fio_by_hand(args.path, args.seconds, args.size)
            ours = run_sizer(args.path, args.seconds, args.size)
        pairs.append((ours, theirs))
    left = sorted(scratch() - before)

    first = pairs[0][0]
    device = first["device"]
    print(
        f"path {first['path']} ({first['fstype']} on {device['name'] if device else 'no device'}), {args.size} file, "
        f"{args.seconds} s per pattern, {first['fio_version']}, {args.rounds} rounds (sizer/fio alternated)"
    )
    print(f"{'figure':30} {'sizer':>10} {'by hand':>10} {'ratio':>7} {'paired':>7}   per-round ratios")
    worst = 0.0
    for name, ours_of, theirs_of in FIGURES:
        ours = [ours_of(s) for s, _ in pairs]
        theirs = [theirs_of(h) for _, h in pairs]
        # The shared disk drifts and jumps between speeds from one run to the next, so a single pair
        # says little. Judged on the median of the per-round (paired, back-to-back) ratios; the
        # ratio of the two medians is shown beside it.
        per_round = [o / t for o, t in zip(ours, theirs) if t]
        paired = statistics.median(per_round)
        worst = max(worst, abs(paired - 1))
        of_medians = statistics.median(ours) / statistics.median(theirs)
        print(
            f"{name:30} {statistics.median(ours):10,.1f} {statistics.median(theirs):10,.1f} {of_medians:7.3f} "
            f"{paired:7.3f}   " + " ".join(f"{r:.2f}" for r in per_round)
        )
    print(f"scratch files left in {args.path}: {left or 'none'}")
    ok = worst <= args.tolerance and not left
    print(f"paired ratio furthest from 1: {worst:.1%} off (tolerance {args.tolerance:.0%}): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
