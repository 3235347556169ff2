"""`sizer sweep --strategy adaptive`: its options refused before any work, a real CPU sweep that
stops at --max-points and, resumed with a larger budget, makes the choices an uninterrupted sweep
makes, and the report's record of what was measured, what predicted and why it stopped."""

from __future__ import annotations

import json
import sqlite3

import pytest


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


@pytest.mark.parametrize("extra,message", [
    (["--strategy", "random"], "--strategy wants one of grid, adaptive, got 'random'"),
    (["--strategy", "adaptive", "--max-points", "0"], "--max-points wants 1 or more"),
    (["--max-points", "5"], "--max-points caps an adaptive sweep"),
    (["--strategy", "adaptive", "--passes", "0"], "--passes wants 1 to 9 measurements of each shape, got 0"),
    (["--strategy", "adaptive", "--refine", "3"], "leave out --refine"),
])
def test_bad_strategy_options_exit_2_before_any_work(cli, tmp_path, extra, message):
    code, out, err = cli("sweep", "--workloads", "cpu-spin", "--store", str(tmp_path / "s.sqlite"), *extra)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.sqlite").exists()


def test_the_report_finds_each_variants_own_adaptive_record():
    from sizer.report.adaptive import adaptive_summary, record_for

    cpu = {"workload": "resnet50-train", "settings": {}, "stopped": "stable", "why": "held"}
    gpu = {"workload": "resnet50-train", "settings": {"decode": "gpu"}, "stopped": "max points", "why": "cap"}
    records = [cpu, gpu]
    assert record_for("resnet50-train", records) is cpu
    assert record_for("resnet50-train[decode=cpu]", records) is cpu  # no setting of the entry says otherwise
    assert record_for("resnet50-train[decode=gpu]", records) is gpu
    assert record_for("resnet50-infer", records) is None
    summary = adaptive_summary(dict(gpu, measured=[{"shape": "2 vCPU / 8 GiB / ssd", "measurements": 2}],
                                    predicted=["4 vCPU / 8 GiB / ssd"], grid_shapes=2, points=2))
    assert summary["text"].startswith("1 of the grid's 2 shapes measured (2 points), the other 1 predicted")
    assert "--max-points was reached: cap" in summary["text"]


def _keys(store) -> list[str]:
    conn = sqlite3.connect(store)
    try:
        return [row[0] for row in conn.execute("SELECT key FROM points ORDER BY id")]
    finally:
        conn.close()


@pytest.mark.cgroup
def test_a_stopped_adaptive_sweep_resumes_with_the_same_choices(cli, tmp_path):
    def sweep(store: str, *extra: str) -> dict:
        code, out, err = cli("sweep", "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", "256M,512M,768M",
                             "--disks", "local-nvme", "--budget", "1", "--no-calibrate", "--strategy", "adaptive",
                             "--passes", "2",
                             "--store", str(tmp_path / store), "--out", str(tmp_path / f"out-{store}"),
                             "--data", str(tmp_path / "data"), "--json", *extra)
        assert code in (0, 3), err
        return json.loads(out)

    whole = sweep("whole.sqlite", "--max-points", "4")
    assert len(whole["points"]) == 4
    record = whole["adaptive"]["cpu-spin"]
    assert record["stopped"] == "max points" and record["points"] == 4
    assert len(record["measured"]) + len(record["predicted"]) == 6
    assert [m["measurements"] for m in record["measured"]] == [2, 2]  # each shape taken in two passes

    first = sweep("cut.sqlite", "--max-points", "2")
    assert first["adaptive"]["cpu-spin"]["stopped"] == "max points"
    resumed = sweep("cut.sqlite", "--max-points", "4", "--resume")
    assert resumed["resumed"]
    assert _keys(tmp_path / "cut.sqlite") == _keys(tmp_path / "whole.sqlite")

    results = json.loads((tmp_path / "out-whole.sqlite" / "results.json").read_text())
    card = next(wl for wl in results["workloads"] if wl["workload"].startswith("cpu-spin"))
    assert card["adaptive"]["stopped"] == "max points"
    assert len(card["adaptive"]["measured"]) == len(record["measured"])
    assert "predicted by the model" in card["adaptive"]["text"]
    html = (tmp_path / "out-whole.sqlite" / "report.html").read_text()
    assert "Adaptive sweep:" in html


def test_the_dry_run_of_an_adaptive_sweep_says_what_it_may_take(cli, tmp_path):
    args = ["sweep", "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", "256M,512M", "--disks", "local-nvme",
            "--budget", "1", "--no-calibrate", "--store", str(tmp_path / "s.sqlite"), "--dry-run"]
    code, out, _ = cli(*args, "--json")
    grid = json.loads(out)
    assert code == 0 and grid["adaptive"] is None
    code, out, _ = cli(*args, "--strategy", "adaptive", "--max-points", "2", "--json")
    outline = json.loads(out)["adaptive"]
    assert code == 0 and outline["entries"] == [{"workload": "cpu-spin", "grid_shapes": 4, "at_most": 2}]
    assert 0 < outline["at_most_seconds"] < grid["estimated_seconds"]
    code, out, _ = cli(*args, "--strategy", "adaptive", "--max-points", "2")
    words = " ".join(out.split())
    assert code == 0 and "adaptive: measures the grid above" in words
    assert "each once, again where its windows spread or the pick turns on it" in words
    assert "cpu-spin: at most 2 measurements of 4 shapes" in words
    code, out, _ = cli(*args, "--strategy", "adaptive", "--passes", "2")
    assert code == 0 and "each 2 times" in " ".join(out.split())
    assert "1 pass" not in out  # the adaptive strategy chooses its passes as it goes
    code, out, _ = cli(*args)
    assert code == 0 and "1 pass" in out
    assert not (tmp_path / "s.sqlite").exists()
