"""`sizer disks probe`: sequential and random direct-read figures of the disk under a path (fio)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from sizer.commands.options import JsonOutput
from sizer.console import emit, err_console, print_table
from sizer.disks import probe_disk
from sizer.units import format_bytes, parse_size


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_disk(data: dict[str, Any]) -> None:
    device = data["device"]
    where = f"{device['name']} ({device['major_minor']})" if device else "no block device"
    table = Table(
        title=f"{data['path']}: {data['fstype']} on {where}, {format_bytes(data['size_bytes'])} file, "
        f"{data['seconds']} s per pattern, {data['fio_version']} {data['engine']}",
        title_justify="left",
    )
    for column in ("pattern", "block", "queue depth", "MB/s", "IOPS", "p50 µs", "p99 µs"):
        table.add_column(column, justify="left" if column == "pattern" else "right", no_wrap=column != "pattern")
    for label, key in (("sequential read", "sequential_read"), ("random read", "random_read")):
        job = data[key]
        table.add_row(
            label,
            format_bytes(job["bs"]),
            str(job["iodepth"]),
            _fmt(job["read_mbps"], 1),
            _fmt(job["read_iops"]),
            _fmt(job["lat_p50_us"]),
            _fmt(job["lat_p99_us"]),
        )
    print_table(table, drop=("p50 µs", "queue depth"))


def probe(
    path: Annotated[str, typer.Argument(help="A directory on the disk to measure; a scratch file is written there and removed.")],
    as_json: JsonOutput = False,
    seconds: Annotated[int, typer.Option("--seconds", min=1, max=3600, help="Seconds per access pattern.")] = 5,
    size: Annotated[str, typer.Option("--size", help="Scratch file size (e.g. 1G, 256M).")] = "1G",
) -> None:
    """Measure the disk under PATH with fio: sequential 1 MiB and random 4 KiB direct reads.

    Reports MB/s, IOPS and completion latency p50/p99 per pattern. The scratch file is laid out with real data first and removed afterwards, also on Ctrl-C.

    Example: sizer disks probe /data --seconds 10 --json
    """  # noqa: E501 (typer shows the docstring's line breaks as written)
    size_bytes = parse_size(size)
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def on_progress(phase: str, elapsed: float, expected: float | None) -> None:
        if not tasks:  # shown once fio runs: bad input fails before, as one clean line
            bar.start()
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=expected)
        bar.update(tasks[phase], total=expected, completed=min(elapsed, expected) if expected else 0)

    try:
        result = probe_disk(path, seconds=seconds, size=size_bytes, progress=on_progress)
    finally:
        if tasks:
            bar.stop()
    emit(result, as_json, render_disk)
