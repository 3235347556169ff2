"""Comparisons of measured speeds on this host: what the limits and the meter do to a rate.

The test suite checks that each limit is applied (the cpuset's size, the cgroup's CPU accounting,
the throttle's value read back) and runs timing logic in fake time; how much faster or slower a
shape then runs is a measurement of the host, which moves with its load, so it is measured here and
printed as a table, not asserted. Each comparison measures its pair (or more) a few times
(--repeats) and prints every run, the best of each side and their ratio; the `expect` column says
what an idle host shows.

  probe             the single-thread speed probe alone and beside a busy process on its CPU
  loader-drain      a real DataLoader faster to start than to run (and one slower than its
                    consumer), measured with the drain of its backlog and without
  cpu-limits        two spinning processes in a limit group of 1 and of 2 vCPUs: CPUs used, by
                    the group's accounting (root, cgroups)
  command-scaling   a CPU-bound command job (`sizer run --command`) at 1 and at 2 vCPUs
  jpeg-training     resnet50-train (cpu-small) from JPEG files at 1 and at 2 vCPUs
  preprocess-disks  imagenet-preprocess from a cold cache on local-nvme and behind `standard`
  disk-caps         `sizer disks verify` of each disk class (fio under the throttle vs its cap)
                    and a disk-read point behind `standard`
  per-cpu-second    two stores' points of the same keys (a fleet node's and a local sweep's, say):
                    cpu-spin's iterations per CPU-second each got, and their ratio
  helper-cost       microseconds a `sizer_progress.step()` call costs a job

Most need two CPUs or more; all but probe, loader-drain, per-cpu-second and helper-cost need root and
writable cgroups, and take sizer's host lock as any sweep does.

Usage: python lab/benchmarks/speed_comparisons.py COMPARISON [--repeats N] [--json]
       python lab/benchmarks/speed_comparisons.py per-cpu-second STORE_A STORE_B [--target host:NAME]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from workloads.measure import cpu_speed_probe  # noqa: E402

SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]
Row = dict[str, Any]


def sizer_json(*args: str, ok_codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """`sizer ARGS --json`, its answer."""
    done = subprocess.run([*SIZER, *args, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=900)
    if done.returncode not in ok_codes:
        raise SystemExit(f"speed_comparisons: sizer {' '.join(args[:2])} exited {done.returncode}: {done.stderr[-500:]}")
    return json.loads(done.stdout)


def pair_rows(name: str, runs: dict[str, list[float]], unit: str, expect: str) -> list[Row]:
    """A row per side (its runs and the best of them) and one of the ratio of the bests."""
    rows = [{"comparison": name, "side": side, "runs": [round(v, 2) for v in values], "best": round(max(values), 2),
             "unit": unit, "expect": ""} for side, values in runs.items()]
    first, second = (max(v) for v in runs.values())
    rows.append({"comparison": name, "side": " / ".join(reversed(list(runs))), "runs": [], "unit": "ratio",
                 "best": round(second / first, 3) if first else None, "expect": expect})
    return rows


# ---------------------------------------------------------------- probe
def _spin(stop_at: float) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    while time.monotonic() < stop_at:
        pass


def _probe_on_first_cpu(queue: Any) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    queue.put(cpu_speed_probe(0.4))


def _probe(ctx: Any) -> float:
    queue = ctx.Queue()
    proc = ctx.Process(target=_probe_on_first_cpu, args=(queue,))
    proc.start()
    value = queue.get(timeout=30)
    proc.join(timeout=30)
    return float(value)


def probe(args: argparse.Namespace) -> list[Row]:
    """One busy process on the probe's CPU halves its share: the probe reads about half as fast."""
    ctx = mp.get_context("fork")
    alone, shared = [], []
    for _ in range(args.repeats):
        alone.append(_probe(ctx))
        spinner = ctx.Process(target=_spin, args=(time.monotonic() + 5.0,))
        spinner.start()
        try:
            time.sleep(0.2)
            shared.append(_probe(ctx))
        finally:
            spinner.terminate()
            spinner.join()
    return pair_rows("probe", {"alone": alone, "beside a busy process": shared}, "MB/s", "about 0.5, below 0.75")


# ---------------------------------------------------------------- loader-drain
class _SlowItems:
    """Items that take `seconds` each to make."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[float, int]:
        time.sleep(self.seconds)
        return float(i), 1


def _loader_rate(drain: bool, item_s: float, batch: int, workers: int, step_s: float, prefetch: int) -> float:
    import warnings

    import torch

    warnings.filterwarnings("ignore", message="This DataLoader will create")  # sleeping workers, more than CPUs

    from workloads import loop
    from workloads.measure import Meter
    from workloads.protocol import Result

    loader = torch.utils.data.DataLoader(_SlowItems(item_s), batch_size=batch, num_workers=workers,
                                         prefetch_factor=prefetch)
    meter = Meter(warmup_steps=workers * prefetch + 3, time_budget_s=4.5, min_steps=10, min_seconds=2.0,
                  round_steps=workers, gpu=False, drain=drain)
    first = [True]

    def step(batch_: Any) -> float:
        time.sleep(1.5 if first[0] else step_s)  # a slow first step: the workers fill their queue
        first[0] = False
        return float(batch)

    it = iter(loader)
    try:
        loop.run_epochs(meter, it, step, loop.StepClock("cpu"), {}, samples_of=loop.batch_samples)
        result = meter.finish(Result(workload="w", framework="f", unit="samples/s", profile="cpu-small"), workers)
    finally:
        it._shutdown_workers()  # type: ignore[attr-defined]
    return result.throughput


def loader_drain(args: argparse.Namespace) -> list[Row]:
    """Two workers making 100 samples/s for a consumer that could take 125: drained, the window reads
    the loader's 100, undrained it takes the backlog in at the consumer's pace. Four workers making
    160 for a consumer that takes 100: 100 either way."""
    rows: list[Row] = []
    cases = {"loader-bound (100/s)": dict(item_s=0.02, batch=4, workers=2, step_s=0.032, prefetch=8),
             "consumer-bound (100/s)": dict(item_s=0.025, batch=8, workers=4, step_s=0.08, prefetch=2)}
    expect = {"loader-bound (100/s)": "above 1.1", "consumer-bound (100/s)": "1.0 within 5%"}
    for name, case in cases.items():
        runs = {"drained": [], "not drained": []}
        for _ in range(args.repeats):
            runs["drained"].append(_loader_rate(True, **case))  # type: ignore[arg-type]
            runs["not drained"].append(_loader_rate(False, **case))  # type: ignore[arg-type]
        rows += pair_rows(f"loader-drain {name}", runs, "samples/s", expect[name])
    return rows


# ---------------------------------------------------------------- cpu-limits
SPIN = """
import multiprocessing, sys
def spin():
    while True:
        pass
if __name__ == "__main__":
    procs = [multiprocessing.Process(target=spin) for _ in range(int(sys.argv[1]))]
    for p in procs:
        p.start()
    print("ready", flush=True)
    for p in procs:
        p.join()
"""


def cpu_limits(args: argparse.Namespace) -> list[Row]:
    """CPUs two spinners use in a group of 1 vCPU and of 2, over 2.5 s by the group's accounting."""
    import signal

    from sizer.limits import LimitRequest, detect_backend

    backend = detect_backend()
    cpus = sorted(os.sched_getaffinity(0))
    runs: dict[str, list[float]] = {"1 vCPU": [], "2 vCPUs": []}
    for _ in range(args.repeats):
        for vcpus, side in ((1, "1 vCPU"), (2, "2 vCPUs")):
            with backend.create(LimitRequest(cpus=tuple(cpus[-vcpus:]), label=f"speed-cpu{vcpus}")) as group:
                proc = subprocess.Popen([sys.executable, "-c", SPIN, "2"], preexec_fn=group.preexec(),
                                        stdout=subprocess.PIPE, start_new_session=True, text=True)
                try:
                    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
                    time.sleep(0.5)
                    c0, t0 = group.cpu_seconds(), time.monotonic()
                    time.sleep(2.5)
                    runs[side].append((group.cpu_seconds() - c0) / (time.monotonic() - t0))
                finally:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    return pair_rows("cpu-limits", runs, "CPUs", "2.0 (1.0 and 2.0 CPUs used)")


# ---------------------------------------------------------------- command-scaling
COMMAND_SPIN = """
import os, sys, sizer_progress
if os.fork():
    pass
while True:
    x = 0
    for _ in range(100_000):
        x += 1
    sizer_progress.step(1)
"""


def command_scaling(args: argparse.Namespace) -> list[Row]:
    """Two busy processes reporting through the helper, at 1 and 2 vCPUs, measured in pairs."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "spin.py"
        script.write_text(COMMAND_SPIN)
        runs: dict[str, list[float]] = {"1 vCPU": [], "2 vCPUs": []}
        for _ in range(args.repeats):
            for vcpus, side in ((1, "1 vCPU"), (2, "2 vCPUs")):
                point = sizer_json("run", "--command", f"{sys.executable} {script}", "--unit", "iterations/s",
                                   "--vcpus", str(vcpus), "--ram", "1G", "--budget", "2", "--profile", "cpu-small")
                runs[side].append(float(point["throughput"]))
    return pair_rows("command-scaling", runs, "iterations/s", "near 2.0, above 1.6")


# ---------------------------------------------------------------- jpeg-training, preprocess-disks
def _run_point(spec: Any, cpus: tuple[int, ...], throttle: Any = None) -> Any:
    from sizer.limits import LimitRequest, detect_backend
    from sizer.runner import run_point

    with detect_backend().create(LimitRequest(cpus=cpus, throttle=throttle, label=f"speed-{spec.workload}")) as group:
        result = run_point(spec, group).result
    if result.status not in ("ok", "noisy"):
        raise SystemExit(f"speed_comparisons: {spec.workload} ended {result.status}: {result.error}")
    return result


def jpeg_training(args: argparse.Namespace) -> list[Row]:
    """resnet50-train (cpu-small) over 300 JPEGs, one loader worker per vCPU."""
    from sizer.datasets import ensure_imagenet
    from workloads.protocol import Spec

    cpus = sorted(os.sched_getaffinity(0))
    runs: dict[str, list[float]] = {"1 vCPU": [], "2 vCPUs": []}
    with tempfile.TemporaryDirectory() as tmp:
        ensure_imagenet(Path(tmp), images=300, seed=7, val_fraction=0.0, progress=False, classes=6, processes=2)
        for _ in range(args.repeats):
            for vcpus, side in ((1, "1 vCPU"), (2, "2 vCPUs")):
                spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=vcpus, data_dir=tmp, time_budget_s=6)
                runs[side].append(_run_point(spec, tuple(cpus[-vcpus:])).throughput)
    return pair_rows("jpeg-training", runs, "images/s", "above 1.18 (1 vCPU below 0.85 of 2)")


def preprocess_disks(args: argparse.Namespace) -> list[Row]:
    """imagenet-preprocess (cpu-small, every CPU) over 2,400 JPEGs from a cold cache, per config."""
    from sizer.cache import evict
    from sizer.diskclasses import load_disk_classes
    from sizer.limits import DiskThrottle, sysfs
    from workloads.protocol import Spec
    from workloads.synth import generate_imagenet

    rows: list[Row] = []
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        generate_imagenet(Path(tmp), n_images=2400, n_classes=8, seed=11, val_fraction=0.0, processes=2)
        device = sysfs.block_device_for(Path(tmp))
        if device is None:
            raise SystemExit(f"speed_comparisons: {tmp} is not on a block device (--scratch DIR on one)")
        for config_name, config in (("resize-reencode", {}), ("pack-as-is", {"short_side": 0, "format": "tar"})):
            runs: dict[str, list[float]] = {"local-nvme": [], "standard": []}
            for _ in range(args.repeats):
                for disk in runs:
                    c = load_disk_classes(None)[disk]
                    throttle = DiskThrottle(device, read_bps=c.read_bps, write_bps=c.write_bps, read_iops=c.read_iops,
                                            write_iops=c.write_iops)
                    evict(Path(tmp))
                    spec = Spec(workload="imagenet-preprocess", profile="cpu-small", vcpus=len(cpus), data_dir=tmp,
                                time_budget_s=8, config=config)
                    runs[disk].append(_run_point(spec, cpus, throttle).throughput)
            rows += pair_rows(f"preprocess {config_name}", runs, "images/s",
                              "below 0.92 where local-nvme reads above 161 MB/s")
    return rows


# ---------------------------------------------------------------- disk-caps
def disk_caps(args: argparse.Namespace) -> list[Row]:
    """fio's sequential reads under each class's throttle against its cap (verify's tolerance is 15%),
    and a disk-read point behind `standard` against its 140 MB/s."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        for cls in ("local-nvme", "standard", "ssd"):
            found = [sizer_json("disks", "verify", "--class", cls, tmp, "--size", "256M", "--seconds", "3",
                                ok_codes=(0, 1)) for _ in range(args.repeats)]
            cap = found[0]["cap_mbps"]
            rows.append({"comparison": "disks verify", "side": cls, "runs": [r["measured_mbps"] for r in found],
                         "best": max(r["measured_mbps"] for r in found), "unit": "MB/s",
                         "expect": f"within 15% of {cap:g}" if cap else "above 345 (the fastest cap + 15%)"})
        data = Path(tmp) / "files"
        data.mkdir()
        for i in range(26):
            (data / f"part-{i:02d}.bin").write_bytes(os.urandom(16 * 2**20))
        reads = [sizer_json("run", "disk-read", "--vcpus", "1", "--ram", "1G", "--disk", "standard", "--data", str(data),
                            "--budget", "10")["throughput"] for _ in range(args.repeats)]
        rows.append({"comparison": "disk-read point", "side": "standard", "runs": [round(r, 1) for r in reads],
                     "best": round(max(reads), 1), "unit": "MB/s", "expect": "126 to 144 (0.9 to 1.03 of 140)"})
    return rows


# ---------------------------------------------------------------- per-cpu-second
def _per_cpu_second(store: Path, target: str | None) -> dict[str, float]:
    """key -> iterations per CPU-second its cpu-spin spinners got, of a store's usable points (of
    fleet target `target` where given)."""
    conn = sqlite3.connect(f"file:{store.resolve()}?mode=ro&immutable=1", uri=True)
    try:
        rows = conn.execute("SELECT p.key, p.throughput, p.result, s.config FROM points p JOIN sweeps s"
                            " ON s.id = p.sweep_id WHERE p.status IN ('ok', 'noisy')").fetchall()
    finally:
        conn.close()
    out = {}
    for key, throughput, result, config in rows:
        fleet = (json.loads(config).get("fleet") or {}).get("target")
        if target and fleet != target:
            continue
        r = json.loads(result)
        used = r["extra"]["shape"]["vcpus"] * r["counters"]["cpu_util_per_vcpu"]
        if used > 0:
            out[key] = float(throughput) / used
    return out


def per_cpu_second(args: argparse.Namespace) -> list[Row]:
    a, b = (_per_cpu_second(Path(store), args.target) for store in args.stores)
    rows: list[Row] = []
    for key in sorted(set(a) & set(b)):
        rows += pair_rows(f"per-cpu-second {key}", {Path(args.stores[0]).name: [a[key]], Path(args.stores[1]).name: [b[key]]},
                          "iterations/CPU-s", "1.0 within 25%")
    if not rows:
        raise SystemExit("speed_comparisons: the two stores share no usable point")
    return rows


# ---------------------------------------------------------------- helper-cost
HELPER_LOOP = ("import sys, time; sys.path.insert(0, sys.argv[1]); import sizer_progress\n"
               "sizer_progress.step(1); t = time.perf_counter()\n"
               "for _ in range(20000): sizer_progress.step(32)\n"
               "print((time.perf_counter() - t) / 20000)")


def helper_cost(args: argparse.Namespace) -> list[Row]:
    """20,000 steps of the helper into a progress file, per run."""
    from workloads.command import HELPER_DIR

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SIZER_PROGRESS": str(Path(tmp) / "p.txt")}
        for _ in range(args.repeats):
            done = subprocess.run([sys.executable, "-c", HELPER_LOOP, str(HELPER_DIR)], env=env, capture_output=True,
                                  text=True, check=True)
            runs.append(float(done.stdout) * 1e6)
    return [{"comparison": "helper-cost", "side": "sizer_progress.step()", "runs": [round(r, 2) for r in runs],
             "best": round(min(runs), 2), "unit": "µs a step", "expect": "a few µs, below 100"}]


# ---------------------------------------------------------------- the table
COMPARISONS: dict[str, Callable[[argparse.Namespace], list[Row]]] = {
    "probe": probe, "loader-drain": loader_drain, "cpu-limits": cpu_limits, "command-scaling": command_scaling,
    "jpeg-training": jpeg_training, "preprocess-disks": preprocess_disks, "disk-caps": disk_caps,
    "per-cpu-second": per_cpu_second, "helper-cost": helper_cost,
}


def render(rows: list[Row]) -> str:
    head = f"{'comparison':<40} {'side':<34} {'best':>10} {'unit':<16} runs / expect"
    lines = [head, "-" * len(head)]
    for r in rows:
        best = "-" if r["best"] is None else f"{r['best']:,.3f}" if r["unit"] == "ratio" else f"{r['best']:,.1f}"
        tail = r["expect"] if r["unit"] == "ratio" or not r["runs"] else ", ".join(f"{v:,.1f}" for v in r["runs"])
        lines.append(f"{r['comparison']:<40} {r['side']:<34} {best:>10} {r['unit']:<16} {tail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="speed_comparisons", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: python lab/benchmarks/speed_comparisons.py probe --repeats 3")
    parser.add_argument("comparison", choices=sorted(COMPARISONS))
    parser.add_argument("stores", nargs="*", help="per-cpu-second: the two stores to compare")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side (default 2)")
    parser.add_argument("--target", help="per-cpu-second: only the points of this fleet target (host:NAME)")
    parser.add_argument("--scratch", default=None, help="a folder on a block device for data (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="the rows as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if (args.comparison == "per-cpu-second") != bool(args.stores):
        parser.error("per-cpu-second takes two stores, and only it takes any")
    if args.stores and (len(args.stores) != 2 or not all(Path(s).is_file() for s in args.stores)):
        parser.error(f"per-cpu-second wants two store files, got {args.stores}")
    if args.comparison not in ("probe", "per-cpu-second", "helper-cost") and len(os.sched_getaffinity(0)) < 2:
        parser.error(f"{args.comparison} needs two CPUs or more")
    rows = COMPARISONS[args.comparison](args)
    print(json.dumps(rows, indent=1) if args.json else render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
