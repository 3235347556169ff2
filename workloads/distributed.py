"""Points of more than one GPU (`Spec.gpus` > 1): one process per GPU, inside the worker's limits.

The worker forks one rank process per GPU (`run_ranks`). They are its children, so they stay in the
point's one limit group: one cpuset, one memory limit with its page cache, one disk throttle. Rank r:
- runs on its own equal share of the shape's cores (`split_cpus`), with vcpus // gpus loader workers
  and thread pools of that size (its spec's `vcpus`), as a one-GPU shape of that size would;
- uses GPU r of those the runner made visible (CUDA_VISIBLE_DEVICES; `join` sets it), its GPU
  sampler the same GPU;
- reads its own shard of every pass over the data (`shard`: DistributedSampler's split, whole
  shards only);
- data-parallel (`Workload.multi_gpu`, training): joins a process group (`backend`: nccl on CUDA,
  gloo on the CPU, the cpu-small profile's test mode) and trains its model wrapped in
  DistributedDataParallel (`data_parallel`); streams (inference, preprocessing): runs the one-GPU
  job on its own.

The ranks share one window. They start their timed loops together (a barrier) and rank 0's meter
decides when the measurement is long enough; the others stop with it (`RankMeter`). Data-parallel
ranks all-reduce their gradients every step, so they step in lock-step: every rank's window holds
the same steps over the same seconds, and the sum of the ranks' window rates is the global
samples/s (each rank counting its own batch; gathering the ranks' figures, rather than rank 0
counting N batches a step, also covers streams and shows a rank that lags). Streams run apart;
their windows cover the same seconds (started together, stopped together) and the point's figure
is the sum of their rates (`combine`). NCCL's settings are the host's: the ranks inherit the
worker's environment, with every NCCL_* variable as the host set it.

torch is imported inside functions only: the worker forks the ranks before it imports torch.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from workloads.measure import Meter, add_read_bytes_per_sample, bottleneck_label
from workloads.protocol import ERROR, NOISY, OK, STATUSES, Result, Spec, Workload

DATA_PARALLEL, STREAMS = "data-parallel", "streams"
# Steps the followers of a lock-step run may be ahead of rank 0 when it decides to stop: a rank's
# loop waits for its previous step, whose all-reduce needs every rank's, so none leads by more than 2.
LOCKSTEP_MARGIN = 4
START_TIMEOUT_S = 600.0  # for every rank to reach its timed loop (imports, model build, process group)
_UNSET = -1


@dataclass(frozen=True)
class RankPlan:
    """What one rank process is: its rank among `world`, how the ranks run together (`mode`), its
    CPUs, where the process group meets, and what it shares with the other ranks."""

    rank: int
    world: int
    mode: str  # DATA_PARALLEL or STREAMS
    cpus: tuple[int, ...]
    store_path: str  # the process group's file store (data-parallel)
    stop_at: Any  # shared: the step count at which every lock-step rank stops (_UNSET: not yet)
    stopped: Any  # shared: 1 once rank 0's meter is done (streams stop at their next step)
    start: Any  # a barrier: the ranks' timed loops start together

    @property
    def leader(self) -> bool:
        return self.rank == 0


_current: RankPlan | None = None


def current() -> RankPlan | None:
    """This process's rank plan, or None outside a rank of a multi-GPU point."""
    return _current


# ---------------------------------------------------------------- the data, the device, the model
def shard(order: Sequence[int], rank: int, world: int) -> Sequence[int]:
    """Rank `rank`'s share of one pass's sample order: every world-th sample from its rank on, over
    the largest multiple of `world` (DistributedSampler's split with drop_last): no sample twice."""
    usable = len(order) - len(order) % world
    return order[rank:usable:world]


def backend(device: str) -> str:
    """The process group's backend: nccl on CUDA, gloo on the CPU (the cpu-small test mode)."""
    return "nccl" if device.startswith("cuda") else "gloo"


def join(device: str) -> None:
    """In a rank: take its GPU (CUDA device r of those visible) and, data-parallel, join the
    process group. Called once the device is chosen (`workloads.torch_common.setup_device`)."""
    plan = _current
    if plan is None:
        return
    import torch

    if device.startswith("cuda"):
        torch.cuda.set_device(plan.rank)
    if plan.mode == DATA_PARALLEL and not torch.distributed.is_initialized():
        import datetime

        torch.distributed.init_process_group(
            backend(device), init_method=f"file://{plan.store_path}", rank=plan.rank, world_size=plan.world,
            timeout=datetime.timedelta(seconds=START_TIMEOUT_S))


def data_parallel(model: Any, device: str) -> Any:
    """The model wrapped for data-parallel training in a data-parallel rank (gradients all-reduced
    every step); the model itself elsewhere."""
    plan = _current
    if plan is None or plan.mode != DATA_PARALLEL:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[plan.rank] if device.startswith("cuda") else None)


# ---------------------------------------------------------------- the common window
class RankMeter(Meter):
    """A rank's meter: its timed loop starts once every rank has reached its own, and it is done
    when rank 0's meter is: lock-step ranks all stop at one step count, streams at their next step."""

    def __init__(self, plan: RankPlan, **kwargs: Any):
        super().__init__(**kwargs)
        self.plan = plan
        plan.start.wait(START_TIMEOUT_S)

    def done(self) -> bool:
        plan = self.plan
        if plan.leader and plan.stopped.value == 0 and super().done():
            if plan.mode == DATA_PARALLEL:
                plan.stop_at.value = len(self.steps) + LOCKSTEP_MARGIN
            plan.stopped.value = 1
        if plan.mode == DATA_PARALLEL:
            return plan.stop_at.value != _UNSET and len(self.steps) >= plan.stop_at.value
        return plan.stopped.value == 1

    def finish(self, result: Result, vcpus: int, input_ended: bool = False) -> Result:
        start = self._t_measure
        super().finish(result, vcpus, input_ended)
        if start is not None:  # perf_counter (the default clock) is the system's monotonic clock: comparable across ranks
            result.extra["window_monotonic"] = [start, self.clock()]
        return result


def new_meter(**kwargs: Any) -> Meter:
    """A Meter, or in a rank of a multi-GPU point its RankMeter (same arguments)."""
    return Meter(**kwargs) if _current is None else RankMeter(_current, **kwargs)


# ---------------------------------------------------------------- the ranks
def split_cpus(cpus: Sequence[int], parts: int, siblings: Callable[[int], Sequence[int]] | None = None
               ) -> list[tuple[int, ...]]:
    """`cpus` in `parts` equal shares of whole cores (SMT siblings stay together), in CPU order;
    by threads where there are fewer cores than parts. Shares differ by at most one core."""
    siblings = siblings or _siblings
    pool = sorted(set(cpus))
    cores: list[tuple[int, ...]] = []
    seen: set[int] = set()
    for cpu in pool:
        if cpu not in seen:
            core = tuple(c for c in sorted(siblings(cpu)) if c in pool and c not in seen) or (cpu,)
            seen.update(core)
            cores.append(core)
    if len(cores) < parts:
        return [tuple(pool[i::parts]) for i in range(parts)]
    size, extra = divmod(len(cores), parts)
    out, at = [], 0
    for i in range(parts):
        take = size + (1 if i < extra else 0)
        out.append(tuple(sorted(c for core in cores[at:at + take] for c in core)))
        at += take
    return out


def _siblings(cpu: int) -> list[int]:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        text = path.read_text().strip()
    except OSError:
        return [cpu]
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def rank_spec(spec: Spec) -> Spec:
    """One rank's spec: its share of the vCPUs (vcpus // gpus, at least one) and one GPU."""
    return dataclasses.replace(spec, vcpus=max(1, spec.vcpus // max(1, spec.gpus)), gpus=1)


def run_ranks(workload: Workload, spec: Spec) -> Result:
    """Run `workload` at `spec` as one process per GPU (see the module) and combine their results."""
    world = int(spec.gpus)
    mode = workload.multi_gpu
    if mode not in (DATA_PARALLEL, STREAMS):
        raise ValueError(f"{workload.name} runs on one GPU only (asked for {world})")
    ctx = multiprocessing.get_context("fork")
    folder = Path(tempfile.mkdtemp(prefix="ranks-", dir=spec.work_dir or None))
    shared = {"stop_at": ctx.RawValue("l", _UNSET), "stopped": ctx.RawValue("b", 0), "start": ctx.Barrier(world)}
    slices = split_cpus(sorted(os.sched_getaffinity(0)), world)
    plans = [RankPlan(r, world, mode, slices[r], str(folder / "store"), **shared) for r in range(world)]
    procs, conns = [], []
    try:
        for plan in plans:
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_rank_main, args=(workload, spec, plan, send), name=f"rank-{plan.rank}")
            proc.start()
            send.close()
            procs.append(proc)
            conns.append(receive)
        results = _collect(procs, conns, workload, spec)
    finally:
        for proc in procs:  # a rank still alive (in its teardown, or beside a failed one) is not needed
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.join()
    return combine(results, spec, mode, [list(s) for s in slices])


def _rank_main(workload: Workload, spec: Spec, plan: RankPlan, conn: Any) -> None:
    """A rank process: its CPUs, thread pools and GPU sampler, then the one-GPU job at its share."""
    global _current
    _current = plan
    os.sched_setaffinity(0, plan.cpus)
    share = rank_spec(spec)
    os.environ.update(OMP_NUM_THREADS=str(share.vcpus), MKL_NUM_THREADS=str(share.vcpus))
    sampled = [g for g in os.environ.get("SIZER_NVML_GPUS", "").split(",") if g]
    if len(sampled) > plan.rank:
        os.environ["SIZER_NVML_GPUS"] = sampled[plan.rank]
    try:
        result = workload.run(share)
    except BaseException as exc:  # the point records it as status error
        result = workload.new_result(share, dict(share.config))
        result.status = ERROR
        result.error = f"rank {plan.rank}: {type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=8)
    result.extra["nccl_env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}  # as the host set them
    conn.send(result.to_json())
    conn.close()


def _collect(procs: list[Any], conns: list[Any], workload: Workload, spec: Spec) -> list[Result]:
    """Each rank's Result, in rank order; once one rank fails (an error, or it ended without a
    result) the point fails: the others may wait for it forever in a collective."""
    from multiprocessing.connection import wait

    results: dict[int, Result] = {}
    pending = dict(enumerate(conns))  # rank -> its pipe, until its result is read
    while pending:
        by_conn = {conn: rank for rank, conn in pending.items()}
        by_sentinel = {procs[rank].sentinel: rank for rank in pending}
        for ready in wait([*by_conn, *by_sentinel]):
            rank = by_conn.get(ready, by_sentinel.get(ready))
            if rank is None or rank not in pending:
                continue
            if ready in by_sentinel and not pending[rank].poll():  # it ended, and nothing came
                return [_failed(workload, spec, f"rank {rank} ended without a result (exit {procs[rank].exitcode})")]
            try:
                results[rank] = Result.from_json(pending[rank].recv())
            except (EOFError, OSError, ValueError):
                return [_failed(workload, spec, f"rank {rank} ended without a result (exit {procs[rank].exitcode})")]
            del pending[rank]
            if results[rank].status == ERROR:
                return [results[rank]]
    return [results[r] for r in range(len(conns))]


def _failed(workload: Workload, spec: Spec, why: str) -> Result:
    result = workload.new_result(spec, dict(spec.config))
    result.status, result.error = ERROR, why
    return result


# ---------------------------------------------------------------- one figure
# Counters that add up over the ranks (each rank counts its own process tree and its own samples).
ADDITIVE_COUNTERS = ("cpu_seconds", "cpu_user_seconds", "cpu_system_seconds", "read_bytes", "measured_samples",
                     "decode_cpu_seconds", "decoded_images", "drained_batches", "drained_samples", "rss_bytes",
                     "peak_rss_bytes")
ADDITIVE_EXTRA = ("cold_read_bytes", "cold_samples", "input_bytes", "encoded_bytes", "images_done", "images_total")


def combine(results: list[Result], spec: Spec, mode: str, slices: list[list[int]]) -> Result:
    """The point's Result from its ranks' (rank 0's as the base): the figure the sum of the ranks'
    window rates; counters summed where they add up; the steps rank 0's, their samples scaled so
    that they give the point's figure; each rank's own figures under `extra["ranks"]`."""
    if len(results) == 1 and results[0].status == ERROR:
        return results[0]
    lead = results[0]
    out = dataclasses.replace(lead, counters=dict(lead.counters), extra=dict(lead.extra),
                              limits_seen=dict(lead.limits_seen))
    out.throughput = sum(r.throughput for r in results)
    scale = out.throughput / lead.throughput if lead.throughput > 0 else float(len(results))
    out.steps = [[s[0], s[1] * scale, s[2]] for s in lead.steps]
    out.window_rates = [rate * scale for rate in lead.window_rates]
    out.spread = max(r.spread for r in results)
    out.status = max((r.status for r in results), key=lambda s: (s != OK, s == NOISY, STATUSES.index(s)))
    _sum_counters(out, results, spec)
    out.extra.update(
        multi_gpu=mode, world_size=len(results), rank_cpus=slices,
        ranks=[_rank_summary(i, r) for i, r in enumerate(results)],
        rank_window_overlap=window_overlap([r.extra.get("window_monotonic") for r in results]),
    )
    out.extra.pop("window_monotonic", None)
    if mode == DATA_PARALLEL:
        out.extra["dist_backend"] = backend(str(lead.config.get("device", "cpu")))
    out.limits_seen["cpus_allowed"] = sorted({c for s in slices for c in s})
    out.bottleneck = bottleneck_label(out.counters, spec.vcpus)
    return out


def _sum_counters(out: Result, results: list[Result], spec: Spec) -> None:
    """Counters and extras that add up over the ranks, and the figures that follow from them."""
    for key in ADDITIVE_COUNTERS:
        values = [r.counters.get(key) for r in results]
        if all(isinstance(v, (int, float)) for v in values):
            out.counters[key] = sum(values)
    for key in ADDITIVE_EXTRA:
        values = [r.extra.get(key) for r in results]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out.extra[key] = sum(values)
    c = out.counters
    seconds, samples, cpu = c.get("measured_seconds") or 0.0, c.get("measured_samples") or 0.0, c.get("cpu_seconds")
    if seconds > 0 and isinstance(cpu, (int, float)):
        c["cpu_util_per_vcpu"] = cpu / seconds / max(1, spec.vcpus)
    if samples > 0 and isinstance(cpu, (int, float)):
        c["cpu_ms_per_sample"] = 1000.0 * cpu / samples
    add_read_bytes_per_sample(out)
    if c.get("decoded_images"):
        c["decode_cpu_ms_per_image"] = 1000.0 * c["decode_cpu_seconds"] / c["decoded_images"]
    utils = [r.counters["gpu_util_mean_pct"] for r in results if "gpu_util_mean_pct" in r.counters]
    if utils:
        c["gpu_util_mean_pct"] = sum(utils) / len(utils)
        c["gpu_util_pct"] = sum(r.counters.get("gpu_util_pct", 0.0) for r in results) / len(results)
        c["gpu_mem_peak_bytes"] = max(r.counters.get("gpu_mem_peak_bytes", 0) for r in results)


def _rank_summary(rank: int, result: Result) -> dict[str, Any]:
    c = result.counters
    return {"rank": rank, "status": result.status, "throughput": result.throughput, "spread": result.spread,
            "measured_seconds": c.get("measured_seconds"), "measured_samples": c.get("measured_samples"),
            "cpu_seconds": c.get("cpu_seconds"), "gpu_util_mean_pct": c.get("gpu_util_mean_pct"),
            "loader_workers": result.extra.get("loader_workers") or result.extra.get("processes")}


def window_overlap(windows: Sequence[Sequence[float] | None]) -> float | None:
    """The share of the longest rank window that every rank's window covers (1: the same seconds)."""
    spans = [w for w in windows if w and len(w) == 2 and w[1] > w[0]]
    if len(spans) != len(windows) or not spans:
        return None
    common = min(w[1] for w in spans) - max(w[0] for w in spans)
    return max(0.0, common) / max(w[1] - w[0] for w in spans)
