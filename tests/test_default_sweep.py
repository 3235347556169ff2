"""The default sweep: its grid on a GPU host (simulated host facts) and without a GPU, its passes
by the host (virtual machine, the start calibration's spread), the dry run's plan and estimate,
and the detection of a virtual machine from real files and a real `systemd-detect-virt`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sizer.sweep.plan as plan_mod
from sizer.probe import hypervisor
from sizer.shapes import HostCpus
from sizer.sweep import SweepOptions, plan_sweep
from sizer.sweep.data import dataset_bytes_estimate
from sizer.sweep.defaults import START_SPREAD_LIMIT, gpu_footprint_gib, gpu_vcpu_levels
from sizer.units import GIB


def smt_host(threads: int) -> HostCpus:
    """A host of threads/2 cores with two SMT siblings each, numbered as Linux does (i, i + n/2)."""
    half = threads // 2
    return HostCpus(tuple((i, i + half) for i in range(half)))


@pytest.fixture
def gpu_host(monkeypatch):
    """Simulate a GPU host: `threads` hardware threads in SMT pairs, 128 GiB, a GPU that NVML sees,
    and the hypervisor the probe finds (None: bare metal)."""

    def make(threads: int = 16, vm: str | None = "kvm", gpu: bool = True) -> None:
        monkeypatch.setattr(plan_mod, "gpu_present", lambda: gpu)
        monkeypatch.setattr(plan_mod, "host_cpus", lambda: smt_host(threads))
        monkeypatch.setattr(plan_mod, "host_ram_bytes", lambda: 128 * GIB)
        monkeypatch.setattr(plan_mod, "hypervisor", lambda: vm)

    return make


def dry_run(cli, tmp_path: Path, *more: str) -> dict:
    code, out, err = cli("sweep", "--dry-run", "--json", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"), *more)
    assert code == 0, err
    return json.loads(out)


def test_default_sweep_on_a_16_thread_gpu_vm_spans_2_to_16_in_two_passes_within_30_minutes(cli, tmp_path, gpu_host):
    gpu_host(16, vm="kvm")
    data = dry_run(cli, tmp_path)
    points = data["points"]
    assert data["profile"] == "gpu" and {p["workload"] for p in points} == {"resnet50-train"}
    assert sorted({p["vcpus"] for p in points}) == [2, 4, 8, 12, 16]
    assert {p["disk_class"] for p in points} == {"local-nvme", "ssd", "standard"}
    low, high = sorted({p["ram_gib"] for p in points})
    # The low level cannot cache the dataset beside the workload at 16 vCPUs; the high one can.
    dataset_gib = dataset_bytes_estimate("imagenet", "gpu") / GIB
    assert low - gpu_footprint_gib(16) < dataset_gib <= high - gpu_footprint_gib(16)
    ceilings = [p for p in points if p["ceiling"]]
    assert len(ceilings) == 1 and ceilings[0]["vcpus"] == 16
    assert sorted({p["pass"] for p in points}) == [1, 2] and len(points) == 1 + 2 * 30
    assert data["refine"] == {"shapes_per_workload": 3, "at_most": 3}
    assert data["plan"]["passes"] == 2 and "virtual machine (kvm)" in data["plan"]["passes_reason"]
    assert data["calibration"] and data["estimated_seconds"] <= 30 * 60
    assert data["estimate"] == f"about {round(data['estimated_seconds'] / 60)} minutes"


def test_on_bare_metal_one_pass_unless_the_start_calibration_spreads(cli, tmp_path, gpu_host):
    gpu_host(16, vm=None)
    data = dry_run(cli, tmp_path)
    assert {p["pass"] for p in data["points"]} == {1} and data["refine"] is None
    spread = data["plan"]["if_start_spreads"]
    assert (spread["passes"], spread["refine"], spread["points"]) == (2, 3, 61)
    assert data["estimated_seconds"] < spread["estimated_seconds"] <= 30 * 60
    plan = plan_sweep(SweepOptions(data_dir=tmp_path / "d", out_dir=tmp_path / "o"))
    assert plan.config["passes"] == "auto"  # a resumed sweep chooses again from its stored start
    assert not plan.apply_start_spread(START_SPREAD_LIMIT) and plan.passes == 1
    assert plan.apply_start_spread(START_SPREAD_LIMIT + 0.01)
    assert (plan.passes, plan.refine, len(plan.points)) == (2, 3, 61)
    assert "spread by 11%" in plan.passes_reason


def test_given_passes_stand_on_a_vm(cli, tmp_path, gpu_host):
    gpu_host(16, vm="kvm")
    data = dry_run(cli, tmp_path, "--passes", "1", "--vcpus", "4,16")
    assert {p["pass"] for p in data["points"]} == {1} and data["refine"] is None
    assert "if_start_spreads" not in data["plan"]


def test_default_sweep_on_32_threads_includes_all_32(cli, tmp_path, gpu_host):
    gpu_host(32, vm="kvm")
    data = dry_run(cli, tmp_path)
    assert sorted({p["vcpus"] for p in data["points"]}) == [2, 4, 8, 16, 24, 32]
    assert len({p["ram_gib"] for p in data["points"]}) == 2


def test_a_host_without_a_gpu_keeps_its_small_default_in_one_pass(cli, tmp_path, gpu_host):
    gpu_host(16, vm="kvm", gpu=False)
    data = dry_run(cli, tmp_path)
    points = data["points"]
    assert data["profile"] == "cpu-small"
    assert {p["workload"] for p in points} == {"resnet50-train", "resnet50-infer", "imagenet-preprocess", "ptb-lstm-train"}
    assert {p["vcpus"] for p in points} == {1, 2} and len({p["ram_gib"] for p in points}) == 1
    assert {p["disk_class"] for p in points} == {"local-nvme", "standard"}
    assert data["plan"]["passes"] == 1 and {p["pass"] for p in points} == {1} and "if_start_spreads" not in data["plan"]
    assert data["estimated_seconds"] <= 15 * 60


def test_the_dry_run_states_the_plan_and_the_estimate_in_words(cli, tmp_path, gpu_host):
    gpu_host(16, vm="kvm")
    code, out, err = cli("sweep", "--dry-run", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "plan: resnet50-train x vCPUs 2, 4, 8, 12, 16 x RAM 6, 11.5 GiB x disks local-nvme, ssd, standard" in text
    assert "2 passes, then --refine 3 (a virtual machine (kvm))" in text
    minutes = int(text.split("estimated time: about ")[1].split()[0])
    assert 10 <= minutes <= 30


@given(st.integers(1, 64), st.booleans())
def test_vcpu_levels_run_from_2_to_the_whole_host_in_whole_cores(threads, smt):
    if smt and threads % 2:
        threads += 1
    cores = smt_host(threads).cores if smt else tuple((i,) for i in range(threads))
    levels = gpu_vcpu_levels(HostCpus(cores))
    assert levels == sorted(set(levels)) and levels[-1] == threads
    assert levels[0] == min(2, threads)
    assert all(v % 2 == 0 for v in levels) if smt else True
    assert len(levels) <= 2 + threads.bit_length()


# ---------------------------------------------------------------- a virtual machine or not
def _fake_dmi(tmp_path: Path, product: str, vendor: str) -> Path:
    dmi = tmp_path / "dmi"
    dmi.mkdir()
    (dmi / "product_name").write_text(product + "\n")
    (dmi / "sys_vendor").write_text(vendor + "\n")
    return dmi


def _cpuinfo(tmp_path: Path, name: str, flags: str) -> Path:
    path = tmp_path / name
    path.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n")
    return path


def _detect_virt(tmp_path: Path, answer: str, code: int) -> str:
    """A stand-in `systemd-detect-virt` (a real executable) that prints `answer` for --vm."""
    tool = tmp_path / "systemd-detect-virt"
    tool.write_text(f'#!/bin/sh\n[ "$1" = "--vm" ] && echo {answer} && exit {code}\nexit 3\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(tool)


def test_a_virtual_machine_is_told_by_the_tool_then_the_firmware_then_the_cpu_flag(tmp_path):
    flagged = _cpuinfo(tmp_path, "flagged", "fpu sse2 hypervisor lahf_lm")
    plain = _cpuinfo(tmp_path, "plain", "fpu sse2 lahf_lm")
    metal = _fake_dmi(tmp_path, "p5.48xlarge", "Amazon EC2")
    assert hypervisor(tool=_detect_virt(tmp_path, "kvm", 0), dmi=tmp_path / "none", cpuinfo=plain) == "kvm"
    # The tool's "none" is bare metal, whatever the CPU flag says (a container on bare metal).
    assert hypervisor(tool=_detect_virt(tmp_path, "none", 1), dmi=metal, cpuinfo=flagged) is None
    assert hypervisor(tool=None, dmi=metal, cpuinfo=plain) == "Amazon EC2 p5.48xlarge"
    (metal / "product_name").write_text("p4d.metal\n")
    assert hypervisor(tool=None, dmi=metal, cpuinfo=plain) is None
    assert hypervisor(tool=None, dmi=tmp_path / "none", cpuinfo=flagged) == "hypervisor CPU flag"
    assert hypervisor(tool=None, dmi=tmp_path / "none", cpuinfo=plain) is None


def test_this_host_is_judged_as_systemd_detect_virt_judges_it():
    import shutil
    import subprocess

    tool = shutil.which("systemd-detect-virt")
    if tool is None:
        pytest.skip("systemd-detect-virt is not installed")
    answer = subprocess.run([tool, "--vm"], capture_output=True, text=True).stdout.strip()
    assert hypervisor() == (None if answer == "none" else answer)
