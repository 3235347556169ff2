"""lab/benchmarks/adaptive_replay.py on a store built here: a two-pass grid of a known model, replayed
without measuring (stored order and seeded noisy draws), and a live store compared with a grid's."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

from sizer.store import Store
from workloads.protocol import Result

VCPUS = (2, 4, 8, 12, 16)
RAMS = (8.0, 32.0)
DISKS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}


@pytest.fixture(scope="module")
def replay():
    """The script as a module registered under its name: its dataclasses and its workers need that."""
    path = Path(__file__).resolve().parent.parent / "lab" / "benchmarks" / "adaptive_replay.py"
    spec = importlib.util.spec_from_file_location("adaptive_replay", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["adaptive_replay"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("adaptive_replay", None)


def _rate(vcpus: int, disk: str, synthetic: bool, pass_no: int) -> float:
    """min(4,000, 350 per vCPU less contention, the disk over 0.11 MB a sample); passes 1% apart."""
    cpu = 350.0 * vcpus / (1 + 0.01 * (vcpus - 1))
    cap = DISKS[disk]
    rate = 4000.0 if synthetic else min(4000.0, cpu, float("inf") if cap is None else cap / 0.11)
    return rate * (1.0 + (0.01 if pass_no == 1 else -0.01) * ((vcpus + len(disk)) % 3 - 1))


def _result(vcpus: int, disk: str, synthetic: bool, pass_no: int, dataset_gib: float) -> Result:
    rate = _rate(vcpus, disk, synthetic, pass_no)
    samples = 5 * rate
    return Result(workload="resnet50-train", framework="pytorch", unit="images/s", profile="gpu", status="ok",
                  throughput=rate, spread=0.02, wall_s=12.0,
                  counters={"measured_samples": samples, "measured_seconds": 5.0, "read_bytes": 0.11e6 * samples,
                            "peak_rss_bytes": 1.6 * 2**30, "gpu_name": "NVIDIA H100 80GB HBM3"},
                  extra={"dataset_gib": dataset_gib, "epochs": 0.5},
                  config={"input": "synthetic" if synthetic else "files", "decode": "cpu", "device": "cuda"})


def _grid_store(path: Path, dataset_gib: float = 5.4) -> Path:
    """A grid sweep in two passes, its GPU ceiling first, as `sizer sweep --passes 2` stores it."""
    with Store(path) as store:
        host = store.upsert_host({"hostname": "gpu-host", "cpu_model": "c", "threads": 16, "gpus": ["H100"]})
        sweep = store.start_sweep(host, "sizer sweep", {"workloads": ["resnet50-train"]})
        ceiling = {"vcpus": 16, "ram_gib": 32.0, "disk_class": "local-nvme"}
        store.add_point(sweep, "resnet50-train/gpu/16vcpu-32gib-local-nvme/input=synthetic", ceiling,
                        _result(16, "local-nvme", True, 1, dataset_gib), {}, time.time())
        for pass_no in (1, 2):
            for v in VCPUS:
                for r in RAMS:
                    for d in DISKS:
                        key = f"resnet50-train/gpu/{v}vcpu-{r:g}gib-{d}" + ("" if pass_no == 1 else "#p2")
                        store.add_point(sweep, key, {"vcpus": v, "ram_gib": r, "disk_class": d},
                                        _result(v, d, False, pass_no, dataset_gib), {}, time.time())
        store.finish_sweep(sweep)
    return path


def test_replays_reach_the_grids_answer_within_the_budget(replay, tmp_path, capsys):
    entries = replay.load_entries(_grid_store(tmp_path / "grid.sqlite"), tmp_path)
    assert [(e.label, e.gpu, e.grid_points, len(e.candidates)) for e in entries] == [
        ("resnet50-train", "H100", 61, 31)]
    [row] = replay.run_all(entries, replays=2, share=0.5, confidence=0.9, workers=1, cache=False)
    assert row["budget"] == 30 and row["passes"] == 2
    assert row["grid"]["instance"] is not None and row["grid"]["trusted"]
    stored, noisy = row["stored"], row["noisy"]
    assert stored["pick"] and stored["knee"] and stored["points"] <= 30 and stored["stopped"] == "stable"
    assert noisy["replays"] == 2 and noisy["points_max"] <= 30 and noisy["pick"] == 2
    assert set(row["grid_noisy"]) == {"pick", "knee"}
    assert replay.print_table([row], need=95, share=0.5)  # the acceptance holds for this one entry
    out = capsys.readouterr().out
    assert "it holds for 1 of 1 entries" in out
    assert f"stopped \"stable\": {noisy['settled']} of 2, on another pick than the grid's: 0" in out
    assert "keep their own pick when read once (>= 95 of 100): 1 of 1 entries; the target holds for 1 of them" in out
    row["grid_noisy"]["pick"] = 0  # a grid whose own pick moves when read once
    assert replay.print_table([row], need=95, share=0.5)
    assert "(>= 95 of 100): 0 of 1 entries; the target holds for 0 of them" in capsys.readouterr().out


def test_a_budget_of_fewer_shapes_than_trust_needs_answers_from_measurements(replay, tmp_path):
    """12 points: six shapes held out at most, fewer than the model's trust needs. A dataset larger
    than the pick's page cache: the grid's pick (the standard disk) rests on the trusted model. The
    replay measures the shape that tells that option (the standard disk at the knee's RAM), which
    holds it below the line, and answers with the disk class its measurements show."""
    entries = replay.load_entries(_grid_store(tmp_path / "grid.sqlite", dataset_gib=300.0), tmp_path)
    [row] = replay.run_all(entries, replays=2, share=0.2, confidence=0.9, workers=1, cache=False)
    assert row["budget"] == 12 and row["grid"]["trusted"] and row["grid"]["disk_class"] == "standard"
    stored = row["stored"]
    assert stored["points"] <= 12
    assert not stored["answer"]["trusted"] and not stored["pick"]
    assert stored["answer"]["instance"] == row["grid"]["instance"]  # the same instance, on the disk it measured
    assert stored["answer"]["disk_class"] == "local-nvme" and row["noisy"]["pick"] == 0
    [fixed] = replay.run_all(entries, replays=1, share=0.2, confidence=0.9, workers=1, cache=False, passes=2)
    assert fixed["stored"]["points"] <= 12 and fixed["stored"]["answer"]["instance"] == row["grid"]["instance"]


def test_a_live_store_is_compared_with_the_grids_answer(replay, tmp_path, capsys):
    grid = _grid_store(tmp_path / "grid.sqlite")
    assert replay.main(["--compare", str(grid), str(grid)]) == 0
    out = capsys.readouterr().out
    assert "pick (instance and disk class) agrees: yes; knee within the grid's range: yes" in out
    assert replay.main(["--compare", str(grid)]) == 2  # no grid store to compare with


def test_four_slots_reach_the_serial_answer_and_an_entry_without_usable_points_is_named(replay, tmp_path):
    """Four of an entry's points in flight at once, stored in the order they end: the answer is the
    serial replay's. An entry whose every point failed has no grid to reach: named, not replayed."""
    path = _grid_store(tmp_path / "grid.sqlite")
    with Store(path) as store:
        sweep = store.sweeps()[0].id
        for v in (2, 4):
            failed = Result(workload="imagenet-preprocess", framework="pillow", unit="images/s", profile="gpu",
                            status="error", error="ModuleNotFoundError: No module named 'lmdb'")
            store.add_point(sweep, f"imagenet-preprocess/gpu/{v}vcpu-8gib-ssd",
                            {"vcpus": v, "ram_gib": 8.0, "disk_class": "ssd"}, failed, {}, time.time())
    replay.SKIPPED.clear()
    entries = replay.load_entries(path, tmp_path)
    assert [e.label for e in entries] == ["resnet50-train"]
    assert replay.SKIPPED == [f"{path} imagenet-preprocess: no usable point (2 error)"]
    [serial] = replay.run_all(entries, replays=3, share=0.5, confidence=0.9, workers=1, cache=False)
    [side] = replay.run_all(entries, replays=3, share=0.5, confidence=0.9, workers=1, cache=False, slots=4)
    assert side["slots"] == 4 and side["stored"]["answer"] == serial["stored"]["answer"]
    assert side["stored"]["points"] == serial["stored"]["points"] and side["noisy"]["pick"] == 3
