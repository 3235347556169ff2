"""`sizer report`: report.html, results.json and points.csv from a store or a points file."""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Optional

from rich.table import Table

from sizer.commands.options import (
    CatalogFiles,
    DatasetGib,
    JobSamples,
    PointsInput,
    ReportFolder,
    StoreInput,
    Tolerance,
    cpu_cost_flag,
    gpu_flag,
    json_flag,
)
from sizer.console import console, emit
from sizer.report import build_context, format_money, format_number, load_inputs, write_context


def _render(data: dict[str, Any]) -> None:
    context = data["context"]
    table = Table(title=f"recommendations for {context['target']['gpu']}", title_justify="left")
    table.add_column("workload", overflow="fold")
    table.add_column("instance", overflow="fold")
    table.add_column("disk")
    table.add_column("predicted", justify="right")
    table.add_column("$/GPU-hour", justify="right")
    for wl in context["workloads"]:
        chosen = (wl["recommendation"] or {}).get("chosen")
        if chosen:
            share = chosen["fraction_of_ceiling"]
            table.add_row(
                wl["workload"],
                f"{chosen['instance_type']} ({chosen['cloud']})",
                chosen["disk_class"],
                f"{format_number(chosen['predicted'])} {wl['unit']}" + (f" ({share:.0%})" if share is not None else ""),
                format_money(chosen["price_per_gpu_hour"]),
            )
        else:
            table.add_row(wl["workload"], f"[yellow]none: {wl['no_recommendation']}[/yellow]", "", "", "")
    console.print(table)
    if context["target"]["illustrative"]:
        console.print(f"[yellow]{context['profile']['note']}[/yellow]")
    for path in data["files"].values():
        console.print(f"wrote {path}", soft_wrap=True, highlight=False)


def report(
    out: ReportFolder,
    store: StoreInput = None,
    input_file: PointsInput = None,
    gpu: Annotated[Optional[str], gpu_flag("GPU model to size for (default: the measured host's GPU).")] = None,
    catalog: CatalogFiles = None,
    tolerance: Tolerance = 0.05,
    dataset_gib: DatasetGib = None,
    job_samples: JobSamples = None,
    cpu_cost: Annotated[
        bool,
        cpu_cost_flag("Fit the model on CPU-bound figures scaled by each window's CPU time per "
                      "sample over the median at its vCPU count: takes a shared host's changing speed out of the "
                      "model (needs --store; the points shown stay as measured)."),
    ] = False,
    as_json: Annotated[bool, json_flag("Print results.json's content instead of a table.")] = False,
) -> None:
    """Write report.html, results.json and points.csv: the recommendation per workload and why.

    The report is one self-contained HTML file (inline CSS and SVG charts, nothing loaded from the
    network) that a person who never ran sizer can read and print.

    Examples:

      sizer report --store results/sizer.sqlite --out results --gpu H100

      sizer report --store results/sizer.sqlite --out results-steady --cpu-cost   (a host whose speed drifts)
    """
    inputs = load_inputs(store, input_file)
    command = _command_line(store, input_file, out, gpu, catalog, tolerance, dataset_gib, job_samples, cpu_cost)
    context = build_context(
        inputs["points"],
        sweeps=inputs["sweeps"],
        gpu=gpu,
        tolerance=tolerance,
        catalog_files=tuple(catalog or ()),
        dataset_gib=dataset_gib,
        job_samples=job_samples,
        command=command,
        enforcement=inputs["enforcement"],
        source=inputs["source"],
        cpu_cost=cpu_cost,
    )
    files = write_context(context, inputs["points"], out)
    emit(context if as_json else {"context": context, "files": files}, as_json, _render)


def _command_line(store, input_file, out, gpu, catalog, tolerance, dataset_gib, job_samples, cpu_cost=False) -> str:
    """The command that reproduces this report, rebuilt from its options."""
    parts = ["sizer", "report"]
    parts += ["--store", str(store)] if store else ["--input", str(input_file)]
    parts += ["--out", str(out)]
    if gpu:
        parts += ["--gpu", gpu]
    for path in catalog or ():
        parts += ["--catalog", str(path)]
    if tolerance != 0.05:
        parts += ["--tolerance", f"{tolerance:g}"]
    if dataset_gib is not None:
        parts += ["--dataset-gib", f"{dataset_gib:g}"]
    if job_samples is not None:
        parts += ["--job-samples", f"{job_samples:g}"]
    if cpu_cost:
        parts.append("--cpu-cost")
    return " ".join(shlex.quote(p) for p in parts)
