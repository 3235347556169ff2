"""GPU instance catalogs: the built-in clouds, the user's own prices, and SkyPilot's catalog.

A catalog row is an instance type (cloud, vCPUs, RAM, GPU model and count, GPU memory, local NVMe,
on-demand price per hour, region, where the price came from and when) plus the disk classes it can
use. Built-in catalogs ship as package data (`sizer/catalogs/{aws,gcp,azure,alibaba}.csv`); a user
catalog with the same columns adds rows or overrides built-in ones (same cloud, instance type, GPU
and region): negotiated, reserved or spot prices. The format is documented in docs/catalogs.md.
"""

from __future__ import annotations

import ast
import csv
import datetime as _dt
import functools
import io
import math
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Literal, overload

from sizer.errors import SizerError
from sizer.textfiles import read_text

COLUMNS = (
    "cloud",
    "instance_type",
    "vcpus",
    "memory_gib",
    "gpu",
    "gpu_count",
    "gpu_memory_gib",
    "price_per_hour_usd",
    "region",
    "local_nvme_gib",
    "disk_classes",
    "price_source",
    "price_date",
)
REQUIRED = ("cloud", "instance_type", "vcpus", "memory_gib", "gpu", "gpu_count")
BUILTIN_CLOUDS = ("aws", "gcp", "azure", "alibaba")
NETWORK_DISKS = ("ssd", "standard")  # every instance can attach these cloud disks
LOCAL_NVME = "local-nvme"

# Memory per GPU (GiB) of the normalised models, used where a catalog leaves it out.
GPU_MEMORY_GIB = {
    "K80": 12, "M60": 8, "P4": 8, "P100": 16, "V100": 16, "V100-32GB": 32, "T4": 16, "A10": 24, "A10G": 24,
    "L4": 24, "L40": 48, "L40S": 48, "A40": 48, "A100": 40, "A100-80GB": 80, "H100": 80, "H100-PCIE": 80,
    "H100-NVL": 94, "H200": 141, "GH200": 96, "B200": 180, "A6000": 48, "RTX6000-ADA": 48,
    "MI300X": 192,
}
# Accelerators that are not GPUs (SkyPilot lists them too).
_NOT_GPU = re.compile(r"^(tpu|inferentia|trainium|gaudi|hl-|qualcomm|radeon pro v520)", re.IGNORECASE)


@dataclass(frozen=True)
class InstanceType:
    cloud: str
    instance_type: str
    vcpus: int
    memory_gib: float
    gpu: str
    gpu_count: int
    gpu_memory_gib: float
    price_per_hour: float | None
    region: str
    local_nvme_gib: float
    disk_classes: tuple[str, ...]
    price_source: str
    price_date: str

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        """What a user row overrides: the same cloud, type, GPU model and count, and region."""
        return (self.cloud, self.instance_type, normalize_gpu(self.gpu), self.gpu_count, self.region)

    @property
    def priced(self) -> bool:
        return self.price_per_hour is not None

    @property
    def family(self) -> str:
        return instance_family(self.instance_type)

    def to_json(self) -> dict[str, Any]:
        """Typed values (numbers as numbers, no price as null, disk classes as a list)."""
        return {
            "cloud": self.cloud,
            "instance_type": self.instance_type,
            "vcpus": self.vcpus,
            "memory_gib": self.memory_gib,
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "gpu_memory_gib": self.gpu_memory_gib,
            "price_per_hour_usd": self.price_per_hour,
            "region": self.region,
            "local_nvme_gib": self.local_nvme_gib,
            "disk_classes": list(self.disk_classes),
            "price_source": self.price_source,
            "price_date": self.price_date,
        }

    def to_row(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "instance_type": self.instance_type,
            "vcpus": self.vcpus,
            "memory_gib": _fmt(self.memory_gib),
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "gpu_memory_gib": _fmt(self.gpu_memory_gib),
            "price_per_hour_usd": "" if self.price_per_hour is None else _fmt(self.price_per_hour),
            "region": self.region,
            "local_nvme_gib": _fmt(self.local_nvme_gib),
            "disk_classes": ";".join(self.disk_classes),
            "price_source": self.price_source,
            "price_date": self.price_date,
        }


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def instance_family(instance_type: str) -> str:
    """An instance type's name without its size: "p5.48xlarge" -> "p5", "a3-highgpu-8g" ->
    "a3-highgpu", "Standard_NC40ads_H100_v5" -> "Standard_NC_H100_v5", "ecs.gn6i-c4g1.xlarge" ->
    "ecs.gn6i". A name of no known pattern is its own family."""
    if instance_type.startswith("Standard_"):  # series letters, vCPUs, feature letters, GPU, version
        return re.sub(r"^(Standard_[A-Z]+)\d+[a-z]*", r"\1", instance_type)
    if instance_type.startswith("ecs."):  # family, then CPU-to-GPU ratio and size
        return instance_type.split("-")[0]
    sized = re.fullmatch(r"(.+)-\d+g?", instance_type)  # family, then vCPUs or GPUs
    if sized:
        return sized.group(1)
    return instance_type.split(".")[0]  # family.size


def whole_cents(price: float) -> int:
    """A price in whole cents, rounded half up. Prices are compared at this grain: a multi-GPU row
    whose price divides to a fraction of a cent below a one-GPU row's (21.53307 / 4 against 5.38327)
    costs the same."""
    return int(Decimal(repr(price)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) * 100)


# ---------------------------------------------------------------------------- GPU names
_MEM = re.compile(r"(\d+)\s*G(?:I?B)?\b", re.IGNORECASE)


def normalize_gpu(name: str) -> str:
    """One name per GPU model: "NVIDIA H100 80GB HBM3" -> "H100", "A100-SXM4-80GB" -> "A100-80GB".

    Memory variants that change what fits (A100 40/80 GB, V100 16/32 GB) and form factors that change
    speed (H100 NVL, H100 PCIe) stay distinct; vendor words, interconnect and memory type do not.
    """
    text = (name or "").strip()
    if not text:
        return ""
    upper = text.upper().replace("_", " ")
    upper = re.sub(r"\b(NVIDIA|TESLA|GEFORCE|QUADRO|AMD|INSTINCT)\b", " ", upper)
    upper = upper.replace("TENSOR CORE GPU", " ").replace("GPU", " ")
    mem = _MEM.search(upper)
    mem_gb = int(mem.group(1)) if mem else None
    tokens = [t for t in re.split(r"[\s\-/]+", upper) if t]
    if not tokens:
        return text
    base = tokens[0]
    rest = set(tokens[1:])
    if base == "RTX" and len(tokens) > 1:
        base = "RTX" + tokens[1]
        if "ADA" in rest:
            return base + "-ADA"
        return base
    if base in ("GH200",):
        return "GH200"
    if base == "H100":
        if "NVL" in rest or mem_gb == 94:
            return "H100-NVL"
        if "PCIE" in rest:
            return "H100-PCIE"
        return "H100"  # SXM/HBM3 and the "H100 Mega" of GCP A3 Mega are the same GPU
    if base == "A100":
        return "A100-80GB" if mem_gb == 80 or "80GB" in rest else "A100"
    if base == "V100":
        return "V100-32GB" if mem_gb == 32 or "32GB" in rest else "V100"
    if base == "A10G" or base == "A10":
        return base
    if base in ("L40S", "L40", "L4", "T4", "P100", "P4", "K80", "M60", "A40", "H200", "B200", "A6000", "MI300X"):
        return base
    return base


# ---------------------------------------------------------------------------- parsing
def _cell(raw: dict[str, str], column: str) -> str:
    return (raw.get(column) or "").strip()


@overload
def _number(raw: dict[str, str], column: str, where: str, integer: bool = False, optional: Literal[False] = False,
            positive: bool = True) -> float: ...


@overload
def _number(raw: dict[str, str], column: str, where: str, integer: bool = False, optional: bool = False,
            positive: bool = True) -> float | None: ...


def _number(raw: dict[str, str], column: str, where: str, integer: bool = False, optional: bool = False,
            positive: bool = True) -> float | None:
    text = _cell(raw, column)
    if text == "":
        if optional:
            return None
        raise SizerError(f"{where}, column {column!r}: empty")
    try:
        value = float(text)
    except ValueError:
        raise SizerError(f"{where}, column {column!r}: not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        need = "> 0" if positive else ">= 0"
        raise SizerError(f"{where}, column {column!r}: must be a finite number {need}, got {text!r}")
    if integer:
        if value != int(value):
            raise SizerError(f"{where}, column {column!r}: must be a whole number, got {text!r}")
        return int(value)
    return value


def _disk_list(text: str, local_nvme_gib: float, where: str, known: Iterable[str] | None) -> tuple[str, ...]:
    if not text:
        classes = list(NETWORK_DISKS)
        if local_nvme_gib > 0:
            classes.insert(0, LOCAL_NVME)
        return tuple(classes)
    classes = [c.strip() for c in re.split(r"[;|\s]+", text) if c.strip()]
    known = set(known) if known is not None else None
    for c in classes:
        if known is not None and c not in known:
            raise SizerError(f"{where}, column 'disk_classes': unknown disk class {c!r} (known: {', '.join(sorted(known))})")
    if LOCAL_NVME in classes and local_nvme_gib <= 0:
        raise SizerError(f"{where}, column 'disk_classes': {LOCAL_NVME} listed but local_nvme_gib is 0")
    return tuple(dict.fromkeys(classes))


def parse_catalog(text: str, name: str, known_disks: Iterable[str] | None = None,
                  base: dict[tuple, InstanceType] | None = None) -> list[InstanceType]:
    """Parse catalog CSV text; a malformed row is refused with one line naming the row and column.

    `base` holds built-in rows: a user row may leave vcpus/memory/GPU memory/local NVMe/disk classes
    empty to keep the built-in row's values and change only the price.
    """
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SizerError(f"{name}: missing column(s) {', '.join(missing)} (columns: {','.join(COLUMNS)})")
    price_column = "price_per_hour_usd" if "price_per_hour_usd" in header else (
        "price_per_hour" if "price_per_hour" in header else None)
    rows: list[InstanceType] = []
    for i, raw in enumerate(reader, start=2):
        where = f"{name}: row {i}"
        if None in raw:  # more cells than header columns
            raise SizerError(f"{where}: more cells than columns in the header")
        for column in ("cloud", "instance_type", "gpu"):
            if not _cell(raw, column):
                raise SizerError(f"{where}, column {column!r}: empty")
        cloud = _cell(raw, "cloud").lower()
        gpu = _cell(raw, "gpu")
        gpu_count = _number(raw, "gpu_count", where, integer=True)
        region = _cell(raw, "region")
        prior = None
        if base is not None:
            prior = base.get((cloud, _cell(raw, "instance_type"), normalize_gpu(gpu), gpu_count, region))
        optional_shape = prior is not None
        vcpus = _number(raw, "vcpus", where, integer=True, optional=optional_shape)
        memory = _number(raw, "memory_gib", where, optional=optional_shape)
        gpu_mem = _number(raw, "gpu_memory_gib", where, optional=True)
        nvme = _number(raw, "local_nvme_gib", where, optional=True, positive=False)
        price = _number(raw, price_column, where, optional=True) if price_column else None
        # vcpus/memory are None only when optional_shape, i.e. there is a prior row
        if vcpus is None:
            assert prior is not None
            vcpus = prior.vcpus
        if memory is None:
            assert prior is not None
            memory = prior.memory_gib
        if gpu_mem is None:
            gpu_mem = prior.gpu_memory_gib if prior else GPU_MEMORY_GIB.get(normalize_gpu(gpu))
            if gpu_mem is None:
                raise SizerError(f"{where}, column 'gpu_memory_gib': empty, and {gpu!r} is not a GPU sizer knows")
        if nvme is None:
            nvme = prior.local_nvme_gib if prior else 0.0
        disks_text = _cell(raw, "disk_classes")
        if not disks_text and prior is not None and nvme == prior.local_nvme_gib:
            disks = prior.disk_classes
        else:
            disks = _disk_list(disks_text, nvme, where, known_disks)
        rows.append(
            InstanceType(
                cloud=cloud,
                instance_type=_cell(raw, "instance_type"),
                vcpus=int(vcpus),
                memory_gib=float(memory),
                gpu=gpu,
                gpu_count=int(gpu_count),
                gpu_memory_gib=float(gpu_mem),
                price_per_hour=price,
                region=region,
                local_nvme_gib=float(nvme),
                disk_classes=disks,
                price_source=_cell(raw, "price_source") or (f"user catalog {name}" if base is not None else ""),
                price_date=_price_date(_cell(raw, "price_date"), where),
            )
        )
    return rows


def _price_date(text: str, where: str) -> str:
    """A row's price date: empty (unknown) or a real calendar date written YYYY-MM-DD."""
    if not text:
        return text
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            _dt.date.fromisoformat(text)
            return text
    except ValueError:
        pass
    raise SizerError(f"{where}, column 'price_date': {text!r} is not a calendar date (YYYY-MM-DD)")


def builtin_rows(clouds: Iterable[str] | None = None) -> list[InstanceType]:
    rows: list[InstanceType] = []
    for cloud in BUILTIN_CLOUDS:
        if clouds and cloud not in clouds:
            continue
        text = resources.files("sizer").joinpath(f"catalogs/{cloud}.csv").read_text()
        rows.extend(parse_catalog(text, f"built-in {cloud}.csv"))
    return rows


def load_catalog(user_files: list[Path] | tuple = (), builtin: bool = True, clouds=None, gpu=None,
                 known_disks: Iterable[str] | None = None) -> list[InstanceType]:
    """Built-in rows (unless `builtin` is False) with user files applied in order, then filtered.

    `clouds`: names to keep (a string or a list); `gpu`: a GPU model, compared after normalize_gpu.
    """
    if isinstance(clouds, str):
        clouds = [clouds]
    cloud_set = {c.lower() for c in clouds} if clouds else None
    if cloud_set:
        unknown_builtin = [c for c in cloud_set if c not in BUILTIN_CLOUDS]
        if unknown_builtin and not user_files:
            raise SizerError(f"unknown cloud {unknown_builtin[0]!r} (built-in: {', '.join(BUILTIN_CLOUDS)})")
    rows: dict[tuple, InstanceType] = {}
    if builtin:
        for row in builtin_rows():
            rows[row.key] = row
    for path in user_files or ():
        path = Path(path)
        text = read_text(path, "catalog")
        for row in parse_catalog(text, str(path), known_disks, base=rows):
            rows[row.key] = row
    out = list(rows.values())
    if cloud_set:
        out = [r for r in out if r.cloud in cloud_set]
    if gpu:
        want = normalize_gpu(gpu)
        out = [r for r in out if normalize_gpu(r.gpu) == want]
    return out


def write_catalog(rows: Iterable[InstanceType], path: str | Path | None = None,
                  blank_local_nvme: bool = False) -> str:
    """Catalog CSV text (and the file, when a path is given).

    `blank_local_nvme` leaves local_nvme_gib and disk_classes empty (unknown, as in an import), so
    that as a user catalog the rows keep the built-in values.
    """
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        data = row.to_row()
        if blank_local_nvme:
            data["local_nvme_gib"] = data["disk_classes"] = ""
        writer.writerow(data)
    text = buf.getvalue()
    if path is not None:
        Path(path).write_text(text)
    return text


# ---------------------------------------------------------------------------- SkyPilot import
# GCP machine types with a fixed GPU (SkyPilot lists the host and the GPU on separate rows).
_GCP_FIXED_GPU = (
    (re.compile(r"^a2-highgpu-(\d+)g$"), "A100"),
    (re.compile(r"^a2-megagpu-(\d+)g$"), "A100"),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB"),
    (re.compile(r"^a3-highgpu-(\d+)g$"), "H100"),
    (re.compile(r"^a3-edgegpu-(\d+)g$"), "H100"),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA"),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200"),
    (re.compile(r"^a4-highgpu-(\d+)g$"), "B200"),
)
_G2_GPUS = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}


@dataclass
class ImportReport:
    rows: list[InstanceType]
    skipped: dict[str, int]


def _gcp_fixed_gpu(instance_type: str, vcpus: float) -> tuple[str, int] | None:
    for pattern, gpu in _GCP_FIXED_GPU:
        m = pattern.match(instance_type)
        if m:
            return gpu, int(m.group(1))
    m = re.match(r"^g2-standard-(\d+)$", instance_type)
    if m and int(m.group(1)) in _G2_GPUS:
        return "L4", _G2_GPUS[int(m.group(1))]
    return None


def _gpu_memory_from_info(info: str, count: int) -> float | None:
    """AWS rows carry GpuInfo as a Python literal with MemoryInfo.SizeInMiB."""
    if not info or "{" not in info:
        return None
    try:
        data = ast.literal_eval(info)
    except (ValueError, SyntaxError):
        return None
    try:
        total = data.get("TotalGpuMemoryInMiB")
        if total:
            return round(float(total) / 1024 / max(count, 1), 1)
        gpus = data.get("Gpus") or []
        if gpus:
            return round(float(gpus[0]["MemoryInfo"]["SizeInMiB"]) / 1024, 1)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return None


def _sky_number(raw: dict[str, str], column: str, where: str, default: float | None = None) -> float:
    """A number of a SkyPilot row; an empty cell is `default` where one is given."""
    text = _cell(raw, column)
    if not text and default is not None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise SizerError(f"{where}, column {column!r}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise SizerError(f"{where}, column {column!r}: not a finite number: {text!r}")
    return value


def import_skypilot(text: str, name: str, cloud: str | None = None, regions: Iterable[str] | None = None,
                    spot: bool = False, price_date: str | None = None) -> ImportReport:
    """Convert SkyPilot's catalog `vms.csv` (any cloud) to sizer catalog rows.

    One row per (instance type, GPU, region): the availability zones of a region share a price
    (the lowest is kept, which matters only for spot). GCP's separate host and accelerator rows are
    combined for the machine types whose GPU is fixed (A2, A3, A4, G2); N1 hosts with attachable GPUs
    are skipped (counted), since any of several GPUs can be attached. TPUs and other non-GPU
    accelerators are skipped. Local NVMe is not in vms.csv: it is left empty (0, or the built-in
    row's value when the file is used as a user catalog).
    """
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    needed = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "Region")
    missing = [c for c in needed if c not in header]
    if missing:
        raise SizerError(f"{name}: not a SkyPilot vms.csv: missing column(s) {', '.join(missing)}")
    if spot and "SpotPrice" not in header:
        raise SizerError(f"{name}: --spot needs the SpotPrice column")
    cloud = (cloud or _guess_cloud(name) or "").lower()
    if not cloud:
        raise SizerError(f"{name}: cannot tell the cloud from the path; give --cloud")
    region_set = set(regions) if regions else None
    skipped: dict[str, int] = {}
    date = price_date or _dt.date.today().isoformat()
    price_kind = "spot" if spot else "on-demand"
    source = f"SkyPilot catalog {Path(name).name} ({price_kind})"

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    def price_of(raw: dict[str, str], i: int) -> float | None:
        col = "SpotPrice" if spot else "Price"
        if not _cell(raw, col):
            return None
        value = _sky_number(raw, col, f"{name}: row {i}")
        return value if value > 0 else None

    hosts: dict[tuple[str, str], tuple[float, float, float | None]] = {}  # (type, region) -> vcpus, mem, price
    accel: dict[tuple[str, int, str], float] = {}  # (gpu, count, region) -> price (GCP accelerator rows)
    out: dict[tuple, InstanceType] = {}
    for i, raw in enumerate(reader, start=2):
        region = _cell(raw, "Region")
        if region_set is not None and region not in region_set:
            continue
        itype = _cell(raw, "InstanceType")
        acc = _cell(raw, "AcceleratorName")
        if acc and _NOT_GPU.match(acc):
            skip("not a GPU (TPU, Inferentia, ...)")
            continue
        price = price_of(raw, i)
        if not itype:
            if acc:  # a GCP accelerator row
                count = int(_sky_number(raw, "AcceleratorCount", f"{name}: row {i}", default=1.0))
                if price is not None:
                    key = (acc, count, region)
                    accel[key] = min(price, accel.get(key, math.inf))
            continue
        vcpus = _sky_number(raw, "vCPUs", f"{name}: row {i}")
        memory = _sky_number(raw, "MemoryGiB", f"{name}: row {i}")
        if not acc:
            hosts[(itype, region)] = (vcpus, memory, price)
            continue
        count = int(_sky_number(raw, "AcceleratorCount", f"{name}: row {i}", default=1.0))
        if price is None:
            skip("no price")
            continue
        gpu_mem = _gpu_memory_from_info(_cell(raw, "GpuInfo"), count) or GPU_MEMORY_GIB.get(normalize_gpu(acc))
        if gpu_mem is None:
            skip("GPU model without a known memory size")
            continue
        _put(out, InstanceType(cloud, itype, int(round(vcpus)), memory, acc, count, float(gpu_mem), price, region,
                               0.0, _disk_list("", 0.0, "", None), source, date))
    # GCP: fixed-GPU machine types = host row + accelerator row(s) of the same region.
    for (itype, region), (vcpus, memory, host_price) in hosts.items():
        fixed = _gcp_fixed_gpu(itype, vcpus)
        if fixed is None:
            if itype.startswith("n1-"):
                skip("N1 host (GPUs are attachable, not fixed)")
            continue
        gpu, count = fixed
        gpu_price = accel.get((gpu, count, region))
        if gpu_price is None and (gpu, 1, region) in accel:
            gpu_price = accel[(gpu, 1, region)] * count
        if gpu_price is None or host_price is None:
            skip("GCP host without a matching accelerator price")
            continue
        gpu_mem = GPU_MEMORY_GIB.get(normalize_gpu(gpu), 0.0)
        _put(out, InstanceType(cloud, itype, int(round(vcpus)), memory, gpu, count, float(gpu_mem),
                               round(host_price + gpu_price, 6), region, 0.0, _disk_list("", 0.0, "", None),
                               source + ": host + accelerator rows", date))
    rows = sorted(out.values(), key=lambda r: (r.region, normalize_gpu(r.gpu), r.gpu_count, r.price_per_hour or 0))
    return ImportReport(rows, skipped)


def _put(out: dict[tuple, InstanceType], row: InstanceType) -> None:
    key = row.key
    if key in out and (out[key].price_per_hour or math.inf) <= (row.price_per_hour or math.inf):
        return
    out[key] = row


def _guess_cloud(name: str) -> str | None:
    parts = [p.lower() for p in Path(name).parts]
    for cloud in ("aws", "gcp", "azure", "lambda", "oci", "runpod", "nebius", "paperspace", "fluidstack",
                  "cudo", "vast", "do", "ibm", "scp", "kubernetes"):
        if cloud in parts:
            return cloud
    return None



# ---------------------------------------------------------------------------- cloud disk types
@functools.lru_cache(maxsize=1)
def cloud_disk_types() -> dict[tuple[str, str], list[dict[str, str]]]:
    """(cloud, canonical class) -> the cloud's disk types in that class, with caps and provenance."""
    text = resources.files("sizer").joinpath("catalogs/cloud_disks.csv").read_text()
    out: dict[tuple[str, str], list[dict[str, str]]] = {}
    for raw in csv.DictReader(io.StringIO(text)):
        out.setdefault((raw["cloud"], raw["canonical_class"]), []).append(dict(raw))
    return out


def disk_types_for(cloud: str, canonical: str) -> list[str]:
    """Names of a cloud's disk types mapped to a canonical class ("ssd" on gcp -> pd-balanced, pd-ssd)."""
    return [row["disk_type"] for row in cloud_disk_types().get((cloud, canonical), [])]
