"""Command-line options that several commands share, each flag declared once here.

An alias (`JsonOutput`, `StoreInput`, ...) is the whole option: type, flag and help. Where commands
say different things of one flag (what `--json` prints instead, what `--store` is for), the command
gives its own help to the flag's function (`json_flag`, `store_flag`, ...) and the flag stays here:

    as_json: Annotated[bool, json_flag("Print a JSON summary.")] = False

Every float option takes `callback=finite`, or a callback that calls it and checks the option's range.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from sizer.errors import SizerError
from sizer.fingerprint import HostFingerprint, read_fingerprint
from sizer.levels import check_confidence, check_tolerance


def finite(value: float | None) -> float | None:
    """A float option's callback: NaN and infinities are refused while the command line is read,
    before any work."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number, got {value}")
    return value


def tolerance_level(value: float) -> float:
    """`--tolerance`'s callback: a finite fraction between 0 and 1, refused in one line where it enters."""
    finite(value)
    check_tolerance(value, "--tolerance")
    return value


def confidence_level(value: float) -> float:
    """`--confidence`'s callback: a finite fraction between 0 and 1, refused in one line where it enters."""
    finite(value)
    check_confidence(value, "--confidence")
    return value


def positive(value: float | None, name: str) -> float | None:
    finite(value)
    if value is not None and not value > 0:
        raise SizerError(f"{name} must be > 0, got {value:g}")
    return value


def json_flag(help_text: str = "Print machine-readable JSON.") -> Any:
    return typer.Option("--json", help=help_text)


def store_flag(help_text: str) -> Any:
    return typer.Option("--store", help=help_text)


def input_flag(help_text: str) -> Any:
    return typer.Option("--input", help=help_text)


def out_flag(help_text: str) -> Any:
    return typer.Option("--out", help=help_text)


def gpu_flag(help_text: str) -> Any:
    return typer.Option("--gpu", help=help_text)


def cloud_flag(help_text: str) -> Any:
    return typer.Option("--cloud", help=help_text)


def catalog_flag(help_text: str) -> Any:
    return typer.Option("--catalog", help=help_text)


def disk_classes_flag(help_text: str) -> Any:
    return typer.Option("--disk-classes", help=help_text)


def limits_flag(help_text: str) -> Any:
    return typer.Option("--limits", help=help_text)


def cpu_cost_flag(help_text: str) -> Any:
    return typer.Option("--cpu-cost", help=help_text)


JsonOutput = Annotated[bool, json_flag()]
StoreInput = Annotated[Optional[Path], store_flag("A sweep's results store (SQLite).")]
PointsInput = Annotated[Optional[Path], input_flag("A points.csv (the format `sizer report` writes).")]
ReportFolder = Annotated[Path, out_flag("Folder for report.html, results.json and points.csv.")]
CatalogFiles = Annotated[Optional[list[Path]], catalog_flag("Your own catalog CSV (prices); repeatable.")]
Tolerance = Annotated[float, typer.Option(
    "--tolerance", callback=tolerance_level, help="Largest accepted slowdown against the GPU ceiling (0.05 = 5%).")]
DatasetGib = Annotated[Optional[float], typer.Option(
    "--dataset-gib", callback=lambda v: positive(v, "--dataset-gib"),
    help="Size of the real dataset in GiB; the RAM axis scales to it.")]
JobSamples = Annotated[Optional[float], typer.Option(
    "--job-samples", callback=lambda v: positive(v, "--job-samples"),
    help="Samples in one job (e.g. 115.2e6 = 90 epochs of ImageNet).")]
Confidence = Annotated[float, typer.Option(
    "--confidence", callback=confidence_level, metavar="LEVEL",
    help="Confidence of every range, between 0 and 1: the pick is the cheapest instance within tolerance at "
         "the pessimistic end of its range at this level (0.5: the figure itself, no margin).")]
DiskClassesFile = Annotated[Optional[Path], disk_classes_flag("CSV of extra or overriding disk classes.")]
LimitBackendName = Annotated[Optional[str], limits_flag("Limit backend: auto, cgroup-v2, cgroup-v1, affinity.")]
CpuQuota = Annotated[bool, typer.Option(
    "--cpu-quota",
    help="Also cap CPU time with a CFS quota of the vCPUs, as a container's CPU limit does (Kubernetes "
         "limits.cpu). Off: the cpuset alone pins the shape.")]


def target_calibration(text: str | None) -> float | HostFingerprint | None:
    """`--target-calibration`: a host fingerprint file (`sizer calibrate --out FILE`), or a number,
    the target CPU's one-vCPU rate in images/s; a bad one is refused in one line before any work."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return read_fingerprint(Path(text))
    if not math.isfinite(value) or value <= 0:
        raise SizerError(f"--target-calibration must be a fingerprint file or a rate > 0, got {text!r}")
    return value


TargetCalibration = Annotated[Optional[str], typer.Option(
    "--target-calibration", metavar="FILE|RATE",
    help="The CPU to answer for: a fingerprint of the target instance type (`sizer calibrate --out FILE`, "
         "taken there or on a CPU-only instance of its CPU family); the CPU-side figures are translated by "
         "the ratio of the every-vCPU-busy rates. A number is the target's one-vCPU rate (images/s). "
         "Default: the measuring host's CPU.")]
