"""Real workloads under real limits (cgroup cpuset and block-I/O throttle, through sizer's runner):
JPEG training runs in the vCPUs it was given, with a loader worker each, and no more CPU time than
they hold; ImageNet preprocessing reads from a cold cache through the `standard` throttle, which the
worker reads back, at no more than its cap.

How much slower the smaller shape or the slower disk makes them is a measurement of this host, not
a test: lab/benchmarks/speed_comparisons.py jpeg-training and preprocess-disks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sizer.cache import evict
from sizer.diskclasses import load_disk_classes
from sizer.limits import DiskThrottle, LimitRequest, sysfs
from sizer.runner import run_point
from workloads.protocol import Result, Spec

pytestmark = [pytest.mark.slow, pytest.mark.cgroup]

CAP_MB_S = 140.0  # the standard class's read cap (sizer/catalogs/disk_classes.csv)


def measure(backend, spec: Spec, cpus: tuple[int, ...], throttle: DiskThrottle | None = None) -> Result:
    with backend.create(LimitRequest(cpus=cpus, throttle=throttle, label=f"wl-{spec.workload}")) as group:
        run = run_point(spec, group)
    r = run.result
    assert r.status in ("ok", "noisy"), r.error
    assert r.throughput > 0
    assert r.limits_seen["cpus_allowed"] == sorted(cpus)  # what the worker saw from inside
    return r


def test_jpeg_training_runs_in_its_vcpus_with_a_loader_worker_each(backend, tmp_path_factory):
    from sizer.datasets import ensure_imagenet

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    data = tmp_path_factory.mktemp("jpeg-train")
    ensure_imagenet(data, images=120, seed=7, val_fraction=0.0, progress=False, classes=6, processes=2)
    for vcpus in (1, 2):
        # A smaller step than cpu-small's: the limits and the loader are what is checked here.
        spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=vcpus, data_dir=str(data), time_budget_s=1.5,
                    config={"image_size": 64, "batch_size": 8})
        r = measure(backend, spec, tuple(cpus[-vcpus:]))
        assert r.extra["loader_workers"] == vcpus and r.config["input"] == "files"
        assert r.limits_seen["cpuset_cpus"] in (",".join(map(str, cpus[-vcpus:])), f"{cpus[-vcpus]}-{cpus[-1]}")
        # No more CPU time than the vCPUs give, per second of the worker's life (loader and model together).
        assert 0 < r.counters["cgroup_cpu_seconds"] <= vcpus * 1.15 * r.wall_s + 1.0, (r.counters, r.wall_s)


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory) -> Path:
    from workloads.synth import generate_imagenet

    data = tmp_path_factory.mktemp("preprocess")
    generate_imagenet(data, n_images=600, n_classes=8, seed=11, val_fraction=0.0, processes=2)
    return data


def preprocess(backend, data: Path, disk: str, config: dict) -> tuple[Result, str]:
    """One cold-cache point of imagenet-preprocess (cpu-small) on every CPU, under a disk class."""
    device = sysfs.block_device_for(data)
    if device is None:
        pytest.skip(f"no block device found under {data}")
    c = load_disk_classes(None)[disk]
    throttle = DiskThrottle(device, read_bps=c.read_bps, write_bps=c.write_bps, read_iops=c.read_iops, write_iops=c.write_iops)
    assert evict(data)["files"] >= 600
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    spec = Spec(workload="imagenet-preprocess", profile="cpu-small", vcpus=len(cpus), data_dir=str(data),
                time_budget_s=2, config=config)
    r = measure(backend, spec, cpus, throttle)
    assert r.extra["read_mb_s"] > 0 and r.counters["read_bytes"] > 0  # read from the device: the cache was cold
    return r, device


def test_preprocess_reads_a_cold_cache_through_the_standard_throttle_at_its_cap_at_most(backend, jpeg_folder):
    assert load_disk_classes(None)["standard"].read_mbps == CAP_MB_S
    r, device = preprocess(backend, jpeg_folder, "standard", {})
    # The throttle the worker ran under, read back from its group: the device at the class's cap.
    assert f"{device} {int(CAP_MB_S * 1e6)}" in r.limits_seen["io_max"], r.limits_seen
    # Through `standard`, JPEG bytes come in no faster than its cap.
    assert r.extra["read_mb_s"] <= 1.15 * CAP_MB_S, r.extra


def test_preprocess_packs_images_as_they_are_on_local_nvme_unthrottled(backend, jpeg_folder):
    r, device = preprocess(backend, jpeg_folder, "local-nvme", {"short_side": 0, "format": "tar"})
    assert device not in r.limits_seen.get("io_max", "")  # local-nvme: no throttle on the device
    assert r.extra["encoded_bytes"] == r.extra["input_bytes"] > 0  # packed as they are
