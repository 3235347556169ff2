"""The report of stored sweeps: report.html, results.json and points.csv of one sweep or several (a
fleet run's: a section per host where they are several), as `sizer sweep` writes them at its end."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from sizer.diskclasses import DiskClass
from sizer.levels import DEFAULT_CONFIDENCE
from sizer.report.answers import workload_answers
from sizer.report.context import build_context, nothing_sized
from sizer.report.load import inputs_from_sweeps
from sizer.report.render import write_context
from sizer.store import Store


def write_sweep_report(store_path: str | Path, sweep_ids: Sequence[int], out_dir: Path, *, gpu: str | None = None,
                       command: str = "", catalog_files: Sequence[str | Path] = (),
                       disk_classes: Mapping[str, DiskClass] | None = None,
                       confidence: float = DEFAULT_CONFIDENCE) -> tuple[dict[str, str], str | None, list[dict[str, Any]]]:
    """The sweeps' report files with their paths, why no workload could be sized (None where one
    could) and each workload's answer in a few words (`answers.workload_answers`); nothing where
    the sweeps hold no point yet."""
    with Store(store_path, create=False) as store:
        inputs = inputs_from_sweeps(store, sweep_ids)
    if not inputs["points"]:
        return {}, None, []
    context = build_context(inputs["points"], sweeps=inputs["sweeps"], gpu=gpu, command=command,
                            enforcement=inputs["enforcement"], catalog_files=catalog_files,
                            disk_classes=None if disk_classes is None else dict(disk_classes), confidence=confidence)
    paths = write_context(context, inputs["points"], out_dir)
    return {name: str(path) for name, path in paths.items()}, nothing_sized(context), workload_answers(context)
