"""`sizer merge`: gather sweeps measured on several hosts (or in several stores) into one store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sizer.commands.options import JsonOutput, store_flag
from sizer.console import console, emit
from sizer.errors import SizerError
from sizer.preflight import check_store_file
from sizer.store import Store


def merge(
    sources: Annotated[list[Path], typer.Argument(help="Stores to copy from.", show_default=False)],
    store: Annotated[Path, store_flag("Store to copy into (created when missing).")],
    as_json: JsonOutput = False,
) -> None:
    """Copy every sweep of SOURCES (hosts, points, raw samples, calibrations) into --store.

    Each sweep keeps its host, so a report over the merged store shows where every point was
    measured; a sweep already there is not copied twice.

    Example: sizer merge gpu-a/sizer.sqlite gpu-b/sizer.sqlite --store fleet.sqlite
    """
    for source in sources:
        if not source.is_file():
            raise SizerError(f"no store at {source}")
        if source.resolve() == store.resolve():
            raise SizerError(f"{source} is the store to merge into")
    check_store_file(store, option="--store")
    totals = {"sweeps": 0, "points": 0, "skipped_sweeps": 0}
    opened: list[Store] = []
    made = not store.exists()
    try:
        for source in sources:  # every source readable before the target is made or touched
            opened.append(Store(source, create=False))
        with Store(store) as target:
            for source_store in opened:
                for key, n in target.merge_from(source_store).items():
                    totals[key] += n
    except BaseException:
        if made:  # a store this merge made and could not fill is not left behind
            for leftover in (store, *(store.with_name(store.name + tail) for tail in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
        raise
    finally:
        for source_store in opened:
            source_store.close()
    emit({"store": str(store), **totals}, as_json,
         lambda d: console.print(f"{d['store']}: {d['sweeps']} sweep(s), {d['points']} point(s) copied"
                                 + (f"; {d['skipped_sweeps']} already there" if d["skipped_sweeps"] else "")))
