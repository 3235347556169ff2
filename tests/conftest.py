"""Shared fixtures: the repository root, a CLI runner, a fake clock, and skips for facilities a host lacks."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

# As in a fresh worker (workloads.torch_common.prefer_sleeping_openmp): OpenMP threads sleep rather
# than spin while loader workers share the CPUs. Effective only before torch loads, and some test
# modules load it as they are collected: here, before any. With spinning threads, the points that
# tests measure in this process (test_workloads_points.py) ran several times slower on two cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
from fake_time import FakeClock  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"


def _cgroup_writable() -> str | None:
    """None when this process can create cgroups (root, v1 or v2), else the reason it can't."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no /sys/fs/cgroup"
    return None


def pytest_collection_modifyitems(config, items):
    reasons = {
        "cgroup": _cgroup_writable(),
        "browser": None if shutil.which("chromium") else "chromium is not installed (make test installs it)",
        "mxnet": None if MXNET_PYTHON.exists() else
        "the MXNet environment is missing (make mxnet-env; it needs Python 3.8 to 3.11 installed)",
    }
    for item in items:
        for mark, reason in reasons.items():
            if reason and mark in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def cli(capsys):
    """Run `sizer ARGS...` in-process; returns (exit code, stdout, stderr)."""
    from sizer.cli import main

    def run(*args: str):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when slept on (tests/fake_time.py): timing logic in fake time."""
    return FakeClock()


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def benchmark():
    """Load a script of lab/benchmarks/ as a module: `benchmark("model_accuracy")`."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, ROOT / "lab" / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def backend():
    """The host's cgroup limit backend (skips where none is writable); afterwards every limit group
    of this test process is removed, and one left behind fails the test."""
    from sizer.limits import detect_backend, list_groups, sysfs

    found = detect_backend()
    if found.name == "affinity":
        pytest.skip("no writable cgroup controllers here")
    yield found
    sysfs.remove_all_live()
    assert [g for g in list_groups() if f"/sizer-{os.getpid()}-" in g] == [], "a limit group of this test was left behind"

