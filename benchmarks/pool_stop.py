"""Stopping a pool of worker processes while megabyte results are in flight, as imagenet-preprocess
does when its measured window ends before the pass does.

Each run starts N processes over tasks that return 1 MB each (a chunk of resized JPEGs is about
that), takes some results, then stops the workers: `multiprocessing.Pool.terminate()` (what the
workload used to do) or `ChunkWorkers.stop()` (what it does now). Every run is a fresh process with
a time limit, so a stop that never returns is counted, not waited for. Prints one row per method:
runs, hung runs, median and max seconds to stop.

Usage: .venv/bin/python benchmarks/pool_stop.py [--processes 16] [--runs 200] [--limit 20]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def megabyte(_: object) -> bytes:
    return os.urandom(1 << 20)


def one_run(method: str, processes: int, take: int) -> float:
    """Start, take `take` results, stop; returns the seconds the stop took."""
    import multiprocessing

    from workloads.imagenet_preprocess import ChunkWorkers

    tasks = list(range(4000))
    if method == "pool":
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            for k, _ in enumerate(pool.imap_unordered(megabyte, tasks)):
                if k == take:
                    break
            t0 = time.perf_counter()
            pool.terminate()
    else:
        workers = ChunkWorkers(processes, fn=megabyte)
        for k, _ in enumerate(workers.imap_unordered(tasks)):
            if k == take:
                break
        t0 = time.perf_counter()
        workers.stop()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--limit", type=float, default=20.0, help="seconds before a run counts as hung")
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "TAKE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(one_run(args.one[0], args.processes, int(args.one[1])))
        return 0
    print(f"{'method':<14} {'runs':>5} {'hung':>5} {'median stop s':>14} {'max stop s':>11}   ({args.processes} processes, 1 MB results)")
    for method in ("pool", "chunk-workers"):
        stops, hung = [], 0
        for r in range(args.runs):
            cmd = [sys.executable, __file__, "--processes", str(args.processes), "--one", method, str(20 + r % 7)]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
            try:
                out, _ = proc.communicate(timeout=args.limit)
                stops.append(float(out.strip()))
            except subprocess.TimeoutExpired:
                hung += 1
            finally:
                try:  # the run and every worker it started
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        med = f"{statistics.median(stops):.3f}" if stops else "-"
        mx = f"{max(stops):.3f}" if stops else "-"
        print(f"{method:<14} {args.runs:>5} {hung:>5} {med:>14} {mx:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
