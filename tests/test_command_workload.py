"""The user's own command measured as a workload, under real cgroups: it gets the shape and is held
to its vCPUs, the helper and --metric-regex read the rate the job reports, each way a job can fail
ends with its reason and leaves no process, cgroup or throttle, and a sweep of it is fitted and
reported. (How much faster a CPU-bound job runs at 2 vCPUs than at 1 is measured by
lab/benchmarks/speed_comparisons.py command-scaling.)"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from sizer.limits import detect_backend, list_groups

pytestmark = [pytest.mark.cgroup, pytest.mark.slow]

PY = sys.executable

# Two busy processes, each reporting a fixed piece of work through the helper (as cpu-spin spins).
SPIN = """
import os, sys, sizer_progress
with open(sys.argv[1], "w") as fh:
    fh.write(" ".join(sys.argv[2:]) + "\\n")
    fh.write(" ".join(os.environ.get(k) or "-" for k in
             ("SIZER_VCPUS", "SIZER_WORKERS", "SIZER_RAM_GIB", "SIZER_DATA", "SIZER_GPUS", "OMP_NUM_THREADS")))
if os.fork():
    pass
while True:
    x = 0
    for _ in range(100_000):
        x += 1
    sizer_progress.step(1)
"""

# 10 samples every 10 ms of the job's own schedule, reported three ways: through the helper, whose
# stamps it sets to the schedule's time (not the moment a busy host let it run), as a rate line
# giving the schedule's rate, and as a count line.
PACED = """
import sys, time, types, sizer_progress
start = time.monotonic()
count = 0
sizer_progress.time = types.SimpleNamespace(monotonic=lambda: start + count / 1000)
while True:
    time.sleep(max(0.0, start + (count + 10) / 1000 - time.monotonic()))
    count += 10
    sizer_progress.step(10)
    if count % 200 == 0:
        print(f"step {count}: 1000.000 samples/s", flush=True)
        print(f"\\rdone {count} samples", end="", file=sys.stderr, flush=True)
"""


@pytest.fixture(autouse=True)
def cgroups_and_own_lock(tmp_path, monkeypatch):
    if detect_backend().name == "affinity":
        pytest.skip("no writable cgroup controllers here")
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))
    monkeypatch.chdir(tmp_path)  # the command runs where sizer was started


def measure(cli, *args: str, vcpus: int = 1, budget: float = 3.0, disk: str = "local-nvme") -> dict:
    code, out, err = cli("run", *args, "--vcpus", str(vcpus), "--ram", "1G", "--disk", disk, "--budget", str(budget),
                         "--profile", "cpu-small", "--json")
    assert code == 0, err
    return json.loads(out)


def script(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_cpu_bound_job_gets_the_shape_as_placeholders_and_is_held_to_its_vcpus(cli, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    spin = script(tmp_path, "spin.py", SPIN)
    for vcpus in (1, 2):
        seen = tmp_path / f"seen-{vcpus}.txt"
        point = measure(cli, "--command", f"{PY} {spin} {seen} {{vcpus}} {{workers}} {{ram_gib}} {{gpus}}",
                        "--unit", "iterations/s", vcpus=vcpus, budget=1.5)
        assert point["status"] in ("ok", "noisy"), point["error"]
        assert point["unit"] == "iterations/s" and point["throughput"] > 0
        assert len(point["cpus"]) == len(set(point["cpus"])) == vcpus  # the cpuset's size
        assert point["result"]["limits_seen"]["cpus_allowed"] == sorted(point["cpus"])
        args, env = seen.read_text().splitlines()
        assert args.split() == [str(vcpus), str(vcpus), "1", "1"]
        assert env.split() == [str(vcpus), str(vcpus), "1", "-", "1", str(vcpus)]
        # The window's CPU time by the cgroup's accounting: the job's whole tree, as /proc counts it
        counters = point["counters"]
        assert counters["cpu_seconds"] == counters["cgroup_window_cpu_seconds"] > 0
        assert abs(counters["cpu_seconds"] - counters["tree_cpu_seconds"]) <= 0.15 * counters["cpu_seconds"] + 0.05
        assert counters["cpu_ms_per_sample"] == pytest.approx(1000 * counters["cpu_seconds"] / counters["measured_samples"])
        # Two busy processes in the group get no more CPU time than its vCPUs give in the window.
        assert counters["cpu_seconds"] <= vcpus * counters["measured_seconds"] * 1.02 + 0.05, counters


def test_the_helper_and_the_regex_read_the_rate_the_job_reports(cli, tmp_path):
    paced = script(tmp_path, "paced.py", PACED)
    routes = {
        "helper": [],
        "rate": ["--metric-regex", r"(?P<rate>[\d.]+) samples/s"],
        "count": ["--metric-regex", r"done (?P<count>\d+) samples"],
    }
    points = {}
    for route, args in routes.items():
        point = measure(cli, "--command", f"{PY} {paced}", *args, budget=1.5)
        assert point["status"] in ("ok", "noisy"), (route, point["error"])
        assert point["result"]["extra"]["progress"] == ("metric-regex" if args else "sizer_progress")
        points[route] = point
    # The helper's stamps and the printed rate are the job's schedule: 1000 samples/s, read exactly.
    assert points["helper"]["throughput"] == pytest.approx(1000, rel=1e-3)
    assert points["rate"]["throughput"] == pytest.approx(1000, rel=1e-6)
    # A count is stamped as its line arrives: its steps hold the 200 samples between two lines.
    count = points["count"]
    assert count["throughput"] > 0 and count["counters"]["measured_samples"] % 200 == 0
    assert {s[1] for s in count["result"]["steps"] if not s[2]} == {200.0}


def test_a_jobs_dataset_is_evicted_read_through_the_throttle_and_named_by_data(cli, tmp_path):
    data = tmp_path / "dataset"
    data.mkdir()
    for i in range(8):
        (data / f"part-{i}.bin").write_bytes(os.urandom(1 << 20))
    reader = script(tmp_path, "read.py", "import os, sys, sizer_progress\n"
                    "open(sys.argv[2], 'w').write(sys.argv[1] + ' ' + os.environ['SIZER_DATA'])\n"
                    "while True:\n"
                    "    for name in sorted(os.listdir(sys.argv[1])):\n"
                    "        open(os.path.join(sys.argv[1], name), 'rb').read()\n"
                    "        sizer_progress.step(1)\n")
    for _ in range(2):  # once to read the files into the page cache: each point must evict them
        point = measure(cli, "--command", f"{PY} {reader} {{data}} {tmp_path / 'seen.txt'}", "--data", "dataset",
                        "--unit", "files/s", disk="ssd", budget=1.5)
        assert point["status"] in ("ok", "noisy"), point["error"]
        assert point["result"]["extra"]["evicted"]["files"] == 8
        assert point["counters"]["cgroup_read_bytes"] >= 8 << 20
    assert (tmp_path / "seen.txt").read_text().split() == [str(data), str(data)]
    assert "read_bps=300000000" in point["enforced"]["disk"]


# ---------------------------------------------------------------- failures
CRASH = """
import sys, time, sizer_progress
open(sys.argv[1], "a").write(f"{__import__('os').getpid()}\\n")
t0 = time.monotonic()
while time.monotonic() - t0 < 1.0:  # into the window (warm-up: a third of the budget), not past it
    time.sleep(0.02)
    sizer_progress.step(4)
raise SystemExit("Traceback (most recent call last): out of cheese")
"""

IGNORES_SIGTERM = """
import os, signal, sys, time, sizer_progress
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
while True:
    time.sleep(0.02)
    sizer_progress.step(4)
"""

DOUBLE_FORK = """
import os, sys, time, sizer_progress
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
        time.sleep(300)
    os._exit(0)
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
while True:
    time.sleep(0.02)
    sizer_progress.step(4)
"""

SILENT = "import os, sys, time\nopen(sys.argv[1], 'a').write(f'{os.getpid()}\\n')\ntime.sleep(300)\n"

GARBAGE = ("import os, sys, time\nopen(sys.argv[1], 'a').write(f'{os.getpid()}\\n')\n"
           "print('rate 1.2.3 samples/s', flush=True)\ntime.sleep(300)\n")

# name -> (script or None, the command after the interpreter and script, more options, status, error piece)
FAILURES = {
    "missing command": (None, "no-such-command-for-sizer --x", [], "error", "code 127 (command not found)"),
    "exits at once": (None, "echo 'usage: train.py DATA' >&2; exit 3", [], "error", "usage: train.py DATA"),
    "crashes mid-window": (CRASH, "", [], "error", "out of cheese"),
    "never reports": (SILENT, "", ["--set", "start_timeout_s=2"], "timeout", "no progress within 2 s"),
    "prints garbage": (GARBAGE, "", ["--metric-regex", r"rate (\S+) samples/s"], "error",
                       "'1.2.3' is not a number of samples or a rate, in the line 'rate 1.2.3 samples/s'"),
    "outlives its budget": (IGNORES_SIGTERM, "", [], "ok", ""),
    "double-forks a grandchild": (DOUBLE_FORK, "", [], "ok", ""),
}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def marked_processes(marker: str) -> list[int]:
    """Processes whose command line names `marker` (the test's own folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def own_groups() -> list[str]:
    """This process's cgroups and throttles (sizer names them after the pid that made them)."""
    return [g for g in list_groups() if f"/sizer-{os.getpid()}-" in g]


@pytest.mark.parametrize("case", list(FAILURES))
def test_a_failing_job_ends_as_stated_and_leaves_nothing(cli, tmp_path, case):
    text, rest, options, status, message = FAILURES[case]
    pids = tmp_path / "pids.txt"
    command = f"{PY} {script(tmp_path, 'job.py', text)} {pids} {rest}" if text else f"{rest} # {tmp_path}"
    assert marked_processes(str(tmp_path)) == [] and own_groups() == []  # before
    point = measure(cli, "--command", command, *options, budget=2)
    assert point["status"] in ((status, "noisy") if status == "ok" else (status,)), point["error"]
    assert message in point["error"]
    if status == "ok":
        assert point["throughput"] > 0
    left = [pid for pid in (int(p) for p in pids.read_text().split()) if alive(pid)] if pids.exists() else []
    try:
        assert left == [] and marked_processes(str(tmp_path)) == []  # after
        assert own_groups() == []
    finally:
        for pid in left:
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- a whole sweep
def test_a_command_sweep_is_fitted_and_reported_with_its_own_card_and_unit(cli, tmp_path):
    spin = script(tmp_path, "spin.py", SPIN)
    code, out, err = cli("sweep", "--command", f"{PY} {spin} {tmp_path / 'seen.txt'}", "--name", "spin-job",
                         "--unit", "tokens/s", "--vcpus", "1,2", "--ram", "1G", "--disks", "local-nvme",
                         "--budget", "1", "--no-calibrate", "--profile", "cpu-small", "--out", str(tmp_path / "out"),
                         "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert [p["workload"] for p in summary["points"]] == ["spin-job", "spin-job"]
    assert {p["status"] for p in summary["points"]} <= {"ok", "noisy"}
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    card = next(w for w in results["workloads"] if w["workload"] == "spin-job")
    assert card["unit"] == "tokens/s" and card["n_usable"] == 2
    html = (tmp_path / "out" / "report.html").read_text()
    assert "spin-job" in html and "tokens/s" in html

    from sizer.store import Store

    with Store(tmp_path / "out" / "sizer.sqlite") as store:
        sweep = store.sweeps()[-1]
        assert sweep.config["command_jobs"]["spin-job"]["command"].startswith(PY)
        stored = [result for _, result in store.results(sweep.id)]
    assert all(r.config["command"].startswith(PY) and r.unit == "tokens/s" for r in stored)
