"""The host's speed over a sweep: real calibrations at the start, during and at the end of real
tiny sweeps, stored as the calibration record's timeline; resumed sweeps append; a spread-out start
raises the passes of a plan that leaves them to it."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

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


@pytest.mark.cgroup
def test_a_sweep_measures_the_host_at_its_start_during_it_and_at_its_end(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "INTERVAL_S", 0.0)  # an entry before every point after the first
    code, out, err = cli(*tiny_sweep(tmp_path))
    assert code == 0, err
    calibration = stored_calibration(tmp_path / "s.sqlite")
    timeline = calibration["timeline"]
    assert len(timeline) == 3  # the start, between the two points, the end
    for entry in timeline:
        check_entry(entry)
    assert calibration["ips_per_vcpu"] == timeline[0]["median"]
    assert calibration["spread"] == timeline[0]["spread"]
    assert timeline[0]["at_s"] < 60 and [e["at_s"] for e in timeline] == sorted({e["at_s"] for e in timeline})
    assert json.loads(out)["calibration"]["timeline"] == timeline
    # The host's fingerprint, kept with the record: its rates, every thread of the host busy at once.
    fingerprint = calibration["fingerprint"]
    assert fingerprint["kind"] == "sizer-host-fingerprint" and fingerprint["source"] == "sweep 1"
    assert fingerprint["calibration"]["one_busy"]["ips_per_vcpu"] == calibration["ips_per_vcpu"]
    assert fingerprint["memory"]["copy_gbps"] > 0 and fingerprint["cpu"]["threads"] == os.cpu_count()
    if len(os.sched_getaffinity(0)) > 1:
        assert calibration["all_busy_vcpus"] == len(os.sched_getaffinity(0))
        assert fingerprint["calibration"]["all_busy"]["ips_per_vcpu"] == calibration["ips_per_vcpu_all_busy"] > 0


@pytest.mark.cgroup
def test_a_resumed_sweep_appends_its_own_start_and_end(cli, tmp_path):
    code, out, err = cli(*tiny_sweep(tmp_path, "--max-time", "1s"))  # calibrates, then has no time for a point
    assert code == 0, err
    assert json.loads(out)["left"] == 2
    (first,) = stored_calibration(tmp_path / "s.sqlite")["timeline"]
    code, out, err = cli(*tiny_sweep(tmp_path, "--resume"))
    assert code == 0, err
    assert json.loads(out)["resumed"] and "left" not in json.loads(out)
    timeline = stored_calibration(tmp_path / "s.sqlite")["timeline"]
    assert len(timeline) == 3 and timeline[0] == first
    for entry in timeline:
        check_entry(entry)
    assert first["at_s"] < timeline[1]["at_s"] < timeline[2]["at_s"]


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
