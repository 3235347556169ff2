"""`sizer sweep`, `sizer run` and `sizer disks verify` on this host's real cgroups.

Sweeps here use the diagnostic workloads (cpu-spin, mem-hog, disk-read) so that each point takes a
second or two; the real workloads go through the very same runner.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer import cache
from sizer.disks import fio_available
from sizer.limits import list_groups

ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    """Each test has its own host lock, so that sweeps of other test runs on this host do not
    collide with it (the lock itself is tested below)."""
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def sizer_groups_of(pid: int) -> list[str]:
    return [g for g in list_groups() if f"/sizer-{pid}-" in g]


def stored(store: Path) -> list[dict]:
    conn = sqlite3.connect(store)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT id, sweep_id, key, status, started, finished, result FROM points ORDER BY id")
        return [dict(r) for r in rows]
    except sqlite3.OperationalError:  # the store is being created right now
        return []
    finally:
        conn.close()


# ---------------------------------------------------------------- bad input
BAD_INPUTS = [
    (["sweep", "--workloads", "no-such-workload"], "unknown workload 'no-such-workload'"),
    (["sweep", "--workloads", "cpu-spin", "--vcpus", "1,4096"], "4096 vCPUs > "),
    (["sweep", "--workloads", "cpu-spin", "--ram", "1,8192G"], "8192 GiB RAM > "),
    (["sweep", "--workloads", "cpu-spin", "--disks", "local-nvme,floppy"], "unknown disk class 'floppy'"),
    (["sweep", "--workloads", "cpu-spin", "--profile", "laptop"], "unknown profile 'laptop'"),
    (["sweep", "--workloads", "cpu-spin", "--vcpus", "1,x"], "'x' is not a positive integer"),
    (["run", "no-such-workload", "--vcpus", "1", "--ram", "1G"], "unknown workload"),
    (["run", "cpu-spin", "--vcpus", "4096", "--ram", "1G"], "larger than this host"),
    (["run", "cpu-spin", "--ram", "1G", "--set", "novalue"], "--set wants key=value"),
    (["disks", "verify", "--class", "floppy", "/tmp"], "unknown disk class 'floppy'"),
]


@pytest.mark.parametrize("args,message", BAD_INPUTS, ids=[" ".join(a[:2]) + ":" + m[:20] for a, m in BAD_INPUTS])
def test_bad_input_exits_2_with_one_line_before_any_work(cli, tmp_path, args, message):
    data, out = tmp_path / "data", tmp_path / "out"
    extra = ["--data", str(data)] if args[0] in ("sweep", "run") else []
    extra += ["--out", str(out)] if args[0] == "sweep" else []
    code, stdout, stderr = cli(*args, *extra)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sizer: error: ") and message in lines[0], stderr
    assert stdout == ""
    assert not data.exists() and not out.exists()  # nothing was prepared or written
    assert not Path(os.environ["SIZER_LOCK_FILE"]).exists()  # refused before even taking the host lock
    assert sizer_groups_of(os.getpid()) == []


def test_data_path_that_is_a_file_or_not_on_a_disk_is_refused(cli, tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    code, _, err = cli("sweep", "--workloads", "cpu-spin", "--data", str(afile), "--dry-run")
    assert code == 2 and "is not a directory" in err
    if Path("/dev/shm").is_dir():
        code, _, err = cli("sweep", "--workloads", "cpu-spin", "--disks", "standard", "--data", "/dev/shm/sizer-x", "--dry-run")
        assert code == 2 and "not on a block device" in err


# ---------------------------------------------------------------- plan and dry run
def test_dry_run_lists_points_and_estimates_time_without_measuring(cli, tmp_path):
    code, out, err = cli(
        "sweep", "--workloads", "cpu-spin,mem-hog", "--vcpus", "1,2", "--ram", "256M", "--disks", "local-nvme,standard",
        "--profile", "cpu-small", "--budget", "2", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"),
        "--dry-run", "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert sorted(p["key"] for p in data["points"])[:4] == [  # workload by workload, each grid shuffled
        "cpu-spin/cpu-small/1vcpu-0.25gib-local-nvme", "cpu-spin/cpu-small/1vcpu-0.25gib-standard",
        "cpu-spin/cpu-small/2vcpu-0.25gib-local-nvme", "cpu-spin/cpu-small/2vcpu-0.25gib-standard",
    ] == sorted(p["key"] for p in data["points"][:4])
    assert len(data["points"]) == 8
    # Each point costs at least its budget; the whole at least the sum of its points.
    assert all(p["estimated_s"] >= 2 for p in data["points"])
    assert data["estimated_seconds"] >= sum(p["estimated_s"] for p in data["points"])
    assert not (tmp_path / "o").exists()


def test_default_grid_fits_this_host_and_the_time_target(cli, tmp_path):
    code, out, err = cli("sweep", "--dry-run", "--json", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"))
    assert code == 0, err
    data = json.loads(out)
    names = {p["workload"] for p in data["points"]}
    assert names == {"resnet50-train", "resnet50-infer", "imagenet-preprocess", "ptb-lstm-train"}
    threads = len(os.sched_getaffinity(0))
    assert {p["vcpus"] for p in data["points"]} == {v for v in (1, 2) if v <= threads}
    assert len({p["ram_gib"] for p in data["points"]}) == 1
    assert {p["disk_class"] for p in data["points"]} == {"local-nvme", "standard"}
    ceilings = sorted(p["workload"] for p in data["points"] if p["ceiling"])
    # Training and inference each measure their GPU ceiling with input=synthetic; the others have none.
    assert ceilings == ["resnet50-infer", "resnet50-train"]
    if data["profile"] == "cpu-small":
        assert data["estimated_seconds"] < 15 * 60


# ---------------------------------------------------------------- measuring
def sweep_args(tmp_path: Path, *more: str) -> list[str]:
    return [
        "sweep", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"),
        "--no-calibrate", "--json", *more,
    ]


@pytest.mark.cgroup
def test_oom_point_is_a_result_and_the_sweep_goes_on(cli, tmp_path):
    code, out, err = cli(*sweep_args(
        tmp_path, "--workloads", "mem-hog:limit_factor=2,cpu-spin", "--vcpus", "1", "--ram", "128M",
        "--disks", "local-nvme", "--budget", "1",
    ))
    assert code == 0, err
    data = json.loads(out)
    by_name = {p["workload"]: p for p in data["points"]}
    assert by_name["mem-hog"]["status"] == "oom"
    assert by_name["cpu-spin"]["status"] in ("ok", "noisy") and by_name["cpu-spin"]["throughput"] > 0
    rows = stored(tmp_path / "s.sqlite")
    assert [r["status"] for r in rows] == ["oom", by_name["cpu-spin"]["status"]]
    assert sizer_groups_of(os.getpid()) == []


LOCK_HOLDER = """
import os, time
from sizer.lock import HostLock
with HostLock():
    print("locked", flush=True)
    time.sleep(60)
"""


def test_second_sweep_exits_2_naming_the_lock(cli, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, out, err = cli(*sweep_args(tmp_path, "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M",
                                         "--disks", "local-nvme", "--budget", "1"))
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    assert os.environ["SIZER_LOCK_FILE"] in err and f"pid {holder.pid}" in err
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.cgroup
@pytest.mark.slow
def test_sigkilled_sweep_resumes_without_measuring_again_or_losing_points(tmp_path):
    args = sweep_args(tmp_path, "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M",
                      "--disks", "local-nvme,standard,ssd", "--budget", "1")
    store = tmp_path / "s.sqlite"
    first = subprocess.Popen([*SIZER, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        # Wait until a point is committed and the next one is running in its group.
        while time.monotonic() < deadline:
            if store.exists() and len(stored(store)) >= 1 and sizer_groups_of(first.pid):
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.1)
        else:
            pytest.fail("the sweep never committed a point")
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    before = stored(store)
    assert 1 <= len(before) < 3
    deadline = time.monotonic() + 15
    while sizer_groups_of(first.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sizer_groups_of(first.pid) == [], "the group's watchdog removes it before any new start"

    second = subprocess.run([*SIZER, *args, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert summary["resumed"] and summary["skipped"] == len(before)
    assert not any(f"/sizer-{first.pid}-" in r for r in summary["leftovers_removed"])
    after = stored(store)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 3  # none lost, none twice
    assert after[: len(before)] == before  # committed points were not measured again
    assert {r["sweep_id"] for r in after} == {before[0]["sweep_id"]}
    assert sizer_groups_of(first.pid) == []


@pytest.mark.cgroup
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stop_cleanly_keeping_committed_points(tmp_path, signum):
    args = sweep_args(tmp_path, "--workloads", "cpu-spin", "--vcpus", "1,2", "--ram", "256M",
                      "--disks", "local-nvme", "--budget", "1")
    store = tmp_path / "s.sqlite"
    proc = subprocess.Popen([*SIZER, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if store.exists() and len(stored(store)) >= 1 and sizer_groups_of(proc.pid):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert len(stored(store)) == 1  # the committed point stays; the one in flight is not stored
    assert sizer_groups_of(proc.pid) == []  # its group went with it, worker included


@pytest.fixture(scope="module")
def file_dataset(tmp_path_factory) -> Path:
    """416 MiB in 26 files: about 3 s at the standard class's 140 MB/s, long enough for its pacing."""
    root = tmp_path_factory.mktemp("files")
    for i in range(26):
        (root / f"part-{i:02d}.bin").write_bytes(os.urandom(16 * 2**20))
    return root


@pytest.mark.cgroup
def test_every_point_starts_cold_for_its_dataset(cli, file_dataset):
    total = cache.total_bytes(file_dataset)
    reads = []
    for _ in range(2):
        for f in file_dataset.iterdir():  # the dataset is fully cached before each run ...
            f.read_bytes()
        assert cache.resident_bytes(file_dataset) >= 0.99 * total
        code, out, err = cli("run", "disk-read", "--vcpus", "1", "--ram", "1G", "--disk", "local-nvme",
                             "--data", str(file_dataset), "--budget", "5", "--json")
        assert code == 0, err
        data = json.loads(out)
        assert data["status"] in ("ok", "noisy"), data["error"]
        reads.append(data["counters"]["cgroup_read_bytes"])
    # ... and still each run read at least 90% of it from the device (the group's blkio counters).
    assert all(r >= 0.9 * total for r in reads), (reads, total)


@pytest.mark.cgroup
def test_a_disk_bound_point_behind_standard_reads_no_faster_than_its_cap(cli, file_dataset):
    cap = 140.0  # MB/s, the canonical standard class
    code, out, err = cli("run", "disk-read", "--vcpus", "1", "--ram", "1G", "--disk", "standard",
                         "--data", str(file_dataset), "--budget", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] in ("ok", "noisy"), data["error"]
    disk = data["enforced"]["disk"]
    assert ("blkio.throttle" in disk or "io.max" in disk) and str(int(cap * 1e6)) in disk, disk  # the cap, read back
    assert 0 < data["throughput"] <= 1.03 * cap, data["window_rates"]
    # How near the cap a busy shared disk lets it come is a measurement of this host
    # (lab/benchmarks/speed_comparisons.py disk-caps); near it, the point says the disk bound it.
    if data["throughput"] >= 0.8 * cap:
        assert data["bottleneck"] == "disk"


# ---------------------------------------------------------------- disks verify
@pytest.mark.cgroup
@pytest.mark.skipif(not fio_available(), reason="fio is not installed (make test installs it)")
def test_disks_verify_reads_under_each_class_throttle_and_judges_its_tolerance(cli, tmp_path):
    target = tmp_path / "disk"
    target.mkdir()
    for cls, cap in (("standard", 140.0), ("ssd", 300.0), ("local-nvme", None)):
        code, out, err = cli("disks", "verify", "--class", cls, str(target), "--size", "128M", "--seconds", "1", "--json")
        r = json.loads(out)
        assert r["cap_mbps"] == cap and r["measured_mbps"] > 0 and r["cgroup_read_bytes"] > 0, r
        if cap is None:
            assert r["within_tolerance"] is None and code == 0
            assert "no throttle" in r["enforcement"]["disk"]
            continue
        # The throttle, read back from its group, and never a rate above the cap.
        assert str(int(cap * 1e6)) in r["enforcement"]["disk"], r["enforcement"]
        assert r["measured_mbps"] <= 1.15 * cap, r
        # The verdict is the ratio's: within 15% exits 0, else 1 (a busy shared disk reads below
        # the cap now and then; how near it comes is lab/benchmarks/speed_comparisons.py disk-caps).
        assert r["ratio"] == pytest.approx(r["measured_mbps"] / cap, abs=1e-3)
        assert r["within_tolerance"] is (abs(r["ratio"] - 1) <= 0.15) and code == (0 if r["within_tolerance"] else 1)
    assert not list(target.iterdir())  # the scratch file is gone


@pytest.mark.cgroup
def test_repeat_noisy_measures_a_spread_out_point_again_and_stores_both(cli, tmp_path):
    code, out, err = cli(*sweep_args(
        tmp_path, "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "1G", "--disks", "local-nvme", "--budget", "1",
        "--repeat-noisy", "1e-9",  # no two windows agree that well: the point is measured twice
    ))
    assert code == 0, err
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    (raw,), = conn.execute("SELECT result FROM points").fetchall()
    conn.close()
    result = json.loads(raw)
    repeat = result["extra"]["repeat"]
    assert repeat["kept"] in ("first", "second") and repeat["other"]["throughput"] > 0
    assert result["spread"] <= repeat["other"]["spread"]  # the steadier of the two was kept
    code, out, err = cli(*sweep_args(tmp_path, "--workloads", "cpu-spin", "--repeat-noisy", "-1"))
    assert code == 2 and "--repeat-noisy" in err
