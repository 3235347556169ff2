"""The host's speed over a sweep: real calibrations at the start, during and at the end of real
tiny sweeps, stored as the calibration record's timeline; resumed sweeps append; a spread-out start
raises the passes of a plan that leaves them to it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from pathlib import Path

import pytest

from sizer.cli import main
from sizer.sweep import defaults
from sizer.sweep.defaults import REPEATS, Passes


@pytest.fixture(autouse=True)
def own_lock_and_short_repeats(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))
    monkeypatch.setattr(defaults, "REPEAT_BUDGET_S", 0.5)  # real repeats, shorter windows


def tiny_sweep(tmp_path: Path, *more: str, ram: str = "512M,768M") -> list[str]:
    """A real cpu-spin sweep of 1 vCPU at each RAM size, 1 s a point, with its calibration (one vCPU
    at most: no loaded calibration of the plan's largest count, only the host's every thread busy)."""
    return ["sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--ram", ram, "--disks", "local-nvme",
            "--budget", "1", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
            "--data", str(tmp_path / "data"), "--json", *more]


def stored_calibration(store: Path) -> dict:
    (raw,) = sqlite3.connect(store).execute("SELECT calibration FROM sweeps").fetchone()
    return json.loads(raw)


def check_entry(entry: dict) -> None:
    assert set(entry) == {"at_s", "ips", "median", "spread"}
    assert len(entry["ips"]) == REPEATS and all(r > 0 for r in entry["ips"])
    assert entry["median"] == sorted(entry["ips"])[1] > 0
    assert entry["spread"] == pytest.approx((max(entry["ips"]) - min(entry["ips"])) / entry["median"])


def sizer_json(*args: str) -> dict:
    """`sizer ARGS` in this process, its JSON answer (exit 0 asserted)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> tuple[Path, dict, dict, dict]:
    """One real sweep in two runs, which the tests below read: the first calibrates, then has no time
    for a point (--max-time 1s); the resumed one measures both points, with an entry of the host's
    speed before every point after its first. (store, first run's start entry, each run's summary)"""
    tmp = tmp_path_factory.mktemp("timeline")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIZER_LOCK_FILE", str(tmp / "sizer.lock"))
        patch.setattr(defaults, "REPEAT_BUDGET_S", 0.5)
        first = sizer_json(*tiny_sweep(tmp, "--max-time", "1s"))
        (start,) = stored_calibration(tmp / "s.sqlite")["timeline"]
        patch.setattr(defaults, "INTERVAL_S", 0.0)  # an entry before every point after the first
        resumed = sizer_json(*tiny_sweep(tmp, "--resume"))
    return tmp / "s.sqlite", start, first, resumed


@pytest.mark.cgroup
def test_a_sweep_measures_the_host_at_its_start_during_it_and_at_its_end(sliced):
    store, start, _, resumed = sliced
    calibration = stored_calibration(store)
    timeline = calibration["timeline"]
    run = timeline[1:]  # the resumed run's: its start, between its two points, its end
    assert len(run) == 3 and len([p for p in resumed["points"] if not p["stored"]]) == 2
    for entry in timeline:
        check_entry(entry)
    assert calibration["ips_per_vcpu"] == start["median"]  # the sweep's calibration: its first start
    assert calibration["spread"] == start["spread"]
    assert start["at_s"] < 60 and [e["at_s"] for e in timeline] == sorted({e["at_s"] for e in timeline})
    assert resumed["calibration"]["timeline"] == timeline
    # The host's fingerprint, kept with the record: its rates, every thread of the host busy at once.
    fingerprint = calibration["fingerprint"]
    assert fingerprint["kind"] == "sizer-host-fingerprint" and fingerprint["source"] == "sweep 1"
    assert fingerprint["calibration"]["one_busy"]["ips_per_vcpu"] == calibration["ips_per_vcpu"]
    assert fingerprint["memory"]["copy_gbps"] > 0 and fingerprint["cpu"]["threads"] == os.cpu_count()
    if len(os.sched_getaffinity(0)) > 1:
        assert calibration["all_busy_vcpus"] == len(os.sched_getaffinity(0))
        assert fingerprint["calibration"]["all_busy"]["ips_per_vcpu"] == calibration["ips_per_vcpu_all_busy"] > 0


@pytest.mark.cgroup
def test_a_resumed_sweep_appends_its_own_start_and_end(sliced):
    store, start, first, resumed = sliced
    assert first["left"] == 2 and first["points"] == []
    assert resumed["resumed"] and "left" not in resumed
    timeline = stored_calibration(store)["timeline"]
    assert len(timeline) == 4 and timeline[0] == start
    assert start["at_s"] < timeline[1]["at_s"] < timeline[2]["at_s"] < timeline[3]["at_s"]


@pytest.mark.cgroup
def test_a_start_calibration_that_spreads_raises_the_passes_and_a_resume_keeps_them(cli, tmp_path, monkeypatch):
    """A plan that leaves its passes to the start calibration (as on a GPU host on bare metal), on a
    host whose start spreads past the limit (here: any spread): the second pass is measured, and
    the resumed sweep chooses the same from the stored start, measuring nothing more."""
    monkeypatch.setattr(defaults, "choose_passes", lambda *_: Passes(1, 0, "test", on_spread=(2, 0)))
    monkeypatch.setattr(defaults, "START_SPREAD_LIMIT", -1.0)
    code, out, err = cli(*tiny_sweep(tmp_path, ram="512M"))
    assert code == 0, err
    summary = json.loads(out)
    assert sorted(p["pass"] for p in summary["points"]) == [1, 2]
    assert any(note.startswith("2 passes and --refine 0: the start calibration spread by") for note in summary["notes"])
    code, out, err = cli(*tiny_sweep(tmp_path, "--resume", ram="512M"))
    assert code == 0, err
    again = json.loads(out)
    assert again["skipped"] == 2 and all(p["stored"] for p in again["points"])
    assert len(stored_calibration(tmp_path / "s.sqlite")["timeline"]) == 2  # the first run's start and end
