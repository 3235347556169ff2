"""The GPU host's tools (lab/gpu/): what a lease call does on a machine with no campaign yet or near the
end of its hold, and that every script parses and calls only scripts that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_a_lease_call_without_steps_on_a_fresh_machine_starts_nothing(tmp_path):
    # The call meant to follow a running campaign, made on a machine that replaced the last one.
    env = {"PATH": "/usr/bin:/bin", "RUNS": str(tmp_path), "WAIT": "1", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "lab/gpu/lease.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no steps given" in done.stdout
    assert not (tmp_path / "campaign.pid").exists() and not (tmp_path / "campaign.done").exists()


def test_a_lease_call_near_the_end_of_the_hold_waits_less(tmp_path):
    # A machine held 1,709 of its 1,800 s: a 540 s wait would outlast it, and the copy would be lost.
    campaign = subprocess.Popen(["sleep", "300"])  # stands in for a campaign still running
    try:
        (tmp_path / "campaign.pid").write_text(f"{campaign.pid}\n")
        env = {"PATH": "/usr/bin:/bin", "RUNS": str(tmp_path), "WAIT": "540", "HOME": str(tmp_path),
               "UPTIME_S": "1709", "OUT": str(tmp_path / "out")}
        # A call that waited its 540 s would run into this timeout: it returns after its 1 s.
        done = subprocess.run(["bash", "lab/gpu/lease.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "this call waits at most 1s: the machine goes back 91s from now" in done.stdout
        assert campaign.poll() is None  # returned while the campaign runs on
        assert (tmp_path / "out" / "runs.tgz").exists() and "campaign running" in done.stdout
    finally:
        campaign.kill()
        campaign.wait()
    early = subprocess.run(["bash", "lab/gpu/lease.sh"], cwd=ROOT, env=dict(env, UPTIME_S="60", WAIT="1"),
                           capture_output=True, text=True, timeout=60)
    assert early.returncode == 2 and "waits at most" not in early.stdout  # the campaign has gone: no steps


SHELL_SCRIPTS = sorted(ROOT.glob("lab/gpu/*.sh")) + [ROOT / "lab" / "benchmarks" / "gpu_sweep.sh"]


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_every_gpu_script_parses_and_calls_only_scripts_of_this_repository_that_exist(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    called = set(re.findall(r"(?<![\w/.-])((?:lab|tests|examples)/[\w/.-]+\.(?:py|sh))", script.read_text()))
    assert called, f"{script.name} names no script"  # every one sources lab/gpu/setup.sh at least
    assert [path for path in sorted(called) if not (ROOT / path).is_file()] == []
