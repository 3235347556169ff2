"""`sizer colocate` and `sizer sweep --colocate` on this host's real cgroups, in the cpu-small test
mode: two cpu-spin jobs sharing one instance of 2 vCPUs, each on its own core with half the RAM and
a disk throttle at half the class's caps, started together and lined up; each names its partner, the
same job alone on its half is measured once; the report's shared option; a SIGKILL mid-pair and
`--resume` lose nothing and measure nothing twice. Refusals before any work need no cgroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_parallel_sweep import SIZER, groups_of, processes_of, start_and_wait_for_two_in_flight
from test_sweep import stored

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.model import group_points
from sizer.store import Store
from sizer.sweep.gpu_share import check_sharing, mps_daemon_running
from workloads.measure import Meter
from workloads.pairing import ENV_DIR, ENV_JOB, ENV_WAIT, PairSync, marker
from workloads.protocol import Result

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a pair's two halves need two CPUs")
PAIR = "cpu-spin+cpu-spin:processes=1"


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def base(tmp_path: Path) -> list[str]:
    return ["--store", str(tmp_path / "s.sqlite"), "--data", str(tmp_path / "data"), "--profile", "cpu-small",
            "--budget", "1.5", "--json"]


def extra(row) -> dict:
    return json.loads(row["result"])["extra"]


@pytest.mark.cgroup
@pytest.mark.slow
def test_two_jobs_share_one_instance_each_on_its_half_named_with_its_partner(cli, tmp_path, backend):
    code, out, err = cli("colocate", "cpu-spin", "cpu-spin:processes=1", "--vcpus", "2", "--ram", "512M", "--disk",
                         "standard", *base(tmp_path))
    assert code == 0, err
    rows = {r["key"]: r for r in stored(tmp_path / "s.sqlite")}
    pair = "cpu-spin+cpu-spin:processes=1/cpu-small/2vcpu-0.5gib-standard/time"
    shared = [rows[f"{pair}#job1"], rows[f"{pair}#job2"]]
    alone = [rows["cpu-spin/cpu-small/2vcpu-0.5gib-standard/time#alone"],
             rows["cpu-spin:processes=1/cpu-small/2vcpu-0.5gib-standard/time#alone"]]
    assert len(rows) == 4
    marks = [extra(r)["colocated"] for r in shared]
    assert [(m["job"], m["partner"]) for m in marks] == [("cpu-spin", "cpu-spin:processes=1"),
                                                          ("cpu-spin:processes=1", "cpu-spin")]
    assert [extra(r)["colocated"]["partner"] for r in alone] == ["", ""]
    # Half the instance each: one core of its own, half the RAM, half the disk class's caps.
    cpus = [set(extra(r)["cpus"]) for r in shared]
    assert cpus[0].isdisjoint(cpus[1]) and all(len(c) == 1 for c in cpus)
    standard = load_disk_classes()["standard"]
    for row in shared + alone:
        enforced = extra(row)["enforcement"]["details"]
        assert enforced["memory.limit_in_bytes"] == str(256 * 2**20)
        assert enforced["blkio.throttle.read_bps_device"].split()[-1] == str(standard.read_bps // 2)
        assert extra(row)["shape"] == {"vcpus": 1, "ram_gib": 0.25, "disk_class": "standard"}
    # Started together, each waited for the other and ran on until the other's window closed.
    syncs = [extra(r)["pair_sync"] for r in shared]
    assert all(s["partner_ready"] for s in syncs) and any(s["partner_done"] for s in syncs)
    assert shared[0]["started"] < shared[1]["finished"] and shared[1]["started"] < shared[0]["finished"]
    assert all(a["started"] >= max(r["finished"] for r in shared) - 1e-3 for a in alone)  # alone: after the pair

    with Store(tmp_path / "s.sqlite") as store:
        points = store.points()
    assert {(p.job, p.partner) for p in points if p.partner} == {("cpu-spin", "cpu-spin:processes=1"),
                                                                  ("cpu-spin:processes=1", "cpu-spin")}
    assert group_points(points) == {}  # no point of a shared instance is fitted as one job's
    (record,) = json.loads(out)["pairs"]
    assert record["r_ab"] > 0 and record["r_ba"] > 0 and isinstance(record["shared_faster"], bool)
    assert record["r_ab"] == pytest.approx(record["jobs"][0]["alone"] / record["jobs"][0]["shared"], rel=1e-3)


@pytest.mark.cgroup
@pytest.mark.slow
def test_a_sweep_killed_mid_pair_resumes_without_losing_or_measuring_again(tmp_path):
    store = tmp_path / "s.sqlite"
    args = ["sweep", "--workloads", "cpu-spin", "--vcpus", "2", "--ram", "512M", "--disks", "local-nvme",
            "--colocate", f"cpu-spin+cpu-spin,{PAIR}", "--no-calibrate", "--out", str(tmp_path / "out"),
            *base(tmp_path)]
    # The grid (cpu-spin, and cpu-spin:processes=1 which its pair adds), the first pair and cpu-spin alone:
    # five points; then the second pair's two jobs run.
    first = start_and_wait_for_two_in_flight(args, store, 5)
    first.send_signal(signal.SIGKILL)
    first.wait()
    first.communicate()
    before = stored(store)
    pair_jobs = [r for r in before if "#job" in r["key"]]
    assert len(before) in (5, 7) and len(pair_jobs) % 2 == 0  # a pair's two jobs are stored together or not at all
    deadline = time.monotonic() + 15
    while (groups_of(first.pid) or processes_of(first.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert groups_of(first.pid) == set() and processes_of(first.pid) == []

    second = subprocess.run([*SIZER, *args, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert summary["resumed"] and summary["skipped"] == len(before)
    after = stored(store)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 8  # none lost, none twice: cpu-spin alone once for both pairs
    assert after[: len(before)] == before  # committed points were not measured again
    assert sum(k.endswith("#alone") for k in keys) == 2
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    shared = report["shared"]
    assert [p["key"] for p in shared["pairs"]] == sorted(p["key"] for p in summary["pairs"])
    assert all(p["option"]["cheaper"] or p["option"]["why_not"] for p in shared["pairs"])
    shown = [p for w in report["workloads"] for p in w["points"]]
    assert shown and all(p["vcpus"] == 2 for p in shown)  # the grid's shape alone: no pair's half (1 vCPU) is fitted
    assert 'id="shared"' in (tmp_path / "out" / "report.html").read_text()


# ------------------------------------------------------------------ refused before any work
@pytest.mark.parametrize("args,message", [
    (("sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--colocate", "cpu-spin+cpu-spin"),
     "an instance of 1 vCPUs cannot be halved between two jobs"),
    (("colocate", "cpu-spin", "cpu-spin", "--vcpus", "2", "--share", "mps"), "--share mps needs a GPU"),
    (("colocate", "cpu-spin", "cpu-spin", "--vcpus", "2", "--share", "spatial"), "--share 'spatial': choose time"),
    (("colocate", "cpu-spin", "nothing-such", "--vcpus", "2"), "unknown workload 'nothing-such'"),
    (("sweep", "--workloads", "cpu-spin", "--vcpus", "2", "--colocate", "cpu-spin"), "give two workloads joined by '+'"),
], ids=["odd-vcpus", "mps-without-gpu", "bad-share", "unknown", "one-job"])
def test_a_pair_the_host_cannot_measure_exits_2_before_any_work(cli, tmp_path, args, message):
    code, _, err = cli(*args, "--store", str(tmp_path / "s.sqlite"), "--data", str(tmp_path / "data"),
                       "--profile", "cpu-small")
    assert code == 2 and message in err, err
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "data").exists()


def test_the_dry_run_shows_each_pair_its_halves_and_the_time_it_adds(cli, tmp_path):
    plain = ("sweep", "--workloads", "cpu-spin", "--vcpus", "2", "--ram", "512M", "--disks", "local-nvme,standard",
             "--store", str(tmp_path / "s.sqlite"), "--data", str(tmp_path / "data"), "--profile", "cpu-small",
             "--no-calibrate", "--dry-run", "--json")
    _, alone, _ = cli(*plain)
    code, out, err = cli(*plain, "--colocate", PAIR)
    assert code == 0, err
    planned, without = json.loads(out), json.loads(alone)
    (pair,) = planned["pairs"]
    assert pair["jobs"] == ["cpu-spin", "cpu-spin:processes=1"] and pair["sharing"] == "time"
    assert pair["instance"] == {"vcpus": 2, "ram_gib": 0.5, "disk_class": "local-nvme"}  # the fastest disk listed
    assert pair["half"]["vcpus"] == 1 and pair["half"]["ram_gib"] == 0.25 and pair["half"]["disk_share"] == 0.5
    assert planned["plan"]["workloads"] == ["cpu-spin", "cpu-spin:processes=1"]  # the pair's job is sized alone too
    assert planned["estimated_seconds"] > without["estimated_seconds"] and without["pairs"] == []


# ------------------------------------------------------------------ the pair's meters (no cgroup, no sleep)
def paired(monkeypatch, folder: Path, job: int = 1) -> None:
    monkeypatch.setenv(ENV_DIR, str(folder))
    monkeypatch.setenv(ENV_JOB, str(job))
    monkeypatch.setenv(ENV_WAIT, "600")  # never reached: the partner's marks are there or come from the test


def test_a_paired_meter_starts_with_its_partner_runs_its_budget_and_holds_until_the_partners_window_closed(
        tmp_path, monkeypatch):
    paired(monkeypatch, tmp_path)
    marker(tmp_path, "ready", 2).touch()
    steady = Meter(warmup_steps=2, time_budget_s=3600.0, min_steps=5, min_seconds=0.5, gpu=False)
    for _ in range(40):
        steady.step(0.1, 10.0)
    assert (tmp_path / "ready-1").exists() and not steady.done()  # steady, yet a pair's window runs its budget

    meter = Meter(warmup_steps=2, time_budget_s=1e-9, min_steps=5, gpu=False)
    for _ in range(7):
        meter.step(0.1, 10.0)
    assert not meter.done() and (tmp_path / "done-1").exists()  # its window closed; the partner's has not
    meter.step(5.0, 1.0)  # run on, unmeasured
    marker(tmp_path, "done", 2).touch()
    assert meter.done()
    result = meter.finish(Result(workload="w", framework="", unit="samples/s", profile="cpu-small"), 1)
    assert result.throughput == pytest.approx(100.0) and len(result.steps) == 7
    sync = result.extra["pair_sync"]
    assert (sync["job"], sync["partner_ready"], sync["partner_done"]) == (1, True, True)


def test_a_partner_gone_holds_nobody(tmp_path, monkeypatch):
    paired(monkeypatch, tmp_path, job=2)
    marker(tmp_path, "gone", 1).touch()  # it failed before its first step
    sync = PairSync.from_env()
    sync.start()
    sync.window_closed()
    assert sync.may_stop() and sync.record()["partner_ready"] is False and sync.record()["partner_done"] is False
    assert PairSync.from_env({ENV_DIR: str(tmp_path), ENV_JOB: "3"}) is None  # only jobs 1 and 2 make a pair
    assert Meter(warmup_steps=0, time_budget_s=1.0, gpu=False)._pair is not None
    monkeypatch.delenv(ENV_DIR)
    assert Meter(warmup_steps=0, time_budget_s=1.0, gpu=False)._pair is None  # a point alone: no pairing


def test_mps_is_taken_only_where_the_host_allows_it(tmp_path):
    assert check_sharing("mps", "gpu", daemon=True, control="") == "mps"  # a running daemon: the jobs join it
    assert check_sharing("mps", "gpu", daemon=False, control="/usr/bin/nvidia-cuda-mps-control") == "mps"
    with pytest.raises(SizerError, match="no MPS control daemon runs on this host and nvidia-cuda-mps-control is not"):
        check_sharing("mps", "gpu", daemon=False, control="")
    assert check_sharing("time", "gpu", daemon=False, control="") == "time"
    (tmp_path / "41").mkdir()
    (tmp_path / "41" / "comm").write_text("python3\n")
    assert not mps_daemon_running(tmp_path)
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "comm").write_text("nvidia-cuda-mps\n")  # the kernel keeps 15 characters of the name
    assert mps_daemon_running(tmp_path)
