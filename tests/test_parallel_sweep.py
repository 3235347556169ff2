"""`sizer sweep --parallel 2` on this host's real cgroups: two slots of one CPU each, points side by
side with disjoint CPUs, each slot reading its own dataset copy, the interference check, and a
parallel sweep stopped (SIGTERM) or killed (SIGKILL) with two points in flight, then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_sweep import stored

from sizer.limits import list_groups

ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]
pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two slots need two CPUs")


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def groups_of(pid: int) -> set[str]:
    """sizer's groups (and throttles) of process `pid`, by name, whatever the hierarchy."""
    return {part for g in list_groups() for part in Path(g.split(":")[0]).parts if part.startswith(f"sizer-{pid}-")}


def processes_of(pid: int) -> list[str]:
    """Workers (their point folder) and watchdogs (their group) that sweep `pid` started, still running."""
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if f"sizer-point-{pid}-" in line or f"sizer-{pid}-" in line:
            out.append(line)
    return out


def sweep_args(tmp_path: Path, *more: str) -> list[str]:
    return ["sweep", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"),
            "--no-calibrate", "--json", "--parallel", "2", "--vcpus", "1", "--budget", "1", *more]


def refusals() -> list[tuple[tuple[str, ...], str]]:
    ram = f"{int(psutil.virtual_memory().total * 0.6 / 2**20)}M"  # fits the host once, not twice
    return [
        (("--parallel", "2", "--vcpus", "2"), "--parallel 2: a shape of 2 vCPUs does not fit a slot of 1 hardware threads"),
        (("--parallel", "3", "--vcpus", "1"), "--parallel 3: this host has 2 core(s) for 3 slot(s)"),
        (("--parallel", "2", "--vcpus", "1", "--ram", ram), "--parallel 2: 2 points of"),
        (("--parallel", "0", "--vcpus", "1"), "--parallel"),
    ]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) != 2, reason="the messages name this 2-CPU host's slots")
@pytest.mark.parametrize("args,message", refusals(), ids=["vcpus", "cores", "ram", "zero"])
def test_a_parallel_plan_the_host_cannot_hold_exits_2_before_any_work(cli, tmp_path, args, message):
    code, _, err = cli("sweep", "--workloads", "cpu-spin", "--store", str(tmp_path / "s.sqlite"), "--data",
                       str(tmp_path / "data"), "--no-calibrate", *args)
    assert code == 2 and message in err, err
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "data").exists()


def test_the_dry_run_shows_the_slots_and_the_shorter_estimate(cli, tmp_path):
    base = ("sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M", "--disks", "local-nvme,ssd,standard",
            "--store", str(tmp_path / "s.sqlite"), "--data", str(tmp_path / "data"), "--no-calibrate", "--dry-run", "--json")
    _, serial, _ = cli(*base)
    code, out, err = cli(*base, "--parallel", "2", "--interference", "1")
    assert code == 0, err
    planned = json.loads(out)
    assert [s["slot"] for s in planned["parallel"]["slots"]] == [0, 1]
    # The check is a CPU-bound shape: the fastest disk, never one its throttle caps.
    assert planned["parallel"]["interference_checks"] == [p["key"] for p in planned["points"]
                                                          if p["disk_class"] == "local-nvme"]
    assert "parallel" not in json.loads(serial)
    assert planned["parallel"]["estimated_seconds"] < planned["estimated_seconds"] == json.loads(serial)["estimated_seconds"]
    note = next(n for n in planned["notes"] if n.startswith("--parallel 2: slot 0"))
    assert "the whole sweep about" in note and "1 shape(s) measured alone as well" in note


@pytest.mark.cgroup
@pytest.mark.slow
def test_two_slots_measure_side_by_side_on_disjoint_cpus_and_store_every_point(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "part.bin").write_bytes(os.urandom(8 * 2**20))
    code, out, err = cli(*sweep_args(tmp_path, "--workloads", "cpu-spin,disk-read", "--ram", "256M",
                                     "--disks", "local-nvme,standard", "--interference", "1"))
    assert code == 0, err
    summary = json.loads(out)
    rows = {r["key"]: r for r in stored(tmp_path / "s.sqlite")}
    planned = [p["key"] for p in summary["points"] if not p.get("alone")]
    assert len(planned) == 4 and set(planned) <= set(rows)
    checks = summary["parallel"]["interference_checks"]
    assert len(checks) == 1 and {f"{k}#alone" for k in checks} <= set(rows) and len(rows) == 5

    in_parallel = {k: json.loads(r["result"])["extra"] for k, r in rows.items() if not k.endswith("#alone")}
    slot_cpus = {s["slot"]: set(s["cpus"]) for s in summary["parallel"]["slots"]}
    assert slot_cpus[0].isdisjoint(slot_cpus[1])
    for extra in in_parallel.values():
        assert extra["parallel"]["slots"] == 2
        assert set(extra["cpus"]) <= slot_cpus[extra["parallel"]["slot"]]  # its vCPUs from its slot alone
    assert {e["parallel"]["slot"] for e in in_parallel.values()} == {0, 1}
    spans = sorted((r["started"], r["finished"]) for k, r in rows.items() if k in in_parallel)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), "no two points ran at the same time"
    for key in checks:  # measured alone in the slot it ran in, with nothing beside it
        alone = rows[f"{key}#alone"]
        extra = json.loads(alone["result"])["extra"]
        assert "parallel" not in extra and extra["alone"]["slot"] == in_parallel[key]["parallel"]["slot"]
        assert not any(r["started"] < alone["finished"] and alone["started"] < r["finished"]
                       for k, r in rows.items() if k != f"{key}#alone")

    copy = tmp_path / "data.slot-1" / "files"  # slot 1 read a copy of the files, slot 0 the files themselves
    assert (copy / "part.bin").read_bytes() == (data / "part.bin").read_bytes()
    assert summary["parallel"]["copy_bytes"] == 8 * 2**20 and summary["parallel"]["copy_seconds"] >= 0  # said, timed
    measured = summary["parallel"]["measured"]
    assert len(measured["checks"]) == 1 and measured["median_difference"] == measured["max_difference"] is not None
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    assert report["parallel"]["points"] == 4
    assert "in parallel, slot 1 of 2" in (tmp_path / "out" / "report.html").read_text()
    assert groups_of(os.getpid()) == set()


def start_and_wait_for_two_in_flight(args: list[str], store: Path, committed: int) -> subprocess.Popen:
    """A sweep in a process of its own, once `committed` points are stored and two limit groups of
    its (two points, or a pair's two jobs) run at once."""
    proc = subprocess.Popen([*SIZER, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if store.exists() and len(stored(store)) >= committed and len(groups_of(proc.pid)) == 2:
            return proc
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the sweep never had two limit groups at once")


KILL_PLAN = ("--workloads", "cpu-spin", "--ram", "256M,512M", "--disks", "local-nvme,standard", "--interference", "0")


@pytest.mark.cgroup
@pytest.mark.slow
def test_sigterm_ends_both_points_in_flight_and_keeps_the_committed(tmp_path):
    store = tmp_path / "s.sqlite"
    proc = start_and_wait_for_two_in_flight(sweep_args(tmp_path, *KILL_PLAN), store, 1)
    before = stored(store)
    try:
        signalled = time.time()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    after = stored(store)
    assert after[: len(before)] == before and len(after) <= 2  # of 4: the two in flight were ended, not stored
    assert all(r["finished"] <= signalled for r in after)
    assert groups_of(proc.pid) == set() and processes_of(proc.pid) == []  # gone with it, at once


@pytest.mark.cgroup
@pytest.mark.slow
def test_sigkilled_parallel_sweep_resumes_without_losing_or_measuring_again(tmp_path):
    store = tmp_path / "s.sqlite"
    args = sweep_args(tmp_path, *KILL_PLAN)
    first = start_and_wait_for_two_in_flight(args, store, 1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    first.communicate()
    before = stored(store)
    assert len(before) in (1, 2)
    deadline = time.monotonic() + 15
    while (groups_of(first.pid) or processes_of(first.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert groups_of(first.pid) == set(), "each group's watchdog removes it, throttle included"
    assert processes_of(first.pid) == []

    second = subprocess.Popen([*SIZER, *args, "--resume"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    summary = json.loads(out)
    assert summary["resumed"] and summary["skipped"] == len(before)
    after = stored(store)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 4  # none lost, none twice
    assert after[: len(before)] == before  # committed points were not measured again
    assert all(json.loads(r["result"])["extra"]["parallel"]["slots"] == 2 for r in after)
    assert groups_of(second.pid) == set() and processes_of(second.pid) == []
