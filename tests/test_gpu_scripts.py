"""The GPU host's campaign scripts (benchmarks/gpu/): what they do on a machine with no campaign yet."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_lease_call_without_steps_on_a_fresh_machine_starts_nothing(tmp_path):
    # The call meant to follow a running campaign, made on a machine that replaced the last one.
    env = {"PATH": "/usr/bin:/bin", "RUNS": str(tmp_path), "WAIT": "1", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "benchmarks/gpu/lease.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no steps given" in done.stdout
    assert not (tmp_path / "campaign.pid").exists() and not (tmp_path / "campaign.done").exists()


def test_a_lease_call_near_the_end_of_the_hold_waits_less(tmp_path):
    # A machine held 1,702 of its 1,800 s: a 540 s wait would outlast it, and the copy would be lost.
    import time

    campaign = subprocess.Popen(["sleep", "120"])  # stands in for a campaign still running
    try:
        (tmp_path / "campaign.pid").write_text(f"{campaign.pid}\n")
        env = {"PATH": "/usr/bin:/bin", "RUNS": str(tmp_path), "WAIT": "540", "HOME": str(tmp_path),
               "UPTIME_S": "1702", "OUT": str(tmp_path / "out")}
        t0 = time.monotonic()
        done = subprocess.run(["bash", "benchmarks/gpu/lease.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        waited = time.monotonic() - t0
        assert done.returncode == 0, done.stdout + done.stderr
        assert "this call waits at most 8s: the machine goes back 98s from now" in done.stdout
        assert 8 <= waited < 40 and campaign.poll() is None  # returned on time; the campaign runs on
        assert (tmp_path / "out" / "runs.tgz").exists() and "campaign running" in done.stdout
    finally:
        campaign.kill()
        campaign.wait()
    early = subprocess.run(["bash", "benchmarks/gpu/lease.sh"], cwd=ROOT, env=dict(env, UPTIME_S="60", WAIT="1"),
                           capture_output=True, text=True, timeout=60)
    assert early.returncode == 2 and "waits at most" not in early.stdout  # the campaign has gone: no steps


def test_worker_start_refuses_a_host_without_a_gpu_in_one_line():
    import sys

    import torch

    if torch.cuda.is_available():
        import pytest

        pytest.skip("a GPU is visible: the script would measure")
    done = subprocess.run([sys.executable, "benchmarks/worker_start.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "worker_start: error: needs a CUDA GPU (none is visible here)"


def test_worker_start_refuses_an_unknown_part_before_looking_for_a_gpu():
    import sys

    done = subprocess.run([sys.executable, "benchmarks/worker_start.py", "--parts", "train,warp"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("worker_start: error: --parts takes import, context, train, infer "
                                   "(got 'train,warp')")


def test_worker_start_prints_a_stored_run_again_without_a_gpu():
    import sys

    done = subprocess.run([sys.executable, "benchmarks/worker_start.py", "--from",
                           "examples/h100-sweep/worker_start-AF.json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("NVIDIA H100 80GB HBM3, PyTorch 2.11.0+cu130, persistence mode on")
    # AF's median steady rate without autotuning, as stored.
    assert any(line.startswith("steady images/s, autotuning off") and "3987.06" in line
               for line in done.stdout.splitlines()), done.stdout
