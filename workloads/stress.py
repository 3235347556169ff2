"""Diagnostic workloads for checking that limits hold: no framework, standard library only.

- `cpu-spin`: N processes burning CPU in a counting loop; the rate is loop iterations per second.
  Under a shape of v vCPUs, N > v processes must share v CPUs, so the rate tells whether the cpuset
  and quota hold.
- `mem-hog`: allocates and touches a given amount of memory (or a multiple of the memory limit it
  sees), then holds it briefly; under a smaller limit the kernel's OOM killer must end it.
- `disk-read`: reads every file under the data directory once, sequentially; the rate is MB/s,
  which under a disk-class throttle must stay at or below the cap.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

from workloads.measure import Meter, bottleneck_label, limits_seen
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, POSITIVE, Result, Spec, Workload, register

_MIB = 1024**2


def _spin(counter: Any, index: int, stop: Any) -> None:
    block = 20_000
    while not stop.is_set():
        x = 0
        for _ in range(block):
            x += 1
        counter[index] += block


@register
class CpuSpin(Workload):
    name = "cpu-spin"
    framework = "python"
    unit = "iterations/s"
    description = "N processes spinning in a counting loop (checks the vCPU limit)"
    stresses = "cpu"
    defaults = {
        # cpu-small is the profile of hosts without a GPU and of the test suite: shorter steps make a
        # point of a second or so, its 8 steps at least still counting millions of iterations each.
        "cpu-small": {"processes": 2, "step_s": 0.1, "warmup_steps": 2},
        "gpu": {"processes": 2, "step_s": 0.25, "warmup_steps": 2},
    }
    ranges = {"processes": AT_LEAST_ONE, "step_s": POSITIVE, "warmup_steps": NOT_NEGATIVE}

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        ctx = multiprocessing.get_context("fork")
        n = max(1, int(cfg["processes"]))
        counter = ctx.Array("q", n, lock=False)
        stop = ctx.Event()
        procs = [ctx.Process(target=_spin, args=(counter, i, stop), daemon=True) for i in range(n)]
        for p in procs:
            p.start()
        meter = Meter(
            warmup_steps=int(cfg["warmup_steps"]), time_budget_s=spec.time_budget_s, min_steps=8,
            spread_target=spec.spread_target, gpu=False,
        )
        try:
            last, t_last = sum(counter), time.perf_counter()
            while not meter.done():
                time.sleep(float(cfg["step_s"]))
                now, t_now = sum(counter), time.perf_counter()
                meter.step(t_now - t_last, float(now - last))
                last, t_last = now, t_now
            meter.finish(result, spec.vcpus)
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=2)
                if p.is_alive():
                    p.kill()
        result.extra["processes"] = n
        result.bottleneck = "cpu"
        return result


@register
class MemHog(Workload):
    name = "mem-hog"
    framework = "python"
    unit = "MiB/s"
    description = "allocates and touches memory (checks the RAM limit: twice the limit must end as oom)"
    stresses = "memory"
    # `limit_factor` > 0 sizes the allocation from the memory limit the worker sees; else `mib`.
    defaults = {
        "cpu-small": {"mib": 64, "limit_factor": 0.0, "chunk_mib": 16, "hold_s": 0.5},
        "gpu": {"mib": 64, "limit_factor": 0.0, "chunk_mib": 16, "hold_s": 0.5},
    }
    ranges = {"mib": POSITIVE, "limit_factor": NOT_NEGATIVE, "chunk_mib": POSITIVE, "hold_s": NOT_NEGATIVE}

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        seen = limits_seen()
        limit = seen.get("memory_limit_bytes")
        factor = float(cfg.get("limit_factor") or 0.0)
        target = int(limit * factor) if (factor > 0 and limit) else int(float(cfg["mib"]) * _MIB)
        chunk = int(float(cfg["chunk_mib"]) * _MIB)
        meter = Meter(warmup_steps=0, time_budget_s=spec.time_budget_s, min_steps=1, n_windows=1, gpu=False)
        held: list[bytearray] = []
        allocated = 0
        while allocated < target:
            size = min(chunk, target - allocated)
            t0 = time.perf_counter()
            block = bytearray(size)
            for i in range(0, size, 4096):  # touch every page so it is really resident
                block[i] = 1
            held.append(block)
            allocated += size
            meter.step(time.perf_counter() - t0, size / _MIB)
        time.sleep(float(cfg["hold_s"]))
        meter.finish(result, spec.vcpus)
        result.status = "ok"
        result.extra.update({"allocated_bytes": allocated, "limit_seen_bytes": limit})
        result.bottleneck = "memory"
        return result


@register
class DiskRead(Workload):
    name = "disk-read"
    framework = "python"
    unit = "MB/s"
    description = "reads every file under the data directory once (checks the disk-class throttle)"
    stresses = "disk"
    dataset = "files"
    # readahead off by default: each read is then one paced request, so window rates show the
    # throttle itself rather than the 100 ms bursts in which it lets readahead through.
    defaults = {
        "cpu-small": {"block_kib": 1024, "subdir": "", "readahead": False, "warmup_mib": 16},
        "gpu": {"block_kib": 1024, "subdir": "", "readahead": False, "warmup_mib": 16},
    }
    ranges = {"block_kib": AT_LEAST_ONE, "warmup_mib": NOT_NEGATIVE}

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        root = Path(spec.data_dir) / str(cfg.get("subdir") or "")
        files = sorted(p for p in root.rglob("*") if p.is_file())
        if not files:
            raise FileNotFoundError(f"no files under {root}")
        block = int(cfg["block_kib"]) * 1024
        # The first MiBs are warm-up: a fresh throttle lets one slice through at the device's speed.
        warmup = max(0, int(float(cfg["warmup_mib"]) * _MIB) // block)
        meter = Meter(warmup_steps=warmup, time_budget_s=spec.time_budget_s, min_steps=1, n_windows=5, gpu=False)
        total = 0
        for path in files:
            with open(path, "rb", buffering=0) as fh:
                if not cfg.get("readahead"):
                    os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
                while True:
                    t0 = time.perf_counter()
                    data = fh.read(block)
                    if not data:
                        break
                    total += len(data)
                    meter.step(time.perf_counter() - t0, len(data) / 1e6)
        meter.finish(result, spec.vcpus)
        result.extra["bytes"] = total
        result.extra["files"] = len(files)
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result
