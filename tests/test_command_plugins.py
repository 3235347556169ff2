"""Workloads of installed packages (the `sizer.workloads` entry points), from a real distribution
on the path: listed with their origin, measured by `sizer run` (the worker loads them too), and a
broken or clashing plugin refused in one line that names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]

DEMO = '''
import time
from workloads.measure import Meter
from workloads.protocol import Workload, register


@register
class DemoNap(Workload):
    name = "demo-nap"
    framework = "python"
    unit = "naps/s"
    description = "naps 10 ms a step"
    stresses = "nothing"
    defaults = {"cpu-small": {"nap_s": 0.01}, "gpu": {"nap_s": 0.01}}

    def run(self, spec):
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        meter = Meter(warmup_steps=3, time_budget_s=spec.time_budget_s, min_steps=10, gpu=False)
        while not meter.done():
            t0 = time.perf_counter()
            time.sleep(cfg["nap_s"])
            meter.step(time.perf_counter() - t0, 1)
        return meter.finish(result, spec.vcpus)


class Unregistered(DemoNap):
    name = "demo-nap-2"
'''


def distribution(where: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution as pip leaves one: its modules and NAME-1.0.dist-info beside them."""
    info = where / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[sizer.workloads]\n{entry_points}\n")
    for module, text in modules.items():
        (where / f"{module}.py").write_text(text)


def sizer(tmp_path: Path, plugins: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(plugins), "SIZER_LOCK_FILE": str(tmp_path / "sizer.lock"), "COLUMNS": "160"}
    return subprocess.run([*SIZER, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def demo(tmp_path) -> Path:
    where = tmp_path / "site"
    distribution(where, "sizerplugin-demo", "demo = sizerplugin_demo\nsecond = sizerplugin_demo:Unregistered",
                 {"sizerplugin_demo": DEMO})
    return where


def test_a_plugins_workloads_are_listed_with_their_origin(tmp_path, demo):
    done = sizer(tmp_path, demo, "workloads", "--json")
    assert done.returncode == 0, done.stderr
    origins = {row["name"]: row["origin"] for row in json.loads(done.stdout)}
    assert origins["demo-nap"] == origins["demo-nap-2"] == "plugin sizerplugin-demo"  # a module and a class
    assert origins["cpu-spin"] == origins["command"] == "built-in"
    table = sizer(tmp_path, demo, "workloads")
    assert " origin " in table.stdout and "plugin sizerplugin-demo" in table.stdout


@pytest.mark.slow
def test_sizer_run_measures_a_plugins_workload(tmp_path, demo):
    done = sizer(tmp_path, demo, "run", "demo-nap", "--vcpus", "1", "--ram", "1G", "--budget", "1.5",
                 "--profile", "cpu-small", "--json")
    assert done.returncode == 0, done.stderr
    point = json.loads(done.stdout)
    assert point["status"] in ("ok", "noisy"), point["error"]
    assert point["unit"] == "naps/s" and 20 < point["throughput"] <= 101  # naps of 10 ms and more


@pytest.mark.parametrize("entry, module, message", [
    ("broken = sizerplugin_broken", "import no_such_module_for_sizer\n",
     "plugin 'broken' (sizerplugin_broken) of sizerplugin-bad 1.0 failed to load: ModuleNotFoundError"),
    ("clash = sizerplugin_broken:Spin",
     "from workloads.stress import CpuSpin\nclass Spin(CpuSpin):\n    pass\n",
     "duplicate workload name 'cpu-spin': taken by the built-in workload workloads.stress.CpuSpin"),
    ("clash = sizerplugin_broken",
     "from workloads.protocol import register\nfrom workloads.stress import CpuSpin\n"
     "@register\nclass Spin(CpuSpin):\n    pass\n",
     "duplicate workload name 'cpu-spin': taken by the built-in workload"),
    ("empty = sizerplugin_broken", "x = 1\n", "the module registers no workload"),
    ("odd = sizerplugin_broken:x", "x = 1\n", "which is no Workload class"),
])
def test_a_broken_or_clashing_plugin_is_named_in_one_line(tmp_path, entry, module, message):
    where = tmp_path / "site"
    distribution(where, "sizerplugin-bad", entry, {"sizerplugin_broken": module})
    done = sizer(tmp_path, where, "workloads")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("sizer: error: plugin ") and message in lines[0], lines[0]
