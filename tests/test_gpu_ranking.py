"""`sizer recommend --gpu any` (`sizer.sizing.across_gpus`): every GPU type the catalog sells, the
measured one as measured and the others predicted, ranked by cost per million samples; a card too
small for the job's measured GPU memory is left out with the reason."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_report import store_with_points
from test_report_fixtures import make_points

from sizer.catalog import InstanceType
from sizer.diskclasses import load_disk_classes
from sizer.gpu_table import load_gpu_table
from sizer.model import fit_points
from sizer.model.gpu_speed import TimeSplit
from sizer.points import combine_passes
from sizer.sizing import SizingTerms
from sizer.sizing.across_gpus import MEASURED, PREDICTED, rank_gpus

SPLIT = TimeSplit("measured", "bf16", tensor=0.4, memory=0.4, other=0.1, latency=0.1)


def _row(name: str, gpu: str, memory: float, price: float, vcpus: int = 16) -> InstanceType:
    return InstanceType("test", name, vcpus, 64.0, gpu, 1, memory, price, "r1", 500.0, ("local-nvme", "ssd"),
                        "constructed for the test", "2026-01-01")


CATALOG = [_row("h100-box", "H100", 80.0, 4.0), _row("a100-box", "A100", 40.0, 2.0), _row("l4-box", "L4", 24.0, 0.5),
           _row("t4-box", "T4", 16.0, 0.3)]


@pytest.fixture(scope="module")
def measured():
    """A CPU-decoding training sweep on an H100 whose job held 20 GiB of GPU memory."""
    points = [dataclasses.replace(p, gpu_mem_peak_gib=20.0) for p in make_points(G=1200.0, c=150.0)]
    table = load_disk_classes()
    fit = fit_points(points, table)["resnet50-train"]
    return combine_passes(points), fit, table


def _rank(measured, min_rate=None):
    points, fit, table = measured
    terms = SizingTerms(tuple(CATALOG), "any", table)
    return rank_gpus(points, fit, CATALOG, terms, load_gpu_table(), lambda: (SPLIT, []), min_rate)


def test_every_gpu_type_is_ranked_by_cost_per_sample_and_labelled(measured):
    choices = _rank(measured)
    assert {c.gpu for c in choices} == {"H100", "A100", "L4", "T4"}
    ranked = [c for c in choices if not c.left_out and c.chosen is not None]
    costs = [c.cost_per_million for c in ranked]
    assert len(ranked) >= 2 and costs == sorted(costs)
    basis = {c.gpu: c.basis for c in choices}
    assert basis["H100"] == MEASURED and basis["A100"] == basis["L4"] == PREDICTED
    # A slower GPU's ceiling is predicted below the measured one, and so needs no more vCPUs.
    by_gpu = {c.gpu: c for c in choices}
    assert by_gpu["L4"].ceiling < by_gpu["H100"].ceiling
    assert (by_gpu["L4"].sizing.knee or 0) <= (by_gpu["H100"].sizing.knee or 10**6)


def test_a_card_too_small_for_the_jobs_gpu_memory_is_left_out_with_the_reason(measured):
    t4 = next(c for c in _rank(measured) if c.gpu == "T4")
    assert t4.sizing is None and "needs 20 GiB of GPU memory" in t4.left_out and "16 GiB" in t4.left_out
    assert _rank(measured)[-1].gpu == "T4"  # left out: last


def test_min_rate_leaves_out_the_slow_cards(measured):
    fast_only = _rank(measured, min_rate=1000.0)
    slow = [c for c in fast_only if c.gpu == "L4"][0]
    assert slow.left_out.startswith("its pick reads") and "below --min-rate 1,000" in slow.left_out
    assert all(c.left_out or (c.ceiling or 0) >= 1000.0 for c in fast_only)


def test_the_command_ranks_gpu_types_with_json(tmp_path, cli):
    points = [dataclasses.replace(p, gpu_util_pct=90.0) for p in make_points()]  # a GPU at work
    path = store_with_points(tmp_path / "s.sqlite", points)
    code, out, err = cli("recommend", "--gpu", "any", "--store", path, "--json")
    assert code == 0, err
    (entry,) = json.loads(out)["rankings"]
    rows = entry["ranking"]
    assert len({r["gpu"] for r in rows}) >= 6
    assert {r["basis"] for r in rows} == {"measured", "predicted"}
    assert all(r["reason"] for r in rows if r["left_out"])
    code, _, err = cli("recommend", "--gpu", "H100", "--min-rate", "10", "--store", path)
    assert code == 2 and "--min-rate ranks GPU types: give it with --gpu any" in err


def test_the_reports_first_table_is_the_ranking_when_asked_for(tmp_path, cli):
    points = [dataclasses.replace(p, gpu_util_pct=90.0) for p in make_points()]
    path = store_with_points(tmp_path / "s.sqlite", points)
    code, _, err = cli("report", "--store", path, "--out", tmp_path / "out", "--gpu", "any")
    assert code == 0, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    (entry,) = results["gpu_ranking"]
    assert entry["workload"] == "resnet50-train" and len(entry["ranking"]) >= 6
    assert results["target"]["source"] == "measured host"  # the cards stay the measured GPU's
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.index('id="gpu-ranking"') < html.index('id="recommendations"')
    code, _, err = cli("report", "--store", path, "--out", tmp_path / "plain")
    assert code == 0 and json.loads((tmp_path / "plain" / "results.json").read_text())["gpu_ranking"] is None
