"""What a multi-GPU point's processes get: their GPUs (CUDA_VISIBLE_DEVICES), the host's NCCL_*
settings unchanged, their share of the cores and of the data; and how the ranks' results become
the point's figure."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sizer.errors import SizerError
from sizer.runner import gpu_env, worker_env
from workloads.distributed import DATA_PARALLEL, STREAMS, combine, rank_spec, shard, split_cpus, window_overlap
from workloads.image_loader import EndlessPasses
from workloads.protocol import NOISY, OK, Result, Spec


def test_gpu_env_names_the_point_s_gpus_among_those_the_host_allows():
    assert gpu_env([0], {}) == {"CUDA_VISIBLE_DEVICES": "0", "SIZER_NVML_GPUS": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert gpu_env([2, 3], {})["CUDA_VISIBLE_DEVICES"] == "2,3"
    # Positions in the host's own list where it sets one; its device order is left alone.
    host = {"CUDA_VISIBLE_DEVICES": "4,5,GPU-abc", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    assert gpu_env([1, 2], host) == {"CUDA_VISIBLE_DEVICES": "5,GPU-abc", "SIZER_NVML_GPUS": "5,GPU-abc"}
    with pytest.raises(SizerError, match="GPU 3 is not among the 3"):
        gpu_env([3], host)
    with pytest.raises(SizerError, match="indices 0 or more"):
        gpu_env([], {})
    assert not any(name.startswith("NCCL_") for name in gpu_env([0, 1], {"NCCL_NVLS_ENABLE": "0"}))


def test_every_worker_keeps_the_host_s_nccl_settings(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("NCCL_P2P_LEVEL", "NVL")
    spec = Spec(workload="resnet50-train", vcpus=4, gpus=2)
    env = worker_env(spec, {}, {**gpu_env([0, 1], {}), "NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": "WARN"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NCCL_P2P_LEVEL"] == "NVL"  # never overridden
    assert env["NCCL_DEBUG"] == "WARN"  # one the host does not set may be added
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["OMP_NUM_THREADS"] == "4"
    # A process started with it (as the worker, and its forked ranks, are) sees them so.
    seen = subprocess.run([sys.executable, "-c", "import os; print(os.environ['NCCL_NVLS_ENABLE'], "
                           "os.environ['CUDA_VISIBLE_DEVICES'])"], env=env, capture_output=True, text=True, check=True)
    assert seen.stdout.split() == ["0", "0,1"]


def test_ranks_get_equal_shares_of_whole_cores():
    siblings = {c: [c % 8, c % 8 + 8] for c in range(16)}.__getitem__  # 8 cores, threads c and c+8
    shares = split_cpus(range(16), 2, siblings)
    assert shares == [(0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)]  # no core split between ranks
    assert split_cpus([0, 1, 2], 2, lambda c: [c]) == [(0, 1), (2,)]
    assert split_cpus([6, 14], 2, siblings) == [(6,), (14,)]  # one core, two ranks: by threads
    assert rank_spec(Spec(workload="w", vcpus=17, gpus=2)) == Spec(workload="w", vcpus=8, gpus=1)


def test_each_rank_reads_its_own_shard_of_every_pass():
    assert list(shard(list(range(10)), 1, 3)) == [1, 4, 7]
    passes = {rank: EndlessPasses(10, shuffle=True, seed=3, rank=rank, world=3) for rank in range(3)}
    assert all(p.pass_samples == 3 for p in passes.values())
    for n in (1, 2):  # two passes: within each, no sample twice across the ranks
        seen = []
        for sampler in passes.values():
            order = iter(sampler)
            taken = [next(order) for _ in range(3 * n)]
            seen.append(taken[3 * (n - 1):])
        flat = [i for part in seen for i in part]
        assert len(set(flat)) == len(flat) == 9
    alone = iter(EndlessPasses(4, shuffle=False, seed=0))  # one GPU: every sample, pass after pass
    assert [next(alone) for _ in range(6)] == [0, 1, 2, 3, 0, 1]


def _rank(rate: float, samples: float, cpu: float, window: list[float], status: str = OK, **counters) -> Result:
    result = Result("w", "pytorch", "images/s", "cpu-small", status=status, throughput=rate, spread=0.02,
                    window_rates=[rate, rate], steps=[[1.0, 16.0, 1.0], [0.5, 16.0, 0.0]])
    result.counters = {"measured_seconds": 4.0, "measured_samples": samples, "cpu_seconds": cpu, "read_bytes": 1e6,
                       **counters}
    result.extra = {"window_monotonic": window, "cold_read_bytes": 5e5, "cold_samples": 10.0, "loader_workers": 2,
                    "epochs": 0.5}
    return result


def test_the_point_s_figure_is_the_sum_of_its_ranks_over_one_window():
    spec = Spec(workload="w", vcpus=4, gpus=2)
    ranks = [_rank(32.0, 128.0, 6.0, [10.0, 14.0]), _rank(30.0, 120.0, 6.0, [10.1, 14.0], status=NOISY)]
    point = combine(ranks, spec, DATA_PARALLEL, [[0, 1], [2, 3]])
    assert point.throughput == pytest.approx(62.0) and point.status == NOISY
    assert point.steps[1][1] == pytest.approx(16.0 * 62.0 / 32.0)  # rank 0's steps give the point's figure
    assert point.counters["measured_samples"] == 248.0 and point.counters["cpu_seconds"] == 12.0
    assert point.counters["cpu_util_per_vcpu"] == pytest.approx(12.0 / 4.0 / 4)
    assert point.extra["cold_read_bytes"] == 1e6 and point.extra["epochs"] == 0.5
    assert point.extra["world_size"] == 2 and point.extra["dist_backend"] == "gloo"
    assert [r["throughput"] for r in point.extra["ranks"]] == [32.0, 30.0]
    assert point.extra["rank_window_overlap"] == pytest.approx(3.9 / 4.0)
    assert point.limits_seen["cpus_allowed"] == [0, 1, 2, 3] and "window_monotonic" not in point.extra
    streams = combine(ranks, spec, STREAMS, [[0, 1], [2, 3]])
    assert "dist_backend" not in streams.extra and streams.extra["multi_gpu"] == STREAMS


def test_one_failed_rank_fails_the_point_and_windows_that_do_not_meet_have_no_overlap():
    failed = _rank(0.0, 0.0, 0.0, [0.0, 1.0], status="error")
    failed.error = "rank 1: RuntimeError: boom"
    assert combine([failed], Spec(workload="w", gpus=2, vcpus=2), DATA_PARALLEL, [[0], [1]]) is failed
    assert window_overlap([[0.0, 1.0], [2.0, 3.0]]) == 0.0
    assert window_overlap([[0.0, 1.0], None]) is None
