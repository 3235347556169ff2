"""lab/benchmarks/cross_host.py on two small stores built here through the real Store API: host B's
CPU is 1.2 times host A's (every vCPU busy) and B's figures are A's carried over, so the translated
prediction must meet B's figures; A measured in a parallel sweep with its load given takes the load
out; the knees it prints move with the CPU; a store without the variant is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer.store import Store
from workloads.protocol import Result

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "lab" / "benchmarks" / "cross_host.py"
CEILING = 4000.0


def _result(rate: float, *, synthetic: bool = False, loaded: bool = False, bottleneck: str = "cpu") -> Result:
    extra = {"dataset_gib": 5.0, **({"parallel": {"slots": 4, "slot": 1, "gpu": 1}} if loaded else {})}
    return Result(workload="resnet50-train", framework="pytorch", unit="images/s", profile="gpu", status="ok",
                  throughput=rate, spread=0.01, bottleneck=bottleneck,
                  counters={"measured_samples": 5 * rate, "measured_seconds": 5.0, "read_bytes": 0.11e6 * 5 * rate,
                            "peak_rss_bytes": 3 * 2**30, "gpu_name": "NVIDIA H200"},
                  config={"input": "synthetic" if synthetic else "files", "decode": "cpu"}, extra=extra)


def store(path: Path, per_vcpu: float, calibration: dict, vcpus=(2, 4, 8, 12), loaded: float | None = None,
          threads: int = 16, whole: float | None = None) -> Path:
    """One sweep of one host: resnet50-train at `per_vcpu` images/s per vCPU up to the ceiling on local
    NVMe with ample RAM (x `loaded` and marked as beside three other slots, where given)."""
    with Store(path) as opened:
        host = opened.upsert_host({"hostname": path.stem, "cpu": {"model": f"CPU {path.stem}", "hardware_threads": threads},
                                   "gpus": ["NVIDIA H200"]})
        sweep = opened.start_sweep(host, "sizer sweep", {"plan": path.stem})
        opened.set_calibration(sweep, calibration)
        shape = {"ram_gib": 32.0, "disk_class": "local-nvme"}
        opened.add_point(sweep, "ceiling", {"vcpus": max(vcpus), **shape}, _result(CEILING, synthetic=True), {}, time.time())
        for v in vcpus:
            rate = min(CEILING, per_vcpu * v) * (loaded or 1.0)
            opened.add_point(sweep, f"v{v}", {"vcpus": v, **shape},
                             _result(rate, loaded=loaded is not None, bottleneck="cpu" if rate < CEILING else "gpu"),
                             {}, time.time())
        if whole is not None:  # 4 GPUs at 8 vCPUs each, each GPU at `whole` of one alone
            node = _result(4 * min(CEILING, per_vcpu * 8) * whole)
            node.extra["shape"] = {"vcpus": 32, "gpus": 4, **shape}  # a sweep records the shape's GPUs there
            opened.add_point(sweep, "whole", {"vcpus": 32, **shape}, node, {}, time.time())
        opened.finish_sweep(sweep)
    return path


def run(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cross")
    a = store(folder / "a.sqlite", 200.0, {"ips_per_vcpu": 320.0, "ips_per_vcpu_loaded": 300.0, "loaded_vcpus": 16})
    b = store(folder / "b.sqlite", 240.0, {"ips_per_vcpu": 330.0, "ips_per_vcpu_loaded": 360.0, "loaded_vcpus": 16})
    loaded = store(folder / "a_loaded.sqlite", 200.0, {"ips_per_vcpu": 320.0, "ips_per_vcpu_loaded": 300.0,
                                                        "loaded_vcpus": 16}, loaded=0.8, threads=64)
    return a, b, loaded


def test_a_translated_sweep_meets_the_other_hosts_figures_in_both_directions(hosts):
    a, b, _ = hosts
    code, out, err = run("--a", str(a), "--b", str(b), "--both", "--json")
    assert code == 0, err
    forward, backward = json.loads(out)
    t = forward["translation"]
    assert (forward["from"], forward["to"]) == ("a", "b")
    assert t["basis"] == "all vCPUs busy" and t["factor"] == pytest.approx(1.2)
    assert [r["shape"] for r in t["rows"]] == [f"{v} vCPU / 32 GiB / local-nvme" for v in (2, 4, 8, 12)]
    for row in t["rows"]:  # B's figures are A's at 1.2 times the CPU: the prediction meets them
        assert row["ratio"] == pytest.approx(1.0, abs=0.03) and row["within_5pct"]
        assert row["low"] <= row["predicted"] <= row["high"]
    assert backward["translation"]["factor"] == pytest.approx(1 / 1.2)
    assert all(r["ratio"] == pytest.approx(1.0, abs=0.03) for r in backward["translation"]["rows"])
    # Not translating misses B's CPU-bound figures by the 20% the CPUs differ.
    none = next(alt for alt in forward["alternatives"] if alt["basis"] == "none")
    assert none["rows"][0]["ratio"] == pytest.approx(1.2, abs=0.03) and not none["rows"][0]["within_5pct"]
    # The knee, 95% of 4,000: 3,800 / 200 = 19 vCPUs on A; 3,800 / 240 = 15.8, so 16 for B and A translated.
    assert forward["knee"]["a_translated"]["vcpus"] == forward["knee"]["b_own"]["vcpus"] == 16
    assert backward["knee"]["b_own"]["vcpus"] in (19, 20)  # at the bound itself, the fit's last digit decides


def test_a_loaded_sweep_is_unloaded_before_it_is_compared_with_figures_alone(hosts):
    _, b, loaded = hosts
    code, out, err = run("--a", str(loaded), "--b", str(b), "--json")
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["a_load"] == {"factor": None, "source": "none measured: 1", "fit_loaded": True}
    assert result["translation"]["rows"][0]["ratio"] == pytest.approx(1 / 0.8, abs=0.04)  # the load was not taken out
    code, out, err = run("--a", str(loaded), "--b", str(b), "--json", "--a-load", "0.8")
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["a_load"]["factor"] == 0.8 and result["a_load"]["source"] == "given"
    assert all(r["ratio"] == pytest.approx(1.0, abs=0.04) for r in result["translation"]["rows"])


def test_a_whole_node_point_is_predicted_with_the_load_given(hosts, tmp_path):
    a, _, _ = hosts
    b = store(tmp_path / "b_node.sqlite", 240.0, {"ips_per_vcpu": 330.0, "ips_per_vcpu_loaded": 360.0,
                                                   "loaded_vcpus": 16}, whole=0.75, threads=64)
    code, out, err = run("--a", str(a), "--b", str(b), "--json", "--b-load", "0.75")
    assert code == 0, err
    (node,) = [r for r in json.loads(out)[0]["translation"]["rows"] if "4 GPUs" in r["shape"]]
    assert node["b"] == pytest.approx(4 * 1920 * 0.75) and node["ratio"] == pytest.approx(1.0, abs=0.04)


def test_a_store_without_the_variant_is_refused_in_one_line(hosts):
    a, b, _ = hosts
    code, _, err = run("--a", str(a), "--b", str(b), "--workload", "resnet50-infer")
    assert code != 0 and "no variant 'resnet50-infer'" in err and len(err.strip().splitlines()) == 1
