"""A host's fingerprint and the translation of a sweep to another host's CPU: `sizer calibrate --quick`
measured here for real (its JSON, read back), the fingerprint a store's calibration record makes,
the translation's factor and words, and `sizer recommend` / `sizer report` with
`--target-calibration FILE` on a store built here."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from simulate import simulate_points
from test_report import store_with_points
from test_report_fixtures import make_points

from sizer.catalog import load_catalog
from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.fingerprint import (
    FINGERPRINT_VERSION,
    HostFingerprint,
    fingerprint_of_record,
    read_fingerprint,
    translate,
    write_fingerprint,
)
from sizer.model import fit_points
from sizer.sizing import SizingTerms, size
from sizer.store import Store
from sizer.sweep.fingerprint import memory_bandwidth


def fingerprint(one: float | None = 300.0, every: float | None = 280.0, vcpus: int = 16, cpu: str = "CPU A",
                threads: int = 16) -> HostFingerprint:
    return HostFingerprint(cpu_model=cpu, threads=threads, one_busy_ips=one, all_busy_ips=every, all_busy_vcpus=vcpus,
                           hostname="h", method="PIL decode")


# ---------------------------------------------------------------- measuring one (quick mode)
@pytest.mark.cgroup
def test_calibrate_quick_writes_a_versioned_fingerprint_of_this_host(cli, tmp_path):
    path = tmp_path / "fp.json"
    code, out, err = cli("calibrate", "--quick", "--out", str(path), "--json")
    assert code == 0, err
    data = json.loads(path.read_text())
    assert data == json.loads(out)
    assert data["kind"] == "sizer-host-fingerprint" and data["version"] == FINGERPRINT_VERSION and data["quick"] is True
    assert data["cpu"]["threads"] == os.cpu_count() and data["cpu"]["model"]
    assert data["calibration"]["one_busy"]["ips_per_vcpu"] > 0
    assert "RandomResizedCrop" in data["calibration"]["method"]
    if len(os.sched_getaffinity(0)) > 1:  # every vCPU busy at once: all of this host's
        assert data["calibration"]["all_busy"]["vcpus"] == len(os.sched_getaffinity(0))
        assert data["calibration"]["all_busy"]["ips_per_vcpu"] > 0
    assert data["memory"]["copy_gbps"] > 0 and data["memory"]["bytes"] == 16 * 2**20
    back = read_fingerprint(path)
    assert back.to_json() == data and back.source == "sizer calibrate"


def test_memory_bandwidth_counts_the_bytes_read_and_written_over_the_clock():
    ticks = iter([0.0, 0.5, 1.0, 1.25])  # two copies: 0.5 s, then 0.25 s
    found = memory_bandwidth(nbytes=2**20, repeats=2, clock=lambda: next(ticks))
    assert found["bytes"] == 2**20 and found["repeats"] == [pytest.approx(2 * 2**20 / 0.5 / 1e9),
                                                           pytest.approx(2 * 2**20 / 0.25 / 1e9)]
    assert found["copy_gbps"] == max(found["repeats"])  # the best: the slower copy met other work


def test_a_bad_fingerprint_file_is_refused_in_one_line(cli, tmp_path):
    points = make_points(noise=0.0)
    store = store_with_points(tmp_path / "s.sqlite", points)
    cases = {"absent.json": None, "text.json": "not json", "other.json": json.dumps({"kind": "something"}),
             "newer.json": json.dumps({"kind": "sizer-host-fingerprint", "version": 99}),
             "empty.json": json.dumps({"kind": "sizer-host-fingerprint", "version": 1, "cpu": {"threads": 4}})}
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        code, _, err = cli("recommend", "--store", str(store), "--target-calibration", str(tmp_path / name))
        assert code == 2 and len(err.strip().splitlines()) == 1, (name, err)
    code, _, err = cli("report", "--store", str(store), "--out", str(tmp_path / "r"), "--target-calibration", "-3")
    assert code == 2 and "--target-calibration" in err and not (tmp_path / "r").exists()


# ---------------------------------------------------------------- from a store's record; the translation
def test_a_store_record_makes_a_fingerprint_with_its_stored_one_first():
    host = {"hostname": "vm", "cpu": {"model": "Xeon", "hardware_threads": 64, "smt": False}}
    old = fingerprint_of_record({"ips_per_vcpu": 333.0, "ips_per_vcpu_loaded": 306.0, "loaded_vcpus": 16}, host, "sweep 1")
    assert (old.one_busy_ips, old.all_busy_ips, old.all_busy_vcpus, old.threads) == (333.0, 306.0, 16, 64)
    newer = fingerprint_of_record({"ips_per_vcpu": 333.0, "ips_per_vcpu_loaded": 306.0, "loaded_vcpus": 16,
                                   "ips_per_vcpu_all_busy": 290.0, "all_busy_vcpus": 64}, host)
    assert (newer.all_busy_ips, newer.all_busy_vcpus) == (290.0, 64)  # the whole host busy beats the plan's largest
    stored = fingerprint(one=350.0, every=320.0).to_json()
    assert fingerprint_of_record({"ips_per_vcpu": 1.0, "fingerprint": stored}, host).all_busy_ips == 320.0
    assert fingerprint_of_record({}, host) is None


def test_the_translation_is_the_ratio_of_the_every_vcpu_busy_rates():
    measured, target = fingerprint(300.0, 250.0), fingerprint(330.0, 300.0, cpu="CPU B")
    t = translate(measured, 300.0, target)
    assert t.factor == pytest.approx(300.0 / 250.0) and t.basis == "all vCPUs busy"
    assert "CPU A" in t.words() and "CPU B" in t.words() and "x 1.2" in t.words()
    # A target without the loaded rate: the one-vCPU rates, said as such.
    t = translate(measured, 300.0, replace(target, all_busy_ips=None))
    assert t.factor == pytest.approx(1.1) and t.basis == "one vCPU busy" and "the target has no rate" in t.note
    # A number is a one-vCPU rate, as before fingerprints; nothing given: the measuring host's CPU.
    assert translate(measured, 300.0, 450.0).factor == pytest.approx(1.5)
    none = translate(measured, 300.0, None)
    assert none.factor == 1.0 and none.basis == "none" and "the measuring host's CPU" in none.words()
    assert translate(None, None, 450.0).factor == 1.0  # a sweep without a calibration cannot be translated


def _fit(disk_classes, per_vcpu: float = 250.0):
    truth = {"gpu_ceiling": 4000.0, "per_vcpu": per_vcpu, "usl_sigma": 0.0, "usl_kappa": 0.0,
             "bytes_per_sample": 0.05, "footprint_gib": 3.0, "dataset_gib": 10.0}
    points = simulate_points("w", truth, (2, 4, 8, 12, 16), {"local-nvme": None, "standard": 140.0}, (32.0,),
                             gpu_model="H200")
    points = [replace(p, calibration_ips=300.0) for p in points]
    return points, fit_points(points, disk_classes)["w"]


def test_sizing_translates_the_knee_and_the_cpu_term_through_the_terms():
    disk_classes = load_disk_classes()
    points, fit = _fit(disk_classes)
    terms = SizingTerms(tuple(load_catalog(gpu="H200")), "H200", disk_classes,
                        measured_host=fingerprint(300.0, 250.0))
    here = size(points, fit, terms)
    assert here.translation.basis == "none" and here.knee == 16  # 250 / vCPU up to 4,000: 16 vCPUs
    faster = size(points, fit, replace(terms, target_calibration=fingerprint(300.0, 500.0, cpu="CPU B")))
    assert faster.translation.factor == pytest.approx(2.0) and faster.knee == 8  # twice the rate: half the vCPUs
    assert any("CPU term scaled by 2" in n for n in faster.recommendation.notes)


# ---------------------------------------------------------------- the commands
def _store_with_fingerprint(path: Path) -> Path:
    store = store_with_points(path, make_points(noise=0.0), calibration=150.0)
    with Store(store) as opened:
        sweep = opened.sweeps()[0]
        record = {**sweep.calibration, "fingerprint": fingerprint(150.0, 120.0, cpu="Test CPU 9000", threads=32).to_json()}
        opened.set_calibration(sweep.id, record)
    return store


def test_recommend_and_report_say_which_host_measured_and_which_cpu_the_answer_is_for(cli, tmp_path):
    store = _store_with_fingerprint(tmp_path / "s.sqlite")
    target = tmp_path / "target.json"
    write_fingerprint(fingerprint(200.0, 180.0, cpu="Target CPU", threads=192), target)
    code, out, err = cli("recommend", "--store", str(store), "--gpu", "H100", "--json")
    assert code == 0, err
    own = json.loads(out)["recommendations"][0]["cpu"]
    assert own["basis"] == "none" and own["factor"] == 1.0 and "Test CPU 9000" in own["measured"]
    assert "the measuring host's CPU" in own["words"]
    code, out, err = cli("recommend", "--store", str(store), "--gpu", "H100", "--json", "--target-calibration", str(target))
    assert code == 0, err
    rec = json.loads(out)["recommendations"][0]
    assert rec["cpu"]["basis"] == "all vCPUs busy" and rec["cpu"]["factor"] == pytest.approx(1.5)
    assert "Target CPU" in rec["cpu"]["answer_for"] and (rec["cpu"]["measured_rate"], rec["cpu"]["target_rate"]) == (120, 180)
    assert rec["knee"]["vcpus"] < json.loads(cli("recommend", "--store", str(store), "--gpu", "H100", "--json")[1])[
        "recommendations"][0]["knee"]["vcpus"]
    code, out, err = cli("report", "--store", str(store), "--gpu", "H100", "--out", str(tmp_path / "r"),
                         "--target-calibration", str(target))
    assert code == 0, err
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["cpu_target"]["kind"] == "fingerprint" and "Target CPU" in results["cpu_target"]["note"]
    assert results["workloads"][0]["cpu"]["factor"] == pytest.approx(1.5)
    assert "--target-calibration" in results["reproduce"]["command"]
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Target CPU" in html and "the CPU term x 1.5" in html
    cli("report", "--store", str(store), "--gpu", "H100", "--out", str(tmp_path / "own"))
    assert "the answer is for the measuring host&#39;s CPU" in (tmp_path / "own" / "report.html").read_text()


def test_a_sizing_terms_number_below_zero_is_refused():
    with pytest.raises(SizerError):
        SizingTerms((), "H200", load_disk_classes(), target_calibration=-1.0)
    SizingTerms((), "H200", load_disk_classes(), target_calibration=fingerprint())  # a fingerprint passes
