"""lab/benchmarks/pipeline_cost.py's pure parts: the minimal loop's counters over the window sizer
measured (from its snapshots), sizer's breakdown from its own counters, and the summary's medians
and ratio; the measuring itself needs `sizer run` twice per point (a smoke test on the CPU:
`--profile cpu-small`, docs in the script)."""

from __future__ import annotations

import json

import pytest


def test_the_loops_counters_cover_the_last_window(benchmark, tmp_path):
    pipeline_cost = benchmark("pipeline_cost")
    snaps = [{"t": t, "main_cpu_s": 0.5 * t, "waited_s": 0.1 * t, "read_s": 0.001 * n, "decode_s": 0.004 * n,
              "images": n, "opens": n, "bytes": 110_000 * n, "collate_s": 0.0002 * n}
             for t, n in ((0.0, 0), (1.0, 100), (5.0, 600), (6.0, 700))]
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(snaps))
    found = pipeline_cost.window_counters(path, 5.0)  # from t = 1 to t = 6: 600 images
    assert found["decode_ms"] == pytest.approx(4.0) and found["read_ms"] == pytest.approx(1.0)
    assert found["collate_ms"] == pytest.approx(0.2) and found["opens_per_image"] == 1.0
    assert found["bytes_per_image"] == 110_000 and found["main_cpu_cores"] == pytest.approx(0.5)
    assert pipeline_cost.window_counters(tmp_path / "absent.json", 5.0) == {}


def test_the_summary_gives_each_pipelines_median_and_their_ratio(benchmark):
    pipeline_cost = benchmark("pipeline_cost")
    sizer = pipeline_cost.sizer_counters({"decode_cpu_ms_per_image": 3.0, "loader_cpu_ms_per_sample": 3.5,
                                          "measured_samples": 1000, "read_bytes": 1.1e8, "main_cpu_cores": 0.3})
    assert sizer["read_ms"] == pytest.approx(0.5) and sizer["bytes_per_image"] == pytest.approx(1.1e5)

    def row(pipeline: str, rate: float, repeat: int, status: str = "ok") -> dict:
        return {"pipeline": pipeline, "condition": "cold", "vcpus": 8, "repeat": repeat, "status": status,
                "throughput": rate, "spread": 0.02, "cpu_ms_per_image": 4.0, "epochs": 0.5}

    rows = [row("sizer", 1800.0, 0), row("loop", 2000.0, 0), row("sizer", 1900.0, 1), row("loop", 2200.0, 1),
            row("loop", 50.0, 2, status="timeout")]  # a failed point counts for nothing
    (entry,) = pipeline_cost.summarize(rows)
    assert entry["sizer"]["throughput"] == 1850.0 and entry["loop"]["throughput"] == 2100.0
    assert entry["ratio"] == pytest.approx(1850.0 / 2100.0) and entry["loop"]["rates"] == [2000.0, 2200.0]
