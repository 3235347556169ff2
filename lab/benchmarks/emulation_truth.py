"""Emulation truth: a shape emulated on a larger host against a host whose whole size is that shape.

sizer emulates a smaller instance on a larger host (vCPUs pinned with cpuset, RAM as a memory
cgroup, the disk class as a throttle). This benchmark measures how close that comes to the real
smaller host, and how much the host's moment moves the answer.

`measure` runs on one host: R rounds, each shape once per round through the real CLI (`sizer run
WORKLOAD --vcpus N --ram SIZE --disk CLASS --json`, a fresh worker under real limits), with the
per-core calibration (`sizer run cpu-calibrate --vcpus 1 --json`: one vCPU's decode-and-augment
rate) before the first round and after every round. Each repeat is thus bracketed by two
calibrations; its calibration is their mean. One warm-up calibration comes first, stored and used
in no ratio: the first one on a fresh GPU machine read 7% and 27% low, with a spread of up to 61%
between its windows. The JSON file is written again after every point, so
a crash, kill or Ctrl-C keeps everything measured. It holds, per shape, every repeat's figure and
calibration, the host facts (`sizer probe`: CPU model, hardware threads, GPUs) and whether the shape
is the whole host (vCPUs == the host's hardware threads) or emulated.

`compare` reads the file of an emulating (larger) host and the file of a host whose whole size is
the shape, and prints per shape both medians, their ratio raw and calibrated (each figure divided by
its own host's calibration at that time), and the range of the per-round ratios (repeat i of one
host against repeat i of the other). A ratio of 1 means the emulation gives what the real host
gives; the range says how much one host's moment moved it. The calibrated ratio speaks of CPU-bound
points: a GPU-bound figure does not move with the CPU's speed (a note names such shapes).

Usage:
  python lab/benchmarks/emulation_truth.py measure resnet50-train --vcpus 8,16 --ram 32G --rounds 3 --out big.json
  python lab/benchmarks/emulation_truth.py measure resnet50-train --vcpus 16 --ram 32G --rounds 3 --out whole.json
  python lab/benchmarks/emulation_truth.py compare big.json whole.json [--json]
Options of `sizer run` pass through: --disk, --profile, --data, --set, --budget. Exit codes: 0 done;
2 bad input (one line on stderr, before any work); 130 interrupted (the points measured are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sizer.diskclasses import get_disk_class  # noqa: E402
from sizer.errors import SizerError  # noqa: E402
from sizer.points import USABLE_STATUSES  # noqa: E402
from sizer.sweep.plan import CALIBRATION_BUDGET_S, CALIBRATION_WORKLOAD  # noqa: E402
from sizer.units import GIB, parse_setting, parse_size  # noqa: E402

NAME = "emulation_truth"
FORMAT_VERSION = 1
# The sizer CLI in this interpreter: the path a user takes, with sizer's own error handling.
SIZER = [sys.executable, "-m", "sizer.cli"]


class Interrupted(Exception):
    """Ctrl-C or SIGTERM during a point: sizer has cleaned up; what was measured is on disk."""


# ------------------------------------------------------------------ running sizer
_RUNNING: list[subprocess.Popen] = []  # the sizer process of the point in flight


def terminate_as_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM ends the benchmark as Ctrl-C does: the running point is passed it and waited for."""
    if _RUNNING:
        _RUNNING[-1].send_signal(signum)
    raise KeyboardInterrupt


def sizer_json(args: list[str]) -> tuple[int, dict[str, Any] | None, str, bool]:
    """(exit code, parsed --json output or None, last stderr line, whether interrupted) of
    `sizer ARGS --json`. Output goes to files, not pipes, so an interrupted sizer can finish its
    clean-up (it got the same Ctrl-C) and what it printed can still be read."""
    interrupted = False
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*SIZER, *args, "--json"], stdout=out, stderr=err, text=True, cwd=REPO)
        _RUNNING.append(proc)
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            interrupted = True
            code = proc.wait()
        finally:
            _RUNNING.remove(proc)
        out.seek(0)
        err.seek(0)
        text, lines = out.read(), err.read().strip().splitlines()
    try:
        data = json.loads(text) if code == 0 else None
    except ValueError:
        data = None
    return code, data, lines[-1] if lines else "", interrupted or code == 130


def host_facts() -> dict[str, Any]:
    """This host as `sizer probe` sees it: the facts a comparison needs, and the whole probe."""
    code, probe, err, interrupted = sizer_json(["probe"])
    if interrupted:
        raise Interrupted()
    if code != 0 or probe is None:
        raise SizerError(f"sizer probe failed (exit {code}): {err}")
    cpu, gpu = probe.get("cpu", {}), probe.get("gpu", {})
    devices = gpu.get("devices") or []
    return {
        "hostname": probe.get("hostname"),
        "cpu_model": cpu.get("model"),
        "threads": cpu.get("hardware_threads"),
        "usable_threads": len(cpu.get("usable") or []),
        "smt": cpu.get("smt"),
        "virtual_machine": cpu.get("virtual_machine"),
        "gpus": [d.get("name") for d in devices],
        "gpu_uuids": [d.get("uuid") for d in devices],
        "probe": probe,
    }


def point_record(code: int, run: dict[str, Any] | None, err: str, round_no: int, started: float) -> dict[str, Any]:
    """One measured point as the benchmark keeps it: its figure and what shows the host's moment."""
    if run is None:
        return {"round": round_no, "started": started, "status": "failed", "throughput": 0.0,
                "error": f"sizer exit {code}: {err}"}
    counters = run.get("counters") or {}
    extra = (run.get("result") or {}).get("extra") or {}
    return {
        "round": round_no, "started": started, "status": run.get("status"), "throughput": run.get("throughput"),
        "unit": run.get("unit"), "spread": run.get("spread"), "window_rates": run.get("window_rates"),
        "bottleneck": run.get("bottleneck"), "wall_s": run.get("wall_s"), "cpus": run.get("cpus"),
        "backend": (run.get("enforced") or {}).get("backend"), "host_speed": extra.get("host_speed"),
        "steal_share": counters.get("steal_share"), "cpu_ms_per_sample": counters.get("cpu_ms_per_sample"),
        "error": run.get("error", ""),
    }


def measure_one(args: list[str], round_no: int) -> tuple[dict[str, Any], bool]:
    """(the point's record, whether the benchmark was interrupted while it ran)."""
    started = time.time()
    code, run, err, interrupted = sizer_json(["run", *args])
    if interrupted and run is None:
        raise Interrupted()
    if code == 2:  # bad input or an environment sizer cannot work in: no later point does better
        raise SizerError(err.removeprefix("sizer: error: ") or "sizer run exited 2")
    return point_record(code, run, err, round_no, started), interrupted


# ------------------------------------------------------------------ measure
def usable(record: dict[str, Any]) -> bool:
    return record.get("status") in USABLE_STATUSES and (record.get("throughput") or 0) > 0


def bracket_calibration(calibrations: list[dict[str, Any]], round_no: int) -> float | None:
    """The calibration of round `round_no`'s repeats: the mean of the usable calibrations measured
    just before (index round_no - 1) and just after (index round_no) that round."""
    around = [c["throughput"] for c in calibrations[max(0, round_no - 1): round_no + 1] if usable(c)]
    return statistics.fmean(around) if around else None


def attach_calibrations(doc: dict[str, Any]) -> None:
    for shape in doc["shapes"]:
        for repeat in shape["repeats"]:
            repeat["calibration"] = bracket_calibration(doc["calibration"]["points"], repeat["round"])


def write_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Replace `path` whole: a kill mid-write leaves the previous version, never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def parse_vcpus(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SizerError(f"--vcpus: not a list of whole numbers: {text!r} (example: 8,16)") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise SizerError(f"--vcpus: give distinct counts of at least 1: {text!r}")
    return counts


def check_measure(args: argparse.Namespace) -> list[int]:
    """Every input of `measure` checked before anything runs; the vCPU counts to measure."""
    from workloads import load_all

    if args.workload.partition(":")[0] not in load_all():
        raise SizerError(f"unknown workload {args.workload!r} (see `sizer workloads`)")
    counts = parse_vcpus(args.vcpus)
    if args.rounds < 1:
        raise SizerError(f"--rounds must be at least 1, not {args.rounds}")
    for name, value in (("--budget", args.budget), ("--calibration-budget", args.calibration_budget)):
        if value is not None and value <= 0:
            raise SizerError(f"{name} must be positive, not {value:g}")
    parse_size(args.ram)
    get_disk_class(args.disk)
    for item in args.set:
        parse_setting(item, "--set")
    if args.out.exists():
        raise SizerError(f"{args.out} exists: give another --out (its measurements are kept)")
    if not args.out.parent.is_dir():
        raise SizerError(f"no folder {args.out.parent} for --out")
    return counts


def run_arguments(args: argparse.Namespace, vcpus: int) -> list[str]:
    """`sizer run` arguments of one shape's point."""
    extra = [f"--set={item}" for item in args.set]
    extra += ["--profile", args.profile] + (["--data", str(args.data)] if args.data else [])
    extra += ["--budget", f"{args.budget:g}"] if args.budget is not None else []
    return [args.workload, "--vcpus", str(vcpus), "--ram", args.ram, "--disk", args.disk, *extra]


def calibration_arguments(args: argparse.Namespace, host: dict[str, Any]) -> list[str]:
    budget = args.calibration_budget
    if budget is None:  # the sweep's own calibration budget for the profile this host runs
        profile = args.profile if args.profile != "auto" else ("gpu" if host["gpus"] else "cpu-small")
        budget = CALIBRATION_BUDGET_S.get(profile, 10.0)
    return [CALIBRATION_WORKLOAD, "--vcpus", "1", "--ram", args.ram, "--disk", args.disk, "--profile", args.profile,
            "--budget", f"{budget:g}"]


def new_document(args: argparse.Namespace, counts: list[int], host: dict[str, Any], argv: list[str]) -> dict[str, Any]:
    ram_gib = parse_size(args.ram) / GIB
    return {
        "benchmark": NAME, "version": FORMAT_VERSION, "command": ["emulation_truth.py", *argv],
        "workload": args.workload, "profile": args.profile, "settings": list(args.set), "budget_s": args.budget,
        "rounds": args.rounds, "complete": False, "host": host,
        "calibration": {"workload": CALIBRATION_WORKLOAD, "vcpus": 1, "warmup": [], "points": []},
        "shapes": [{"vcpus": n, "ram": args.ram, "ram_gib": ram_gib, "disk": args.disk,
                    "whole_host": n == host["threads"], "repeats": []} for n in counts],
    }


def measure(args: argparse.Namespace, argv: list[str]) -> int:
    counts = check_measure(args)
    host = host_facts()
    too_many = [n for n in counts if n > host["usable_threads"]]
    if too_many:
        raise SizerError(f"--vcpus {too_many[0]}: this host has {host['usable_threads']} usable hardware threads")
    doc = new_document(args, counts, host, argv)
    calibrate = calibration_arguments(args, host)

    def point(run_args: list[str], round_no: int, into: list[dict[str, Any]], label: str) -> None:
        record, interrupted = measure_one(run_args, round_no)
        into.append(record)
        attach_calibrations(doc)
        write_atomic(args.out, doc)
        figure = f"{record['throughput']:,.1f} {record.get('unit') or ''}".strip() if usable(record) else record["status"]
        print(f"round {round_no}: {label}: {figure}", file=sys.stderr, flush=True)
        if interrupted:  # the point ended before the signal was seen: kept, and no other starts
            raise Interrupted()

    previous = signal.signal(signal.SIGTERM, terminate_as_interrupt)
    try:
        point(calibrate, 0, doc["calibration"]["warmup"], "warm-up calibration")
        point(calibrate, 0, doc["calibration"]["points"], "calibration")
        for round_no in range(1, args.rounds + 1):
            for shape in doc["shapes"]:
                point(run_arguments(args, shape["vcpus"]), round_no, shape["repeats"], f"{shape['vcpus']} vCPUs")
            point(calibrate, round_no, doc["calibration"]["points"], "calibration")
    except (Interrupted, KeyboardInterrupt):
        print(f"{NAME}: interrupted; the points measured are in {args.out}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    doc["complete"] = True
    write_atomic(args.out, doc)
    print(f"{NAME}: wrote {args.out}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ compare
def load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise SizerError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise SizerError(f"{path} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("benchmark") != NAME or not isinstance(doc.get("shapes"), list):
        raise SizerError(f"{path} is not a file of `{NAME}.py measure`")
    return doc


def shape_key(shape: dict[str, Any]) -> tuple[int, float, str]:
    return int(shape["vcpus"]), round(float(shape["ram_gib"]), 3), str(shape["disk"])


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def figures(shape: dict[str, Any]) -> dict[int, tuple[float, float | None]]:
    """round -> (figure, figure over its calibration) of the shape's usable repeats."""
    out = {}
    for r in shape["repeats"]:
        if usable(r):
            cal = r.get("calibration")
            out[int(r["round"])] = (float(r["throughput"]), r["throughput"] / cal if cal else None)
    return out


def compare_shape(emulated: dict[str, Any], whole: dict[str, Any]) -> dict[str, Any]:
    """One shape's row: medians, raw and calibrated ratios, and the per-round ratios' ranges."""
    emu, real = figures(emulated), figures(whole)
    emu_median = median_or_none([f for f, _ in emu.values()])
    whole_median = median_or_none([f for f, _ in real.values()])
    emu_cal = median_or_none([c for _, c in emu.values() if c is not None])
    whole_cal = median_or_none([c for _, c in real.values() if c is not None])
    both = sorted(set(emu) & set(real))
    raw_by_round = {n: emu[n][0] / real[n][0] for n in both}
    cal_by_round = {n: ec / wc for n in both if (ec := emu[n][1]) and (wc := real[n][1])}
    rounds = [{"round": n, "ratio_raw": raw_by_round[n], "ratio_calibrated": cal_by_round.get(n)} for n in both]
    raw, cal = list(raw_by_round.values()), list(cal_by_round.values())
    return {
        "vcpus": emulated["vcpus"], "ram_gib": emulated["ram_gib"], "disk": emulated["disk"],
        "emulated_is_whole_host": bool(emulated.get("whole_host")), "whole_is_whole_host": bool(whole.get("whole_host")),
        "emulated_repeats": len(emu), "whole_repeats": len(real),
        "emulated_median": emu_median, "whole_median": whole_median,
        "ratio_raw": emu_median / whole_median if emu_median and whole_median else None,
        "ratio_calibrated": emu_cal / whole_cal if emu_cal and whole_cal else None,
        "rounds": rounds,
        "round_ratio_raw_range": [min(raw), max(raw)] if raw else None,
        "round_ratio_calibrated_range": [min(cal), max(cal)] if cal else None,
    }


def bound_note(emulated: dict[str, Any], whole: dict[str, Any]) -> str | None:
    """A note where the shape's points were bound by something else than the CPU on either host."""
    bounds = [sorted({r.get("bottleneck") or "?" for r in s["repeats"] if usable(r)}) for s in (emulated, whole)]
    if all(b == ["cpu"] for b in bounds):
        return None
    return (f"{emulated['vcpus']} vCPUs: {'/'.join(bounds[0]) or '-'}-bound emulated, {'/'.join(bounds[1]) or '-'}-bound"
            " on the whole host; the calibrated ratio speaks of CPU-bound points only")


def calibration_summary(doc: dict[str, Any]) -> dict[str, Any]:
    points = [c for c in doc["calibration"]["points"] if usable(c)]
    rates = [c["throughput"] for c in points]
    return {"unit": points[0].get("unit") if points else None, "median": median_or_none(rates),
            "range": [min(rates), max(rates)] if rates else None, "count": len(rates)}


def host_summary(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    host = doc.get("host") or {}
    return {"file": str(path), "hostname": host.get("hostname"), "cpu_model": host.get("cpu_model"),
            "threads": host.get("threads"), "gpus": host.get("gpus"), "complete": doc.get("complete"),
            "calibration": calibration_summary(doc)}


def compare(emulated_path: Path, whole_path: Path) -> dict[str, Any]:
    emulated, whole = load(emulated_path), load(whole_path)
    if emulated.get("workload") != whole.get("workload"):
        raise SizerError(f"the files measured different workloads: {emulated.get('workload')} and {whole.get('workload')}")
    theirs = {shape_key(s): s for s in whole["shapes"]}
    ours = {shape_key(s): s for s in emulated["shapes"]}
    if not set(ours) & set(theirs):
        raise SizerError("the files share no shape (vCPUs, RAM and disk class must match)")
    notes = [f"{v} vCPUs, {r:g} GiB, {d}: only in {p.name}" for keys, other, p in
             ((ours, theirs, emulated_path), (theirs, ours, whole_path)) for (v, r, d) in sorted(set(keys) - set(other))]
    notes += [f"{s['vcpus']} vCPUs: the whole host in {emulated_path.name} too, not emulated"
              for k, s in sorted(ours.items()) if k in theirs and s.get("whole_host")]
    notes += [note for k in sorted(set(ours) & set(theirs)) if (note := bound_note(ours[k], theirs[k]))]
    for key in ("profile", "settings", "budget_s"):
        if emulated.get(key) != whole.get(key):
            notes.append(f"{key} differs: {emulated.get(key)!r} and {whole.get(key)!r}")
    units = {r.get("unit") for doc in (emulated, whole) for s in doc["shapes"] for r in s["repeats"] if usable(r)}
    return {"workload": emulated.get("workload"), "unit": ", ".join(sorted(units)) or None,
            "emulated": host_summary(emulated_path, emulated),
            "whole": host_summary(whole_path, whole),
            "shapes": [compare_shape(ours[k], theirs[k]) for k in sorted(set(ours) & set(theirs))], "notes": notes}


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "-"
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if value >= factor:
            return f"{value / factor:,.1f}{suffix}"
    return f"{value:,.1f}"


def fmt_range(pair: list[float] | None) -> str:
    return "-" if not pair else f"{pair[0]:.2f}-{pair[1]:.2f}"


def print_comparison(result: dict[str, Any]) -> None:
    """The table of `compare`, at most 80 columns for figures of up to seven characters."""
    header = ("vCPUs", "RAM", "disk", "emulated", "whole", "raw", "calib", "raw/round", "calib/round")
    rows = [(f"{s['vcpus']}{'' if s['whole_is_whole_host'] else '*'}", f"{s['ram_gib']:g}G", s["disk"],
             fmt_rate(s["emulated_median"]), fmt_rate(s["whole_median"]),
             "-" if s["ratio_raw"] is None else f"{s['ratio_raw']:.3f}",
             "-" if s["ratio_calibrated"] is None else f"{s['ratio_calibrated']:.3f}",
             fmt_range(s["round_ratio_raw_range"]), fmt_range(s["round_ratio_calibrated_range"]))
            for s in result["shapes"]]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print(f"{result['workload']}, {result['unit'] or 'no usable figure'}: medians; ratios emulated / whole host")
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) if i in (1, 2) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    for side in ("emulated", "whole"):
        h, cal = result[side], result[side]["calibration"]
        low, high = cal["range"] or (None, None)
        gpus = Counter(h["gpus"] or [])
        print(f"{side}: {h['hostname']}, {h['cpu_model']}, {h['threads']} threads\n"
              f"  GPUs: {', '.join(f'{n} x {name}' for name, n in gpus.items()) or 'none'}\n"
              f"  calibration {fmt_rate(cal['median'])} {cal['unit'] or ''} per vCPU "
              f"({cal['count']} points, {fmt_rate(low)} to {fmt_rate(high)})")
    if any(not s["whole_is_whole_host"] for s in result["shapes"]):
        print("* not the whole host in the second file: emulated there too")
    for note in result["notes"]:
        print(textwrap.fill(f"note: {note}", width=80, subsequent_indent="  "))


# ------------------------------------------------------------------ command line
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="emulation_truth.py", description=__doc__.split("\n\n")[0],
                                  epilog=__doc__[__doc__.index("Usage:"):],
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("measure", help="measure shapes of one workload in interleaved rounds on this host")
    m.add_argument("workload", help="a workload of `sizer workloads` (with settings: resnet50-train:decode=gpu)")
    m.add_argument("--vcpus", required=True, help="comma-separated vCPU counts, e.g. 8,16")
    m.add_argument("--ram", default="32G", help="RAM of every shape, page cache included (default 32G)")
    m.add_argument("--disk", default="local-nvme", help="disk class of every shape (default local-nvme)")
    m.add_argument("--rounds", type=int, default=3, help="repeats of every shape, interleaved (default 3)")
    m.add_argument("--out", type=Path, required=True, help="the JSON file to write (must not exist)")
    m.add_argument("--profile", default="auto", help="auto, gpu or cpu-small")
    m.add_argument("--data", type=Path, default=None, help="dataset folder, as `sizer run --data`")
    m.add_argument("--set", action="append", default=[], help="workload setting key=value (repeatable)")
    m.add_argument("--budget", type=float, default=None, help="seconds per point, as `sizer run --budget`")
    m.add_argument("--calibration-budget", type=float, default=None,
                   help="seconds per calibration point (default: the sweep's for the profile)")
    c = sub.add_parser("compare", help="an emulating host's file against a whole host's file")
    c.add_argument("emulated", type=Path, help="JSON of `measure` on the larger, emulating host")
    c.add_argument("whole", type=Path, help="JSON of `measure` on a host whose whole size is the shape")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    return top


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    try:
        if args.mode == "measure":
            return measure(args, argv)
        result = compare(args.emulated, args.whole)
    except SizerError as exc:
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 2
    except (Interrupted, KeyboardInterrupt):
        print(f"{NAME}: interrupted before the first point", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_comparison(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
