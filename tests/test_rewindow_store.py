"""benchmarks/rewindow_store.py --whole-window: stored figures re-derived from their raw steps."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from workloads import stats

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "h200-sweep" / "sizer.sqlite"


def test_whole_window_rederives_each_figure_from_its_steps_once(tmp_path, benchmark):
    store = tmp_path / "s.sqlite"
    shutil.copy(EXAMPLE, store)
    conn = sqlite3.connect(store)
    # Every loader-fed point made stale: no marker, a figure of 1.0 image/s.
    rows = conn.execute("SELECT id, result FROM points WHERE workload='resnet50-infer' AND status IN ('ok','noisy')").fetchall()
    for point_id, raw in rows:
        result = json.loads(raw)
        result["extra"].pop("whole_window", None)
        result["throughput"] = 1.0
        conn.execute("UPDATE points SET throughput=1.0, result=? WHERE id=?", (json.dumps(result), point_id))
    conn.commit()
    bench = benchmark("rewindow_store")
    changed = bench.whole_window(store)
    assert len(changed) >= len(rows) > 10
    for point_id, _ in rows:
        throughput, raw = conn.execute("SELECT throughput, result FROM points WHERE id=?", (point_id,)).fetchone()
        result = json.loads(raw)
        workers = result["extra"]["loader_workers"]
        assert bench.round_steps_of(result) == workers >= 2
        assert throughput == result["throughput"] == stats.window_rate(result["steps"], workers) > 100
        assert result["extra"]["whole_window"]["throughput"] == 1.0
    conn.close()
    assert bench.whole_window(store) == []


def test_synthetic_input_and_single_workers_count_single_steps(benchmark):
    bench = benchmark("rewindow_store")
    assert bench.round_steps_of({"extra": {"loader_workers": 8}, "config": {"input": "synthetic"}}) == 1
    assert bench.round_steps_of({"extra": {"loader_workers": 1}, "config": {"input": "files"}}) == 1
    assert bench.round_steps_of({"extra": {}, "config": {}}) == 1
    assert bench.round_steps_of({"extra": {"loader_workers": 6}, "config": {"input": "files"}}) == 6
