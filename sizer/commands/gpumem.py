"""`sizer gpumem WORKLOAD`: peak GPU memory over a ladder of batch sizes, measured and estimated,
memory(batch) fitted, and the largest batch each card of the catalogs holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer import gpumem as lib
from sizer.catalog import builtin_rows
from sizer.commands.options import finite, json_flag
from sizer.console import console, emit, err_console, print_table, styled
from sizer.datasets import ensure_ptb
from sizer.errors import SizerError
from sizer.lock import HostLock
from sizer.model.gpu_memory import DEFAULT_MARGIN, GIB
from sizer.probe import gpu_info
from sizer.sweep.plan import default_data_dir
from workloads import load_all

MEASURE_NEEDS_GPU = "measuring GPU memory needs a GPU: none is visible here (the analytic estimate needs none)"


def _gib(value: float | None) -> str:
    return "–" if not value else f"{value / GIB:,.2f}"


def _render(data: dict[str, Any]) -> None:
    measured = {m["batch"]: m for m in data["measured"] or []}
    analytic = {a["batch_size"]: a for a in data["analytic"] or []}
    fitted = data["fits"].get("measured_allocated")
    table = Table(title=f"{data['workload']}: peak GPU memory (GiB) by batch size", title_justify="left")
    for column in ("batch", "allocated", "reserved", "device", "fitted", "analytic", "analytic vs allocated"):
        table.add_column(column, justify="right", no_wrap=True)
    for batch in data["batches"]:
        m, a = measured.get(batch), analytic.get(batch)
        allocated = m["allocated_bytes"] if m and m["status"] == "ok" else None
        fit = None if fitted is None else fitted["fixed_bytes"] + fitted["per_sample_bytes"] * batch
        versus = f"{a['peak_bytes'] / allocated - 1:+.1%}" if a and allocated else "–"
        status = m["status"] if m and m["status"] != "ok" else None
        table.add_row(str(batch), status or _gib(allocated), _gib(m and m["reserved_bytes"]),
                      _gib(m and m["device_bytes"]), _gib(fit) if m else "–", _gib(a and a["peak_bytes"]), versus)
    print_table(table)
    for name, fit in data["fits"].items():
        worst = max(abs(r["relative"]) for r in fit["residuals"])
        console.print(styled((f"  {name}: {_gib(fit['fixed_bytes'])} GiB + {fit['per_sample_bytes'] / 2**20:,.1f} MiB "
                              f"per sample (largest residual {worst:.1%})", "dim")))
    for note in (data["measure_note"], data["analytic_note"]):
        if note:
            console.print(styled((note, "yellow")))
    cards = Table(title=f"Largest batch per card, {data['margin']:.0%} of it kept free", title_justify="left")
    for column in ("card GiB", "GPUs", "measured", "analytic"):
        cards.add_column(column, justify="left" if column == "GPUs" else "right", no_wrap=column != "GPUs")
    for card in data["cards"]:
        cards.add_row(f"{card['memory_gib']:g}", ", ".join(card["gpus"]),
                      *("–" if v is None else f"{v:,}" for v in (card["largest_batch_measured"],
                                                                 card["largest_batch_analytic"])))
    print_table(cards)
    if data["analytic"]:
        console.print(styled(("analytic: the step's tensors and library workspaces; the card also holds the CUDA "
                              "context and the allocator's cache (the measured device column)", "dim")))


def gpumem(
    workload: Annotated[str, typer.Argument(help="A built-in GPU workload (see `sizer workloads`).")],
    batches: Annotated[Optional[str], typer.Option(
        "--batches", help="Batch sizes, comma-separated (default: the workload's own, its half, quarter and eighth).")] = None,
    measure: Annotated[Optional[bool], typer.Option(
        "--measure/--no-measure", help="Measure on the GPU (default: where one is visible); --measure without "
                                       "a GPU is an error.")] = None,
    margin: Annotated[float, typer.Option(
        "--margin", callback=finite, help="Share of each card kept free when sizing the batch.")] = DEFAULT_MARGIN,
    data: Annotated[Optional[Path], typer.Option(
        "--data", help="Dataset folder for a workload that reads one (default: $SIZER_DATA or ~/.cache/sizer/data).")] = None,
    as_json: Annotated[bool, json_flag("Print JSON instead of tables.")] = False,
) -> None:
    """Peak GPU memory of WORKLOAD over a ladder of batch sizes, memory(batch) fitted, and the
    largest batch each GPU memory size of the catalogs holds.

    On a GPU each batch size runs a few steps in a fresh worker (the allocator's peaks and the
    device's figure); everywhere, an analytic estimate traces one step on fake tensors (weights,
    gradients, optimizer state, saved activations, library workspaces).

    Example: sizer gpumem resnet50-train --batches 32,64,128,256 --json
    """
    if not 0 <= margin < 1:
        raise SizerError(f"--margin must be in [0, 1), got {margin:g}")
    config = lib.check_workload(workload)
    ladder = lib.parse_batches(batches) if batches else lib.default_batches(int(config["batch_size"]))
    has_gpu = gpu_info().get("count", 0) > 0
    if measure and not has_gpu:
        raise SizerError(MEASURE_NEEDS_GPU)
    report = lib.LadderReport(workload=workload, batches=ladder, margin=margin)
    try:
        report.analytic = lib.analytic_ladder(workload, ladder)
    except ImportError:
        report.analytic_note = "the analytic estimate needs torch and torchvision (pip install 'sizer[torch]')"
    if measure is not False and has_gpu:
        data_dir = _dataset(workload, data)
        say = None if as_json else (lambda text: err_console.print(styled((f"{workload}: {text}", "dim"))))
        with HostLock():  # one measurement per host at a time, as a sweep's
            report.measured = lib.measure_ladder(workload, ladder, config, data_dir, progress=say)
    elif not has_gpu:
        report.measure_note = MEASURE_NEEDS_GPU
    if report.analytic is None and report.measured is None:
        raise SizerError(report.analytic_note or MEASURE_NEEDS_GPU)
    lib.fit_ladder(report)
    lib.size_cards(report, lib.card_sizes(builtin_rows()))
    emit(report.as_dict(), as_json, _render)


def _dataset(workload: str, data: Path | None) -> Path | None:
    """The corpus folder of a workload that reads one (the PTB LSTM), made where missing."""
    if load_all()[workload].dataset != "ptb":
        return None

    folder = (data or default_data_dir()) / "ptb"
    ensure_ptb(folder, progress=False)
    return folder
