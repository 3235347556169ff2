"""A sweep's progress in a log: the calibration announced before it runs, then one plain line per
finished point, when the output is not a terminal (as under pytest's capture)."""

from __future__ import annotations

import json
import re

import pytest

POINT_LINE = re.compile(
    r"^point (?P<index>\d+)/2 cpu-spin @ 1 vCPU / (?P<ram>\d+) GiB / local-nvme: (?P<status>ok|noisy), "
    r"[\d,.]+ iterations/s \(spread [\d.]+%(?:; .+)?\) in \d+ s; elapsed \d+:\d\d, ETA \d+:\d\d$"
)


@pytest.fixture(autouse=True)
def own_lock_and_short_calibrations(tmp_path, monkeypatch):
    from sizer.sweep import defaults

    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))
    monkeypatch.setattr(defaults, "REPEAT_BUDGET_S", 0.5)  # real calibrations, shorter windows


@pytest.mark.cgroup
def test_a_logged_sweep_says_it_calibrates_then_prints_one_plain_line_per_point(cli, tmp_path):
    code, out, err = cli(
        "sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "1G,2G", "--disks", "local-nvme",
        "--profile", "cpu-small", "--budget", "1", "--store", str(tmp_path / "s.sqlite"),
        "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"), "--json",
    )
    assert code == 0, err
    assert len(json.loads(out)["points"]) == 2
    lines = err.splitlines()
    calibrating = next(i for i, line in enumerate(lines) if line.startswith("calibrating the CPU: cpu-calibrate"))
    points = [(i, POINT_LINE.match(line)) for i, line in enumerate(lines) if line.startswith("point ")]
    assert [m["index"] for _, m in points if m] == ["1", "2"], lines
    assert len(points) == 2 and calibrating < points[0][0]
    assert sorted(m["ram"] for _, m in points if m) == ["1", "2"]
    assert "━" not in err  # no live bar in a log
