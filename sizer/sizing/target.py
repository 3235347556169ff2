"""What an answer is judged against: the GPU to size for, its catalog rows, and the host's speed
over the sweeps that measured it. The report, `sizer recommend` and the adaptive sweep choose them
here alike."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

from sizer.catalog import InstanceType, load_catalog, normalize_gpu
from sizer.errors import SizerError
from sizer.fingerprint import HostFingerprint, fingerprint_of_record
from sizer.values import finite_number

# The GPU a report sizes for where neither --gpu nor a measured host names one.
DEFAULT_TARGET_GPU = "H100"


def host_gpu_names(host: dict[str, Any] | None) -> list[str]:
    """The GPU models a host record names: its probed devices, else its plain `gpus` list."""
    host = host or {}
    gpu = host.get("gpu")
    devices = gpu.get("devices", []) if isinstance(gpu, dict) else []
    names = [str(d.get("name")) for d in devices if d.get("name")]
    return names or [str(g) for g in host.get("gpus") or [] if g]


def target_gpu(gpu: str | None, host_gpus: Sequence[str]) -> tuple[str, str]:
    """The GPU to size for and where that choice came from: --gpu, else the GPU measured most, else
    the default, said as such."""
    if gpu:
        return normalize_gpu(gpu), "--gpu"
    if host_gpus:
        return normalize_gpu(Counter(host_gpus).most_common(1)[0][0]), "measured host"
    return DEFAULT_TARGET_GPU, "default: the measured host has no GPU"


def target_catalog(target: str, gpu: str | None, catalog_files: Sequence[str | Path]) -> list[InstanceType]:
    """The catalog rows of the target GPU; an explicit --gpu no row has is an error."""
    catalog = load_catalog(user_files=tuple(catalog_files), builtin=True, gpu=target)
    if not catalog and gpu:
        known = sorted({normalize_gpu(r.gpu) for r in load_catalog(user_files=tuple(catalog_files))})
        raise SizerError(f"no catalog row has GPU {gpu!r} (known: {', '.join(known)})")
    return catalog


def sweep_host_speeds(calibrations: Iterable[dict[str, Any] | None]) -> tuple[tuple[float, ...], ...]:
    """Per sweep calibration record that holds its host's speed (`timeline`: the calibration repeated
    at the start, during and at the end of the sweep), every repeat's rate (images/s)."""
    out = []
    for calibration in calibrations:
        timeline = (calibration or {}).get("timeline") or []
        ips = [float(x) for t in timeline if isinstance(t, dict) for x in (t.get("ips") or [])
               if finite_number(x) and float(x) > 0]
        if ips:
            out.append(tuple(ips))
    return tuple(out)


def measured_fingerprint(sweeps: Iterable[Any]) -> HostFingerprint | None:
    """The measuring host's fingerprint (`sizer.fingerprint`): the one the newest sweep with a
    calibration stored, else made from its calibration record and host (sweeps: rows with `id`,
    `calibration` and `host`, as `sizer.store.Store.sweeps` gives them). None without a calibration."""
    for sweep in reversed(list(sweeps)):
        found = fingerprint_of_record(getattr(sweep, "calibration", None), getattr(sweep, "host", None),
                                      f"sweep {getattr(sweep, 'id', '?')}")
        if found is not None:
            return found
    return None
