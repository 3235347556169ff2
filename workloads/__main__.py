"""Worker entry point: `python -m workloads run --spec FILE --out FILE`.

Runs one point of one workload and writes its Result as JSON to --out. Works from any interpreter
that can import this package (sizer puts the package on PYTHONPATH for the MXNet environment).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from workloads import for_spec, load_all
from workloads.protocol import ERROR, Result, Spec


def _write(path: str, result: Result) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(result.to_json())
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="print the registered workloads as JSON")
    for name in ("run", "prepare"):
        p = sub.add_parser(name)
        p.add_argument("--spec", required=True, help="spec JSON file, or - for standard input")
        p.add_argument("--out", help="where to write the result JSON (run only)")
    args = parser.parse_args(argv)

    if args.cmd == "list":
        print(json.dumps([cls.describe() for cls in load_all().values()]))
        return 0

    text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text()
    spec = Spec.from_json(text)
    workload = for_spec(spec)
    if args.cmd == "prepare":
        workload.prepare(spec)
        return 0

    from workloads.lifetime import forks_die_with_this_process
    from workloads.measure import cpu_speed_probe, process_age_s

    forks_die_with_this_process()  # before the workload starts any process

    speed_before = cpu_speed_probe()
    t0 = time.perf_counter()
    try:
        result = workload.run(spec)
    except Exception as exc:  # the runner records it as status `error` and the sweep goes on
        result = workload.new_result(spec, dict(spec.config))
        result.status = ERROR
        result.error = f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=8)
    result.wall_s = time.perf_counter() - t0
    timeline = result.extra.setdefault("timeline_s", {})
    if isinstance(timeline, dict):  # after the workload's own clean-up (loader workers stopped)
        timeline["run_returned"] = round(process_age_s(), 3)
    # The host's speed on one of the point's vCPUs just before and after it (see cpu_speed_probe).
    result.extra["host_speed"] = {"before_mbps": round(speed_before, 2), "after_mbps": round(cpu_speed_probe(), 2)}
    if args.out:
        _write(args.out, result)
    else:
        print(result.to_json())
    return 0 if result.status != ERROR else 1


def exit_now(code: int) -> None:
    """End the worker once its result is written, without the interpreter's clean-up: after PyTorch
    that takes 0.9 to 1.2 s, a second of every point that measures nothing. Loader
    workers are stopped by then, and sizer's runner ends any process of the point still alive."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    code = main()
    if sys.argv[1:2] == ["run"]:
        exit_now(code)
    sys.exit(code)
