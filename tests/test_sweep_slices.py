"""Sweeps in slices and across hosts: workload variants, --max-time with --resume, one host per
sweep, merging stores, round-aligned windows, the loaded calibration."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sizer.errors import SizerError
from sizer.shapes import build_plan
from sizer.store import Store
from sizer.sweep import check_same_host, parse_workload_entry
from sizer.units import parse_duration
from workloads import stats
from workloads.protocol import Result


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def test_workload_entry_carries_settings_of_its_own():
    assert parse_workload_entry("resnet50-train") == ("resnet50-train", {})
    assert parse_workload_entry(" resnet50-train:decode=gpu:batch_size=128 ") == (
        "resnet50-train", {"decode": "gpu", "batch_size": 128})
    with pytest.raises(SizerError, match="wants key=value"):
        parse_workload_entry("resnet50-train:decode")


def test_variants_of_one_workload_share_one_ceiling_and_differ_in_key():
    plan = build_plan(
        [("resnet50-train", "imagenet", None, {}), ("resnet50-train", "imagenet", None, {"decode": "gpu"})],
        vcpus=[1, 2], ram_gib=[4], disks=["local-nvme"], profile="cpu-small", config={"batch_size": 8},
    )
    assert len(plan) == 1 + 2 + 2
    assert plan[0].ceiling and plan[0].config == {"batch_size": 8, "input": "synthetic"}
    gpu = [p for p in plan if p.config.get("decode") == "gpu"]
    assert sorted(p.key for p in gpu) == [
        "resnet50-train/cpu-small/1vcpu-4gib-local-nvme/batch_size=8,decode=gpu",
        "resnet50-train/cpu-small/2vcpu-4gib-local-nvme/batch_size=8,decode=gpu",
    ]
    assert all("(batch_size=8, decode=gpu)" in p.label() for p in gpu)
    with pytest.raises(SizerError, match="duplicate"):
        build_plan([("cpu-spin", "", None, {}), ("cpu-spin", "", None, {})], [1], [1], ["local-nvme"], "cpu-small")


@pytest.mark.parametrize("entry,message", [
    ("cpu-spin:nosuch=1", "workload cpu-spin has no setting 'nosuch'"),
    ("cpu-spin:novalue", "wants key=value"),
])
def test_bad_variant_exits_2_before_any_work(cli, tmp_path, entry, message):
    code, out, err = cli("sweep", "--workloads", entry, "--store", str(tmp_path / "s.sqlite"), "--dry-run")
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.sqlite").exists()


def test_durations():
    assert parse_duration("540", "x") == 540
    assert parse_duration("9m", "x") == 540
    assert parse_duration("1.5h", "x") == 5400
    for bad in ("", "9x", "-1", "0"):
        with pytest.raises(SizerError, match="duration"):
            parse_duration(bad, "--max-time")


@pytest.mark.cgroup
def test_max_time_slices_resume_and_finish_without_measuring_twice(cli, tmp_path):
    args = ["sweep", "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", "512M", "--disks", "local-nvme",
            "--budget", "1", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
            "--data", str(tmp_path / "data"), "--no-calibrate", "--json"]
    code, out, err = cli(*args, "--max-time", "1s")
    assert code == 0, err
    first = json.loads(out)
    assert first["left"] == 2 and first["points"] == []
    assert any("--resume goes on" in n for n in first["notes"])
    code, out, err = cli(*args, "--resume")
    assert code == 0, err
    second = json.loads(out)
    assert second["resumed"] and "left" not in second
    assert sorted(p["vcpus"] for p in second["points"] if not p["stored"]) == [1, 2]
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 2
    assert conn.execute("SELECT finished IS NOT NULL FROM sweeps").fetchall() == [(1,)]


def _store_with_one_point(path: Path, hostname: str) -> Store:
    store = Store(path)
    host = store.upsert_host({"hostname": hostname, "cpu_model": "Xeon", "threads": 16, "gpus": ["H200"]})
    sweep = store.start_sweep(host, "sizer sweep", {"workloads": ["cpu-spin"]})
    store.set_calibration(sweep, {"ips_per_vcpu": 300.0})
    result = Result(workload="cpu-spin", profile="cpu-small", framework="python", status="ok", throughput=10.0, unit="ops/s",
                    steps=[[1.0, 10.0, 1.0], [1.0, 10.0, 0.0]])
    store.add_point(sweep, f"cpu-spin/{hostname}", {"vcpus": 1, "ram_gib": 1.0, "disk_class": "local-nvme"},
                    result, {}, 0.0)
    return store


def test_a_sweep_cannot_be_resumed_on_another_host(tmp_path):
    store = _store_with_one_point(tmp_path / "s.sqlite", "gpu-a")
    other = {"hostname": "gpu-b", "cpu_model": "Xeon", "threads": 16, "gpus": ["H200"]}
    other_id = store.upsert_host(other)
    check_same_host(store, 1, 1, {"hostname": "gpu-a"}, tmp_path)  # the same host goes on
    with pytest.raises(SizerError, match="cannot span two machines"):
        check_same_host(store, 1, other_id, other, tmp_path)
    store.close()


def test_merge_copies_hosts_sweeps_points_and_samples_once(tmp_path):
    a = _store_with_one_point(tmp_path / "a.sqlite", "gpu-a")
    b = _store_with_one_point(tmp_path / "b.sqlite", "gpu-b")
    with Store(tmp_path / "all.sqlite") as merged:
        assert merged.merge_from(a) == {"sweeps": 1, "points": 1, "skipped_sweeps": 0}
        assert merged.merge_from(b)["points"] == 1
        assert merged.merge_from(a) == {"sweeps": 0, "points": 0, "skipped_sweeps": 1}
        sweeps = merged.sweeps()
        assert [s.host["hostname"] for s in sweeps] == ["gpu-a", "gpu-b"]
        assert [s.calibration["ips_per_vcpu"] for s in sweeps] == [300.0, 300.0]
        rows = list(merged.point_rows())
        assert [r["key"] for r in rows] == ["cpu-spin/gpu-a", "cpu-spin/gpu-b"]
        assert merged.samples(rows[1]["id"]) == [(1.0, 10.0, 1), (1.0, 10.0, 0)]
    a.close()
    b.close()


def test_merge_cli_refuses_a_missing_source(cli, tmp_path):
    code, out, err = cli("merge", str(tmp_path / "nope.sqlite"), "--store", str(tmp_path / "all.sqlite"))
    assert code == 2 and "no store at" in err


def test_windows_hold_whole_loader_rounds_and_drop_an_incomplete_last_one():
    # 4 workers: each round is a 1 s wait then 3 batches at once; a last round of 2 instant steps.
    steps = []
    for _ in range(10):
        steps += [[1.0, 256.0, 0.0], [1e-4, 256.0, 0.0], [1e-4, 256.0, 0.0], [1e-4, 256.0, 0.0]]
    steps += [[1e-4, 256.0, 0.0], [1e-4, 256.0, 0.0]]
    rate, spread, rates = stats.summarize(steps, 5, round_steps=4)
    assert len(rates) == 5 and spread < 0.01
    assert rate == pytest.approx(1024 / 1.0003, rel=1e-3)
    _, unaligned_spread, _ = stats.summarize(steps, 5)
    assert unaligned_spread > 0.5  # what windows across round boundaries made of the same steps


def test_loaded_calibration_runs_one_decoder_per_cpu(tmp_path):
    import os

    from workloads.cpu_calibrate import CpuCalibrate
    from workloads.protocol import Spec

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    spec = Spec(workload="cpu-calibrate", profile="cpu-small", vcpus=2, data_dir=str(tmp_path),
                config={"parallel": 2, "images": 8}, time_budget_s=3.0)
    result = CpuCalibrate().run(spec)
    assert result.extra["parallel"] == 2 and len(result.extra["neighbour_rates"]) == 1
    assert result.extra["neighbour_rates"][0] > 0
    assert result.extra["rate_per_vcpu_loaded"] == pytest.approx((result.throughput + result.extra["neighbour_rates"][0]) / 2)
    assert sorted(os.sched_getaffinity(0)) == cpus  # the caller gets its CPUs back


def test_machines_of_one_kind_are_told_apart_by_their_gpus(tmp_path):
    from sizer.store import host_fingerprint

    def machine(uuid):
        return {"hostname": "vm", "cpu_model": "Xeon", "threads": 16, "gpus": ["NVIDIA H200"],
                "gpu": {"devices": [{"name": "NVIDIA H200", "uuid": uuid}]}}

    a, b = machine("GPU-aaaa"), machine("GPU-bbbb")
    assert host_fingerprint(a) != host_fingerprint(b)
    assert host_fingerprint(a) == host_fingerprint(dict(a, kernel="another boot"))  # a reboot is the same host
    store = Store(tmp_path / "s.sqlite")
    a_id, b_id = store.upsert_host(a), store.upsert_host(b)
    assert a_id != b_id
    sweep = store.start_sweep(a_id, "sizer sweep", {})
    with pytest.raises(SizerError, match="cannot span two machines"):
        check_same_host(store, sweep, b_id, b, tmp_path)
    store.close()


def _run(status: str, throughput: float, spread: float, started: float):
    from sizer.runner import PointRun
    from workloads.protocol import Result

    result = Result(workload="w", framework="f", unit="u/s", profile="gpu", status=status, throughput=throughput,
                    spread=spread, window_rates=[throughput])
    return PointRun(result=result, enforced={}, started=started, wall_s=1.0, returncode=0)


def test_a_noisy_point_is_measured_again_and_the_steadier_one_kept():
    from sizer.sweep import keep_steadier, wants_repeat

    noisy = _run("noisy", 609.0, 0.27, started=100.0)
    assert wants_repeat(noisy.result, 0.2) and not wants_repeat(noisy.result, 0.3) and not wants_repeat(noisy.result, None)
    assert not wants_repeat(_run("oom", 0.0, 0.0, 0.0).result, 0.2)  # nothing measured to repeat
    kept = keep_steadier(noisy, _run("ok", 801.0, 0.03, started=130.0))
    assert kept.result.throughput == 801.0 and kept.started == 100.0  # the point's time covers both
    assert kept.result.extra["repeat"]["kept"] == "second"
    assert kept.result.extra["repeat"]["other"]["throughput"] == 609.0  # nothing measured is dropped unseen
    first = _run("noisy", 700.0, 0.25, started=10.0)
    assert keep_steadier(first, _run("error", 0.0, 0.0, started=40.0)).result.throughput == 700.0
    assert keep_steadier(_run("noisy", 700.0, 0.21, 0.0), _run("noisy", 650.0, 0.40, 30.0)).result.throughput == 700.0


def test_repeat_threshold_is_checked_before_any_work(tmp_path):
    from sizer.errors import SizerError
    from sizer.sweep import SweepOptions, plan_sweep

    with pytest.raises(SizerError, match="--repeat-noisy"):
        plan_sweep(SweepOptions(workloads=["cpu-spin"], vcpus=[1], ram_bytes=[2**30], disks=["local-nvme"],
                                data_dir=tmp_path, out_dir=tmp_path, repeat_spread=0.0))
    plan = plan_sweep(SweepOptions(workloads=["cpu-spin"], vcpus=[1], ram_bytes=[2**30], disks=["local-nvme"],
                                   data_dir=tmp_path, out_dir=tmp_path, repeat_spread=0.2))
    assert plan.config["repeat_spread"] == 0.2  # part of the plan: a resume keeps the same rule


def test_calibration_neighbours_are_decoding_before_the_block_starts():
    """A block shorter than the time to make the calibration images still sees every neighbour
    decode: the images are made before the neighbours start, and the block waits until they run."""
    import os
    import time

    from workloads.cpu_calibrate import CpuCalibrate, busy_neighbours

    cpus = sorted(os.sched_getaffinity(0))
    cfg = dict(CpuCalibrate.defaults["cpu-small"])
    with busy_neighbours(cpus[-1:], cfg) as rates:
        time.sleep(0.2)
    assert len(rates) == 1 and rates[0] > 0
