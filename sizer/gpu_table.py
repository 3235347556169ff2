"""The GPU table: each GPU model's published rates, from which sizer predicts a workload's speed on
GPUs it did not measure (sizer.model.gpu_speed) and which batch fits its memory.

One row per GPU model the built-in catalogs sell (`sizer/catalogs/gpus.csv`, names as
`sizer.catalog.normalize_gpu` gives them): memory (GiB), memory bandwidth (GB/s), dense tensor-core
TFLOPS in bf16, fp16 and tf32 (empty where the GPU has no such tensor cores), fp32 TFLOPS, SM count
and boost clock (MHz), the form factor the rates are for, and the public datasheet each row's
figures were read from (`source`, with `figures_read` saying which figures came from where).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

from sizer.catalog import normalize_gpu
from sizer.errors import SizerError

COLUMNS = ("gpu", "memory_gib", "memory_bandwidth_gbps", "bf16_tensor_tflops", "fp16_tensor_tflops",
           "tf32_tensor_tflops", "fp32_tflops", "sm_count", "boost_clock_mhz", "form_factor", "source",
           "figures_read")
_REQUIRED_NUMBERS = ("memory_gib", "memory_bandwidth_gbps", "fp32_tflops", "sm_count", "boost_clock_mhz")
_OPTIONAL_NUMBERS = ("bf16_tensor_tflops", "fp16_tensor_tflops", "tf32_tensor_tflops")
PRECISIONS = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class GpuSpec:
    gpu: str
    memory_gib: float
    memory_bandwidth_gbps: float
    bf16_tensor_tflops: float | None
    fp16_tensor_tflops: float | None
    tf32_tensor_tflops: float | None
    fp32_tflops: float
    sm_count: int
    boost_clock_mhz: float
    form_factor: str
    source: str
    figures_read: str

    def matrix_tflops(self, precision: str) -> tuple[float, str]:
        """The dense rate matrix work at `precision` runs at here, and which figure that is: bf16 on
        bf16 tensor cores, else fp16 ones (a GPU without bf16 runs such a job in fp16), else the
        fp32 units; fp32 on tf32 tensor cores (the PyTorch workloads allow TF32), else the fp32
        units."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        order = {"bf16": ("bf16_tensor_tflops", "fp16_tensor_tflops"), "fp16": ("fp16_tensor_tflops",),
                 "fp32": ("tf32_tensor_tflops",)}[precision]
        for column in order:
            value = getattr(self, column)
            if value:
                return float(value), column
        return self.fp32_tflops, "fp32_tflops"

    @property
    def sm_clock(self) -> float:
        """SMs times boost clock (SM-GHz): what a kernel bound by neither the tensor cores nor the
        memory scales with (its waves over the SMs, at the clock)."""
        return self.sm_count * self.boost_clock_mhz / 1000.0

    @property
    def memory_bandwidth(self) -> float:
        """Memory bandwidth in bytes per second."""
        return self.memory_bandwidth_gbps * 1e9


class GpuTable:
    """GPU rows by normalised name."""

    def __init__(self, rows: Iterable[GpuSpec]):
        self.rows = {r.gpu: r for r in rows}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_gpu(name) in self.rows

    def __iter__(self):
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, name: str) -> GpuSpec:
        """The row of a GPU by any of its names ("NVIDIA H100 80GB HBM3" -> H100); SizerError
        for a GPU the table lacks."""
        key = normalize_gpu(name)
        if key not in self.rows:
            raise SizerError(f"GPU {name!r} ({key}) is not in the GPU table; it has {', '.join(self.rows)}")
        return self.rows[key]

    def missing(self, gpus: Iterable[str]) -> list[str]:
        """The normalised names among `gpus` the table has no row for."""
        return sorted({normalize_gpu(g) for g in gpus if g} - set(self.rows))


def _number(raw: str, column: str, where: str, optional: bool = False) -> float | None:
    text = raw.strip()
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise SizerError(f"{where}: {column} {raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise SizerError(f"{where}: {column} must be > 0, got {raw!r}")
    return value


def _row(raw: dict[str, str], where: str) -> GpuSpec:
    name = (raw.get("gpu") or "").strip()
    if not name:
        raise SizerError(f"{where}: no gpu name")
    where = f"{where} ({name})"
    if normalize_gpu(name) != name:
        raise SizerError(f"{where}: name the GPU as the catalogs do: {normalize_gpu(name)!r}")
    source = (raw.get("source") or "").strip()
    if not source.startswith(("https://", "http://")):
        raise SizerError(f"{where}: source must be the public datasheet's URL, got {source!r}")
    numbers = {c: _number(raw.get(c) or "", c, where) for c in _REQUIRED_NUMBERS}
    optional = {c: _number(raw.get(c) or "", c, where, optional=True) for c in _OPTIONAL_NUMBERS}
    sm_count = numbers["sm_count"]
    if sm_count is None or sm_count != int(sm_count):
        raise SizerError(f"{where}: sm_count must be a whole number, got {raw.get('sm_count')!r}")
    return GpuSpec(gpu=name, memory_gib=float(numbers["memory_gib"] or 0),
                   memory_bandwidth_gbps=float(numbers["memory_bandwidth_gbps"] or 0),
                   bf16_tensor_tflops=optional["bf16_tensor_tflops"], fp16_tensor_tflops=optional["fp16_tensor_tflops"],
                   tf32_tensor_tflops=optional["tf32_tensor_tflops"], fp32_tflops=float(numbers["fp32_tflops"] or 0),
                   sm_count=int(sm_count), boost_clock_mhz=float(numbers["boost_clock_mhz"] or 0),
                   form_factor=(raw.get("form_factor") or "").strip(), source=source,
                   figures_read=(raw.get("figures_read") or "").strip())


def parse_gpu_table(text: str, origin: str = "gpus.csv") -> GpuTable:
    """A GPU table from CSV text; one SizerError line, naming the row, for the first bad one."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SizerError(f"{origin}: missing column(s) {', '.join(missing)}")
    rows: list[GpuSpec] = []
    seen: set[str] = set()
    for number, raw in enumerate(reader, start=2):  # line 1 is the header
        row = _row(raw, f"{origin} line {number}")
        if row.gpu in seen:
            raise SizerError(f"{origin} line {number}: GPU {row.gpu} appears twice")
        seen.add(row.gpu)
        rows.append(row)
    if not rows:
        raise SizerError(f"{origin}: no GPU rows")
    return GpuTable(rows)


def load_gpu_table(path: str | Path | None = None) -> GpuTable:
    """The built-in table (`sizer/catalogs/gpus.csv`) or the one at `path`."""
    if path is None:
        text = resources.files("sizer").joinpath("catalogs/gpus.csv").read_text(encoding="utf-8")
        return parse_gpu_table(text, "sizer/catalogs/gpus.csv")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SizerError(f"cannot read GPU table {p}: {exc.strerror or exc}") from None
    return parse_gpu_table(text, str(p))
