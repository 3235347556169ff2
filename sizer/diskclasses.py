"""Disk classes: the bandwidth and IOPS caps that emulate a cloud disk on the host's own device.

Canonical classes come from the built-in table (`sizer/catalogs/disk_classes.csv`, built from the
clouds' published caps); a user file with the same columns overrides or adds classes.
`local-nvme` has no cap but the device's own.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, overload

from sizer.errors import SizerError
from sizer.textfiles import read_text

CANONICAL = ("local-nvme", "ssd", "standard")
COLUMNS = ("name", "read_mbps", "read_iops", "write_mbps", "write_iops", "description")


@dataclass(frozen=True)
class DiskClass:
    name: str
    read_mbps: float | None  # MB/s (10^6 bytes), None = not throttled
    read_iops: int | None
    write_mbps: float | None
    write_iops: int | None
    description: str = ""

    @property
    def throttled(self) -> bool:
        return any(v is not None for v in (self.read_mbps, self.read_iops, self.write_mbps, self.write_iops))

    @property
    def read_bps(self) -> int | None:
        return None if self.read_mbps is None else int(self.read_mbps * 1_000_000)

    @property
    def write_bps(self) -> int | None:
        return None if self.write_mbps is None else int(self.write_mbps * 1_000_000)


@overload
def _opt(value: str, row: int, column: str, name: str, integer: Literal[True]) -> int | None: ...


@overload
def _opt(value: str, row: int, column: str, name: str, integer: Literal[False]) -> float | None: ...


def _opt(value: str, row: int, column: str, name: str, integer: bool) -> float | int | None:
    value = (value or "").strip()
    if value in ("", "none", "-"):
        return None
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        raise SizerError(f"{name}: row {row}, column {column!r}: not a number: {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise SizerError(f"{name}: row {row}, column {column!r}: must be a finite number > 0 (leave empty for no cap), "
                         f"got {value!r}")
    return number


def parse_disk_classes(text: str, name: str) -> dict[str, DiskClass]:
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in ("name", "read_mbps", "read_iops") if c not in (reader.fieldnames or [])]
    if missing:
        raise SizerError(f"{name}: missing column(s) {', '.join(missing)} (columns: {','.join(COLUMNS)})")
    out: dict[str, DiskClass] = {}
    for i, raw in enumerate(reader, start=2):
        cls_name = (raw.get("name") or "").strip()
        if not cls_name:
            raise SizerError(f"{name}: row {i}, column 'name': empty")
        out[cls_name] = DiskClass(
            name=cls_name,
            read_mbps=_opt(raw.get("read_mbps", ""), i, "read_mbps", name, False),
            read_iops=_opt(raw.get("read_iops", ""), i, "read_iops", name, True),
            write_mbps=_opt(raw.get("write_mbps", ""), i, "write_mbps", name, False),
            write_iops=_opt(raw.get("write_iops", ""), i, "write_iops", name, True),
            description=(raw.get("description") or "").strip(),
        )
    return out


def load_disk_classes(user_file: str | Path | None = None) -> dict[str, DiskClass]:
    text = resources.files("sizer").joinpath("catalogs/disk_classes.csv").read_text()
    table = parse_disk_classes(text, "built-in disk_classes.csv")
    if user_file:
        path = Path(user_file)
        user_text = read_text(path, "disk-class file")
        table.update(parse_disk_classes(user_text, str(path)))
    return table


def get_disk_class(name: str, table: dict[str, DiskClass] | None = None) -> DiskClass:
    table = table if table is not None else load_disk_classes()
    if name not in table:
        raise SizerError(f"unknown disk class {name!r} (known: {', '.join(sorted(table))})")
    return table[name]
