"""The command layer's one path from options to files: measure (on this host, or on a fleet's
nodes with `--ray`), then write the report of what was measured. The sweep and the report never
import each other: this module joins them."""

from __future__ import annotations

from typing import Any

from sizer.diskclasses import load_disk_classes
from sizer.fleet import run_fleet
from sizer.report.of_sweeps import write_sweep_report
from sizer.sweep import SweepOptions, run_sweep
from sizer.sweep.state import OnPoint


def measure_and_report(opts: SweepOptions, progress: bool = True, on_point: OnPoint | None = None) -> dict[str, Any]:
    """Run the sweep (a fleet's where `opts.fleet` is set), then, unless it was a dry run or asked
    for no report, write report.html, results.json and points.csv under `opts.out_dir`. The summary
    gains `outputs` (their paths) and, for a sweep with every planned point stored whose workloads
    none could be sized, `not_sized` (why)."""
    summary = run_fleet(opts, progress, on_point) if opts.fleet is not None else run_sweep(opts, progress, on_point)
    if opts.dry_run or not opts.report or opts.out_dir is None:
        return summary
    files, not_sized, answers = write_sweep_report(
        summary["store"], summary["sweep_ids"], opts.out_dir, gpu=opts.gpu, command=opts.command,
        catalog_files=opts.catalog_files, disk_classes=load_disk_classes(opts.disk_classes_file),
        confidence=opts.confidence)
    summary["outputs"] = files
    summary["answers"] = answers
    if not_sized and summary.get("complete"):  # a slice with points to go may size them yet
        summary["not_sized"] = not_sized
    return summary

