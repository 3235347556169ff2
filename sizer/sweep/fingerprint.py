"""Taking a host's fingerprint (`sizer calibrate`, and with every sweep's calibration): the
calibration's per-vCPU rates with one vCPU busy and with every vCPU busy (the `cpu-calibrate`
workload in real limit groups, as a sweep measures them), the memory copy bandwidth, and the CPU
model and SMT layout from the probe. The value and its JSON form are `sizer.fingerprint`."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.fingerprint import HostFingerprint, fingerprint_of_record, now_iso
from sizer.limits import detect_backend
from sizer.lock import HostLock
from sizer.probe import cpu_info
from sizer.shapes import host_cpus, host_ram_bytes
from sizer.sweep import defaults
from sizer.sweep.calibration import loaded_rate
from sizer.sweep.plan import CALIBRATION_BUDGET_S, CALIBRATION_WORKLOAD, SweepPlan, default_data_dir, load_workload_classes
from sizer.sweep.signals import stop_on_signals
from sizer.sweep.timeline import entry_of, measure_repeats

MIB = 1024**2

# The copy that measures memory bandwidth: large enough to leave every cache (a few hundred MB).
COPY_BYTES = 256 * MIB
COPY_REPEATS = 5


@dataclass(frozen=True)
class CalibrateOptions:
    """What `sizer calibrate` measures with: `quick` (short windows, a small copy: a test of the
    method, not a figure to size with), the limit backend, and the host lock's path."""

    quick: bool = False
    limits: str | None = None
    lock_path: Path | None = None

    @property
    def repeats(self) -> int:
        return 1 if self.quick else defaults.REPEATS

    @property
    def repeat_budget_s(self) -> float:
        return 0.5 if self.quick else defaults.REPEAT_BUDGET_S

    def all_busy_budget_s(self, profile: str) -> float:
        return 1.0 if self.quick else CALIBRATION_BUDGET_S.get(profile, 10.0)

    @property
    def copy_bytes(self) -> int:
        return 16 * MIB if self.quick else COPY_BYTES


def memory_bandwidth(nbytes: int = COPY_BYTES, repeats: int = COPY_REPEATS,
                     clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """A numpy copy of `nbytes` into a second array, `repeats` times: GB/s as STREAM's copy counts
    it (the bytes read plus the bytes written, over the seconds), the best of the repeats (the
    slower ones met the host's other work), and each repeat's."""
    count = max(1, nbytes // 8)
    source = np.ones(count, dtype=np.float64)
    target = np.empty_like(source)
    np.copyto(target, source)  # the pages of both arrays exist before any copy is timed
    rates = []
    for _ in range(max(1, repeats)):
        t0 = clock()
        np.copyto(target, source)
        seconds = clock() - t0
        if seconds > 0:
            rates.append(2 * source.nbytes / seconds / 1e9)
    return {"copy_gbps": max(rates) if rates else None, "bytes": int(source.nbytes), "repeats": rates}


def calibration_plan(profile: str, limits: str | None) -> SweepPlan:
    """A plan of no points that the calibration's measurements run under: the host's CPUs and RAM,
    the limit backend, an unthrottled disk."""
    classes = load_workload_classes([CALIBRATION_WORKLOAD])
    if profile not in classes[CALIBRATION_WORKLOAD].defaults:
        raise SizerError(f"workload {CALIBRATION_WORKLOAD} has no profile {profile!r}")
    data_dir = default_data_dir()
    return SweepPlan(points=[], profile=profile, data_dir=data_dir, store=data_dir / "unused.sqlite", out_dir=None,
                     disk_table=load_disk_classes(), classes=classes, cpus=host_cpus(), host_ram=host_ram_bytes(),
                     device=None, backend=detect_backend(limits), time_budget_s=defaults.REPEAT_BUDGET_S, config={},
                     datasets=[])


def fingerprint_from(calibration: Mapping[str, Any], cpu: Mapping[str, Any], memory: Mapping[str, Any],
                     hostname: str = "", quick: bool = False, source: str = "") -> HostFingerprint:
    """The fingerprint of a calibration record (its rates), the probe's CPU description and a memory
    copy (`memory_bandwidth`)."""
    base = fingerprint_of_record(calibration, {"cpu": dict(cpu), "hostname": hostname}, source)
    if base is None:
        raise SizerError("the calibration measured no rate: " + str(calibration.get("error") or calibration.get("status")))
    timeline = calibration.get("timeline") or []
    repeats = tuple(float(x) for x in (timeline[0].get("ips") or [])) if timeline else ()
    return replace(base, memory_gbps=memory.get("copy_gbps"), memory_bytes=memory.get("bytes"),
                   memory_repeats=tuple(memory.get("repeats") or ()), one_busy_repeats=repeats,
                   taken_at=now_iso(), quick=quick)


def measure_fingerprint(options: CalibrateOptions, profile: str = "cpu-small",
                        note: Callable[[str], None] = lambda _: None) -> HostFingerprint:
    """Measure this host's fingerprint (see the module) under the host lock: one sweep at a time."""
    plan = calibration_plan(profile, options.limits)
    cpu = cpu_info()
    with HostLock(options.lock_path), stop_on_signals():
        note(f"{CALIBRATION_WORKLOAD} on 1 vCPU, {options.repeats} x {options.repeat_budget_s:g} s")
        run = measure_repeats(plan, options.repeats, options.repeat_budget_s)
        entry = entry_of(run, 0.0)
        if entry is None:
            raise SizerError(f"the calibration on 1 vCPU failed ({run.result.status}): {run.result.error}")
        calibration: dict[str, Any] = {"ips_per_vcpu": entry["median"], "spread": entry["spread"], "timeline": [entry],
                                       "method": run.result.extra.get("method", "")}
        threads = plan.cpus.threads
        if threads > 1:
            note(f"{CALIBRATION_WORKLOAD} on all {threads} threads at once, {options.all_busy_budget_s(profile):g} s")
            loaded = loaded_rate(plan, threads, options.all_busy_budget_s(profile))
            if "ips_per_vcpu_loaded" in loaded:
                calibration.update(ips_per_vcpu_all_busy=loaded["ips_per_vcpu_loaded"],
                                   all_busy_vcpus=loaded["loaded_vcpus"], all_busy_spread=loaded["loaded_spread"])
        note(f"memory: copying {options.copy_bytes // MIB} MiB {COPY_REPEATS} times")
        memory = memory_bandwidth(options.copy_bytes)
    return fingerprint_from(calibration, cpu, memory, _hostname(), options.quick, "sizer calibrate")


def sweep_fingerprint(calibration: Mapping[str, Any], host: Mapping[str, Any], sweep_id: int) -> dict[str, Any] | None:
    """The fingerprint a sweep stores with its calibration record (its JSON form), its memory copy
    measured now; None where the calibration measured no rate."""
    if not calibration.get("ips_per_vcpu"):
        return None
    cpu = host.get("cpu") if isinstance(host.get("cpu"), dict) else {}
    memory = memory_bandwidth()
    return fingerprint_from(calibration, cpu or {}, memory, str(host.get("hostname") or ""),
                            source=f"sweep {sweep_id}").to_json()


def _hostname() -> str:
    import socket

    return socket.gethostname()
