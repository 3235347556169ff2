"""lab/benchmarks/emulation_truth.py: `measure` for real on this host (cpu-spin under real limits, the
per-core calibration between rounds), then `compare` of it against a second host's file made from
it, its figures recomputed here from the stored JSON."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "lab" / "benchmarks" / "emulation_truth.py"
FAST = ["--ram", "1G", "--budget", "0.3", "--calibration-budget", "0.3"]


def _script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def _env(tmp: Path) -> dict:
    # Other tests of this host take sizer's host lock too: this test's points take their own.
    return dict(os.environ, SIZER_LOCK_FILE=str(tmp / "sizer.lock"))


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[Path, Path]:
    """Two files: one measured on this host, 1 and 2 vCPUs in two rounds, taken as the emulating
    host; the other made from it as a second host's would read (each repeat and calibration at
    another speed, so no ratio comes out 1), taken as the whole host."""
    tmp = tmp_path_factory.mktemp("emulation-truth")
    files = (tmp / "emulating.json", tmp / "whole.json")
    done = _script("measure", "cpu-spin", "--vcpus", "1,2", "--rounds", "2", *FAST, "--out", str(files[0]),
                   env=_env(tmp))
    assert done.returncode == 0, done.stderr
    other = json.loads(files[0].read_text())
    for k, calibration in enumerate(other["calibration"]["points"]):
        calibration["throughput"] *= 1.05 + 0.04 * k
    for i, shape in enumerate(other["shapes"]):
        for repeat in shape["repeats"]:
            repeat["throughput"] *= 1.1 + 0.07 * i + 0.03 * repeat["round"]
            before, after = (other["calibration"]["points"][repeat["round"] + d]["throughput"] for d in (-1, 0))
            repeat["calibration"] = (before + after) / 2
    files[1].write_text(json.dumps(other))
    return files


def _usable(repeat: dict) -> bool:
    return repeat["status"] in ("ok", "noisy") and repeat["throughput"] > 0


@pytest.mark.cgroup
@pytest.mark.slow
def test_measure_interleaves_the_shapes_with_calibrations_and_records_the_host(measured):
    doc = json.loads(measured[0].read_text())
    assert doc["complete"] and doc["workload"] == "cpu-spin"
    assert doc["host"]["threads"] == os.cpu_count() and doc["host"]["cpu_model"]
    calibrations = doc["calibration"]["points"]
    assert [c["round"] for c in calibrations] == [0, 1, 2] and all(_usable(c) for c in calibrations)
    (warmup,) = doc["calibration"]["warmup"]  # measured first, in no bracket
    assert _usable(warmup) and warmup["started"] < calibrations[0]["started"]
    starts = sorted([c["started"] for c in calibrations] + [r["started"] for s in doc["shapes"] for r in s["repeats"]])
    for shape in doc["shapes"]:
        assert shape["whole_host"] == (shape["vcpus"] == doc["host"]["threads"])
        assert [r["round"] for r in shape["repeats"]] == [1, 2]
        for repeat in shape["repeats"]:
            assert repeat["unit"] == "iterations/s" and repeat["backend"] and len(repeat["cpus"]) == shape["vcpus"]
            before, after = calibrations[repeat["round"] - 1], calibrations[repeat["round"]]
            assert before["started"] < repeat["started"] < after["started"]  # bracketed by its calibrations
            assert repeat["calibration"] == pytest.approx((before["throughput"] + after["throughput"]) / 2)
    assert len(starts) == 7 and len(set(starts)) == 7


@pytest.mark.cgroup
@pytest.mark.slow
def test_compare_computes_its_ratios_from_the_stored_figures(measured, capsys, benchmark):
    truth = benchmark("emulation_truth")
    emulating, whole = (json.loads(path.read_text()) for path in measured)
    assert truth.main(["compare", *map(str, measured), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [s["vcpus"] for s in result["shapes"]] == [1, 2]
    for row, ours, theirs in zip(result["shapes"], emulating["shapes"], whole["shapes"]):
        mine = {r["round"]: r for r in ours["repeats"] if _usable(r)}
        real = {r["round"]: r for r in theirs["repeats"] if _usable(r)}
        emu_median = statistics.median(r["throughput"] for r in mine.values())
        whole_median = statistics.median(r["throughput"] for r in real.values())
        assert row["emulated_median"] == pytest.approx(emu_median)
        assert row["ratio_raw"] == pytest.approx(emu_median / whole_median)
        calibrated = (statistics.median(r["throughput"] / r["calibration"] for r in mine.values())
                      / statistics.median(r["throughput"] / r["calibration"] for r in real.values()))
        assert row["ratio_calibrated"] == pytest.approx(calibrated)
        per_round = [mine[n]["throughput"] / real[n]["throughput"] for n in sorted(set(mine) & set(real))]
        assert row["round_ratio_raw_range"] == pytest.approx([min(per_round), max(per_round)])
        per_round_cal = [(mine[n]["throughput"] / mine[n]["calibration"]) / (real[n]["throughput"] / real[n]["calibration"])
                         for n in sorted(set(mine) & set(real))]
        assert row["round_ratio_calibrated_range"] == pytest.approx([min(per_round_cal), max(per_round_cal)])
        assert row["whole_is_whole_host"] == theirs["whole_host"]

    assert truth.main(["compare", *map(str, measured)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for row in result["shapes"]:
        marked = f"{row['vcpus']}{'' if row['whole_is_whole_host'] else '*'}"  # * : emulated in the "whole" file too
        (printed,) = [line.split() for line in lines if line.split()[:1] == [marked]]
        low, high = row["round_ratio_raw_range"]
        assert printed[5:8] == [f"{row['ratio_raw']:.3f}", f"{row['ratio_calibrated']:.3f}", f"{low:.2f}-{high:.2f}"]
    assert any(line.startswith("* not the whole host") for line in lines)  # 1 vCPU is never the whole host here


@pytest.mark.cgroup
@pytest.mark.slow
def test_compare_notes_shapes_not_bound_by_the_cpu_and_refuses_files_without_a_shape_in_common(
        measured, tmp_path, capsys, benchmark):
    truth = benchmark("emulation_truth")
    assert truth.main(["compare", *map(str, measured)]) == 0
    assert "-bound" not in capsys.readouterr().out  # cpu-spin: CPU-bound on both
    other = json.loads(measured[1].read_text())
    for repeat in other["shapes"][1]["repeats"]:
        repeat["bottleneck"] = "gpu"  # as a shape at the GPU's ceiling reads
    (tmp_path / "gpu.json").write_text(json.dumps(other))
    assert truth.main(["compare", str(measured[0]), str(tmp_path / "gpu.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: 2 vCPUs: cpu-bound emulated, gpu-bound on the whole host; the calibrated ratio speaks of CPU-bound" in out
    other["shapes"] = [dict(s, disk="standard") for s in other["shapes"]]
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert truth.main(["compare", str(measured[0]), str(tmp_path / "other.json")]) == 2
    assert capsys.readouterr().err.strip().endswith("the files share no shape (vCPUs, RAM and disk class must match)")


def test_measure_refuses_bad_input_in_one_line_before_measuring(tmp_path, monkeypatch, capsys, benchmark):
    truth = benchmark("emulation_truth")
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))
    out = tmp_path / "out.json"
    cases = [
        (["nosuch", "--vcpus", "1"], "unknown workload 'nosuch'"),
        (["cpu-spin", "--vcpus", "1,1"], "--vcpus: give distinct counts"),
        (["cpu-spin", "--vcpus", "1", "--rounds", "0"], "--rounds must be at least 1"),
        (["cpu-spin", "--vcpus", "1", "--disk", "floppy"], "unknown disk class 'floppy'"),
        (["cpu-spin", "--vcpus", str((os.cpu_count() or 1) + 1)], "usable hardware threads"),
    ]
    for args, message in cases:
        assert truth.main(["measure", *args, "--out", str(out)]) == 2
        done = capsys.readouterr()
        assert done.out == ""
        assert done.err.count("\n") == 1 and message in done.err, done.err
        assert not out.exists()
    out.write_text("{}")  # an earlier run's file is never replaced
    assert truth.main(["measure", "cpu-spin", "--vcpus", "1", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "{}"
    assert truth.main(["compare", str(out), str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"emulation_truth: error: {out} is not a file of `emulation_truth.py measure`"


def _calibrated(path: Path) -> bool:
    """Whether the file holds the calibration that opens the first round."""
    try:
        return bool(json.loads(path.read_text())["calibration"]["points"])
    except (OSError, ValueError):
        return False


@pytest.mark.cgroup
@pytest.mark.slow
def test_a_terminated_measure_keeps_the_points_it_measured(tmp_path):
    out = tmp_path / "killed.json"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "measure", "cpu-spin", "--vcpus", "1", "--rounds", "9",
                             "--ram", "1G", "--budget", "5", "--calibration-budget", "0.3", "--out", str(out)],
                            cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _calibrated(out) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # the first shape's point is running now
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    doc = json.loads(out.read_text())
    assert not doc["complete"] and _usable(doc["calibration"]["warmup"][0]) and _usable(doc["calibration"]["points"][0])
    assert f"the points measured are in {out}" in err
    assert not list(tmp_path.glob(".*.tmp"))
