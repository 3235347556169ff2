"""`sizer qualify`: pass or fail measured figures against a baseline's thresholds (JUnit XML, exit 1)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.console import console, emit
from sizer.errors import SizerError
from sizer.qualify import evaluate, host_calibration, junit_xml, load_baseline, run_suite, summary, write_junit
from sizer.report import load_inputs


def _render(data: dict[str, Any]) -> None:
    table = Table(title=f"qualify {data['suite']}", title_justify="left")
    for column in ("check", "metric", "measured", "threshold", "result"):
        table.add_column(column, justify="right" if column in ("measured", "threshold") else "left")
    for c in data["checks"]:
        measured = "–" if c["measured"] is None else f"{c['measured']:,.4g} {c['unit']}".strip()
        bound = ("<= " if c["threshold_kind"] == "max" else ">= ") + f"{c['threshold']:,.4g}"
        result = "[green]PASS[/green]" if c["passed"] else f"[red]FAIL[/red] {c['message']}"
        table.add_row(c["name"], c["metric"], measured, bound, result)
    console.print(table)
    verdict = "[green]all checks met[/green]" if data["passed"] else (
        f"[red]{data['checks_failed']} of {data['checks_total']} check(s) fell short[/red]"
    )
    console.print(verdict + (f"; JUnit XML in {data['junit']}" if data.get("junit") else ""))


def qualify(
    baseline: Annotated[Path, typer.Option("--baseline", help="The baseline file (JSON): the suite and thresholds.")],
    store: Annotated[Optional[Path], typer.Option("--store", help="Read the figures from this results store.")] = None,
    input_file: Annotated[Optional[Path], typer.Option("--input", help="Read the figures from this points.csv.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here (one testcase per check).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
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
