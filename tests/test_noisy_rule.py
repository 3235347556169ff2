"""The noisy flag: set above the spread an idle host gives (docs/PERFORMANCE.md, "The noisy
threshold"), by the worker's meter and, for stored points, by the store's reader."""

from __future__ import annotations

import dataclasses
import time

import pytest

from sizer.store import Store
from workloads.measure import Meter
from workloads.protocol import Result
from workloads.stats import NOISY_SPREAD

# The largest spread of 50 points of the default sweep on an idle 2-vCPU host (three passes):
# a disk-throttled preprocessing point, whose throttle hands out bytes in bursts.
IDLE_HOST_MAX_SPREAD = 0.17


def _meter_result(last_window_faster_by: float) -> Result:
    """A window of five sub-windows of ten steps, the last one faster by the given share."""
    meter = Meter(warmup_steps=0, time_budget_s=60.0, min_steps=10, min_seconds=0.0, n_windows=5, gpu=False)
    for i in range(50):
        meter.step(0.1 / (1 + last_window_faster_by) if i >= 40 else 0.1, 10.0)
    return meter.finish(Result(workload="w", framework="f", unit="u/s", profile="cpu-small"), 1)


def test_a_spread_an_idle_host_gives_is_not_noisy_and_a_busy_hosts_is():
    assert IDLE_HOST_MAX_SPREAD < NOISY_SPREAD
    idle = _meter_result(0.10)
    assert idle.spread == pytest.approx(0.10, rel=0.01) and idle.status == "ok"
    busy = _meter_result(0.30)
    assert busy.spread == pytest.approx(0.30, rel=0.01) and busy.status == "noisy"


def test_stored_points_are_read_by_the_current_threshold(tmp_path):
    """A store measured under an older, tighter threshold reads by this one; a point without a
    figure keeps its status."""
    shape = {"vcpus": 2, "ram_gib": 8.0, "disk_class": "ssd"}
    stored = [("noisy", 0.10, {}), ("noisy", 0.35, {}), ("noisy", 0.0, {"window_short": "3 of 10 steps"}),
              ("oom", 0.0, {})]
    with Store(tmp_path / "s.sqlite") as store:
        sweep = store.start_sweep(store.upsert_host({"hostname": "h", "cpu_model": "c", "threads": 2}), "sizer sweep", {})
        for i, (status, spread, extra) in enumerate(stored):
            result = Result(workload="w", framework="f", unit="images/s", profile="cpu-small", status=status,
                            throughput=0.0 if status == "oom" else 100.0, spread=spread, extra=extra,
                            steps=[[0.1, 10.0, 0.0]] * 10)
            store.add_point(sweep, f"w/{i}", shape, result, {}, time.time())
        by_key = {p.key: (p.status, p.marks) for p in store.points()}
    # A window that came out short once made a point noisy: its windows agree, so it reads ok, marked.
    assert by_key == {"w/0": ("ok", ()), "w/1": ("noisy", ()), "w/2": ("ok", ("short window (3 of 10 steps)",)),
                      "w/3": ("oom", ())}


def test_one_noisy_point_is_counted_but_warns_of_no_busy_host():
    """One noisy point is chance on an idle host (3 of 100 there); two make the warning, and with it
    the report's banner."""
    from test_report_fixtures import make_points

    from sizer.report.analysis import quality_warnings

    points = make_points(noise=0.0)
    points[3] = dataclasses.replace(points[3], status="noisy", spread=0.25)
    assert not any("flagged noisy" in w for w in quality_warnings(points, None))
    points[7] = dataclasses.replace(points[7], status="noisy", spread=0.30)
    assert any(w.startswith("2 of 37 points were flagged noisy") for w in quality_warnings(points, None))


def test_windows_that_agree_are_never_noisy_and_other_reasons_are_named():
    """A disk-throttled point whose loader rounds come slowly: its window comes out short, its rates
    agree to the percent. It is ok, marked with the reason; so is a window the hypervisor took a
    share of. The sweep's progress line and its summary row name the reason, not "noisy"."""
    from sizer.method import current_marks
    from sizer.sweep.progress import outcome_text

    meter = Meter(warmup_steps=0, time_budget_s=0.0, min_steps=80, n_windows=5, gpu=False)
    for _ in range(10):
        meter.step(0.1, 16.0)
    short = meter.finish(Result(workload="w", framework="f", unit="images/s", profile="gpu"), 16)
    assert short.spread == 0.0 and short.status == "ok"
    assert current_marks(short) == ("short window (10 of 80 steps measured)",)
    busy = dataclasses.replace(short, extra={}, counters={"steal_share": 0.12})
    assert current_marks(busy) == ("busy host (the hypervisor took 12% of its vCPUs' time)",)
    calm = dataclasses.replace(short, extra={}, counters={"steal_share": 0.01})
    assert current_marks(calm) == () and current_marks(dataclasses.replace(short, status="oom")) == ()
    line = outcome_text({"status": short.status, "throughput": 1260.0, "unit": "images/s", "spread": 0.0,
                         "marks": list(current_marks(short))})
    assert line == "ok, 1,260 images/s (spread 0.0%; short window (10 of 80 steps measured))"
    assert "noisy" not in line


def test_the_report_shows_each_points_marks_and_counts_them_apart_from_noise():
    from test_report_fixtures import make_points

    from sizer.report import build_context

    points = make_points(noise=0.0)
    points[2] = dataclasses.replace(points[2], marks=("short window (34 of 80 steps measured)",))
    points[5] = dataclasses.replace(points[5], status="noisy", spread=0.3)
    context = build_context(points, gpu="H100")
    card = context["workloads"][0]
    assert card["n_noisy"] == 1 and card["marked"] == {"short window": 1}
    rows = [r for r in card["points"] if r["marks"]]
    assert [r["marks"] for r in rows] == [["short window (34 of 80 steps measured)"]] and rows[0]["status"] == "ok"
