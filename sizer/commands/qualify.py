"""`sizer qualify`: pass or fail measured figures against a baseline's thresholds (JUnit XML, exit 1).

The figures come from a store, a points.csv, or, for a baseline with `"run": true`, a sweep this
command runs first; `sizer.qualify` then judges them."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.commands.options import JsonOutput, input_flag, store_flag
from sizer.console import console, emit, print_table, styled
from sizer.errors import SizerError
from sizer.qualify import Baseline, evaluate, host_calibration, junit_xml, load_baseline, summary, write_junit
from sizer.report import inputs_from_store, load_inputs
from sizer.store import Store
from sizer.sweep import SweepOptions, run_sweep
from sizer.units import GIB

DEFAULT_RUN_STORE = Path("results") / "qualify.sqlite"


# ---------------------------------------------------------------------------- running the suite
def sweep_options(baseline: Baseline, store: str | Path | None = None) -> SweepOptions:
    """The sweep that measures a baseline's suite: its `sweep` object, else the checks' own shapes."""
    spec = baseline.sweep
    shapes = [c.shape for c in baseline.checks if c.shape]
    vcpus = spec.get("vcpus") or sorted({s["vcpus"] for s in shapes}) or None
    ram_gib = spec.get("ram_gib") or sorted({s["ram_gib"] for s in shapes}) or None
    disks = spec.get("disks") or sorted({s["disk_class"] for s in shapes}) or None
    return SweepOptions(
        workloads=list(spec.get("workloads") or dict.fromkeys(c.workload for c in baseline.checks)),
        vcpus=[int(v) for v in vcpus] if vcpus else None,
        ram_bytes=[int(float(r) * GIB) for r in ram_gib] if ram_gib else None,
        disks=list(disks) if disks else None,
        profile=str(spec.get("profile", "auto")),
        store=Path(store) if store else DEFAULT_RUN_STORE,
        out_dir=None,  # qualify writes JUnit, not a report
        data_dir=Path(spec["data_dir"]) if spec.get("data_dir") else None,
        resume=bool(spec.get("resume", False)),
        time_budget_s=spec.get("time_budget_s"),
        config=dict(spec.get("config") or {}),
        limits=spec.get("limits"),
        ceiling=bool(spec.get("ceiling", True)),
        calibrate=bool(spec.get("calibrate", True)),
        passes=int(spec.get("passes", 1)),  # the suite as the baseline says, not as the host would choose
        refine=int(spec.get("refine", 0)),
        command=f"sizer qualify --baseline {baseline.path}",
        report=False,
    )


def run_suite(
    baseline: Baseline, store: str | Path | None = None, progress: bool = True, **overrides: Any
) -> dict[str, Any]:
    """Measure the baseline's suite (`"run": true`) with `sizer.sweep`, then read that sweep's figures.

    `overrides` replace fields of the sweep's options (for example `lock_path`)."""
    options = dataclasses.replace(sweep_options(baseline, store), **overrides)
    result = run_sweep(options, progress=progress)
    with Store(result["store"], create=False) as opened:
        data = inputs_from_store(opened, sweep_id=result["sweep_id"])
    return {**data, "source": f"{result['store']} (sweep {result['sweep_id']}, run by this check)"}


# ---------------------------------------------------------------------------- the command
def _render(data: dict[str, Any]) -> None:
    table = Table(title=f"qualify {data['suite']}", title_justify="left")
    for column in ("check", "metric", "measured", "threshold", "result"):
        table.add_column(column, justify="right" if column in ("measured", "threshold") else "left",
                         no_wrap=column == "threshold")
    for c in data["checks"]:
        measured = "–" if c["measured"] is None else f"{c['measured']:,.4g} {c['unit']}".strip()
        bound = ("<= " if c["threshold_kind"] == "max" else ">= ") + f"{c['threshold']:,.4g}"
        result = styled(("PASS", "green")) if c["passed"] else styled(("FAIL", "red"), f" {c['message']}")
        table.add_row(c["name"], c["metric"], measured, bound, result)
    print_table(table)
    verdict = styled(("all checks met", "green")) if data["passed"] else styled((
        f"{data['checks_failed']} of {data['checks_total']} check(s) fell short", "red")
    )
    console.print(verdict + (f"; JUnit XML in {data['junit']}" if data.get("junit") else ""))


def qualify(
    baseline: Annotated[Path, typer.Option("--baseline", help="The baseline file (JSON): the suite and thresholds.")],
    store: Annotated[Optional[Path], store_flag("Read the figures from this results store.")] = None,
    input_file: Annotated[Optional[Path], input_flag("Read the figures from this points.csv.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here (one testcase per check).")] = None,
    as_json: JsonOutput = False,
) -> None:
    """Compare measured figures with a baseline; exit 1 when any falls short, 0 when all meet.

    Each check of the baseline names a workload, a metric (throughput at a shape, a model parameter
    such as gpu_ceiling or per_vcpu, or calibration_ips) and a threshold. A baseline with
    `"run": true` measures its suite first. Bad input exits 2.

    Example: sizer qualify --baseline examples/qualify-baseline.json --store results/sizer.sqlite --junit qualify.xml
    """
    suite = load_baseline(baseline)
    started = time.monotonic()
    if suite.run:
        if input_file:
            raise SizerError('a baseline with "run": true measures into a store: give --store (or nothing), not --input')
        inputs = run_suite(suite, store=store, progress=not as_json)
    else:
        inputs = load_inputs(store, input_file)
    outcomes = evaluate(suite, inputs["points"], inputs["sweeps"])
    elapsed = time.monotonic() - started
    data = summary(suite, outcomes, source=inputs["source"])
    calibration = host_calibration(inputs["points"], inputs["sweeps"])
    if junit:
        properties = {"source": inputs["source"], "host_calibration_ips": calibration,
                      "baseline_calibration_ips": suite.calibration_ips}
        data["junit"] = str(write_junit(junit, junit_xml(suite, outcomes, elapsed_s=elapsed, properties=properties)))
    emit(data, as_json, _render)
    if not data["passed"]:
        raise typer.Exit(code=1)
