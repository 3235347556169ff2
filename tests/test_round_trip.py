"""What sizer writes, it reads back: points (a rate of 0, huge rates, names with commas, quotes,
line breaks, unicode and terminal markup) go through the store, points.csv and results.json and
come back unchanged; a rate of 0 is an error, never a noisy point with an infinite spread."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizer.points import MAX_VCPUS, read_points_csv, write_points_csv
from sizer.report import build_context, write_context
from sizer.store import Store
from workloads import stats
from workloads.measure import Meter
from workloads.protocol import Result

DISKS = ("local-nvme", "ssd", "standard")
# Names a person or a file from elsewhere may give: csv's and markup's special characters, quotes,
# line breaks, unicode; no NUL (neither csv nor a terminal carries one) and no lone surrogate. A
# workload is named by its text without surrounding blanks (sizer.variants.Variant), as sizer names it.
NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
               max_size=24).filter(lambda name: name.strip() == name)
NAME = st.one_of(NAME, st.sampled_from(["[/]", "[bold red]FAKE[/bold red]", 'a,"b",c', "naïve 测试 🚀", "x\r\ny"]))
UNIT = st.one_of(st.sampled_from(["images/s", "tokens/s", "samples/s"]),
                 st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,8}/s", fullmatch=True))
RATE = st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e300, allow_nan=False, allow_infinity=False))


@st.composite
def measured_points(draw):
    """(workload, vcpus, ram GiB, disk class, rate, unit, spread) of 1 to 3 points, each its own shape
    (a points file keeps a row repeated verbatim once: two of one shape and figure are one)."""
    vcpus = draw(st.lists(st.integers(1, MAX_VCPUS), min_size=1, max_size=3, unique=True))
    rows = []
    for v in vcpus:
        rate = draw(RATE)
        spread = 0.0 if rate == 0 else draw(st.floats(min_value=0.0, max_value=5.0))
        rows.append((draw(NAME), v, draw(st.floats(0.0625, 4096.0)), draw(st.sampled_from(DISKS)), rate, draw(UNIT),
                     spread))
    return rows


def _stored(tmp_path, rows):
    store_path = tmp_path / "s.sqlite"
    store_path.unlink(missing_ok=True)
    with Store(store_path) as store:
        host = store.upsert_host({"hostname": "round-trip", "cpu_model": "test", "threads": 2, "gpus": []})
        sweep = store.start_sweep(host, "sizer sweep", {"test": True})
        for i, (name, vcpus, ram, disk, rate, unit, spread) in enumerate(rows):
            status = "error" if rate == 0 else ("noisy" if stats.is_noisy(spread) else "ok")
            result = Result(workload=name, framework="test", unit=unit, profile="cpu-small", status=status,
                            throughput=rate, spread=spread, config={"input": "files"})
            shape = {"vcpus": vcpus, "ram_gib": ram, "disk_class": disk}
            store.add_point(sweep, f"point-{i}", shape, result, {}, 0.0)
        return store.points(sweep)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=measured_points())
def test_points_come_back_unchanged_through_the_store_and_points_csv(tmp_path, rows):
    points = _stored(tmp_path, rows)
    assert [(p.workload, p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.unit, p.spread) for p in points] == rows
    assert [p.status for p in points] == [
        "error" if rate == 0 else ("noisy" if stats.is_noisy(spread) else "ok") for *_, rate, _, spread in rows]
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    again = read_points_csv(csv_path, warn=lambda line: None)
    assert [p.to_row() for p in again] == [p.to_row() for p in points]


# A whole report per example (a fit and charts): fewer examples.
@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=measured_points())
def test_points_come_back_unchanged_through_a_report_s_results_json_and_points_csv(tmp_path, rows):
    points = _stored(tmp_path, rows)
    out = tmp_path / "out"
    write_context(build_context(points), points, out)
    written = json.loads((out / "results.json").read_text(encoding="utf-8"))
    shown = {(wl["workload"], row["vcpus"], row["ram_gib"], row["disk_class"], row["measured"], row["spread"],
              row["status"]) for wl in written["workloads"] for row in wl.get("points") or []}
    assert shown == {(p.workload, p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.spread, p.status) for p in points}
    again = read_points_csv(out / "points.csv", warn=lambda line: None)
    assert [p.to_row() for p in again] == [p.to_row() for p in points]
    assert not list(out.glob("*.tmp"))


def test_a_window_that_counted_nothing_is_an_error_with_no_spread():
    meter = Meter(warmup_steps=1, time_budget_s=1.0, min_steps=2, n_windows=5, gpu=False)
    for _ in range(12):
        meter.step(0.05, 0.0)
    result = meter.finish(Result(workload="w", framework="test", unit="samples/s", profile="cpu-small"), vcpus=1)
    assert (result.status, result.throughput, result.spread) == ("error", 0.0, 0.0)
    assert "a rate of 0 is no measurement" in result.error
    assert math.isfinite(result.spread)
