"""A host's fingerprint: what its CPUs give the CPU side of a workload, and the translation of figures
measured on one host to another host's CPU.

A fingerprint (`sizer calibrate`, and every sweep's calibration record) holds the per-vCPU
decode-and-augment rate of the `cpu-calibrate` work (PIL decode, RandomResizedCrop(224), flip) with
one vCPU busy and with every vCPU busy at once, the memory copy bandwidth, the CPU model and its SMT
layout. It is versioned JSON:

    {"kind": "sizer-host-fingerprint", "version": 1, "taken_at": ISO time, "hostname": ..., "quick": bool,
     "source": where it came from ("sizer calibrate", "sweep N"),
     "cpu": {"model", "threads", "physical_cores", "threads_per_core", "smt", "sockets", "numa_nodes", "hypervisor"},
     "calibration": {"method", "one_busy": {"ips_per_vcpu", "repeats", "spread"},
                     "all_busy": {"ips_per_vcpu", "vcpus", "spread"}},
     "memory": {"copy_gbps", "bytes", "repeats"}}

The translation (`translate`) scales the CPU term of a fit measured on one host by the ratio of the
all-vCPUs-busy rates, target over measuring host: a loader with one worker per vCPU runs with every
vCPU busy, so that rate, not one vCPU's alone, is what a vCPU gives it. Where either side lacks it,
the one-vCPU rates' ratio, said as such; a bare number (`--target-calibration 320`) is a one-vCPU
rate, as before fingerprints. This is not `sizer.store.host_fingerprint`, a machine's identity."""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sizer.errors import SizerError

FINGERPRINT_KIND = "sizer-host-fingerprint"
FINGERPRINT_VERSION = 1


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


@dataclass(frozen=True)
class HostFingerprint:
    """One host's fingerprint (see the module). Rates are images/s per vCPU; None: not measured."""

    cpu_model: str
    threads: int
    one_busy_ips: float | None
    all_busy_ips: float | None = None
    all_busy_vcpus: int | None = None
    memory_gbps: float | None = None
    physical_cores: int | None = None
    threads_per_core: int | None = None
    smt: bool | None = None
    sockets: int | None = None
    numa_nodes: int | None = None
    hypervisor: str | None = None
    method: str = ""
    hostname: str = ""
    taken_at: str = ""
    quick: bool = False
    source: str = ""
    one_busy_repeats: tuple[float, ...] = ()
    one_busy_spread: float | None = None
    all_busy_spread: float | None = None
    memory_bytes: int | None = None
    memory_repeats: tuple[float, ...] = field(default=())

    @property
    def label(self) -> str:
        """The host and its CPU in a few words."""
        host = f"{self.hostname}, " if self.hostname else ""
        return f"{host}{self.cpu_model or 'unknown CPU'}, {self.threads} threads"

    def rate_words(self) -> str:
        parts = []
        if self.one_busy_ips:
            parts.append(f"{self.one_busy_ips:.0f} images/s per vCPU with one busy")
        if self.all_busy_ips:
            parts.append(f"{self.all_busy_ips:.0f} with {self.all_busy_vcpus or 'every'} busy")
        return ", ".join(parts) or "no calibration"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": FINGERPRINT_KIND,
            "version": FINGERPRINT_VERSION,
            "taken_at": self.taken_at,
            "hostname": self.hostname,
            "quick": self.quick,
            "source": self.source,
            "cpu": {"model": self.cpu_model, "threads": self.threads, "physical_cores": self.physical_cores,
                    "threads_per_core": self.threads_per_core, "smt": self.smt, "sockets": self.sockets,
                    "numa_nodes": self.numa_nodes, "hypervisor": self.hypervisor},
            "calibration": {
                "method": self.method,
                "one_busy": {"ips_per_vcpu": self.one_busy_ips, "repeats": list(self.one_busy_repeats),
                             "spread": self.one_busy_spread},
                "all_busy": {"ips_per_vcpu": self.all_busy_ips, "vcpus": self.all_busy_vcpus,
                             "spread": self.all_busy_spread},
            },
            "memory": {"copy_gbps": self.memory_gbps, "bytes": self.memory_bytes, "repeats": list(self.memory_repeats)},
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "fingerprint") -> HostFingerprint:
        """A fingerprint from its JSON form; a SizerError names what is wrong."""
        if not isinstance(data, dict) or data.get("kind") != FINGERPRINT_KIND:
            raise SizerError(f"{where}: not a sizer host fingerprint (no \"kind\": \"{FINGERPRINT_KIND}\"; "
                             "make one with `sizer calibrate --out FILE`)")
        version = data.get("version")
        if version != FINGERPRINT_VERSION:
            raise SizerError(f"{where}: fingerprint version {version!r}, this sizer reads version {FINGERPRINT_VERSION}")
        cpu, cal, memory = _dict(data.get("cpu")), _dict(data.get("calibration")), _dict(data.get("memory"))
        one, every = _dict(cal.get("one_busy")), _dict(cal.get("all_busy"))
        threads = cpu.get("threads")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise SizerError(f"{where}: cpu.threads must be a whole number of 1 or more, got {threads!r}")
        fp = cls(
            cpu_model=str(cpu.get("model") or ""), threads=threads,
            one_busy_ips=_positive(one.get("ips_per_vcpu")), all_busy_ips=_positive(every.get("ips_per_vcpu")),
            all_busy_vcpus=_int(every.get("vcpus")), memory_gbps=_positive(memory.get("copy_gbps")),
            physical_cores=_int(cpu.get("physical_cores")), threads_per_core=_int(cpu.get("threads_per_core")),
            smt=cpu.get("smt") if isinstance(cpu.get("smt"), bool) else None, sockets=_int(cpu.get("sockets")),
            numa_nodes=_int(cpu.get("numa_nodes")), hypervisor=cpu.get("hypervisor") or None,
            method=str(cal.get("method") or ""), hostname=str(data.get("hostname") or ""),
            taken_at=str(data.get("taken_at") or ""), quick=bool(data.get("quick")), source=str(data.get("source") or ""),
            one_busy_repeats=tuple(r for r in (_positive(x) for x in one.get("repeats") or []) if r),
            one_busy_spread=_finite(one.get("spread")), all_busy_spread=_finite(every.get("spread")),
            memory_bytes=_int(memory.get("bytes")),
            memory_repeats=tuple(r for r in (_positive(x) for x in memory.get("repeats") or []) if r),
        )
        if fp.one_busy_ips is None and fp.all_busy_ips is None:
            raise SizerError(f"{where}: the fingerprint holds no per-vCPU rate (calibration.one_busy or all_busy)")
        return fp


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def read_fingerprint(path: Path) -> HostFingerprint:
    """The fingerprint in a JSON file (`sizer calibrate --out FILE`); one SizerError line where it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SizerError(f"cannot read the fingerprint {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SizerError(f"{path}: not JSON ({exc})") from None
    return HostFingerprint.from_json(data, str(path))


def write_fingerprint(fingerprint: HostFingerprint, path: Path) -> None:
    Path(path).write_text(json.dumps(fingerprint.to_json(), indent=2) + "\n")


def fingerprint_of_record(calibration: Mapping[str, Any] | None, host: Mapping[str, Any] | None,
                          source: str = "") -> HostFingerprint | None:
    """A sweep's fingerprint: the one its calibration record stores (`fingerprint`), else one made from
    the record's rates (one vCPU busy: `ips_per_vcpu`; every vCPU of the plan busy: `ips_per_vcpu_loaded`
    at `loaded_vcpus`; every vCPU of the host: `ips_per_vcpu_all_busy`) and the host record. None
    where the record has no rate."""
    calibration = calibration or {}
    stored = calibration.get("fingerprint")
    if isinstance(stored, dict):
        try:
            fp = HostFingerprint.from_json(stored, source or "a sweep's fingerprint")
            return fp if fp.source or not source else _with_source(fp, source)
        except SizerError:
            pass  # a damaged stored fingerprint: the record's own rates still say what they say
    one = _positive(calibration.get("ips_per_vcpu") or calibration.get("calibration_ips"))
    every, vcpus = _positive(calibration.get("ips_per_vcpu_all_busy")), _int(calibration.get("all_busy_vcpus"))
    if every is None:
        every, vcpus = _positive(calibration.get("ips_per_vcpu_loaded")), _int(calibration.get("loaded_vcpus"))
    if one is None and every is None:
        return None
    host = host or {}
    cpu = _dict(host.get("cpu"))
    threads = _int(cpu.get("hardware_threads")) or _int(host.get("threads")) or vcpus or 1
    return HostFingerprint(
        cpu_model=str(cpu.get("model") or host.get("cpu_model") or ""), threads=threads, one_busy_ips=one,
        all_busy_ips=every, all_busy_vcpus=vcpus, physical_cores=_int(cpu.get("physical_cores")),
        threads_per_core=_int(cpu.get("threads_per_core")), smt=cpu.get("smt") if isinstance(cpu.get("smt"), bool) else None,
        sockets=_int(cpu.get("sockets")), numa_nodes=_int(cpu.get("numa_nodes")), hypervisor=cpu.get("hypervisor") or None,
        method=str(calibration.get("method") or ""), hostname=str(host.get("hostname") or ""), source=source,
        one_busy_spread=_finite(calibration.get("spread")),
        all_busy_spread=_finite(calibration.get("all_busy_spread", calibration.get("loaded_spread"))),
    )


def _with_source(fp: HostFingerprint, source: str) -> HostFingerprint:
    from dataclasses import replace

    return replace(fp, source=source)


# ---------------------------------------------------------------------------- the translation
@dataclass(frozen=True)
class CpuTranslation:
    """How the CPU-side figures of one host are carried to the CPU an answer is for: the factor on
    the CPU term, the rates it is the ratio of, and both hosts in words."""

    factor: float
    basis: str  # "none", "all vCPUs busy", "one vCPU busy"
    measured: str  # the measuring host, in words
    answer_for: str  # the CPU the answer is for, in words
    measured_rate: float | None = None
    target_rate: float | None = None
    note: str = ""

    @property
    def translated(self) -> bool:
        return self.factor != 1.0 or self.basis != "none"

    def words(self) -> str:
        """One sentence: which host measured, which CPU the answer is for, and the translation."""
        if self.basis == "none":
            return (f"measured on {self.measured}; the answer is for the measuring host's CPU"
                    + (f" ({self.note})" if self.note else ""))
        return (f"measured on {self.measured}; the answer is for {self.answer_for}: the CPU term x {self.factor:.3g}, "
                f"the ratio of the per-vCPU rates with {self.basis} ({self.target_rate:.0f} / {self.measured_rate:.0f} "
                f"images/s)" + (f"; {self.note}" if self.note else ""))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "words": self.words()}


def translate(measured: HostFingerprint | None, measured_one_ips: float | None,
              target: float | HostFingerprint | None) -> CpuTranslation:
    """The translation of a fit measured on `measured` (its sweeps' fingerprint; `measured_one_ips`:
    the points' one-vCPU calibration where no fingerprint says it) to `target` (a fingerprint, a
    one-vCPU rate, or None: the measuring host's CPU). See the module."""
    one = measured_one_ips or (measured.one_busy_ips if measured else None)
    here = measured.label if measured else "the measuring host"
    if measured and measured.rate_words() != "no calibration":
        here += f" ({measured.rate_words()})"
    own = "the measuring host's CPU" + (f" ({measured.cpu_model})" if measured and measured.cpu_model else "")
    if target is None:
        return CpuTranslation(1.0, "none", here, own,
                              note="no --target-calibration: another CPU model moves every CPU-bound figure")
    if not isinstance(target, HostFingerprint):
        if not one:
            return CpuTranslation(1.0, "none", here, own,
                                  note="the sweep has no calibration, so --target-calibration cannot be applied")
        return CpuTranslation(float(target) / one, "one vCPU busy", here,
                              f"a CPU of {float(target):.0f} images/s per vCPU with one busy", one, float(target))
    there = f"{target.label} ({target.rate_words()})"
    ours = measured.all_busy_ips if measured else None
    if ours and target.all_busy_ips:
        return CpuTranslation(target.all_busy_ips / ours, "all vCPUs busy", here, there, ours, target.all_busy_ips)
    if one and target.one_busy_ips:
        missing = "the measuring host" if not ours else "the target"
        return CpuTranslation(target.one_busy_ips / one, "one vCPU busy", here, there, one, target.one_busy_ips,
                              note=f"{missing} has no rate with every vCPU busy")
    return CpuTranslation(1.0, "none", here, there,
                          note="the two hosts share no calibration rate, so nothing was translated")
