"""A workload's modules are looked for before any work: a plugin workload that declares a module
this host lacks stops the sweep before its first point, in one line naming the package to install
(exit 2); with --skip-unavailable the other workloads are measured and the report names the one
left out. The modules a setting brings in (a packed format's library) count as well."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_command_plugins import distribution

from sizer.sweep.dependencies import DependencyCheck, dataset_modules, missing_modules
from workloads.imagenet_infer import ResNet50Infer
from workloads.imagenet_preprocess import ImagenetPreprocess
from workloads.stress import CpuSpin

ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]
ABSENT = "sizer_test_absent_module"

PLUGIN = f'''
from workloads.protocol import Workload, register


@register
class NeedsAbsent(Workload):
    name = "needs-absent"
    framework = "python"
    unit = "steps/s"
    description = "declares a module no host has"
    requires_modules = ("{ABSENT}",)
    pip_packages = {{"{ABSENT}": "sizer-test-absent"}}
    defaults = {{"cpu-small": {{}}, "gpu": {{}}}}

    def run(self, spec):
        raise AssertionError("never measured: its module is missing")
'''


@pytest.fixture
def plugin(tmp_path) -> Path:
    where = tmp_path / "site"
    distribution(where, "sizerplugin-absent", "absent = sizerplugin_absent", {"sizerplugin_absent": PLUGIN})
    return where


def sizer(tmp_path: Path, plugins: Path, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(plugins), str(ROOT)])  # this tree's sizer beside the plugin
    env = {**os.environ, "PYTHONPATH": path, "SIZER_LOCK_FILE": str(tmp_path / "sizer.lock"), "COLUMNS": "200"}
    return subprocess.run([*SIZER, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def sweep_args(tmp_path: Path, *more: str) -> list[str]:
    return ["sweep", "--workloads", "cpu-spin,needs-absent", "--vcpus", "1", "--ram", "256M", "--disks", "local-nvme",
            "--budget", "1", "--no-calibrate", "--profile", "cpu-small", "--store", str(tmp_path / "s.sqlite"),
            "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"), *more]


def test_a_missing_module_stops_the_sweep_before_any_point_in_one_line(tmp_path, plugin):
    done = sizer(tmp_path, plugin, *sweep_args(tmp_path))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("sizer: error: needs-absent needs the Python module sizer_test_absent_module")
    assert "pip install sizer-test-absent" in lines[0] and "--skip-unavailable" in lines[0]
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "data").exists()  # nothing began
    dry = sizer(tmp_path, plugin, *sweep_args(tmp_path, "--dry-run"))
    assert dry.returncode == 2 and "pip install sizer-test-absent" in dry.stderr


def test_the_dry_run_with_skip_unavailable_plans_the_others_and_says_why(tmp_path, plugin):
    done = sizer(tmp_path, plugin, *sweep_args(tmp_path, "--dry-run", "--skip-unavailable", "--json"))
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    assert {p["workload"] for p in planned["points"]} == {"cpu-spin"}
    assert any(n.startswith("left out (--skip-unavailable): needs-absent needs the Python module") for n in planned["notes"])


@pytest.mark.cgroup
@pytest.mark.slow
def test_skip_unavailable_measures_the_others_and_the_report_names_the_one_left_out(tmp_path, plugin):
    done = sizer(tmp_path, plugin, *sweep_args(tmp_path, "--skip-unavailable", "--json"))
    assert done.returncode in (0, 3), done.stderr  # 3: cpu-spin has no GPU ceiling to size against
    summary = json.loads(done.stdout)
    assert [p["workload"] for p in summary["points"]] == ["cpu-spin"]
    assert summary["left_out"] == [{"workload": "needs-absent", "install": "pip install sizer-test-absent",
                                    "reason": summary["left_out"][0]["reason"]}]
    assert "sizer_test_absent_module" in summary["left_out"][0]["reason"]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [u["workload"] for u in results["left_out"]] == ["needs-absent"]
    assert results["left_out"][0]["install"] == "pip install sizer-test-absent"
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="left-out"' in html and "needs-absent" in html and "pip install sizer-test-absent" in html


def test_a_setting_brings_its_formats_module_and_the_dataset_its_writer():
    assert "lmdb" in ImagenetPreprocess.modules_for("gpu", {})  # writes LMDB by default
    assert "lmdb" not in ImagenetPreprocess.modules_for("gpu", {"format": "tar"})
    assert ResNet50Infer.modules_for("gpu", {})[:2] == ("torch", "torchvision")
    assert "lmdb" in ResNet50Infer.modules_for("gpu", {"input": "lmdb"})
    assert "lmdb" in dataset_modules(ResNet50Infer, "gpu", {"input": "lmdb"})  # sizer packs it before the sweep
    assert "lmdb" not in dataset_modules(ImagenetPreprocess, "gpu", {})  # it reads the JPEG files
    assert CpuSpin.modules_for("cpu-small", {}) == ()


def test_modules_are_looked_for_in_the_workloads_own_interpreter(tmp_path):
    assert missing_modules(sys.executable, {}, ["json", ABSENT]) == [ABSENT]
    # Another interpreter is asked in a process of its own, with its environment.
    other = tmp_path / "python"
    other.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    other.chmod(0o755)
    assert missing_modules(str(other), {"PYTHONPATH": str(tmp_path)}, ["json", ABSENT]) == [ABSENT]
    (tmp_path / f"{ABSENT}.py").write_text("")
    assert missing_modules(str(other), {"PYTHONPATH": str(tmp_path)}, ["json", ABSENT]) == []


def test_an_interpreter_that_is_missing_leaves_its_workload_out_with_the_way_to_make_it(monkeypatch):
    from sizer import runner

    monkeypatch.setattr(runner, "MXNET_PYTHON", Path("/nonexistent/.venv-mxnet/bin/python"))
    from workloads.mxnet_ptb_lstm import MxnetPtbLstmTrain

    missing = DependencyCheck("cpu-small").entry("mxnet-ptb-lstm-train", MxnetPtbLstmTrain, {})
    assert missing is not None and missing.install.startswith("make mxnet-env")
    assert missing.reason == "runs in the MXNet environment, which is missing (/nonexistent/.venv-mxnet/bin/python)"
