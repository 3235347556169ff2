"""Instances of several GPUs judged loaded, and the shapes that are sold: the load factor from a
parallel sweep's interference checks (CPU-bound pairs only), the recommender's loaded per-GPU
figure and the reason that says which, the interference check's choice of CPU-bound shapes on
constructed plans, and the sold vCPU-per-GPU levels in the default grid of a faked host."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simulate import simulate_points
from test_default_sweep import smt_host

import sizer.sweep.plan as plan_mod
from sizer.catalog import load_catalog
from sizer.diskclasses import load_disk_classes
from sizer.model import fit_points
from sizer.model.load import measure_load
from sizer.points import ParallelMark, Point
from sizer.recommend import recommend
from sizer.shapes import HostCpus, InstanceShape, PlannedPoint
from sizer.sweep.defaults import parallel_grid, sold_vcpu_levels
from sizer.sweep.parallel import choose_checks
from sizer.units import GIB

DISKS = {"local-nvme": None, "standard": 140.0}
# 250 images/s per vCPU up to a 4,000 images/s GPU: the GPU is fed from 16 vCPUs on, alone.
TRUTH = {"gpu_ceiling": 4000.0, "per_vcpu": 250.0, "usl_sigma": 0.0, "usl_kappa": 0.0, "bytes_per_sample": 0.05,
         "footprint_gib": 3.0, "dataset_gib": 10.0}
VCPUS = (4, 8, 16, 24, 28)


def alone_points() -> list[Point]:
    points = simulate_points("w", TRUTH, VCPUS, DISKS, (64.0,), gpu_model="H200")
    return [replace(p, bottleneck="gpu" if p.throughput >= 3999 else "cpu") for p in points]


def mark(slots: int = 4, slot: int = 1) -> ParallelMark:
    return ParallelMark(slots=slots, slot=slot, gpu=slot)


def with_checks(points: list[Point], factor: float, check_vcpus: int = 8, disk: str = "local-nvme",
                bottleneck: str = "cpu") -> list[Point]:
    """`points` measured in a parallel sweep (every real-input one beside three others, at `factor`
    of its rate alone where CPU-bound), and the shape at `check_vcpus` on `disk` also measured alone."""
    out = []
    for p in points:
        if p.input == "synthetic" or p.bottleneck != "cpu":
            out.append(replace(p, parallel=mark()) if p.input != "synthetic" else p)
            continue
        loaded = replace(p, throughput=p.throughput * factor, parallel=mark())
        if p.vcpus == check_vcpus and p.disk_class == disk:
            key = f"w/{p.vcpus}"
            out += [replace(loaded, interference_check=key, bottleneck=bottleneck),
                    replace(p, interference_check=key, bottleneck=bottleneck, key=key + "#alone")]
        else:
            out.append(loaded)
    return out


def _option(rec, instance_type: str, disk: str = "local-nvme"):
    return next(o for o in rec.considered if o.instance.instance_type == instance_type and o.disk_class == disk)


# ---------------------------------------------------------------- the load factor
def test_the_load_factor_takes_cpu_bound_pairs_and_leaves_capped_ones_out():
    load = measure_load(with_checks(alone_points(), 0.88))
    assert load.factor == pytest.approx(0.88) and load.slots == 4 and load.fit_loaded
    assert [p.key for p in load.pairs] == ["w/8"]
    # The same check on a shape its disk capped says nothing of the CPUs: left out, no factor.
    capped = measure_load(with_checks(alone_points(), 0.88, bottleneck="disk"))
    assert capped.factor is None and capped.capped == ("w/8",)
    assert measure_load(alone_points()).summary() is None  # a serial sweep: nothing measured beside others


def test_an_eight_gpu_row_is_judged_by_its_loaded_per_gpu_figure_and_says_which():
    disk_classes, catalog = load_disk_classes(), load_catalog(gpu="H200")
    idle = recommend(fit_points(alone_points(), disk_classes)["w"], catalog, "H200", disk_classes=disk_classes)
    p5en = _option(idle, "p5en.48xlarge")
    assert p5en.meets and p5en.load_basis == "idle host" and "an idle host's figure" in p5en.reason
    assert "judged by its loaded per-GPU figure: none measured" in idle.reason

    # Every slot busy took 12% from each CPU-bound shape: 24 vCPUs still give 6,000 x 0.88, over 4,000.
    busy = fit_points(with_checks(alone_points(), 0.88), disk_classes)["w"]
    rec = recommend(busy, catalog, "H200", disk_classes=disk_classes)
    p5en = _option(rec, "p5en.48xlarge")
    assert p5en.load_basis == "measured with every slot busy" and p5en.gpu_efficiency == 1.0
    assert "measured with the other 3 slot(s) of a parallel sweep busy" in p5en.reason

    # Alone measurements and a load factor only (a serial sweep merged with a parallel sweep's checks).
    only_factor = [p for p in with_checks(alone_points(), 0.7) if p.interference_check] + alone_points()
    fit = fit_points(only_factor, disk_classes)["w"]
    assert not fit.scaling.load.fit_loaded and fit.scaling.load.factor == pytest.approx(0.7)
    rec = recommend(fit, catalog, "H200", disk_classes=disk_classes)
    p5en, alone = _option(rec, "p5en.48xlarge"), _option(idle, "p5en.48xlarge")
    assert p5en.load_basis == "load factor" and p5en.predicted == pytest.approx(0.7 * alone.predicted, rel=0.02)
    assert not p5en.meets and p5en.bottleneck == "load"  # 70% of the GPU: loaded, it starves
    assert "one GPU alone x 0.7, the load factor measured with 4 slots busy" in p5en.reason


def test_a_whole_node_point_outranks_the_load_factor():
    disk_classes, catalog = load_disk_classes(), load_catalog(gpu="H200")
    node = Point("w", 64, 64.0, "local-nvme", 4 * 3200.0, "images/s", gpus=4, read_mb_per_sample=0.05,
                 footprint_gib=3.0, dataset_gib=10.0, gpu_model="H200")
    fit = fit_points([*alone_points(), node], disk_classes)["w"]
    rec = recommend(fit, catalog, "H200", disk_classes=disk_classes)
    p5en = _option(rec, "p5en.48xlarge")
    assert p5en.load_basis == "measured with 4 GPUs" and p5en.gpu_efficiency == pytest.approx(0.8, rel=0.01)
    assert not p5en.meets and "the efficiency measured with 4 GPUs at once" in p5en.reason


# ---------------------------------------------------------------- the interference check's shapes
def _table():
    return load_disk_classes()


@settings(max_examples=60, deadline=None)
@given(vcpus=st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True),
       rams=st.lists(st.sampled_from([8.0, 16.0, 32.0, 64.0]), min_size=1, max_size=3, unique=True),
       disks=st.lists(st.sampled_from(["local-nvme", "ssd", "standard"]), min_size=1, max_size=3, unique=True),
       wanted=st.integers(0, 4), seed=st.randoms(use_true_random=False))
def test_the_check_never_picks_a_disk_capped_or_gpu_capped_shape(vcpus, rams, disks, wanted, seed):
    shapes = [InstanceShape(v, r, d) for v in vcpus for r in rams for d in disks]
    points = [PlannedPoint("resnet50-train", "gpu", s) for s in shapes]
    points += [PlannedPoint("resnet50-train", "gpu", s, {"decode": "gpu"}) for s in shapes]  # capped by the GPU
    points.append(PlannedPoint("resnet50-train", "gpu", InstanceShape(max(vcpus), max(rams), disks[0]),
                               {"input": "synthetic"}, ceiling=True))
    points += [replace(p, pass_no=2) for p in points[:3]]
    seed.shuffle(points)
    chosen = choose_checks(points, wanted, _table())
    by_key = {p.key: p for p in points}
    fastest = min(disks, key=["local-nvme", "ssd", "standard"].index)
    assert len(chosen) == min(wanted, len(vcpus))
    for key in chosen:
        p = by_key[key]
        assert not p.ceiling and p.config.get("decode") != "gpu" and p.pass_no == 1
        assert p.shape.disk_class == fastest and p.shape.ram_gib == max(rams)  # no throttle caps it, the cache holds
    assert [by_key[k].shape.vcpus for k in chosen] == sorted(vcpus, reverse=True)[:len(chosen)]


def test_the_dry_run_of_a_parallel_sweep_checks_the_largest_shape_on_the_fastest_disk(cli, tmp_path):
    code, out, err = cli("sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M,512M",
                         "--disks", "standard,ssd,local-nvme", "--store", str(tmp_path / "s.sqlite"), "--data",
                         str(tmp_path / "d"), "--no-calibrate", "--dry-run", "--json", "--parallel", "2",
                         "--interference", "1")
    assert code == 0, err
    planned = json.loads(out)
    by_key = {p["key"]: p for p in planned["points"]}
    (check,) = planned["parallel"]["interference_checks"]
    assert (by_key[check]["ram_gib"], by_key[check]["disk_class"]) == (0.5, "local-nvme")


# ---------------------------------------------------------------- the shapes that are sold
def test_the_sold_levels_come_from_every_catalog_row_of_the_gpu():
    assert sold_vcpu_levels("H200") == [24, 28]  # p5en.48xlarge 192 / 8, a3-ultragpu-8g 224 / 8
    assert sold_vcpu_levels("H100") == [12, 16, 24, 26]
    assert sold_vcpu_levels(None) == []


def test_parallel_slots_widen_to_hold_the_largest_sold_level():
    grid = parallel_grid(smt_host(64), 4, [24, 28])
    assert grid.slots == 2 and {24, 28} <= set(grid.levels) and max(grid.levels) == 32
    assert "too few for the 28 vCPUs per GPU that are sold: 2 slot(s) of 32 threads" in grid.note
    wide = parallel_grid(HostCpus(tuple((i,) for i in range(128))), 4, [24, 28])
    assert wide.slots == 4 and wide.note == "" and {24, 28, 32} <= set(wide.levels)


@pytest.fixture
def h200_host(monkeypatch):
    def make(threads: int) -> None:
        monkeypatch.setattr(plan_mod, "gpu_present", lambda: True)
        monkeypatch.setattr(plan_mod, "host_cpus", lambda: smt_host(threads))
        monkeypatch.setattr(plan_mod, "host_ram_bytes", lambda: 512 * GIB)
        monkeypatch.setattr(plan_mod, "hypervisor", lambda: "kvm")
        monkeypatch.setattr(plan_mod, "host_gpu_model", lambda: "NVIDIA H200")
    return make


def _dry_run(cli, tmp_path: Path, *more: str) -> dict:
    code, out, err = cli("sweep", "--dry-run", "--json", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"),
                         *more)
    assert code == 0, err
    return json.loads(out)


def test_a_64_thread_host_plans_the_h200s_sold_levels(cli, tmp_path, h200_host):
    h200_host(64)
    planned = _dry_run(cli, tmp_path, "--gpu", "H200")
    assert sorted({p["vcpus"] for p in planned["points"]}) == [2, 4, 8, 16, 24, 28, 32, 48, 64]
    # Without --gpu the host's own GPU is the target.
    assert {24, 28} <= {p["vcpus"] for p in _dry_run(cli, tmp_path)["points"]}


def test_a_16_thread_host_says_the_sold_levels_are_extrapolated(cli, tmp_path, h200_host):
    h200_host(16)
    planned = _dry_run(cli, tmp_path, "--gpu", "H200")
    assert max(p["vcpus"] for p in planned["points"]) == 16
    assert any("the 24, 28 vCPUs per GPU that are sold are not measured" in n for n in planned["notes"])


def test_an_option_beyond_the_measured_vcpus_says_it_is_extrapolated_with_its_range():
    disk_classes = load_disk_classes()
    points = [p for p in alone_points() if p.vcpus <= 16]
    rec = recommend(fit_points(points, disk_classes)["w"], load_catalog(gpu="H200"), "H200", disk_classes=disk_classes)
    p5en = _option(rec, "p5en.48xlarge")
    assert p5en.extrapolated and "extrapolated: " in p5en.reason and "no shape with 24 vCPUs was measured" in p5en.reason
    assert "% to " in p5en.reason.split("extrapolated")[1]


def test_parallel_4_on_a_64_thread_h200_host_takes_2_slots_wide_enough_for_28_vcpus(cli, tmp_path, h200_host):
    h200_host(64)
    planned = _dry_run(cli, tmp_path, "--gpu", "H200", "--parallel", "4")
    assert len(planned["parallel"]["slots"]) == 2
    assert all(len(slot["cpus"]) == 32 for slot in planned["parallel"]["slots"])
    assert sorted({p["vcpus"] for p in planned["points"]}) == [2, 4, 8, 16, 24, 28, 32]
    assert any("--parallel 4 would give each slot 16 threads" in n for n in planned["notes"])
