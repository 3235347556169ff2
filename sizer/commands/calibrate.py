"""`sizer calibrate`: this host's fingerprint (per-vCPU rates with one and with every vCPU busy,
memory bandwidth, CPU model and SMT layout), printed and written as JSON for `--target-calibration`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.commands.options import JsonOutput, LimitBackendName
from sizer.console import console, emit, print_table, styled
from sizer.fingerprint import HostFingerprint, write_fingerprint
from sizer.sweep.fingerprint import CalibrateOptions, measure_fingerprint
from sizer.sweep.plan import resolve_profile


def _render(data: dict[str, Any]) -> None:
    fp = HostFingerprint.from_json(data["fingerprint"])
    table = Table(title=f"host fingerprint: {fp.label}", show_header=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value")
    layout = (f"{fp.physical_cores or '?'} cores, {fp.threads} threads"
              + (f", SMT {fp.threads_per_core} per core" if fp.smt else ", no SMT")
              + (f", {fp.sockets} socket(s)" if fp.sockets else "")
              + (f", {fp.hypervisor} VM" if fp.hypervisor else ""))
    table.add_row("CPU", fp.cpu_model or "unknown")
    table.add_row("layout", layout)
    table.add_row("one vCPU busy", "–" if fp.one_busy_ips is None else f"{fp.one_busy_ips:.1f} images/s per vCPU"
                  + ("" if fp.one_busy_spread is None else f" (repeats spread {fp.one_busy_spread:.0%})"))
    table.add_row("every vCPU busy", "–" if fp.all_busy_ips is None else
                  f"{fp.all_busy_ips:.1f} images/s per vCPU with {fp.all_busy_vcpus} busy")
    table.add_row("memory copy", "–" if fp.memory_gbps is None else f"{fp.memory_gbps:.1f} GB/s")
    table.add_row("work", fp.method)
    print_table(table)
    if fp.quick:
        console.print(styled(("--quick: short windows and a small copy; a test of the method, not a figure to "
                              "translate with", "yellow")))
    if data.get("written"):
        console.print(f"wrote {data['written']}", soft_wrap=True, highlight=False)


def calibrate(
    out: Annotated[Optional[Path], typer.Option("--out", help="Write the fingerprint (JSON) to this file.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Short windows and a small copy (seconds): tests the "
                                                        "method; its figures translate nothing.")] = False,
    limits: LimitBackendName = None,
    as_json: JsonOutput = False,
) -> None:
    """Measure this host's fingerprint: what its CPUs give a JPEG input pipeline.

    The per-vCPU decode-and-augment rate (PIL decode, RandomResizedCrop(224), flip) with one vCPU
    busy and with every vCPU busy at once, in real limit groups as a sweep measures them; the memory
    copy bandwidth; the CPU model and its SMT layout. No GPU and no dataset: about a minute. Give
    the file to `sizer recommend` or `sizer report` as --target-calibration to translate a sweep of
    another host to this CPU (the ratio of the every-vCPU-busy rates).

    Example: sizer calibrate --out c7i-fingerprint.json
    """
    options = CalibrateOptions(quick=quick, limits=limits)
    profile = resolve_profile("auto")

    def note(text: str) -> None:
        if not as_json:
            console.print(styled((text, "dim")))

    fingerprint = measure_fingerprint(options, profile, note)
    if out is not None:
        write_fingerprint(fingerprint, out)
    emit({"fingerprint": fingerprint.to_json(), "written": str(out) if out else None} if not as_json
         else fingerprint.to_json(), as_json, _render)
