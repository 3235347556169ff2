"""`sizer report`: report.html, results.json and points.csv from a store or a points file."""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Optional

from rich.table import Table

from sizer.commands.options import (
    CatalogFiles,
    Confidence,
    DatasetGib,
    DiskClassesFile,
    JobSamples,
    PointsInput,
    ReportFolder,
    StoreInput,
    TargetCalibration,
    Tolerance,
    cpu_cost_flag,
    gpu_flag,
    json_flag,
    target_calibration,
)
from sizer.console import console, emit, print_table, styled
from sizer.diskclasses import load_disk_classes
from sizer.errors import NothingSized
from sizer.gpu_ranking import ANY_GPU
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE
from sizer.preflight import check_out_folder
from sizer.report import build_context, format_money, format_number, load_inputs, write_context
from sizer.report.context import nothing_sized


def _render(data: dict[str, Any]) -> None:
    context = data["context"]
    table = Table(title=f"recommendations for {context['target']['gpu']}", title_justify="left")
    table.add_column("workload", overflow="fold")
    table.add_column("instance", overflow="fold")
    table.add_column("disk")
    table.add_column("predicted", justify="right")
    table.add_column("$/GPU-hour", justify="right", no_wrap=True)
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
            table.add_row(wl["workload"], styled((f"none: {wl['no_recommendation']}", "yellow")), "", "", "")
    print_table(table)
    if context["target"]["illustrative"]:
        console.print(styled((context["profile"]["note"], "yellow")))
    for path in data["files"].values():
        console.print(f"wrote {path}", soft_wrap=True, highlight=False)


def report(
    out: ReportFolder,
    store: StoreInput = None,
    input_file: PointsInput = None,
    gpu: Annotated[Optional[str], gpu_flag(
        "GPU model to size for (default: the measured host's GPU); 'any': the measured GPU's cards, and first "
        "a table of every GPU type ranked by cost per sample (the others' ceilings predicted).")] = None,
    catalog: CatalogFiles = None,
    disk_classes: DiskClassesFile = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    confidence: Confidence = DEFAULT_CONFIDENCE,
    dataset_gib: DatasetGib = None,
    job_samples: JobSamples = None,
    target_cpu: TargetCalibration = None,
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
    network) that a person who never ran sizer can read and print. It is written also when no
    workload could be sized (no usable measurement with real input); it says why, and the exit code is 3.

    Examples:

      sizer report --store results/sizer.sqlite --out results --gpu H100

      sizer report --store results/sizer.sqlite --out results-steady --cpu-cost   (a host whose speed drifts)
    """
    target_cal = target_calibration(target_cpu)  # a bad file or rate is refused before any work
    check_out_folder(out)
    table = load_disk_classes(disk_classes)
    inputs = load_inputs(store, input_file, table)
    check_out_folder(out, len(inputs["points"]))
    command = _command_line(store, input_file, out, gpu, catalog, tolerance, dataset_gib, job_samples, cpu_cost,
                            disk_classes, confidence, target_cpu)
    rank_gpus = (gpu or "").strip().lower() == ANY_GPU
    context = build_context(
        inputs["points"],
        sweeps=inputs["sweeps"],
        gpu=None if rank_gpus else gpu,
        tolerance=tolerance,
        catalog_files=tuple(catalog or ()),
        dataset_gib=dataset_gib,
        job_samples=job_samples,
        command=command,
        enforcement=inputs["enforcement"],
        source=inputs["source"],
        cpu_cost=cpu_cost,
        disk_classes=table,
        confidence=confidence,
        rank_gpus=rank_gpus,
        target_calibration=target_cal,
    )
    files = write_context(context, inputs["points"], out)
    emit(context if as_json else {"context": context, "files": files}, as_json, _render)
    why = nothing_sized(context)
    if why:
        raise NothingSized(why)


def _command_line(store, input_file, out, gpu, catalog, tolerance, dataset_gib, job_samples, cpu_cost=False,
                  disk_classes=None, confidence=DEFAULT_CONFIDENCE, target_cpu=None) -> str:
    """The command that reproduces this report, rebuilt from its options."""
    parts = ["sizer", "report"]
    parts += ["--store", str(store)] if store else ["--input", str(input_file)]
    parts += ["--out", str(out)]
    if gpu:
        parts += ["--gpu", gpu]
    for path in catalog or ():
        parts += ["--catalog", str(path)]
    if tolerance != DEFAULT_TOLERANCE:
        parts += ["--tolerance", f"{tolerance:g}"]
    if confidence != DEFAULT_CONFIDENCE:
        parts += ["--confidence", f"{confidence:g}"]
    if dataset_gib is not None:
        parts += ["--dataset-gib", f"{dataset_gib:g}"]
    if job_samples is not None:
        parts += ["--job-samples", f"{job_samples:g}"]
    if cpu_cost:
        parts.append("--cpu-cost")
    if disk_classes:
        parts += ["--disk-classes", str(disk_classes)]
    if target_cpu:
        parts += ["--target-calibration", str(target_cpu)]
    return " ".join(shlex.quote(p) for p in parts)
