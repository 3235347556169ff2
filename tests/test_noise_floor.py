"""lab/benchmarks/noise_floor.py: the spread of points per host and workload, read from stores built
here through the real Store API, opened read-only."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from sizer.store import Store
from workloads.protocol import Result
from workloads.stats import NOISY_SPREAD

ROOT = Path(__file__).resolve().parent.parent
IDLE_SPREADS = (0.2, 0.8, 1.2)  # shares of the noisy threshold: one point over it


def _store(path: Path, host: dict, points: list[tuple[str, float, bool]]) -> Path:
    """One sweep of `host` with points (workload, spread, window short), ten measured steps each."""
    with Store(path) as store:
        sweep = store.start_sweep(store.upsert_host(host), "sizer sweep", {})
        for i, (workload, spread, short) in enumerate(points):
            status = "noisy" if spread > 0.05 or short else "ok"
            steps = [[0.1, 10.0, 1.0]] * 2 + [[0.1, 10.0, 0.0]] * 10
            result = Result(workload=workload, framework="f", unit="images/s", profile="gpu", status=status,
                            throughput=100.0, spread=spread, steps=steps, counters={"warmup_steps": 2},
                            extra={"window_short": "5 of 10 steps measured"} if short else {})
            store.add_point(sweep, f"{workload}/{i}", {"vcpus": 2, "ram_gib": 8.0, "disk_class": "ssd"}, result, {},
                            time.time())
        store.finish_sweep(sweep)
    return path


@pytest.fixture
def stores(tmp_path):
    gpu = _store(tmp_path / "gpu.sqlite", {"hostname": "a", "cpu_model": "c", "threads": 16, "gpus": ["NVIDIA H200"]},
                 [("train", s, False) for s in (0.01, 0.02, 0.03, 0.08, 0.30)] + [("infer", 0.02, True)])
    idle = _store(tmp_path / "idle.sqlite", {"hostname": "b", "cpu_model": "c", "threads": 2, "gpus": []},
                  [("train", s * NOISY_SPREAD, False) for s in IDLE_SPREADS])
    return gpu, idle


def test_the_table_gives_each_hosts_spreads_per_workload_and_what_the_threshold_flags(benchmark, stores, capsys):
    noise_floor = benchmark("noise_floor")
    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in stores]
    assert noise_floor.main([*map(str, stores), "--threshold", "0.1", "--json"]) == 0
    rows = {(r["host"], r["workload"]): r for r in json.loads(capsys.readouterr().out)}
    train = rows[("1x H200, 16 vCPUs", "train")]
    assert train["points"] == 5 and train["median"] == pytest.approx(0.03) and train["max"] == pytest.approx(0.30)
    assert train["p95"] == pytest.approx(0.30 - 0.2 * (0.30 - 0.08)) and train["median_steps"] == 10
    assert train["flagged"] == 1  # only 30% is over 10%
    infer = rows[("1x H200, 16 vCPUs", "infer")]
    assert infer["flagged"] == 0 and infer["short"] == 1  # a short window is counted apart: its windows may agree
    assert rows[("1x H200, 16 vCPUs", "all")]["points"] == 6
    assert rows[("no GPU, 2 vCPUs", "train")]["flagged"] == sum(s * NOISY_SPREAD > 0.1 for s in IDLE_SPREADS)
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in stores] == digests  # read, never written
    assert not list(stores[0].parent.glob("*.sqlite-*"))  # nor a -wal or -shm file left beside them

    assert noise_floor.main([str(stores[1])]) == 0
    text = capsys.readouterr().out
    assert f"over {NOISY_SPREAD:.0%}" in text.splitlines()[0]  # the threshold in force
    assert "no GPU, 2 vCPUs" in text and " 1 (33%)" in text


def test_without_a_store_it_prints_its_usage(benchmark, capsys):
    with pytest.raises(SystemExit) as stop:
        benchmark("noise_floor").main([])
    assert stop.value.code == 2
    assert "usage: python lab/benchmarks/noise_floor.py STORE [STORE ...]" in capsys.readouterr().err
