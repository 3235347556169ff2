"""MXNet workloads, run as sizer runs them: `python -m workloads run` in .venv-mxnet's interpreter
with the repository on PYTHONPATH; one cpu-small point each."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from workloads import synth
from workloads.protocol import Result, Spec

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"


def _mxnet_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run_point(tmp_path: Path, spec: Spec) -> Result:
    spec_file, out = tmp_path / "spec.json", tmp_path / "result.json"
    spec_file.write_text(spec.to_json())
    proc = subprocess.run(
        [str(MXNET_PYTHON), "-m", "workloads", "run", "--spec", str(spec_file), "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=_mxnet_env(), cwd=tmp_path,
    )
    assert out.exists(), proc.stderr[-3000:]
    result = Result.from_json(out.read_text())
    assert proc.returncode == 0, result.error or proc.stderr[-3000:]
    return result


def _check_point(result: Result, name: str, unit: str) -> None:
    assert result.workload == name and result.framework == "mxnet" and result.unit == unit
    assert result.profile == "cpu-small" and result.status in ("ok", "noisy")
    assert result.throughput > 0 and len(result.window_rates) >= 1
    counters = result.counters
    for key in ("cpu_seconds", "measured_samples", "measured_seconds", "peak_rss_bytes", "read_bytes", "warmup_steps"):
        assert key in counters, key
    assert counters["measured_samples"] > 0 and counters["cpu_seconds"] > 0 and counters["warmup_steps"] >= 1
    assert result.extra["device"] == "cpu" and "CUDA 11.2" in result.extra["device_note"]
    assert result.extra["versions"]["mxnet"] == "1.9.1"
    assert result.limits_seen["cpus_allowed"]


@pytest.mark.mxnet
def test_protocol_modules_import_in_the_mxnet_interpreter():
    proc = subprocess.run(
        [str(MXNET_PYTHON), "-m", "workloads", "list"], capture_output=True, text=True, timeout=60, env=_mxnet_env()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = {w["name"]: w for w in json.loads(proc.stdout)}
    for name, unit in (("mxnet-inception-v3-train", "images/s"), ("mxnet-ptb-lstm-train", "tokens/s")):
        assert listed[name]["framework"] == "mxnet" and listed[name]["interpreter"] == "mxnet"
        assert listed[name]["unit"] == unit and listed[name]["profiles"] == ["cpu-small", "gpu"]
    check = "import numpy, workloads.measure as m; print(numpy.__version__, m.Meter(1, 1.0).measuring)"
    proc = subprocess.run([str(MXNET_PYTHON), "-c", check], capture_output=True, text=True, timeout=60, env=_mxnet_env())
    assert proc.returncode == 0 and proc.stdout.split() == ["1.23.5", "False"], proc.stderr[-2000:]


@pytest.mark.mxnet
@pytest.mark.slow
def test_mxnet_inception_cpu_small_point(tmp_path):
    from sizer.datasets import ensure_imagenet

    data = tmp_path / "imagenet"
    ensure_imagenet(data, images=160, classes=8, formats=("rec",), progress=False)
    spec = Spec(workload="mxnet-inception-v3-train", profile="cpu-small", vcpus=2, data_dir=str(data), time_budget_s=4)
    result = _run_point(tmp_path, spec)
    _check_point(result, "mxnet-inception-v3-train", "images/s")
    assert result.config["model"] == "resnet18_v1" and result.config["image_size"] == 112
    assert result.extra["preprocess_threads"] == 2 and result.extra["dataset_images"] == 144
    assert result.counters["measured_samples"] % 16 == 0


@pytest.mark.mxnet
@pytest.mark.slow
def test_mxnet_ptb_lstm_cpu_small_point_and_its_loss_falls(tmp_path):
    corpus = tmp_path / "ptb"
    synth.generate_ptb(corpus, seed=0, train_tokens=200_000, valid_tokens=2_000, test_tokens=2_000)
    # 40 measured steps, however fast this host steps: the window ends at its first check past them
    # (a spread target any window meets, a budget no window reaches).
    spec = Spec(workload="mxnet-ptb-lstm-train", profile="cpu-small", vcpus=2, data_dir=str(corpus), time_budget_s=600,
                spread_target=1e9, config={"min_steps": 40, "min_seconds": 0})
    result = _run_point(tmp_path, spec)
    assert sum(1 for s in result.steps if not s[2]) == 40
    _check_point(result, "mxnet-ptb-lstm-train", "tokens/s")
    extra = result.extra
    assert extra["vocabulary"] == synth.PTB_VOCAB and extra["corpus_tokens"] > 190_000
    assert extra["loss_end"] < extra["loss_start"] - 0.5, (extra["loss_start"], extra["loss_end"])
    assert result.counters["measured_samples"] % (20 * 20) == 0  # whole BPTT windows of batch x steps


@pytest.mark.mxnet
def test_mxnet_workload_without_its_data_says_how_to_make_it(tmp_path):
    spec = Spec(workload="mxnet-inception-v3-train", profile="cpu-small", vcpus=1, data_dir=str(tmp_path))
    (tmp_path / "spec.json").write_text(spec.to_json())
    proc = subprocess.run(
        [str(MXNET_PYTHON), "-m", "workloads", "run", "--spec", str(tmp_path / "spec.json"), "--out", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=60, env=_mxnet_env(),
    )
    assert proc.returncode == 1
    result = Result.from_json((tmp_path / "r.json").read_text())
    assert result.status == "error" and "sizer data pack" in result.error
