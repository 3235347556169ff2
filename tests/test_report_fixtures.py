"""Points generated from the bottleneck model with known parameters, for the report and qualify tests.

`make_points` evaluates the model of docs/design.md (GPU ceiling, USL on vCPUs, disk bandwidth over uncached
bytes) on a grid of shapes and adds seeded noise, so a test knows the right answer by construction.
The tests in this file check the generator itself against that construction.
"""

from __future__ import annotations

import random

from sizer.points import Point

DISK_MBPS = {"local-nvme": None, "ssd": 300.0, "standard": 140.0}
H100 = "NVIDIA H100 80GB HBM3"


def model_rate(v: int, ram_gib: float, disk: str, *, G: float, c: float, s: float, k: float, b: float, F: float,
               D: float) -> tuple[float, str]:
    cpu = c * v / (1 + s * (v - 1) + k * v * (v - 1))
    bw = DISK_MBPS[disk]
    miss = min(max(1 - (ram_gib - F) / D, 0.0), 1.0)
    io = float("inf") if bw is None or miss == 0 else bw / (b * miss)
    terms = {"gpu": G, "cpu": cpu, "disk": io}
    bound = min(terms, key=terms.get)
    return terms[bound], bound


def make_points(
    workload: str = "resnet50-train",
    *,
    G: float = 1200.0,
    c: float = 150.0,
    s: float = 0.02,
    k: float = 0.0,
    b: float = 0.3,
    F: float = 2.0,
    D: float = 16.0,
    vcpus: tuple[int, ...] = (1, 2, 4, 8, 12, 16),
    rams: tuple[float, ...] = (8.0, 32.0),
    disks: tuple[str, ...] = ("local-nvme", "ssd", "standard"),
    noise: float = 0.01,
    seed: int = 7,
    unit: str = "images/s",
    profile: str = "gpu",
    gpu_model: str = H100,
    decode: str = "cpu",
    calibration_ips: float | None = 150.0,
) -> list[Point]:
    """One synthetic-input point (the GPU ceiling) and every shape of the grid, with seeded noise."""
    rng = random.Random(seed)
    common = dict(unit=unit, profile=profile, gpu_model=gpu_model, calibration_ips=calibration_ips)
    points = [
        Point(workload=workload, vcpus=max(vcpus), ram_gib=max(rams), disk_class="local-nvme",
              throughput=G * (1 + rng.uniform(-noise, noise)), spread=0.01, bottleneck="gpu", input="synthetic",
              decode=decode, **common)
    ]
    for disk in disks:
        for ram in rams:
            for v in vcpus:
                rate, bound = model_rate(v, ram, disk, G=G, c=c, s=s, k=k, b=b, F=F, D=D)
                points.append(
                    Point(workload=workload, vcpus=v, ram_gib=ram, disk_class=disk,
                          throughput=rate * (1 + rng.uniform(-noise, noise)), spread=0.02, bottleneck=bound,
                          read_mb_per_sample=b, footprint_gib=F, dataset_gib=D, input="files", decode=decode,
                          **common)
                )
    return points


def test_generator_follows_the_model_it_states():
    points = make_points(noise=0.0)
    ceiling = [p for p in points if p.input == "synthetic"]
    assert len(ceiling) == 1 and ceiling[0].throughput == 1200.0
    one = next(p for p in points if p.vcpus == 1 and p.disk_class == "local-nvme" and p.ram_gib == 32.0)
    assert one.throughput == 150.0 and one.bottleneck == "cpu"
    # 8 GiB caches (8 - 2) / 16 of the dataset: the standard disk feeds 140 / (0.3 * 0.625) images/s.
    slow = next(p for p in points if p.vcpus == 16 and p.disk_class == "standard" and p.ram_gib == 8.0)
    assert abs(slow.throughput - 140 / (0.3 * 0.625)) < 1e-9 and slow.bottleneck == "disk"
    fast = next(p for p in points if p.vcpus == 16 and p.disk_class == "standard" and p.ram_gib == 32.0)
    assert fast.throughput == 1200.0 and fast.bottleneck == "gpu"


def test_generator_noise_is_seeded_and_bounded():
    a, b = make_points(seed=3, noise=0.02), make_points(seed=3, noise=0.02)
    assert [p.throughput for p in a] == [p.throughput for p in b]
    exact = make_points(noise=0.0)
    for noisy, clean in zip(a, exact):
        assert abs(noisy.throughput / clean.throughput - 1) <= 0.02 + 1e-12
