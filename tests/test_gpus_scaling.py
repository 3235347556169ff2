"""Scaling with the GPU count, on constructed points: the one-GPU fit ignores multi-GPU points, each
multi-GPU shape's efficiency and its gap to the per-GPU-share prediction, the efficiency a catalog
row of G GPUs gets, the shared page cache, and what the recommendation says of rows beyond the GPU
counts measured."""

from __future__ import annotations

import pytest
from simulate import simulate_points

from sizer.catalog import load_catalog
from sizer.diskclasses import load_disk_classes
from sizer.model import fit_points
from sizer.model.scaling import GpuScaling, ScalingPoint, shared_cache_ram_gib
from sizer.points import Point
from sizer.recommend import recommend

DISKS = {"local-nvme": None, "standard": 140.0}
# 500 images/s per vCPU up to a 4,000 images/s GPU: CPU-bound below 8 vCPUs.
TRUTH = {"gpu_ceiling": 4000.0, "per_vcpu": 500.0, "usl_sigma": 0.0, "usl_kappa": 0.0, "bytes_per_sample": 0.05,
         "footprint_gib": 3.0, "dataset_gib": 10.0}


@pytest.fixture(scope="module")
def disk_classes():
    return load_disk_classes()


def one_gpu_points() -> list[Point]:
    return simulate_points("w", TRUTH, (2, 4, 8, 16), DISKS, (32.0,), gpu_model="A10G")


def multi(gpus: int, vcpus: int, rate: float, disk: str = "local-nvme", ram: float = 32.0) -> Point:
    return Point("w", vcpus, ram, disk, rate, "images/s", gpus=gpus, read_mb_per_sample=0.05, footprint_gib=3.0,
                 dataset_gib=10.0, gpu_model="A10G")


def test_the_one_gpu_fit_ignores_multi_gpu_points_and_measures_them_against_itself(disk_classes):
    single = fit_points(one_gpu_points(), disk_classes)["w"]
    assert single.scaling.summary() is None and single.scaling.measured_gpus == 1
    # 2 GPUs at 4 vCPUs each (one GPU there: 2,000/s): 3,600 = 90%; at 8 each (4,000/s): 7,200 = 90%;
    # 4 GPUs at 6 each, a level no one-GPU point has (the model's 3,000/s): 9,600 = 80%.
    points = one_gpu_points() + [multi(2, 8, 3600.0), multi(2, 16, 7200.0), multi(4, 24, 9600.0)]
    fit = fit_points(points, disk_classes)["w"]
    assert fit.n_points == single.n_points and fit.ceiling == pytest.approx(single.ceiling)
    rows = {(r["gpus"], r["vcpus"]): r for r in fit.scaling.summary()["rows"]}
    assert rows[(2, 8)]["one_gpu_basis"] == "measured" and rows[(2, 8)]["one_gpu_rate"] == pytest.approx(2000.0)
    assert rows[(2, 8)]["efficiency"] == pytest.approx(0.9) and rows[(2, 8)]["per_gpu_rate"] == 1800.0
    assert rows[(2, 16)]["efficiency"] == pytest.approx(0.9)
    assert rows[(4, 24)]["one_gpu_basis"] == "model" and rows[(4, 24)]["efficiency"] == pytest.approx(0.8, rel=0.01)
    # The per-GPU share at 2 GPUs x 8 vCPUs: 2 x one GPU at 4 vCPUs, 16 GiB, an uncapped disk: 4,000/s.
    assert rows[(2, 8)]["share_prediction"] == pytest.approx(4000.0, rel=0.01)
    assert rows[(2, 8)]["gap"] == pytest.approx(-0.1, abs=0.01)
    assert fit.scaling.measured_gpus == 4


def test_the_share_prediction_divides_ram_and_disk_among_the_gpus(disk_classes):
    # On a standard disk (140 MB/s) a whole uncached 10 GiB dataset reads at 2,800 images/s; two GPUs
    # share it, so the old per-GPU share gives each 70 MB/s and 16 GiB (caches (16-3)/10: all of it).
    fit = fit_points(one_gpu_points() + [multi(2, 32, 5000.0, disk="standard")], disk_classes)["w"]
    row = fit.scaling.summary()["rows"][0]
    expected = 2 * fit.predict(16, 16.0, 70.0).throughput
    assert row["share_prediction"] == pytest.approx(expected)


def _scaling(*rows: tuple[int, float, float]) -> GpuScaling:
    """(GPUs, vCPUs per GPU, efficiency) rows against a one-GPU rate of 1,000."""
    return GpuScaling(tuple(ScalingPoint(g, int(g * v), 32.0, "local-nvme", g * 1000.0 * e, 1000.0, "measured", None)
                            for g, v, e in rows))


def test_a_row_gets_the_efficiency_of_its_gpu_count_linear_beyond_the_largest_measured():
    scaling = _scaling((2, 8, 0.9), (4, 8, 0.8))
    assert scaling.efficiency_at(1) == 1.0 and scaling.efficiency_at(2) == pytest.approx(0.9)
    assert scaling.efficiency_at(3) == pytest.approx(0.85)  # between two measured counts
    assert scaling.efficiency_at(8) == pytest.approx(0.8)  # beyond: the per-GPU rate stays
    assert scaling.note_for(4) == "" and scaling.note_for(8) == "assumed linear beyond 4 measured GPUs"
    assert GpuScaling().efficiency_at(8) == 1.0
    assert GpuScaling().note_for(8) == "assumed linear beyond 1 measured GPU"
    # Two vCPU-per-GPU levels at one count: the level nearest the row's share (none given: the largest).
    levels = _scaling((2, 4, 0.95), (2, 8, 0.85), (2, 8, 0.87))
    assert levels.efficiency_at(2, 5) == pytest.approx(0.95)
    assert levels.efficiency_at(2, 7) == pytest.approx(0.86) == levels.efficiency_at(2)
    # A shape without a one-GPU reference has no efficiency, and counts for nothing.
    unknown = GpuScaling((ScalingPoint(8, 64, 32.0, "ssd", 8000.0, None, "", None),))
    assert unknown.measured_gpus == 1 and unknown.efficiency_at(8) == 1.0


def test_one_page_cache_serves_every_gpu_of_an_instance():
    # 64 GiB, 4 GPU processes of 3 GiB: a 52 GiB page cache, which one GPU alone has with 55 GiB.
    assert shared_cache_ram_gib(64.0, 4, 3.0) == 55.0
    assert shared_cache_ram_gib(64.0, 1, 3.0) == 64.0 and shared_cache_ram_gib(8.0, 8, 3.0) == 0.0


def _option(rec, instance_type: str, disk: str):
    return next(o for o in rec.considered if o.instance.instance_type == instance_type and o.disk_class == disk)


def test_the_recommendation_scales_multi_gpu_rows_and_says_where_it_extrapolates(disk_classes):
    catalog = load_catalog(gpu="A10G")
    linear = recommend(fit_points(one_gpu_points(), disk_classes)["w"], catalog, "A10G", disk_classes=disk_classes)
    assert any("assumed linear beyond 1 measured GPU" in n and "no multi-GPU point" in n for n in linear.notes)
    measured = fit_points(one_gpu_points() + [multi(2, 16, 7200.0), multi(2, 32, 7200.0)], disk_classes)["w"]
    scaled = recommend(measured, catalog, "A10G", disk_classes=disk_classes)
    assert any(n.startswith("rows of 4, 8 GPUs: per-GPU rate x 0.9,") and "assumed linear beyond 2 measured GPUs" in n
               for n in scaled.notes)
    one, eight = _option(linear, "g5.48xlarge", "local-nvme"), _option(scaled, "g5.48xlarge", "local-nvme")
    assert eight.gpu_efficiency == pytest.approx(0.9) and eight.scaling_note == "assumed linear beyond 2 measured GPUs"
    assert eight.predicted == pytest.approx(0.9 * one.predicted, rel=0.01)
    assert eight.cost_per_million == pytest.approx(one.cost_per_million / 0.9, rel=0.01)
    # An instance of several GPUs is judged by its loaded per-GPU figure: 90% of the ceiling misses 5%.
    assert one.meets and not eight.meets and eight.load_basis == "measured with 2 GPUs"
    assert one.load_basis == "idle host" and "an idle host's figure" in one.reason
    assert "one GPU's x 0.9, the efficiency measured with 2 GPUs at once" in eight.reason
    assert "one page cache for all its GPUs" in eight.reason
    alone = _option(scaled, "g5.xlarge", "local-nvme")
    assert alone.gpu_efficiency == 1.0 and alone.scaling_note == ""
    assert alone.predicted == _option(linear, "g5.xlarge", "local-nvme").predicted


def test_multi_gpu_points_join_the_fit_of_their_one_gpu_variant_whatever_other_multi_gpu_points_use():
    """The one-GPU points all decode on the CPU; a multi-GPU point decoding on the GPU does not
    relabel the CPU-decoding multi-GPU points away from the one-GPU fit they belong to."""
    import dataclasses

    from sizer.model.grouping import group_points, multi_gpu_groups

    cpu = [dataclasses.replace(p, decode="cpu") for p in one_gpu_points()]
    both = [dataclasses.replace(multi(2, 16, 7200.0), decode="cpu"), dataclasses.replace(multi(2, 16, 3000.0), decode="gpu")]
    groups = multi_gpu_groups(cpu + both)
    assert list(group_points(cpu + both)) == ["w"]
    assert [p.decode for p in groups["w"]] == ["cpu"] and [p.decode for p in groups["w[decode=gpu]"]] == ["gpu"]
