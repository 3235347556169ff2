"""Shapes, CPU selection, the plan, page-cache eviction and the host lock (no cgroups needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sizer import cache
from sizer.errors import LockHeld, SizerError
from sizer.lock import HostLock
from sizer.shapes import HostCpus, InstanceShape, build_plan, check_fits, host_cpus, parse_cpu_list, select_cpus


def fake_sysfs(root: Path, cores: list[list[int]], packages: list[int] | None = None) -> Path:
    for i, core in enumerate(cores):
        for cpu in core:
            topo = root / f"cpu{cpu}" / "topology"
            topo.mkdir(parents=True)
            (topo / "thread_siblings_list").write_text(",".join(map(str, core)) + "\n")
            (topo / "physical_package_id").write_text(f"{(packages or [0] * len(cores))[i]}\n")
    return root


def test_parse_cpu_list():
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpu_list("5") == [5]


def test_host_cpus_groups_smt_siblings(tmp_path):
    # 4 cores, Linux numbering: thread 0 of every core first, then their siblings.
    root = fake_sysfs(tmp_path, [[0, 4], [1, 5], [2, 6], [3, 7]])
    host = host_cpus(range(8), sysfs=root)
    assert host.cores == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert host.smt and host.threads == 8
    # Only CPUs this process may use count.
    assert host_cpus([0, 1, 4], sysfs=root).cores == ((0, 4), (1,))


def test_select_cpus_gives_whole_sibling_pairs_and_keeps_cpu0_last():
    host = HostCpus(cores=((0, 4), (1, 5), (2, 6), (3, 7)))
    assert select_cpus(2, host) == (3, 7)
    assert select_cpus(4, host) == (2, 3, 6, 7)
    three = select_cpus(3, host)
    assert len(three) == 3 and {3, 7} <= set(three)  # one whole core plus one thread
    assert select_cpus(8, host) == (0, 1, 2, 3, 4, 5, 6, 7)
    with pytest.raises(SizerError, match="larger than this host"):
        select_cpus(9, host)


def test_select_cpus_without_smt():
    host = HostCpus(cores=((0,), (1,)))
    assert select_cpus(1, host) == (1,)
    assert select_cpus(2, host) == (0, 1)


def test_shape_key_is_stable_and_validated():
    shape = InstanceShape(2, 4.0, "standard")
    assert shape.key == "2vcpu-4gib-standard" == InstanceShape(2, 4, "standard").key
    assert InstanceShape(1, 0.5, "ssd").key == "1vcpu-0.5gib-ssd"
    assert shape.ram_bytes == 4 * 2**30
    with pytest.raises(SizerError):
        InstanceShape(0, 4, "ssd")


def test_check_fits_refuses_larger_shapes():
    check_fits(InstanceShape(2, 4, "ssd"), threads=2, ram_bytes=8 * 2**30)
    with pytest.raises(SizerError, match="4 vCPUs > 2 hardware threads"):
        check_fits(InstanceShape(4, 4, "ssd"), threads=2, ram_bytes=8 * 2**30)
    with pytest.raises(SizerError, match="16 GiB RAM"):
        check_fits(InstanceShape(1, 16, "ssd"), threads=2, ram_bytes=8 * 2**30)


def test_build_plan_adds_one_ceiling_point_per_image_workload_that_takes_synthetic_input():
    plan = build_plan(
        [("resnet50-train", "imagenet"), ("imagenet-preprocess", "imagenet"), ("ptb-lstm-train", "ptb"),
         ("resnet50-infer", "imagenet", ("files", "lmdb")), ("vgg16-infer", "imagenet", ("files", "synthetic"))],
        vcpus=[2, 1, 2], ram_gib=[4], disks=["standard", "local-nvme"], profile="cpu-small",
    )
    keys = [p.key for p in plan]
    assert len(keys) == len(set(keys)) == 5 * 2 * 2 + 2
    ceiling = [p for p in plan if p.ceiling]
    assert [p.workload for p in ceiling] == ["resnet50-train", "vgg16-infer"]
    ceiling = ceiling[:1]
    assert ceiling[0].config == {"input": "synthetic"} and ceiling[0].shape == InstanceShape(2, 4, "local-nvme")
    assert ceiling[0].key == "resnet50-train/cpu-small/2vcpu-4gib-local-nvme/input=synthetic"
    assert plan[0].ceiling  # the ceiling comes first: a sweep cut short still has it
    # Then the entry's grid, every shape once (shuffled: shapes.pass_order).
    assert sorted((p.shape.vcpus, p.shape.disk_class) for p in plan[1:5]) == [
        (1, "local-nvme"), (1, "standard"), (2, "local-nvme"), (2, "standard")]


@pytest.mark.parametrize("threads", [1, 3])
def test_evict_drops_the_dataset_pages_only(tmp_path, threads):
    data = tmp_path / "ds"
    (data / "sub" / "deeper").mkdir(parents=True)
    for i in range(7):
        (data / ("sub" if i < 4 else "sub/deeper") / f"f{i}.bin").write_bytes(os.urandom(2**20))
    (data / "top.bin").write_bytes(os.urandom(2**19))
    (data / "link.bin").symlink_to(data / "top.bin")  # a link is one more name for a file: evicted again
    (data / "dirlink").symlink_to(data / "sub", target_is_directory=True)  # not followed
    other = tmp_path / "other.bin"
    other.write_bytes(os.urandom(2**20))
    for f in [*data.rglob("*.bin"), other]:
        f.read_bytes()  # now cached (and already written back by evict's fdatasync below)
    assert cache.resident_bytes(other) == 2**20
    assert len(list(cache.dataset_files(data))) == 9
    info = cache.evict(data, threads=threads)
    assert info == {"files": 9, "bytes": 7 * 2**20 + 2 * 2**19, "skipped": 0}
    assert cache.resident_bytes(data) == 0
    assert cache.resident_bytes(other) == 2**20  # not a global drop: other files stay cached


LOCK_HOLDER = """
import sys, time
from sizer.lock import HostLock
with HostLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(30)
"""


def test_second_sweep_gets_the_lock_file_and_holder_pid(tmp_path, repo_root):
    path = tmp_path / "sizer.lock"
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path)], stdout=subprocess.PIPE, text=True, cwd=repo_root)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockHeld) as err:
            HostLock(path).acquire()
        assert str(path) in str(err.value) and f"pid {holder.pid}" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    # The kernel released the lock with the killed holder: no stale lock.
    with HostLock(path) as lock:
        assert lock.holder()["pid"] == os.getpid()
