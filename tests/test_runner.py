"""The point runner: a fresh worker in the shape's group; ok, oom, timeout and error outcomes."""

from __future__ import annotations

import os

import pytest

from sizer.errors import SizerError
from sizer.limits import AffinityBackend, LimitRequest, sysfs
from sizer.runner import interpreter_for, run_point
from workloads.protocol import Spec


def last_cpu() -> int:
    return max(os.sched_getaffinity(0))


@pytest.mark.cgroup
def test_worker_runs_inside_the_group_and_reads_its_limits_back(backend):
    limit = 256 * 2**20
    request = LimitRequest(cpus=(last_cpu(),), memory_bytes=limit, label="runner-ok")
    with backend.create(request) as group:
        run = run_point(Spec(workload="cpu-spin", vcpus=1, time_budget_s=1.5, config={"processes": 2}), group)
    r = run.result
    assert r.status in ("ok", "noisy"), r.error
    assert r.throughput > 0 and r.unit == "iterations/s"
    # What the worker saw from inside, and what the group enforced, agree with the request.
    assert r.limits_seen["cpus_allowed"] == [last_cpu()]
    assert r.limits_seen["memory_limit_bytes"] == limit
    assert run.enforced["backend"] == backend.name and str(limit) in run.enforced["memory"]
    assert r.extra["enforcement"] == run.enforced
    # Figures from the cgroup: two spinners on one vCPU get at most about one CPU's time.
    assert 0 < r.counters["cgroup_cpu_seconds"] <= 1.1 * run.wall_s + 0.2
    assert r.counters["cgroup_memory_peak_bytes"] and r.counters["cgroup_memory_peak_bytes"] <= limit


@pytest.mark.cgroup
def test_twice_the_memory_limit_ends_as_oom_from_the_cgroup_events(backend):
    with backend.create(LimitRequest(cpus=(last_cpu(),), memory_bytes=128 * 2**20, label="runner-oom")) as group:
        run = run_point(Spec(workload="mem-hog", vcpus=1, time_budget_s=5, config={"limit_factor": 2.0}), group)
    assert run.result.status == "oom"
    assert run.result.counters["cgroup_oom_kill"] is True
    assert "memory limit" in run.result.error
    assert run.returncode == -9


@pytest.mark.cgroup
def test_within_the_memory_limit_is_not_oom(backend):
    with backend.create(LimitRequest(cpus=(last_cpu(),), memory_bytes=256 * 2**20, label="runner-fits")) as group:
        run = run_point(Spec(workload="mem-hog", vcpus=1, time_budget_s=5, config={"mib": 32}), group)
    assert run.result.status == "ok", run.result.error
    assert run.result.extra["allocated_bytes"] == 32 * 2**20
    assert run.result.counters["cgroup_oom_kill"] is False


@pytest.mark.cgroup
def test_overrunning_worker_becomes_timeout_and_leaves_no_process(backend):
    with backend.create(LimitRequest(cpus=(last_cpu(),), label="runner-timeout")) as group:
        run = run_point(Spec(workload="cpu-spin", vcpus=1, time_budget_s=60, spread_target=0.0), group, timeout_s=2.5)
        group_dir = getattr(group, "dir", None) or group.dirs["cpuset"]
        assert sysfs.group_pids(group_dir) == []  # the worker and its spinners are gone
    assert run.result.status == "timeout"
    assert "2 s" in run.result.error or "3 s" in run.result.error


def test_crashing_worker_is_error_with_its_last_stderr_lines():
    run = run_point(Spec(workload="no-such-workload", time_budget_s=1), AffinityBackend().create(LimitRequest(cpus=(0,))))
    assert run.result.status == "error"
    assert "KeyError" in run.result.error and "no-such-workload" in run.result.error
    assert run.returncode not in (0, None)


def test_affinity_backend_runs_and_marks_limits_not_enforced():
    group = AffinityBackend().create(LimitRequest(cpus=(0,), memory_bytes=2**30))
    run = run_point(Spec(workload="mem-hog", vcpus=1, time_budget_s=2, config={"mib": 16}), group)
    assert run.result.status == "ok", run.result.error
    assert run.result.limits_seen["cpus_allowed"] == [0]
    assert run.enforced["memory"] == "not enforced"
    assert run.result.counters["cgroup_cpu_seconds"] > 0  # from the reaped worker's resource usage


def test_unknown_or_missing_interpreter_is_refused(tmp_path, monkeypatch):
    import sizer.runner as runner

    monkeypatch.setattr(runner, "MXNET_PYTHON", tmp_path / "missing" / "python")
    with pytest.raises(SizerError, match="make mxnet-env"):
        interpreter_for("mxnet")
    with pytest.raises(SizerError, match="unknown worker interpreter"):
        interpreter_for("jython")
    assert interpreter_for("")[1] == {}


def test_a_point_interrupted_leaves_no_folder_behind(tmp_path, monkeypatch):
    """Ctrl-C during a point (the sweep's stop flag) takes its worker down and removes its folder."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    calls = []

    def stop_after_a_moment() -> bool:
        calls.append(1)
        return len(calls) > 4

    with pytest.raises(KeyboardInterrupt):
        run_point(Spec(workload="cpu-spin", vcpus=1, time_budget_s=30), AffinityBackend().create(LimitRequest(cpus=(0,))),
                  should_stop=stop_after_a_moment)
    assert calls and not list(tmp_path.glob("sizer-point-*"))


def test_a_point_folder_orphaned_by_a_killed_sizer_goes_with_the_next_point(tmp_path, monkeypatch):
    import subprocess
    import sys
    import tempfile

    from sizer.limits.sysfs import remove_orphaned_dirs

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names a process that no longer runs
    orphan = tmp_path / f"sizer-point-{gone.pid}-abc"
    alive = tmp_path / f"sizer-point-{os.getpid()}-def"  # a live sizer's point: kept
    older = tmp_path / "sizer-point-x1y2z3"  # no pid in the name: not ours to judge
    for folder in (orphan, alive, older):
        folder.mkdir()
        (folder / "spec.json").write_text("{}")
    assert remove_orphaned_dirs(tmp_path, "sizer-point-") == 1
    assert not orphan.exists() and alive.exists() and older.exists()
    run = run_point(Spec(workload="cpu-spin", vcpus=1, time_budget_s=1), AffinityBackend().create(LimitRequest(cpus=(0,))))
    assert run.result.status in ("ok", "noisy")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, older.name])  # its own folder went too


def test_a_worker_that_may_not_write_bytecode_keeps_it_in_sizers_cache(tmp_path, monkeypatch):
    """Where PYTHONDONTWRITEBYTECODE is set, the worker reads and writes its bytecode in sizer's own
    cache instead of compiling the frameworks on every start; elsewhere the environment is left alone."""
    import sizer.runner as runner

    cache = tmp_path / "pycache"
    monkeypatch.setattr(runner, "pycache_dir", lambda: cache)
    group = AffinityBackend().create(LimitRequest(cpus=(0,)))
    spec = Spec(workload="mem-hog", vcpus=1, time_budget_s=1, config={"mib": 8})

    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    assert run_point(spec, group).result.status == "ok"
    assert not cache.exists()  # nothing to change: bytecode goes where the interpreter puts it

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert run_point(spec, group).result.status == "ok"
    written = {p.name.split(".")[0] for p in cache.rglob("*.pyc")}
    assert {"stress", "measure", "protocol"} <= written  # the worker's own modules, compiled once, kept
    assert runner.bytecode_env({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/x"}) == (
        {"PYTHONPYCACHEPREFIX": "/x"}, ["PYTHONDONTWRITEBYTECODE"])
