"""Points the performance model itself would produce for known parameters: a known answer for tests
of the fitting to recover."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from sizer.model.equations import PARAM_NAMES, throughput_terms
from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT


def simulate_points(
    workload: str,
    truth: dict[str, float],
    vcpus: Iterable[int],
    disks: dict[str, float | None],
    rams: Iterable[float],
    unit: str = "images/s",
    noise: float = 0.0,
    seed: int = 0,
    synthetic: bool = True,
    measured: Iterable[str] = ("bytes_per_sample", "footprint_gib", "dataset_gib"),
    gpu_model: str = "",
) -> list[Point]:
    """Points of every (vCPUs, disk, RAM) shape at the model's throughput for `truth`, with
    multiplicative Gaussian noise, and a synthetic-input point at the GPU ceiling (`synthetic`).

    `truth` uses the public names (gpu_ceiling, per_vcpu, usl_sigma, usl_kappa, bytes_per_sample,
    footprint_gib, dataset_gib); `disks` maps a disk class to its read MB/s (None = unthrottled).
    `measured` names the quantities the points carry, as a sweep records them.
    """
    rng = np.random.default_rng(seed)
    values = {key: float(truth.get(public, 0.0)) for key, public in PARAM_NAMES.items()}
    measured = set(measured)
    vcpus, rams = list(vcpus), list(rams)
    points = []
    for v in vcpus:
        for disk, mbps in disks.items():
            for ram in rams:
                x, _ = throughput_terms(values, np.array([float(v)]), np.array([float(ram)]),
                                        np.array([np.nan if mbps is None else float(mbps)]))
                y = float(x[0]) * (1.0 + noise * rng.standard_normal())
                points.append(Point(
                    workload, int(v), float(ram), disk, max(y, 1e-9), unit,
                    read_mb_per_sample=values["b"] if "bytes_per_sample" in measured else None,
                    footprint_gib=values["F"] if "footprint_gib" in measured else None,
                    dataset_gib=values["D"] if "dataset_gib" in measured else None,
                    gpu_model=gpu_model,
                ))
    if synthetic:
        g = values["G"] * (1.0 + noise * rng.standard_normal())
        points.append(Point(workload, int(max(vcpus)), float(max(rams)), next(iter(disks)), g, unit,
                            input=SYNTHETIC_INPUT, gpu_model=gpu_model))
    return points
