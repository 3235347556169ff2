"""The maintainer's benchmarks (lab/benchmarks/): each one's pure part, on stores built here through the
real Store API, or its command line where the rest needs a GPU or a disk to measure.

model_accuracy.py is tested in test_model.py, test_passes.py and test_host_speed.py."""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer.store import Store
from sizer.variants import SYNTHETIC_INPUT
from workloads.protocol import Result

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = "resnet50-train"


def _result(rate: float, status: str = "ok", bottleneck: str = "cpu", counters: dict | None = None,
            **config) -> Result:
    """A resnet50-train point as a GPU sweep stores it: JPEGs decoded on CPU workers unless `config` says."""
    return Result(workload=WORKLOAD, framework="pytorch", unit="images/s", profile="gpu", status=status,
                  throughput=rate, spread=0.02, bottleneck=bottleneck, wall_s=12.0,
                  counters={"measured_samples": 5 * rate, "measured_seconds": 5.0, "cpu_util_per_vcpu": 0.95,
                            **(counters or {})},
                  config={"input": "files", "decode": "cpu", "device": "cuda", "image_size": 224, **config})


def _shape(vcpus: int, ram_gib: float = 32.0, disk: str = "local-nvme") -> dict:
    return {"vcpus": vcpus, "ram_gib": ram_gib, "disk_class": disk}


def write_store(path: Path, points: list[tuple[dict, Result]], calibration: dict | None = None) -> Path:
    """One sweep of one host holding `points` ((shape, result) pairs, stored in that order)."""
    with Store(path) as store:
        host = store.upsert_host({"hostname": "gpu-host", "cpu_model": "c", "threads": 16, "gpus": []})
        sweep = store.start_sweep(host, "sizer sweep", {})
        if calibration:
            store.set_calibration(sweep, calibration)
        for i, (shape, result) in enumerate(points):
            store.add_point(sweep, f"{WORKLOAD}/{shape['vcpus']}vcpu-{shape['ram_gib']:g}gib-{shape['disk_class']}#{i}",
                            shape, result, {}, time.time())
        store.finish_sweep(sweep)
    return path


# ------------------------------------------------------------------ sweep_cost.py
def test_sweep_cost_splits_a_start_in_the_order_its_stages_happened(benchmark):
    """Image workloads open their loader before they build the model: each part of the start is
    the time from the stage before it, whatever order the stages came in."""
    sweep_cost = benchmark("sweep_cost")
    timeline = {"torch_imported": 3.0, "data_opened": 6.5, "model_built": 7.0, "first_step_done": 9.5,
                "window_start": 10.5, "window_end": 18.5, "run_returned": 19.0}
    parts = sweep_cost.phases(timeline, wall_s=21.0)
    assert parts["imports_s"] == 3.0 and parts["data_s"] == 3.5
    assert parts["model_s"] == pytest.approx(0.5) and parts["first_batch_s"] == pytest.approx(2.5)
    assert parts["start_s"] == 9.5 and parts["teardown_s"] == pytest.approx(0.5) and parts["rest_s"] == 2.0


def _drained_sweep(path: Path, drains: list[float]) -> Path:
    """A training sweep whose loader-fed points dropped their backlog in `drains` seconds, and its
    synthetic-input point, which has no loader to drain."""
    points = [(_shape(2 + i), _result(400.0 + i, counters={"drain_seconds": d})) for i, d in enumerate(drains)]
    points.append((_shape(16), _result(4000.0, bottleneck="gpu", input=SYNTHETIC_INPUT)))
    return write_store(path, points)


def test_sweep_cost_counts_the_drains_that_outlasted_their_limit(benchmark, tmp_path):
    """Two sweeps, each drain read from the store's own counters: one with drains past the drain's
    limit, one without."""
    sweep_cost = benchmark("sweep_cost")
    limit = sweep_cost.DRAIN_MAX_S
    stores = {"before": _drained_sweep(tmp_path / "before.sqlite", [0.02, 0.05, 0.3, 1.6 * limit, 3 * limit, 10.9 * limit]),
              "after": _drained_sweep(tmp_path / "after.sqlite", [0.01, 0.03, 0.04, 0.1, 0.2, 0.5 * limit])}
    seen = {}
    for name, store in stores.items():
        with sqlite3.connect(store) as conn:
            drains = [json.loads(raw)["counters"].get("drain_seconds") for (raw,) in conn.execute("SELECT result FROM points")]
        drains = [d for d in drains if d is not None]  # the synthetic-input point has no loader to drain
        (train,) = sweep_cost.summarize(sweep_cost.point_costs(store))["workloads"]
        assert train["drains"] == len(drains)
        assert train["max_drain_s"] == pytest.approx(max(drains))
        assert train["median_drain_s"] == pytest.approx(statistics.median(drains))
        assert train["drains_over_limit"] == sum(d > limit for d in drains)
        seen[name] = train
    before, after = seen["before"], seen["after"]
    assert (before["drains"], before["drains_over_limit"]) == (6, 3)
    assert after["drains_over_limit"] < before["drains_over_limit"] and after["max_drain_s"] < 2.0
    assert sweep_cost.drain_figures([]) == {}
    assert sweep_cost.drain_figures([0.02, 0.04, 3.0])["drains_over_limit"] == 1


def test_sweep_cost_prints_its_tables_and_refuses_a_missing_store(benchmark, tmp_path, capsys):
    sweep_cost = benchmark("sweep_cost")
    store = _drained_sweep(tmp_path / "s.sqlite", [0.02, 2.0 * sweep_cost.DRAIN_MAX_S])
    assert sweep_cost.main(["--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["workload", "points", "median", "p90", "max", "window", "outside"]
    assert "the loader's backlog dropped before the window" in out and out.rstrip().splitlines()[-1].startswith("sweep: ")
    assert sweep_cost.main(["--store", str(tmp_path / "absent.sqlite")]) == 2
    assert "sweep_cost: error:" in capsys.readouterr().err


def test_sweep_cost_counts_one_sweep_and_its_seconds_a_measurement(benchmark, tmp_path, capsys):
    """The figure the dry run's cost table is built from: one sweep's wall time over its measurements."""
    sweep_cost = benchmark("sweep_cost")
    store = _drained_sweep(tmp_path / "s.sqlite", [0.01, 0.02])  # sweep 1: 3 points
    _drained_sweep(store, [0.01, 0.02, 0.03, 0.04])  # sweep 2: 5 points
    assert sweep_cost.main(["--store", str(store), "--sweep", "2", "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["points"] == 5
    assert sweep_cost.main(["--store", str(store), "--sweep", "2"]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("sweep: ") and last.endswith(f"; {total['active_s'] / 5:.1f} s a measurement")
    assert sweep_cost.main(["--store", str(store), "--sweep", "3"]) == 2
    assert "holds no points of sweep 3" in capsys.readouterr().err


# ------------------------------------------------------------------ grid_table.py
def test_grid_table_writes_one_markdown_table_per_workload(benchmark, tmp_path, capsys):
    grid_table = benchmark("grid_table")
    store = write_store(tmp_path / "s.sqlite", [
        (_shape(2), _result(400.0)),
        (_shape(2), _result(500.0)),  # a second pass of the same shape
        (_shape(2, 8.0, "standard"), _result(300.0, bottleneck="disk")),
        (_shape(4), _result(0.0, status="oom")),
        (_shape(4, 32.0, "ssd"), _result(1234.4)),
        (_shape(16), _result(4000.0, bottleneck="gpu", input=SYNTHETIC_INPUT)),
    ])
    assert grid_table.main(["--store", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(WORKLOAD) and lines[0].endswith("(images/s; d = disk-bound)")
    assert "| vCPUs | local-nvme 32G | ssd 32G | standard 8G |" in lines  # disk classes fastest first
    assert "| 2 | 450 (400-500) | - | 300 d |" in lines  # the median of two passes and their range
    assert "| 4 | OOM | 1,234 | - |" in lines
    assert "Input already on the device (16 vCPUs): 4,000 images/s" in lines
    assert grid_table.main(["--store", str(store), "--workload", "absent"]) == 0
    assert capsys.readouterr().out.strip() == "grid_table: no points"


# ------------------------------------------------------------------ pipeline_fidelity.py
def test_pipeline_fidelity_compares_cpu_bound_points_with_the_loaded_calibration(benchmark, tmp_path, capsys):
    fidelity = benchmark("pipeline_fidelity")
    store = write_store(tmp_path / "s.sqlite", [
        (_shape(4), _result(800.0)),  # 4 x 200 loaded: 1.00
        (_shape(8), _result(1200.0)),  # 8 x 200: 0.75
        (_shape(8, 8.0, "standard"), _result(900.0, bottleneck="disk")),  # says nothing of the decoder
        (_shape(8, 8.0, "ssd"), _result(2000.0, decode="gpu")),  # not decoded on the CPU: left out
        (_shape(16), _result(4000.0, bottleneck="gpu", input=SYNTHETIC_INPUT)),
    ], calibration={"ips_per_vcpu_loaded": 200.0, "ips_per_vcpu": 250.0})
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"images_per_s": 3980.0}))
    assert fidelity.main(["--store", str(store), "--plain", str(plain), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert len(run["rows"]) == 3 and [c["throughput"] for c in run["ceilings"]] == [4000.0]
    four = next(r for r in run["rows"] if r["vcpus"] == 4)
    assert four["ratio_loaded"] == pytest.approx(1.0) and four["ratio_alone"] == pytest.approx(0.8)
    summary = run["summary"]
    assert (summary["cpu_bound_points"], summary["within_target"]) == (2, 1)
    assert summary["median_ratio_loaded"] == pytest.approx(0.875)
    assert summary["harness_over_plain"] == pytest.approx(4000.0 / 3980.0)
    assert fidelity.main(["--store", str(store), "--plain", str(plain)]) == 0
    out = capsys.readouterr().out
    assert "CPU-bound points: 1 of 2 within 10% of the loaded calibration x vCPUs" in out
    assert "plain PyTorch loop 3,980: ratio 1.005" in out


# ------------------------------------------------------------------ harness_fidelity.py, plain_resnet50.py
def test_harness_fidelity_runs_registered_workloads_on_the_vcpus_there_are(benchmark):
    from workloads import load_all

    harness = benchmark("harness_fidelity")
    for cpus in (2, 16, 64):
        points = harness.points(Path("imagenet"), Path("ptb"), cpus)
        assert {workload for _, workload, _, _ in points} <= set(load_all())
        assert all(1 <= vcpus <= min(cpus, 16) for _, _, vcpus, _ in points)
        assert len({label for label, _, _, _ in points}) == len(points)


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_harness_fidelity_and_the_plain_loop_answer_help_without_a_gpu():
    harness = _script("lab/benchmarks/harness_fidelity.py", "--help")
    assert harness.returncode == 0 and "--only" in harness.stdout
    plain = _script("lab/benchmarks/plain_resnet50.py", "--help")
    assert plain.returncode == 0 and "--steps" in plain.stdout


def test_the_plain_loop_refuses_a_host_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the loop would measure")
    done = _script("lab/benchmarks/plain_resnet50.py", "--json")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == "plain_resnet50: needs a CUDA GPU"


# ------------------------------------------------------------------ disk_probe_fidelity.py
def _probe_figures(path: Path, scale: float) -> tuple[dict, dict]:
    """(sizer's `disks probe --json`, fio's by hand) for one round, fio's `scale` times sizer's."""
    ours = {"path": str(path), "fstype": "ext4", "device": {"name": "nvme0n1"}, "fio_version": "fio-3.36",
            "sequential_read": {"read_mbps": 1000.0, "read_iops": 1000.0},
            "random_read": {"read_mbps": 200.0, "read_iops": 50000.0}}
    theirs = {"seq": {"mbps": 1000.0 * scale, "iops": 1000.0 * scale},
              "rand": {"mbps": 200.0 * scale, "iops": 50000.0 * scale}}
    return ours, theirs


@pytest.mark.parametrize("scale, leaves_a_file, code", [(1.05, False, 0), (1.3, False, 1), (1.0, True, 1)])
def test_disk_probe_fidelity_passes_within_its_tolerance_and_without_scratch_files(
        benchmark, tmp_path, monkeypatch, capsys, scale, leaves_a_file, code):
    fidelity = benchmark("disk_probe_fidelity")
    ours, theirs = _probe_figures(tmp_path, scale)

    def fio_by_hand(path, seconds, size):
        if leaves_a_file:
            (Path(path) / "fio-by-hand-left.dat").write_bytes(b"")
        return theirs

    monkeypatch.setattr(fidelity, "run_sizer", lambda path, seconds, size: ours)
    monkeypatch.setattr(fidelity, "run_fio_by_hand", fio_by_hand)
    monkeypatch.setattr(sys, "argv", ["disk_probe_fidelity.py", "--path", str(tmp_path), "--rounds", "2"])
    assert fidelity.main() == code
    verdict = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert verdict.endswith("PASS" if code == 0 else "FAIL")


# ------------------------------------------------------------------ gpu_sweep.sh
def _stub_host(tmp_path: Path, sweep_json: dict) -> dict:
    """An environment in which gpu_sweep.sh runs without a GPU: `sizer` answers with `sweep_json` and
    records its arguments, `python3` is this interpreter except for the set-up's install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "sweep.json").write_text(json.dumps(sweep_json))
    (bin_dir / "sizer").write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> {tmp_path}/sizer.calls\n'
        f'case "$1" in probe) echo {{}} ;; sweep) cat {tmp_path}/sweep.json ;; esac\n')
    (bin_dir / "python3").write_text(
        "#!/bin/bash\n"
        '[ "$1 $2" = "-m pip" ] && exit 0\n'
        f'case "$*" in *sysconfig*) echo {bin_dir}; exit 0 ;; esac\n'
        f'exec {sys.executable} "$@"\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "RUNS": str(tmp_path / "runs"),
            "SIZER_DATA": str(tmp_path / "data"), "PLAIN": "0", "REPORT": "0", "PYTHONPATH": str(ROOT)}


def _gpu_sweep(env: dict, *entries: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "lab/benchmarks/gpu_sweep.sh", *entries], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_gpu_sweep_runs_each_entry_as_a_resumable_slice_and_drops_repeats_with_passes(tmp_path):
    point = {"key": "k", "status": "ok", "throughput": 1.0, "unit": "images/s", "bottleneck": "cpu", "wall_s": 1.0}
    env = _stub_host(tmp_path, {"points": [point], "notes": []})
    done = _gpu_sweep(dict(env, SWEEP_ARGS="--passes 2 --budget 10"), "resnet50-train")
    assert done.returncode == 0 and "== complete" in done.stdout, done.stdout + done.stderr
    (sweep,) = [c for c in (tmp_path / "sizer.calls").read_text().splitlines() if c.startswith("sweep ")]
    assert "--workloads resnet50-train --vcpus 2,4,8,12,16 --disks local-nvme,ssd,standard --ram 8G,32G" in sweep
    assert "--resume --max-time" in sweep and "--passes 2 --budget 10" in sweep
    assert "--repeat-noisy" not in sweep  # passes measure every shape again: no repeats on top
    assert "--passes 1" not in sweep
    again = _gpu_sweep(env, "resnet50-train")
    last = (tmp_path / "sizer.calls").read_text().splitlines()[-1]
    # Without --passes, one pass and repeats, not the passes sizer would choose on a VM.
    assert again.returncode == 0 and "--repeat-noisy 0.2 --passes 1" in last


def test_gpu_sweep_exits_3_while_a_sweep_has_points_left(tmp_path):
    env = _stub_host(tmp_path, {"points": [], "notes": [], "left": 12})
    done = _gpu_sweep(env, "resnet50-train", "ptb-lstm-train")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "left: 12" in done.stdout and "not finished" in done.stdout
    sweeps = [c for c in (tmp_path / "sizer.calls").read_text().splitlines() if c.startswith("sweep ")]
    assert len(sweeps) == 1  # the next entry waits for the next slice
    assert os.path.exists(tmp_path / "runs" / "out" / "gpu_sweep.log")


# ------------------------------------------------------------------ speed_comparisons.py
def _spin_store(path: Path, per_cpu_second: dict[int, float], util: float) -> Path:
    """cpu-spin points at 1 and 2 vCPUs whose spinners got `util` of each vCPU and did
    `per_cpu_second[vcpus]` iterations per CPU-second."""
    with Store(path) as store:
        host = store.upsert_host({"hostname": path.stem, "cpu_model": "c", "threads": 2, "gpus": []})
        sweep = store.start_sweep(host, "sizer sweep", {})
        for vcpus, rate in per_cpu_second.items():
            result = Result(workload="cpu-spin", framework="python", unit="iterations/s", profile="cpu-small",
                            status="ok", throughput=rate * vcpus * util, counters={"cpu_util_per_vcpu": util},
                            extra={"shape": _shape(vcpus, 0.5)})
            store.add_point(sweep, f"cpu-spin/cpu-small/{vcpus}vcpu-0.5gib-local-nvme", _shape(vcpus, 0.5), result, {},
                            time.time())
    return path


def test_speed_comparisons_sets_two_stores_work_per_cpu_second_side_by_side(benchmark, tmp_path, capsys):
    speed = benchmark("speed_comparisons")
    fleet = _spin_store(tmp_path / "fleet.sqlite", {1: 20e6, 2: 19e6}, util=0.5)
    local = _spin_store(tmp_path / "local.sqlite", {1: 25e6, 2: 19e6}, util=0.9)
    assert speed.main(["per-cpu-second", str(fleet), str(local), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ratios = {r["comparison"]: r["best"] for r in rows if r["unit"] == "ratio"}
    assert ratios == {"per-cpu-second cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme": 1.25,
                      "per-cpu-second cpu-spin/cpu-small/2vcpu-0.5gib-local-nvme": 1.0}
    assert speed.main(["per-cpu-second", str(fleet), str(local)]) == 0
    assert "1.250" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["per-cpu-second"], "per-cpu-second takes two stores"),
    (["probe", "a.sqlite"], "per-cpu-second takes two stores"),
    (["probe", "--repeats", "0"], "--repeats must be at least 1"),
    (["per-cpu-second", "a.sqlite", "b.sqlite"], "wants two store files"),
    (["fastest"], "invalid choice"),
])
def test_speed_comparisons_refuses_bad_input_before_measuring(benchmark, capsys, args, message):
    speed = benchmark("speed_comparisons")
    with pytest.raises(SystemExit) as exit_:
        speed.main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
