"""A real data-parallel training point of 2 "GPUs" under real cgroups: on this host without a GPU,
the cpu-small profile's test mode (each GPU a CPU process, the gloo backend), through the same code
path as NCCL on GPUs. Both ranks run in the point's one limit group, step in lock-step over one
window, each on its own cores, and the point's figure is theirs together."""

from __future__ import annotations

import os

import pytest

from sizer.limits import LimitRequest
from sizer.runner import run_point
from workloads.protocol import Spec

pytestmark = [pytest.mark.slow, pytest.mark.cgroup]



def test_two_rank_data_parallel_training_runs_in_one_limit_group(backend, tmp_path, monkeypatch):
    from sizer.datasets import ensure_imagenet

    cpus = tuple(sorted(os.sched_getaffinity(0))[-2:])
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    data = tmp_path / "data"
    ensure_imagenet(data, images=120, seed=7, val_fraction=0.0, progress=False, classes=4, processes=2)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # as a multi-GPU host sets it: every rank must see it so
    # A smaller step than cpu-small's: many steps in a short window, so a step's jitter between the
    # ranks is a small share of it.
    spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=2, gpus=2, ram_bytes=3 * 2**30,
                data_dir=str(data), time_budget_s=2, config={"image_size": 64, "batch_size": 8})
    request = LimitRequest(cpus=cpus, memory_bytes=3 * 2**30, label="gpus-train")
    with backend.create(request) as group:
        run = run_point(spec, group)
        left = [d for d in group.cgroup_dirs() if (d / "cgroup.procs").read_text().split()]
        assert left == []  # no rank, nor any of its loader workers, outlives the point
    r = run.result
    assert r.status in ("ok", "noisy"), r.error
    ranks = r.extra["ranks"]
    assert r.extra["multi_gpu"] == "data-parallel" and r.extra["dist_backend"] == "gloo" and len(ranks) == 2
    assert r.extra["nccl_env"] == {"NCCL_NVLS_ENABLE": "0"}
    # One window: the ranks stepped in lock-step (the same samples) over the same seconds.
    assert ranks[0]["measured_samples"] == ranks[1]["measured_samples"] > 0
    assert r.extra["rank_window_overlap"] > 0.9
    assert r.throughput == pytest.approx(ranks[0]["throughput"] + ranks[1]["throughput"])
    # Each rank on a core of its own, with one loader worker (2 vCPUs // 2 GPUs), both in the group:
    # the group was charged the ranks' CPU time.
    assert sorted(map(tuple, r.extra["rank_cpus"])) == [(cpus[0],), (cpus[1],)]
    assert all(rank["loader_workers"] == 1 for rank in ranks)
    assert r.counters["cgroup_cpu_seconds"] >= 0.9 * sum(rank["cpu_seconds"] for rank in ranks)
    assert r.limits_seen["cpus_allowed"] == list(cpus) and r.limits_seen["memory_limit_bytes"] == 3 * 2**30
