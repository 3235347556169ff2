"""`sizer qualify`: compare measured figures with a baseline's thresholds, for gating pipelines.

A baseline file (JSON, documented in docs/report.md) lists a suite of checks. Each check names a
workload, a metric and a threshold:

- metric `throughput`: the measured rate at one shape (vcpus, ram_gib, disk_class, optionally
  decode and input); the median when the shape was measured more than once;
- metric `calibration_ips`: the host's per-vCPU decode-and-augment rate;
- metric `loo_median_ape` / `loo_max_ape`: the model's leave-one-out error (a fraction);
- any other metric: a fitted model parameter of the workload (`gpu_ceiling`, `per_vcpu`, ...).

A threshold is `min` (at least), `max` (at most) or `reference` with `max_shortfall` (at least
reference x (1 - max_shortfall)). With `scale_with_calibration`, the threshold is scaled by the
host's calibration over the baseline's `calibration_ips`, so a CPU-bound figure is judged against
what this host's CPU model can do.

Outcomes become a table, JSON and JUnit XML (one testcase per check); the command exits 1 when any
check falls short, 0 when all meet, 2 on bad input.

This module judges figures it is given and measures nothing: measuring a suite (`"run": true`) is
the command's work (`sizer.commands.qualify`).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.model import WorkloadFit, fit_points
from sizer.points import Point
from sizer.store import sweep_calibration_ips
from sizer.textfiles import read_text
from sizer.variants import SYNTHETIC_INPUT, Variant

BASELINE_SCHEMA_VERSION = 1
THROUGHPUT = "throughput"
CALIBRATION = "calibration_ips"
FIT_ERRORS = ("loo_median_ape", "loo_max_ape")
_CHECK_KEYS = {
    "name",
    "workload",
    "metric",
    "shape",
    "min",
    "max",
    "reference",
    "max_shortfall",
    "scale_with_calibration",
    "description",
}
_SHAPE_KEYS = {"vcpus", "ram_gib", "disk_class", "decode", "input"}
_SWEEP_KEYS = {
    "workloads", "vcpus", "ram_gib", "disks", "profile", "time_budget_s", "config", "data_dir", "resume", "limits",
    "ceiling", "calibrate",
}
_BASELINE_KEYS = {"schema_version", "suite", "description", "run", "sweep", "calibration_ips", "dataset_gib", "checks"}


@dataclass(frozen=True)
class Check:
    name: str
    workload: str
    metric: str
    shape: dict[str, Any] = field(default_factory=dict)
    min: float | None = None
    max: float | None = None
    reference: float | None = None
    max_shortfall: float | None = None
    scale_with_calibration: bool = False
    description: str = ""

    def base_threshold(self) -> float:
        """The bound before any calibration scaling."""
        if self.min is not None:
            return self.min
        if self.max is not None:
            return self.max
        assert self.reference is not None and self.max_shortfall is not None
        return self.reference * (1.0 - self.max_shortfall)

    @property
    def upper_bound(self) -> bool:
        return self.max is not None

    def threshold_text(self) -> str:
        if self.min is not None:
            return f">= {self.min:g}"
        if self.max is not None:
            return f"<= {self.max:g}"
        return f">= {self.reference:g} - {self.max_shortfall:.0%}"


@dataclass(frozen=True)
class Baseline:
    suite: str
    checks: tuple[Check, ...]
    description: str = ""
    run: bool = False
    sweep: dict[str, Any] = field(default_factory=dict)
    calibration_ips: float | None = None
    dataset_gib: float | None = None
    path: str = ""


@dataclass
class Outcome:
    check: Check
    passed: bool
    measured: float | None
    threshold: float
    unit: str
    message: str
    source: str = ""
    scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.check.name,
            "workload": self.check.workload,
            "metric": self.check.metric,
            "shape": self.check.shape,
            "measured": self.measured,
            "threshold": self.threshold,
            "threshold_kind": "max" if self.check.upper_bound else "min",
            "threshold_rule": self.check.threshold_text(),
            "calibration_scale": self.scale,
            "unit": self.unit,
            "passed": self.passed,
            "message": self.message,
            "source": self.source,
        }


# ---------------------------------------------------------------------------- parsing
def _number(value: Any, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SizerError(f"{where}: must be a number, got {value!r}")
    if positive and value <= 0:
        raise SizerError(f"{where}: must be > 0, got {value!r}")
    return float(value)


def _parse_shape(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise SizerError(f"{where}: 'shape' must be an object with vcpus, ram_gib and disk_class")
    unknown = sorted(set(raw) - _SHAPE_KEYS)
    if unknown:
        raise SizerError(f"{where}: unknown shape key(s) {', '.join(unknown)} (known: {', '.join(sorted(_SHAPE_KEYS))})")
    missing = [k for k in ("vcpus", "ram_gib", "disk_class") if k not in raw]
    if missing:
        raise SizerError(f"{where}: shape needs {', '.join(missing)}")
    vcpus = raw["vcpus"]
    if isinstance(vcpus, bool) or not isinstance(vcpus, int) or vcpus < 1:
        raise SizerError(f"{where}: shape vcpus must be a positive integer, got {vcpus!r}")
    shape: dict[str, Any] = {
        "vcpus": vcpus,
        "ram_gib": _number(raw["ram_gib"], f"{where}: shape ram_gib", positive=True),
        "disk_class": str(raw["disk_class"]),
    }
    for key in ("decode", "input"):
        if key in raw:
            shape[key] = str(raw[key])
    return shape


def default_check_name(workload: str, metric: str, shape: dict[str, Any]) -> str:
    if shape:
        extra = "".join(f" / {shape[k]} {k}" for k in ("decode", "input") if k in shape)
        return f"{workload} {metric} at {shape['vcpus']} vCPU / {shape['ram_gib']:g} GiB / {shape['disk_class']}{extra}"
    return f"{workload} {metric}"


def _parse_check(raw: Any, index: int, name: str) -> Check:
    where = f"{name}: checks[{index}]"
    if not isinstance(raw, dict):
        raise SizerError(f"{where}: must be an object")
    unknown = sorted(set(raw) - _CHECK_KEYS)
    if unknown:
        raise SizerError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_CHECK_KEYS))})")
    workload = raw.get("workload")
    if not isinstance(workload, str) or not workload:
        raise SizerError(f"{where}: 'workload' is missing")
    metric = raw.get("metric", THROUGHPUT)
    if not isinstance(metric, str) or not metric:
        raise SizerError(f"{where}: 'metric' must be a name (throughput, calibration_ips or a model parameter)")
    shape: dict[str, Any] = {}
    if metric == THROUGHPUT:
        if "shape" not in raw:
            raise SizerError(f"{where}: a throughput check needs a 'shape' (vcpus, ram_gib, disk_class)")
        shape = _parse_shape(raw["shape"], where)
    elif "shape" in raw:
        raise SizerError(f"{where}: only a throughput check has a 'shape' ({metric!r} is one figure per workload)")
    forms = [k for k in ("min", "max", "reference") if k in raw]
    if len(forms) != 1:
        raise SizerError(f"{where}: give exactly one threshold: 'min', 'max', or 'reference' with 'max_shortfall'")
    kwargs: dict[str, Any] = {}
    if forms == ["reference"]:
        if "max_shortfall" not in raw:
            raise SizerError(f"{where}: 'reference' needs 'max_shortfall' (for example 0.05 for 5%)")
        kwargs["reference"] = _number(raw["reference"], f"{where}: reference", positive=True)
        shortfall = _number(raw["max_shortfall"], f"{where}: max_shortfall")
        if not 0 <= shortfall < 1:
            raise SizerError(f"{where}: max_shortfall must be a fraction in [0, 1), got {shortfall:g}")
        kwargs["max_shortfall"] = shortfall
    else:
        if "max_shortfall" in raw:
            raise SizerError(f"{where}: 'max_shortfall' goes with 'reference', not with {forms[0]!r}")
        kwargs[forms[0]] = _number(raw[forms[0]], f"{where}: {forms[0]}")
    scale = raw.get("scale_with_calibration", False)
    if not isinstance(scale, bool):
        raise SizerError(f"{where}: scale_with_calibration must be true or false")
    check_name = raw.get("name") or default_check_name(workload, metric, shape)
    return Check(
        name=str(check_name),
        workload=workload,
        metric=metric,
        shape=shape,
        scale_with_calibration=scale,
        description=str(raw.get("description", "")),
        **kwargs,
    )


def parse_baseline(data: Any, name: str = "baseline") -> Baseline:
    """A baseline from its JSON data; bad input raises SizerError naming the check and key."""
    if not isinstance(data, dict):
        raise SizerError(f"{name}: must be a JSON object with 'suite' and 'checks'")
    version = data.get("schema_version", BASELINE_SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SizerError(f"{name}: schema_version must be a positive integer")
    if version > BASELINE_SCHEMA_VERSION:
        raise SizerError(
            f"{name}: baseline schema {version} is newer than this sizer reads ({BASELINE_SCHEMA_VERSION}): upgrade sizer"
        )
    unknown = sorted(set(data) - _BASELINE_KEYS)
    if unknown:
        raise SizerError(f"{name}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_BASELINE_KEYS))})")
    suite = data.get("suite")
    if not isinstance(suite, str) or not suite:
        raise SizerError(f"{name}: 'suite' (the suite's name) is missing")
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise SizerError(f"{name}: 'checks' must be a non-empty list")
    checks = tuple(_parse_check(raw, i, name) for i, raw in enumerate(raw_checks))
    seen: set[str] = set()
    for check in checks:
        if check.name in seen:
            raise SizerError(f"{name}: two checks are named {check.name!r} (names must be unique)")
        seen.add(check.name)
    calibration = data.get("calibration_ips")
    if calibration is not None:
        calibration = _number(calibration, f"{name}: calibration_ips", positive=True)
    if any(c.scale_with_calibration for c in checks) and calibration is None:
        raise SizerError(f"{name}: a check has scale_with_calibration but the baseline has no 'calibration_ips'")
    dataset_gib = data.get("dataset_gib")
    if dataset_gib is not None:
        dataset_gib = _number(dataset_gib, f"{name}: dataset_gib", positive=True)
    run = data.get("run", False)
    if not isinstance(run, bool):
        raise SizerError(f"{name}: 'run' must be true or false")
    sweep = data.get("sweep", {})
    if not isinstance(sweep, dict):
        raise SizerError(f"{name}: 'sweep' must be an object of sweep options")
    unknown = sorted(set(sweep) - _SWEEP_KEYS)
    if unknown:
        raise SizerError(f"{name}: unknown sweep key(s) {', '.join(unknown)} (known: {', '.join(sorted(_SWEEP_KEYS))})")
    for key in ("vcpus", "ram_gib", "workloads", "disks"):
        if key in sweep and (not isinstance(sweep[key], list) or not sweep[key]):
            raise SizerError(f"{name}: sweep {key} must be a non-empty list")
    return Baseline(
        suite=suite,
        checks=checks,
        description=str(data.get("description", "")),
        run=run,
        sweep=sweep,
        calibration_ips=calibration,
        dataset_gib=dataset_gib,
        path=name,
    )


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    text = read_text(path, "baseline")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SizerError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    return parse_baseline(data, str(path))


# ---------------------------------------------------------------------------- evaluating
def _same_shape(point: Point, shape: dict[str, Any]) -> bool:
    if point.vcpus != shape["vcpus"] or point.disk_class != shape["disk_class"]:
        return False
    if not math.isclose(point.ram_gib, shape["ram_gib"], rel_tol=0.01, abs_tol=1e-6):
        return False
    if "input" not in shape and point.input == SYNTHETIC_INPUT:
        return False  # a GPU-ceiling point (input on the device) is not the shape's real pipeline
    return all(getattr(point, key) == shape[key] for key in ("decode", "input") if key in shape)


def host_calibration(points: Sequence[Point], sweeps: Sequence[Any] = ()) -> float | None:
    """The per-vCPU decode-and-augment rate of the measured host: from the points, else the sweeps."""
    values = [p.calibration_ips for p in points if p.calibration_ips]
    if values:
        return float(statistics.median(values))
    values = [v for v in (sweep_calibration_ips(s.calibration) for s in sweeps) if v]
    return float(statistics.median(values)) if values else None


def _points_of(check: Check, by_workload: dict[str, list[Point]]) -> list[Point]:
    variant = Variant.from_label(check.workload)
    return [p for p in by_workload.get(variant.workload, []) if all(getattr(p, k, None) == v for k, v in variant.settings)]


def _fit_for(check: Check, fits: dict[str, Any], path: str) -> Any:
    if check.workload in fits:
        return fits[check.workload]
    variants = sorted(k for k in fits if Variant.from_label(k).workload == check.workload)
    if len(variants) > 1:
        raise SizerError(
            f"{path}: check {check.name!r}: {check.workload} was measured in several variants, each fitted on its "
            f"own ({', '.join(variants)}): name one as the check's workload"
        )
    return fits[variants[0]] if variants else None


def evaluate(baseline: Baseline, points: Sequence[Point], sweeps: Sequence[Any] = ()) -> list[Outcome]:
    """One Outcome per check, in the baseline's order. A figure that cannot be had is a failure."""
    by_workload: dict[str, list[Point]] = {}
    for p in points:
        by_workload.setdefault(p.workload, []).append(p)
    calibration = host_calibration(points, sweeps)
    model_checks = [c for c in baseline.checks if c.metric not in (THROUGHPUT, CALIBRATION)]
    wanted = {Variant.from_label(c.workload).workload for c in model_checks}
    fit_input = [p for p in points if p.workload in wanted]
    fits = fit_points(fit_input, load_disk_classes(), dataset_gib=baseline.dataset_gib) if fit_input else {}
    chosen_fits = {}
    for check in model_checks:
        fit = _fit_for(check, fits, baseline.path)
        if fit is not None and check.metric not in FIT_ERRORS and check.metric not in fit.params:
            raise SizerError(
                f"{baseline.path}: check {check.name!r}: {check.workload} has no model parameter {check.metric!r} "
                f"(has: {', '.join(sorted(fit.params))}; or throughput, calibration_ips, loo_median_ape, loo_max_ape)"
            )
        chosen_fits[check.name] = fit
    return [
        _evaluate_one(c, baseline, _points_of(c, by_workload), chosen_fits.get(c.name), calibration)
        for c in baseline.checks
    ]


def _evaluate_one(
    check: Check, baseline: Baseline, points: list[Point], fit: WorkloadFit | None, calibration: float | None
) -> Outcome:
    scale = 1.0
    if check.scale_with_calibration:
        if not calibration:
            return _missing(check, "the measurements carry no calibration figure to scale the threshold with")
        scale = calibration / float(baseline.calibration_ips or calibration)
    threshold = check.base_threshold() * scale
    unit = ""
    source = ""
    if not points:
        return _missing(check, f"no measurement of workload {check.workload!r}", threshold, scale)
    if check.metric == THROUGHPUT:
        matched = [p for p in points if _same_shape(p, check.shape)]
        usable = [p for p in matched if p.usable]
        if not usable:
            if matched:
                statuses = ", ".join(sorted({p.status for p in matched}))
                return _missing(check, f"the shape was measured but gave no figure (status {statuses})", threshold, scale)
            return _missing(check, "this shape was not measured", threshold, scale)
        measured = float(statistics.median(p.throughput for p in usable))
        unit = usable[0].unit
        source = f"median of {len(usable)} point(s)" if len(usable) > 1 else "1 point"
    elif check.metric == CALIBRATION:
        if calibration is None:
            return _missing(check, "the measurements carry no calibration figure", threshold, scale)
        measured = calibration
        unit = "images/s per vCPU"
        source = "host calibration"
    else:
        if fit is None:
            return _missing(check, f"no model could be fitted for {check.workload!r}", threshold, scale)
        if check.metric in FIT_ERRORS:
            measured = float(getattr(fit, check.metric))
            unit = "fraction"
        else:
            param = fit.params[check.metric]
            measured = float(param.value)
            unit = param.unit
        source = f"model fitted on {fit.n_points} point(s)"
    passed = measured <= threshold if check.upper_bound else measured >= threshold
    relation = ("<=" if passed else ">") if check.upper_bound else (">=" if passed else "<")
    scaled = f" (x{scale:.3f} for this host's calibration)" if check.scale_with_calibration else ""
    message = f"measured {measured:,.4g} {unit} {relation} threshold {threshold:,.4g} {unit}{scaled}".replace("  ", " ")
    if not passed and not check.upper_bound and threshold > 0:
        message += f"; short by {(threshold - measured) / threshold:.1%}"
    return Outcome(check, passed, measured, threshold, unit, message, source, scale)


def _missing(check: Check, why: str, threshold: float | None = None, scale: float = 1.0) -> Outcome:
    bound = check.base_threshold() if threshold is None else threshold
    return Outcome(check, False, None, bound, "", f"no figure: {why}", "", scale)


# ---------------------------------------------------------------------------- reporting
def summary(baseline: Baseline, outcomes: Sequence[Outcome], source: str = "") -> dict[str, Any]:
    failed = [o for o in outcomes if not o.passed]
    return {
        "suite": baseline.suite,
        "baseline": baseline.path,
        "source": source,
        "passed": not failed,
        "checks_total": len(outcomes),
        "checks_failed": len(failed),
        "checks": [o.to_dict() for o in outcomes],
    }


def junit_xml(
    baseline: Baseline, outcomes: Sequence[Outcome], *, elapsed_s: float = 0.0, properties: dict[str, Any] | None = None
) -> ET.ElementTree:
    """JUnit XML as CI systems read it: one testsuite, one testcase per check, a failure per shortfall."""
    failures = sum(1 for o in outcomes if not o.passed)
    root = ET.Element(
        "testsuites", name="sizer qualify", tests=str(len(outcomes)), failures=str(failures), errors="0",
        time=f"{elapsed_s:.3f}",
    )
    suite = ET.SubElement(
        root,
        "testsuite",
        name=baseline.suite,
        tests=str(len(outcomes)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{elapsed_s:.3f}",
        timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
        hostname=platform.node(),
    )
    props = ET.SubElement(suite, "properties")
    for key, value in sorted({"baseline": baseline.path, **(properties or {})}.items()):
        if value is not None and value != "":
            ET.SubElement(props, "property", name=str(key), value=str(value))
    for outcome in outcomes:
        check = outcome.check
        case = ET.SubElement(
            suite, "testcase", classname=f"sizer.qualify.{baseline.suite}.{check.workload}", name=check.name, time="0"
        )
        if not outcome.passed:
            failure = ET.SubElement(
                case, "failure", message=outcome.message, type="missing" if outcome.measured is None else "shortfall"
            )
            failure.text = json.dumps(outcome.to_dict(), indent=2, sort_keys=True)
        out = ET.SubElement(case, "system-out")
        out.text = outcome.message + (f" [{outcome.source}]" if outcome.source else "")
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: str | Path, tree: ET.ElementTree) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tree.write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise SizerError(f"cannot write JUnit file {path}: {exc.strerror}") from None
    return path
