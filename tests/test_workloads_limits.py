"""Under real limits (cgroup cpuset and block-I/O throttle, through sizer's runner): JPEG training is
slower at 1 vCPU than at 2, and ImageNet preprocessing is slower on a `standard` cloud disk than on
local NVMe when it starts from a cold cache."""

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



def measure(backend, spec: Spec, cpus: tuple[int, ...], throttle: DiskThrottle | None = None) -> Result:
    with backend.create(LimitRequest(cpus=cpus, throttle=throttle, label=f"wl-{spec.workload}")) as group:
        run = run_point(spec, group)
    r = run.result
    assert r.status in ("ok", "noisy"), r.error
    assert r.throughput > 0
    assert r.limits_seen["cpus_allowed"] == sorted(cpus)  # what the worker saw from inside
    return r


def test_jpeg_training_is_slower_at_one_vcpu_than_at_two(backend, tmp_path_factory):
    from sizer.datasets import ensure_imagenet

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    data = tmp_path_factory.mktemp("jpeg-train")
    ensure_imagenet(data, images=300, seed=7, val_fraction=0.0, progress=False, classes=6, processes=2)

    def rate(vcpus: int) -> Result:
        spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=vcpus, data_dir=str(data), time_budget_s=6)
        r = measure(backend, spec, tuple(cpus[-vcpus:]))
        assert r.extra["loader_workers"] == vcpus and r.config["input"] == "files"
        return r

    one, two = [rate(1)], [rate(2)]
    best = lambda runs: max(r.throughput for r in runs)  # noqa: E731 - capacity: the least disturbed run
    if not best(one) < 0.85 * best(two):  # a busy host can disturb one pair: measure each once more
        one.append(rate(1))
        two.append(rate(2))
    assert best(one) < 0.85 * best(two), ([r.throughput for r in one], [r.throughput for r in two])
    # One vCPU's worth of CPU time at most, per second, at 1 vCPU (loader worker and model together).
    assert all(r.counters["cgroup_cpu_seconds"] <= 1.15 * r.wall_s + 1.0 for r in one)


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory) -> Path:
    from workloads.synth import generate_imagenet

    data = tmp_path_factory.mktemp("preprocess")
    generate_imagenet(data, n_images=2400, n_classes=8, seed=11, val_fraction=0.0, processes=2)
    return data


def preprocess_rates(backend, data: Path, disk: str, config: dict) -> Result:
    """One cold-cache point of imagenet-preprocess (cpu-small) on every CPU, under a disk class."""
    device = sysfs.block_device_for(data)
    if device is None:
        pytest.skip(f"no block device found under {data}")
    c = load_disk_classes(None)[disk]
    throttle = DiskThrottle(device, read_bps=c.read_bps, write_bps=c.write_bps, read_iops=c.read_iops, write_iops=c.write_iops)
    assert evict(data)["files"] >= 2400
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    spec = Spec(workload="imagenet-preprocess", profile="cpu-small", vcpus=len(cpus), data_dir=str(data),
                time_budget_s=8, config=config)
    r = measure(backend, spec, cpus, throttle)
    print(f"{disk} {config}: {r.throughput:.0f} images/s, {r.extra['read_mb_s']:.0f} MB/s read, "
          f"cpu {r.counters['cpu_util_per_vcpu']:.2f} per vCPU")
    return r


CAP_MB_S = 140.0  # the standard class's read cap (sizer/catalogs/disk_classes.csv)


def compare(backend, data: Path, config: dict) -> tuple[list[Result], list[Result]]:
    assert load_disk_classes(None)["standard"].read_mbps == CAP_MB_S
    nvme = [preprocess_rates(backend, data, "local-nvme", config)]
    standard = [preprocess_rates(backend, data, "standard", config)]
    # The throttle holds: through `standard`, JPEG bytes come in no faster than its cap.
    assert standard[0].extra["read_mb_s"] <= 1.15 * CAP_MB_S, standard[0].extra
    if not best(standard).throughput < 0.92 * best(nvme).throughput:  # a busy host: once more each
        nvme.append(preprocess_rates(backend, data, "local-nvme", config))
        standard.append(preprocess_rates(backend, data, "standard", config))
    return nvme, standard


def best(runs: list[Result]) -> Result:
    return max(runs, key=lambda r: r.throughput)  # capacity: the least disturbed run


@pytest.mark.parametrize(
    "config",
    [{}, {"short_side": 0, "format": "tar"}],
    ids=["resize-reencode", "pack-as-is"],
)
def test_preprocess_is_slower_on_standard_than_on_local_nvme_from_a_cold_cache(backend, jpeg_folder, config):
    nvme, standard = compare(backend, jpeg_folder, config)
    unthrottled = best(nvme).extra["read_mb_s"]
    if unthrottled < 1.15 * CAP_MB_S:
        # Resizing decodes every JPEG (PIL draft mode, 1/8 scale): about 1.4 ms of CPU per 110 kB
        # image, so two free cores read about 150 MB/s at most, too close to the cap to bind
        # measurably; a busy host or a busy disk reads less.
        pytest.skip(
            f"unthrottled, this host preprocesses {unthrottled:.0f} MB/s from a cold cache, not above "
            f"the standard cap of {CAP_MB_S:.0f} MB/s by 15%: the disk cannot be the bound here"
        )
    assert best(standard).throughput < 0.92 * best(nvme).throughput, (
        [(r.throughput, r.extra["read_mb_s"]) for r in nvme],
        [(r.throughput, r.extra["read_mb_s"]) for r in standard],
    )
    if config.get("short_side") == 0:
        assert all(r.extra["encoded_bytes"] == r.extra["input_bytes"] for r in nvme)  # packed as they are
