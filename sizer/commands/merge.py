"""`sizer merge`: gather sweeps measured on several hosts (or in several stores) into one store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sizer.console import console, emit
from sizer.errors import SizerError


def merge(
    sources: Annotated[list[Path], typer.Argument(help="Stores to copy from.", show_default=False)],
    store: Annotated[Path, typer.Option("--store", help="Store to copy into (created when missing).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Copy every sweep of SOURCES (hosts, points, raw samples, calibrations) into --store.

    Each sweep keeps its host, so a report over the merged store shows where every point was
    measured; a sweep already there is not copied twice.

    Example: sizer merge gpu-a/sizer.sqlite gpu-b/sizer.sqlite --store fleet.sqlite
    """
    from sizer.store import Store

    for source in sources:
        if not source.is_file():
            raise SizerError(f"no store at {source}")
        if source.resolve() == store.resolve():
            raise SizerError(f"{source} is the store to merge into")
    totals = {"sweeps": 0, "points": 0, "skipped_sweeps": 0}
    with Store(store) as target:
        opened = [Store(source, create=False) for source in sources]  # all readable before any copy
        try:
            for source in opened:
                for key, n in target.merge_from(source).items():
                    totals[key] += n
        finally:
            for source in opened:
                source.close()
    emit({"store": str(store), **totals}, as_json,
         lambda d: console.print(f"{d['store']}: {d['sweeps']} sweep(s), {d['points']} point(s) copied"
                                 + (f"; {d['skipped_sweeps']} already there" if d["skipped_sweeps"] else "")))
