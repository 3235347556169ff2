"""sizer.probe and `sizer probe`: the host as the kernel, NVML and the frameworks describe it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sizer import probe as probe_mod
from sizer.errors import SizerError
from sizer.probe import block_device, cpu_info, gpu_info, memory_info, parse_cpu_list, path_info, probe_host


@pytest.fixture(scope="module")
def host() -> dict:
    return probe_host("/tmp")  # imports torch and probes the limit backend: once per module


@pytest.mark.parametrize(
    "text,expected",
    [("0", [0]), ("0-3", [0, 1, 2, 3]), ("0-1,8,10-11\n", [0, 1, 8, 10, 11]), ("3,1,1", [1, 3]), ("", [])],
)
def test_parse_cpu_list(text, expected):
    assert parse_cpu_list(text) == expected


def test_cpu_topology_matches_the_kernel():
    cpu = cpu_info()
    assert cpu["hardware_threads"] == os.cpu_count()
    threads = [t for group in cpu["siblings"] for t in group]
    assert sorted(threads) == cpu["online"]  # every thread in exactly one core
    assert len(threads) == len(set(threads))
    assert cpu["physical_cores"] == len(cpu["siblings"])
    assert cpu["smt"] == (cpu["hardware_threads"] > cpu["physical_cores"])
    for group in cpu["siblings"]:
        siblings_file = Path(f"/sys/devices/system/cpu/cpu{group[0]}/topology/thread_siblings_list")
        assert parse_cpu_list(siblings_file.read_text()) == group
    assert cpu["sockets"] >= 1 and cpu["model"]
    assert set(cpu["usable"]) == os.sched_getaffinity(0)


def test_memory_matches_meminfo():
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    mem_total = int(meminfo["MemTotal"].split()[0]) * 1024
    mem = memory_info()
    # a ballooned VM's MemTotal moves between reads; a few percent of slack covers that
    assert mem["total_bytes"] == pytest.approx(mem_total, rel=0.05)
    balloon = Path("/sys/bus/virtio/drivers/virtio_balloon")
    if balloon.is_dir() and any(p.is_symlink() for p in balloon.iterdir()):
        assert "virtio_balloon" in mem["resizable_by"] and mem["notes"]


def test_no_gpu_is_an_answer_not_an_error():
    gpu = gpu_info()
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        assert gpu["count"] == 0 and gpu["devices"] == []
        assert "no NVIDIA driver" in gpu["reason"]
        return
    try:
        assert gpu["count"] == pynvml.nvmlDeviceGetCount()
        assert all(d["name"] and d["memory_bytes"] > 0 for d in gpu["devices"])
    finally:
        pynvml.nvmlShutdown()


def test_path_on_a_disk_resolves_to_its_device(tmp_path):
    info = path_info(str(tmp_path))
    findmnt = shutil.which("findmnt")
    if findmnt:
        out = subprocess.run(
            [findmnt, "-n", "-o", "FSTYPE,TARGET", "--target", str(tmp_path)], capture_output=True, text=True, check=True
        ).stdout.split()
        assert [info["fstype"], info["mount_point"]] == out
    st = os.stat(tmp_path)
    device = info["device"]
    if device is None:
        assert info["note"]
        return
    own = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    assert own in (device["major_minor"], device["partition_major_minor"])
    sys_disk = Path(f"/sys/dev/block/{device['major_minor']}")
    assert sys_disk.resolve().name == device["name"]
    assert not (sys_disk / "partition").exists()  # the whole disk, where a throttle applies


def test_partition_resolves_to_its_disk(tmp_path, monkeypatch):
    """This kernel scans no partition tables, so the sysfs layout of one partition is rebuilt here."""
    disk = tmp_path / "devices" / "nvme0n1"
    part = disk / "nvme0n1p2"
    part.mkdir(parents=True)
    (disk / "dev").write_text("259:0\n")
    (disk / "size").write_text("2000409264\n")
    (disk / "queue").mkdir()
    (disk / "queue" / "rotational").write_text("0\n")
    (part / "dev").write_text("259:2\n")
    (part / "partition").write_text("2\n")
    by_dev = tmp_path / "dev" / "block"
    by_dev.mkdir(parents=True)
    (by_dev / "259:2").symlink_to(part)
    (by_dev / "259:0").symlink_to(disk)
    monkeypatch.setattr(probe_mod, "SYS_BLOCK_BY_DEV", by_dev)
    device = block_device(259, 2)
    assert device["name"] == "nvme0n1" and device["major_minor"] == "259:0"
    assert device["partition"] == "nvme0n1p2" and device["partition_major_minor"] == "259:2"
    assert device["rotational"] is False and device["size_bytes"] == 2000409264 * 512
    assert block_device(259, 0)["partition"] is None
    assert block_device(259, 9) is None


def test_memory_filesystem_has_no_block_device():
    info = path_info("/dev/shm")
    assert info["fstype"] == "tmpfs"
    assert info["device"] is None and "memory" in info["note"]


def test_missing_path_is_a_sizer_error(tmp_path):
    with pytest.raises(SizerError, match="no such file"):
        probe_host(str(tmp_path / "absent"))


def test_probe_host_is_json_and_complete(host):
    text = json.dumps(host)
    again = json.loads(text)
    assert set(again) >= {"hostname", "kernel", "python", "cpu", "memory", "gpu", "frameworks", "limits", "path"}
    import torch

    assert again["frameworks"]["torch"]["version"] == torch.__version__
    assert again["frameworks"]["torch"]["cuda"] == torch.version.cuda
    assert again["path"]["path"] == os.path.realpath("/tmp")


def test_limit_backend_is_reported(host):
    limits = host["limits"]
    assert "error" not in limits, limits.get("error")
    assert limits["backend"] in ("cgroup-v2", "cgroup-v1", "affinity")
    if limits["backend"] == "affinity":
        assert limits["notes"]  # says why nothing but affinity is enforced


def _v1_cgroup_host() -> bool:
    return Path("/sys/fs/cgroup/cpuset/cpuset.cpus").exists() and not Path("/sys/fs/cgroup/cgroup.controllers").exists()


@pytest.mark.cgroup
@pytest.mark.skipif(not _v1_cgroup_host(), reason="the cgroup-v1 acceptance host only")
def test_acceptance_on_this_cgroup_v1_host(cli):
    code, out, err = cli("probe", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["cpu"]["hardware_threads"] == os.cpu_count()
    assert data["memory"]["total_gib"] == pytest.approx(psutil_total_gib(), rel=0.05)
    assert data["gpu"]["count"] == 0 and data["gpu"]["reason"]
    assert data["limits"]["backend"] == "cgroup-v1"
    assert {"cpuset", "memory", "blkio"} <= set(data["limits"]["writable"])


def psutil_total_gib() -> float:
    import psutil

    return psutil.virtual_memory().total / 1024**3


def test_cli_probe_json_and_human(cli, tmp_path):
    code, out, err = cli("probe", "--json", "--path", str(tmp_path))
    assert code == 0, err
    data = json.loads(out)
    assert data["path"]["path"] == str(tmp_path.resolve())
    assert data["cpu"]["siblings"] and data["memory"]["total_bytes"] > 0
    code, out, err = cli("probe", "--path", str(tmp_path))
    assert code == 0, err
    assert "hardware threads" in out and "SMT siblings" in out and "limit backend" in out
    assert data["cpu"]["model"] in out


def test_cli_probe_missing_path_is_one_line_exit_2(cli, tmp_path):
    code, out, err = cli("probe", "--path", str(tmp_path / "absent"))
    assert code == 2
    assert out == ""
    assert err.strip().count("\n") == 0 and err.startswith("sizer: error:") and "absent" in err


def test_cli_probe_unknown_option_is_exit_2(cli):
    code, _, err = cli("probe", "--colour")
    assert code == 2 and err.strip().count("\n") == 0 and "--colour" in err
