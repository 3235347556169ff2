"""What `sizer colocate` and `sizer sweep --colocate` share on the command line: the sharing
option and the table of measured pairs."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.console import console, print_table
from sizer.sweep.gpu_share import SHARING
from sizer.sweep.pairs import PAIR_SEPARATOR

ShareOption = Annotated[str, typer.Option(
    "--share",
    help=f"How a pair's two jobs share the GPU: {' or '.join(SHARING)} (time-sliced, the driver's default; mps: "
         "NVIDIA's Multi-Process Service, where a control daemon runs or nvidia-cuda-mps-control is installed).")]
ColocateOption = Annotated[Optional[list[str]], typer.Option(
    "--colocate",
    help="Measure two workloads on one GPU at once, A+B (repeatable, or pairs separated by commas): each on half "
         "of the grid's largest shape, beside the other and alone; each job is sized alone too, and the report "
         "prices the shared instance against one each.")]


def _fmt(value: Any, digits: int = 3) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"


def render_pairs(pairs: list[dict[str, Any]]) -> None:
    """The pairs' table: each job's rate shared and alone, its slowdown r, the GPU's use alone and
    shared, and the verdict; then each pair's verdict in words."""
    if not pairs:
        return
    table = Table(title="pairs on one GPU", title_justify="left")
    for column in ("pair", "job", "shared", "alone", "r", "GPU alone %", "GPU shared %", "shared faster"):
        table.add_column(column, justify="left" if column in ("pair", "job") else "right")
    for pair in pairs:
        inst = pair["instance"]
        name = f"{pair['jobs'][0]['job']} {PAIR_SEPARATOR} {pair['jobs'][1]['job']}"
        where = f"{inst['vcpus']} vCPU / {inst['ram_gib']:g} GiB / {inst['disk_class']}, {pair['sharing']}"
        faster = {True: "yes", False: "no", None: "-"}[pair["shared_faster"]]
        for i, job in enumerate(pair["jobs"]):
            table.add_row(name if i == 0 else where, job["job"], f"{_fmt(job['shared'])} {job['unit']}",
                          _fmt(job["alone"]), _fmt(job["slowdown"]), _fmt(job["gpu_util_alone_pct"]),
                          _fmt(pair["gpu_util_shared_pct"]) if i == 0 else "", faster if i == 0 else "")
    print_table(table)
    for pair in pairs:
        console.print(f"{pair['key']}: {pair['verdict']}")
