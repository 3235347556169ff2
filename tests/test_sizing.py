"""`sizer.sizing`: one home for a workload's answers. The report and the adaptive sweep size a
stored sweep through the same `size`, with the same host speeds, and so give the same knee, knee
range and pick; the terms are checked where they enter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sizer.catalog import load_catalog
from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.facts import with_facts
from sizer.model.evaluate import fit_group
from sizer.points import combine_passes
from sizer.report import build_context, inputs_from_store
from sizer.shapes import build_plan
from sizer.sizing import SizingTerms, size
from sizer.store import Store
from sizer.sweep.adaptive import AdaptiveChooser
from sizer.sweep.adaptive_run import adaptive_terms
from sizer.sweep.plan import SweepOptions
from workloads.protocol import Result

VCPUS = (2, 4, 8, 12, 16)
RAMS = (8.0, 32.0)
DISKS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}
GPU = "NVIDIA H100 80GB HBM3"


def _rate(vcpus: int, disk: str, synthetic: bool, pass_no: int) -> float:
    """min(4,000, 330 per vCPU less contention, the disk over 0.11 MB a sample); passes 3% apart."""
    cpu = 330.0 * vcpus / (1 + 0.01 * (vcpus - 1))
    cap = DISKS[disk]
    rate = 4000.0 if synthetic else min(4000.0, cpu, float("inf") if cap is None else cap / 0.11)
    return rate * (1.0 + (0.03 if pass_no == 1 else -0.03) * ((vcpus + len(disk)) % 3 - 1))


def _result(vcpus: int, disk: str, synthetic: bool, pass_no: int) -> Result:
    rate = _rate(vcpus, disk, synthetic, pass_no)
    samples = 5 * rate
    return Result(workload="resnet50-train", framework="pytorch", unit="images/s", profile="gpu", status="ok",
                  throughput=rate, spread=0.02, wall_s=12.0,
                  counters={"measured_samples": samples, "measured_seconds": 5.0, "read_bytes": 0.11e6 * samples,
                            "peak_rss_bytes": 1.6 * 2**30, "gpu_name": GPU},
                  extra={"dataset_gib": 5.4, "epochs": 0.5},
                  config={"input": "synthetic" if synthetic else "files", "decode": "cpu", "device": "cuda"})


def _stored_grid(path: Path, timeline: list[float]) -> Path:
    """A two-pass grid sweep with its GPU ceiling, and the host's speed over it (`timeline`)."""
    with Store(path) as store:
        host = store.upsert_host({"hostname": "gpu-host", "cpu_model": "c", "threads": 16, "gpus": [GPU]})
        sweep = store.start_sweep(host, "sizer sweep", {"workloads": ["resnet50-train"]})
        store.set_calibration(sweep, {"ips_per_vcpu": 330.0, "timeline": [
            {"at_s": 600.0 * i, "ips": [ips], "median": ips, "spread": 0.0} for i, ips in enumerate(timeline)]})
        store.add_point(sweep, "resnet50-train/gpu/16vcpu-32gib-local-nvme/input=synthetic",
                        {"vcpus": 16, "ram_gib": 32.0, "disk_class": "local-nvme"},
                        _result(16, "local-nvme", True, 1), {}, time.time())
        for pass_no in (1, 2):
            for v in VCPUS:
                for r in RAMS:
                    for d in DISKS:
                        key = f"resnet50-train/gpu/{v}vcpu-{r:g}gib-{d}" + ("" if pass_no == 1 else "#p2")
                        store.add_point(sweep, key, {"vcpus": v, "ram_gib": r, "disk_class": d},
                                        _result(v, d, False, pass_no), {}, time.time())
        store.finish_sweep(sweep)
    return path


def test_the_adaptive_answer_and_the_reports_agree_on_a_stored_sweep(tmp_path):
    path = _stored_grid(tmp_path / "sizer.sqlite", [330.0, 250.0, 400.0, 320.0])
    with Store(path) as store:
        inputs = inputs_from_store(store)
        sweep_id = store.sweeps()[0].id
        terms = adaptive_terms(store, sweep_id, SweepOptions(), load_disk_classes())
        keys = [row["key"] for row in store.point_rows(sweep_id)]
    [card] = build_context(inputs["points"], sweeps=inputs["sweeps"])["workloads"]
    grid = build_plan([("resnet50-train", "imagenet", None, {})], list(VCPUS), list(RAMS), list(DISKS), "gpu")
    answer = AdaptiveChooser(grid, terms).answer(list(zip(keys, inputs["points"])))

    chosen = card["recommendation"]["chosen"]
    assert answer is not None and chosen is not None
    assert answer.pick == (f"{chosen['cloud']}:{chosen['instance_type']}", chosen["disk_class"])
    assert answer.knee == card["knee"]["predicted_vcpus"]
    assert (answer.knee_low, answer.knee_high) == (card["knee"]["range"]["low"], card["knee"]["range"]["high"])
    # Both drew with the host's speed over the sweep, which moved more than the passes did.
    assert card["knee"]["range"]["host_timeline"] and terms.sizing.host_speeds == ((330.0, 250.0, 400.0, 320.0),)


def _fit_and_points(path: Path):
    with Store(path) as store:
        points = with_facts(store.points())
    return fit_group("resnet50-train", points, load_disk_classes()), combine_passes(points)


def test_the_hosts_speed_over_the_sweep_widens_the_knee_range(tmp_path):
    fit, points = _fit_and_points(_stored_grid(tmp_path / "sizer.sqlite", [330.0]))
    base = SizingTerms(tuple(load_catalog(builtin=True, gpu="H100")), "H100", load_disk_classes())
    steady = size(points, fit, base)
    moving = size(points, fit, SizingTerms(base.catalog, base.target, base.disk_classes,
                                           host_speeds=((330.0, 250.0, 400.0, 330.0),)))
    assert moving.knee == steady.knee
    assert steady.knee_range.low is not None and moving.knee_range.low is not None
    assert moving.knee_range.low <= steady.knee_range.low
    assert (moving.knee_range.high or 10**6) > (steady.knee_range.high or 10**6)
    assert moving.knee_range.host_timeline and not steady.knee_range.host_timeline


@pytest.mark.parametrize(("field", "value", "words"), [
    ("tolerance", 1.5, "tolerance must be a fraction"),
    ("confidence", 0.0, "confidence must be a fraction"),
    ("job_samples", -1.0, "job samples must be > 0"),
    ("target_calibration", 0.0, "target calibration must be > 0"),
])
def test_sizing_terms_are_checked_where_they_enter(field, value, words):
    with pytest.raises(SizerError, match=words):
        SizingTerms((), "H100", load_disk_classes(), **{field: value})
