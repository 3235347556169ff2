"""No process of a point outlives it, nor sizer: SIGKILL a real `sizer run` in the middle of a
point of each kind of workload, and within 15 s, before any new sizer starts, every process the
point started is gone, and so is every cgroup and throttle sizer made. Also the parts: the
watchdog kills nothing outside its group, a worker's forks die with it, and a point's leftovers
go at its normal end on the affinity-only backend too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer.limits import AffinityBackend, LimitRequest, detect_backend, list_groups
from sizer.runner import run_point
from workloads.protocol import Spec

ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]
GONE_WITHIN_S = 15.0


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), None once it is gone or a zombie;
    with the pid it names one process, whatever pid reuse happens meanwhile."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def descendants(root: int) -> dict[int, str]:
    """Every live process below `root`: pid -> start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        started = start_time(pid)
        if started is not None:
            found[pid] = started
        todo.extend(children.get(pid, []))
    return found


def group_dirs_of(pid: int) -> list[Path]:
    return [Path(g) for g in list_groups() if f"/sizer-{pid}-" in g and ":" not in g]


def group_procs(pid: int) -> set[int]:
    procs: set[int] = set()
    for d in group_dirs_of(pid):
        try:
            procs.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        except OSError:
            continue
    return procs


def still_alive(processes: dict[int, str]) -> list[int]:
    return [pid for pid, started in processes.items() if start_time(pid) == started]


def kill_all_of(processes: dict[int, str]) -> None:
    """SIGKILL what a failed test left (processes of the test's own sizer only)."""
    for pid in still_alive(processes):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def workers_below(pid: int, below: dict[int, str]) -> int:
    """How many of the processes below sizer are the point's: its worker and what that started."""
    count = 0
    for child in below:
        try:
            count += b"workloads\0run" in Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
    return count


def kill_sizer_mid_point(args: list[str], tmp_path: Path, env: dict[str, str], ready) -> tuple[int, dict[int, str]]:
    """Start `sizer ARGS`, wait until `ready(sizer_pid, its descendants)`, SIGKILL sizer alone;
    returns (its pid, every process below it at that moment)."""
    env = {**os.environ, "SIZER_LOCK_FILE": str(tmp_path / "sizer.lock"), **env}
    sizer = subprocess.Popen([*SIZER, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    below: dict[int, str] = {}
    killed = False
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            below = descendants(sizer.pid)
            if ready(sizer.pid, below):
                break
            assert sizer.poll() is None, sizer.communicate()[1]
            time.sleep(0.2)
        else:
            pytest.fail("the point's processes never appeared")
        sizer.send_signal(signal.SIGKILL)
        sizer.wait()
        killed = True
    finally:
        if not killed:
            sizer.kill()
            sizer.wait()
            kill_all_of(below)
    return sizer.pid, below


def assert_nothing_left(pid: int, processes: dict[int, str]) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (still_alive(processes) or [g for g in list_groups() if f"/sizer-{pid}-" in g]) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = still_alive(processes)
    try:
        assert alive == [], f"processes of the point still alive {GONE_WITHIN_S:g} s after sizer's SIGKILL"
        assert [g for g in list_groups() if f"/sizer-{pid}-" in g] == [], "cgroups or throttles left"
    finally:
        kill_all_of(processes)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    """One data folder for the module: the first point generates its small image set, the next reuse it."""
    return tmp_path_factory.mktemp("data")


# workload, settings, processes in the point's cgroup besides the worker once it is under way
POINTS = {
    "spinner": ("cpu-spin", [], 2),
    "loader": ("resnet50-train", [], 2),
    "preprocess": ("imagenet-preprocess", [], 2),
}


@pytest.mark.cgroup
@pytest.mark.slow
@pytest.mark.parametrize("kind", list(POINTS))
def test_sigkilled_sizer_leaves_no_process_nor_group_of_its_point(kind, tmp_path, data_root):
    workload, settings, children = POINTS[kind]
    if detect_backend().name == "affinity":
        pytest.skip("no writable cgroup controllers here")
    args = ["run", workload, "--vcpus", "2", "--ram", "4G", "--disk", "ssd", "--profile", "cpu-small",
            "--budget", "120", "--data", str(data_root), "--json", *settings]

    def under_way(pid: int, below: dict[int, str]) -> bool:
        throttled = any(":" in g for g in list_groups() if f"/sizer-{pid}-" in g)
        return throttled and workers_below(pid, below) >= 1 + children and len(group_procs(pid)) >= 1 + children

    pid, processes = kill_sizer_mid_point(args, tmp_path, {}, under_way)
    assert_nothing_left(pid, processes)


@pytest.mark.slow
def test_sigkilled_sizer_leaves_no_process_on_the_affinity_backend(tmp_path):
    args = ["run", "cpu-spin", "--vcpus", "1", "--ram", "1G", "--budget", "120", "--profile", "cpu-small", "--json"]

    def under_way(pid: int, below: dict[int, str]) -> bool:
        return workers_below(pid, below) >= 3  # the worker and its two spinners

    pid, processes = kill_sizer_mid_point(args, tmp_path, {"SIZER_LIMITS": "affinity"}, under_way)
    assert_nothing_left(pid, processes)


OWNER = """
import subprocess, sys, time
from sizer.limits import detect_backend, LimitRequest
g = detect_backend().create(LimitRequest(cpus=(0,), memory_bytes=2**28, label="owned"))
inside = subprocess.Popen(["sleep", "60"], preexec_fn=g.preexec())
outside = subprocess.Popen(["sleep", "60"])
print(inside.pid, outside.pid, g.watchdog().process.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.cgroup
def test_watchdog_kills_only_its_groups_processes_removes_the_group_and_exits():
    if detect_backend().name == "affinity":
        pytest.skip("no writable cgroup controllers here")
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    inside, outside, watchdog = (int(p) for p in owner.stdout.readline().split())
    processes = {p: start_time(p) for p in (inside, watchdog)}
    try:
        assert group_dirs_of(owner.pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert_nothing_left(owner.pid, processes)  # the watchdog too: its job is done
        assert start_time(outside) is not None, "a process outside the group must be spared"
    finally:
        for pid in (inside, outside):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.cgroup
def test_a_removed_group_releases_its_watchdog_untouched():
    backend = detect_backend()
    if backend.name == "affinity":
        pytest.skip("no writable cgroup controllers here")
    group = backend.create(LimitRequest(cpus=(0,), label="released"))
    watchdog = group.watchdog().process
    assert watchdog.poll() is None
    group.remove()
    assert watchdog.wait(timeout=5) == 0


FORKER = """
import os, sys, time
from workloads.lifetime import forks_die_with_this_process
assert forks_die_with_this_process()
child = os.fork()
if child == 0:
    os.setsid()  # out of the worker's session: only the binding to its parent ends it
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_a_workers_forks_die_with_it_even_out_of_its_session():
    parent = subprocess.Popen([sys.executable, "-c", FORKER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    child = int(parent.stdout.readline())
    started = start_time(child)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while start_time(child) == started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert start_time(child) != started
    finally:
        if start_time(child) == started:
            os.kill(child, signal.SIGKILL)


def test_a_points_leftovers_go_at_its_normal_end_without_cgroups(tmp_path):
    """A worker that leaves a process behind in its session: on the affinity-only backend (no
    cgroup to empty) the runner still ends it before the point counts as done."""
    marker = tmp_path / "left.pid"
    worker = tmp_path / "worker"
    worker.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {marker}\nexit 3\n")
    worker.chmod(0o755)
    group = AffinityBackend().create(LimitRequest(cpus=tuple(sorted(os.sched_getaffinity(0)))))
    spec = Spec(workload="cpu-spin", profile="cpu-small", vcpus=1, time_budget_s=1.0)
    run = run_point(spec, group, interpreter=str(worker), timeout_s=30)
    group.remove()
    left = int(marker.read_text())
    assert run.result.status == "error"
    deadline = time.monotonic() + 2
    while start_time(left) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert start_time(left) is None, "the worker's leftover outlived the point"
    finally:
        if start_time(left) is not None:
            os.kill(left, signal.SIGKILL)
