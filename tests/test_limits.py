"""Limit backends on this host's real cgroups: vCPU, RAM and disk limits hold, and nothing is left.

What is checked is the limit (the cpuset each process sees, the quota where asked for, the CPU time
and bytes by the group's own accounting against the cap, the throttle read back), never how fast a
shared, busy host lets a group run up to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer import cache
from sizer.diskclasses import get_disk_class
from sizer.limits import (
    AffinityBackend,
    DiskThrottle,
    LimitRequest,
    block_device_for,
    cleanup_leftovers,
    list_groups,
    sysfs,
)

SPIN = """
import multiprocessing, sys
def spin():
    while True:
        pass
if __name__ == "__main__":
    procs = [multiprocessing.Process(target=spin) for _ in range(int(sys.argv[1]))]
    for p in procs:
        p.start()
    print("ready", flush=True)
    for p in procs:
        p.join()
"""


def own_groups() -> list[str]:
    return [g for g in list_groups() if f"/sizer-{os.getpid()}-" in g]


def spin_in(group, processes: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN, str(processes)], preexec_fn=group.preexec(), stdout=subprocess.PIPE,
        start_new_session=True, text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def cpus_used(group, seconds: float) -> float:
    c0, t0 = group.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (group.cpu_seconds() - c0) / (time.monotonic() - t0)


@pytest.mark.cgroup
def test_backend_detected_by_probe_and_probe_removed(backend):
    info = backend.info()
    assert info.name in ("cgroup-v1", "cgroup-v2")
    assert "memory" in info.writable and ("cpuset" in info.writable or "cpu" in info.writable)
    assert info.placement in ("beneath own cgroup", "sizer subtree at the hierarchy root")
    assert own_groups() == []  # the probe group is gone


@pytest.mark.cgroup
@pytest.mark.parametrize("vcpus,quota", [(1, False), (2, False), (1, True)])
def test_cpu_limit_holds_from_cgroup_accounting(backend, vcpus, quota):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 hardware threads")
    cpus = (max(os.sched_getaffinity(0)),) if vcpus == 1 else tuple(sorted(os.sched_getaffinity(0))[:2])
    with backend.create(LimitRequest(cpus=cpus, label=f"cpu{vcpus}", cpu_quota=quota)) as group:
        enforced = group.enforcement().cpus
        if "cpuset" in backend.info().writable:
            # Pinned, a group needs no quota; one is set only when asked for.
            assert enforced.startswith("cpuset") and ("quota" in enforced) == quota, enforced
        proc = spin_in(group, processes=2)
        try:
            time.sleep(0.2)
            used = cpus_used(group, 1.0)
            group_dir = getattr(group, "dir", None) or group.dirs["cpuset"]
            children = sysfs.group_pids(group_dir)
            allowed = {pid: os.sched_getaffinity(pid) for pid in children if pid != proc.pid}
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert allowed and all(cpu_set == set(cpus) for cpu_set in allowed.values()), allowed
    # The cap holds by the group's own accounting: two spinning processes get no more than the
    # group's vCPUs. (How near the cap a busy host lets them come is a measurement of the host:
    # lab/benchmarks/speed_comparisons.py cpu-limits.)
    assert 0 < used <= vcpus + 0.1, f"2 spinning processes under {vcpus} vCPU(s) used {used:.2f} CPUs"


@pytest.mark.cgroup
def test_memory_limit_kills_and_reports_oom_from_events(backend):
    limit = 64 * 2**20
    alloc = "import sys; b = bytearray(int(sys.argv[1])); b[::4096] = b'x' * len(b[::4096]); print('done')"
    with backend.create(LimitRequest(cpus=tuple(os.sched_getaffinity(0)), memory_bytes=limit, label="mem-ok")) as group:
        ok = subprocess.run([sys.executable, "-c", alloc, str(limit // 4)], preexec_fn=group.preexec(), capture_output=True)
        assert ok.returncode == 0 and not group.oom_killed()  # not guessed: a run within the limit is no OOM
    with backend.create(LimitRequest(cpus=tuple(os.sched_getaffinity(0)), memory_bytes=limit, label="mem-hog")) as group:
        hog = subprocess.run([sys.executable, "-c", alloc, str(2 * limit)], preexec_fn=group.preexec(), capture_output=True)
        assert hog.returncode == -signal.SIGKILL
        assert group.oom_killed()
        peak = group.memory_peak_bytes()
        assert peak is None or peak <= limit
        enf = group.enforcement()
        assert str(limit) in enf.memory


@pytest.mark.cgroup
def test_disk_throttle_caps_buffered_reads(backend, tmp_path):
    device = block_device_for(tmp_path)
    if device is None:
        pytest.skip("tmp_path is not on a block device")
    standard = get_disk_class("standard")
    data = tmp_path / "blob.bin"
    data.write_bytes(os.urandom(160 * 2**20))
    cache.evict(data)
    assert cache.resident_bytes(data) < 2**20  # eviction works: every try starts cold
    throttle = DiskThrottle(device, read_bps=standard.read_bps, read_iops=standard.read_iops)
    # Buffered reads arrive in readahead bursts (up to 8 MiB) that the throttle paces per 100 ms
    # slice, and a fresh throttle lets about one slice through at the device's speed; so the rate
    # is the slope of bytes over time after the first 16 MiB, as a steady-state window would see it.
    reader = (
        "import statistics, sys, time\nn = 0; ts = []; ns = []; t = time.perf_counter()\n"
        "with open(sys.argv[1], 'rb', buffering=0) as f:\n"
        "    while (b := f.read(1 << 20)):\n"
        "        n += len(b)\n"
        "        if n > 16 << 20:\n            ts.append(time.perf_counter() - t); ns.append(n)\n"
        "print(statistics.linear_regression(ts, ns).slope)"
    )
    cap = standard.read_bps
    with backend.create(LimitRequest(cpus=tuple(os.sched_getaffinity(0)), throttle=throttle, label="disk")) as group:
        out = subprocess.run([sys.executable, "-c", reader, str(data)], preexec_fn=group.preexec(),
                             capture_output=True, text=True, check=True)
        read = group.read_bytes()
        disk = group.enforcement().disk
    assert ("throttle" in disk or "io.max" in disk) and str(cap) in disk, disk  # the cap, read back
    rate = float(out.stdout)
    # Other runs sharing this disk can only slow a read down: the cap holds on any host. (How near
    # it a busy disk lets a read come: lab/benchmarks/speed_comparisons.py disk-caps.)
    assert 0 < rate <= cap * 1.05, f"read {rate / 1e6:.0f} MB/s through a {cap / 1e6:.0f} MB/s throttle"
    assert read >= 0.95 * data.stat().st_size  # counted by the group's I/O statistics


@pytest.mark.cgroup
def test_group_removed_when_the_block_raises(backend):
    with pytest.raises(RuntimeError):
        with backend.create(LimitRequest(cpus=(0,), memory_bytes=2**28, label="boom")) as group:
            proc = subprocess.Popen(["sleep", "30"], preexec_fn=group.preexec())
            assert own_groups()
            raise RuntimeError("crash inside a point")
    assert own_groups() == []
    assert proc.wait(timeout=5) == -signal.SIGKILL  # its process went with it


LEFTOVER = """
import subprocess, sys, time
from sizer.limits import detect_backend, LimitRequest
g = detect_backend().create(LimitRequest(cpus=(0,), memory_bytes=2**28, label="killed"))
subprocess.Popen(["sleep", "60"], preexec_fn=g.preexec())
g.watchdog().process.kill()  # killed along with its sizer: the next start must clean up instead
g.watchdog().process.wait()
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.cgroup
def test_leftovers_of_a_sigkilled_process_are_found_and_removed(backend, repo_root):
    mine = backend.create(LimitRequest(cpus=(0,), label="alive"))  # a live owner's group must stay
    owner = subprocess.Popen([sys.executable, "-c", LEFTOVER], stdout=subprocess.PIPE, text=True, cwd=repo_root)
    try:
        assert owner.stdout.readline().strip() == "ready"
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        theirs = [g for g in list_groups() if f"/sizer-{owner.pid}-" in g]
        assert theirs, "the killed process's groups should be visible before cleanup"
        removed = cleanup_leftovers()
        assert all(f"/sizer-{owner.pid}-" in r for r in removed) and removed
        assert [g for g in list_groups() if f"/sizer-{owner.pid}-" in g] == []
        assert own_groups(), "cleanup must not touch the groups of a live sizer"
    finally:
        mine.remove()
        if owner.poll() is None:
            owner.kill()


SIGTERMED = """
import time
from sizer.limits import detect_backend, LimitRequest
from sizer.sweep import stop_on_signals
with stop_on_signals():
    with detect_backend().create(LimitRequest(cpus=(0,), memory_bytes=2**28, label="term")) as g:
        print(g.name, flush=True)
        time.sleep(60)
"""


@pytest.mark.cgroup
def test_sigterm_removes_the_group(backend, repo_root):
    proc = subprocess.Popen([sys.executable, "-c", SIGTERMED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=repo_root)
    name = proc.stdout.readline().strip()
    assert name.startswith(f"sizer-{proc.pid}-term")
    assert any(name in g for g in list_groups())
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    assert not any(name in g for g in list_groups())


def test_block_device_is_a_whole_disk(tmp_path):
    device = block_device_for(tmp_path)
    if device is None:
        pytest.skip("tmp_path is not on a block device")
    major, minor = device.split(":")
    assert major.isdigit() and minor.isdigit()
    assert not (Path("/sys/dev/block") / device / "partition").exists()


def test_affinity_backend_pins_and_says_what_it_does_not_enforce():
    group = AffinityBackend().create(LimitRequest(cpus=(0,), memory_bytes=2**30, throttle=DiskThrottle("254:0", read_bps=10**6)))
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         preexec_fn=group.preexec(), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0]"
    enf = group.enforcement()
    assert enf.backend == "affinity" and enf.memory == "not enforced" and enf.disk == "not enforced"
    assert group.oom_killed() is False
