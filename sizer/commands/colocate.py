"""`sizer colocate A B`: two jobs on one GPU at once, each on half of one instance shape, and each
alone on its half; the pair's slowdowns and whether sharing is faster (docs/design.md, "Two jobs on
one GPU"). `sizer sweep --colocate A+B` measures pairs after its grid, with the same machinery."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from sizer.command_job import CommandJob, define_command_job
from sizer.commands.options import CpuQuota, JsonOutput, LimitBackendName, finite, store_flag
from sizer.commands.pair_table import ShareOption, render_pairs
from sizer.commands.sweep import CommandLine, MetricRegexOption, UnitOption, parse_set
from sizer.console import console, emit, err_console, styled
from sizer.errors import SizerError
from sizer.shapes import host_cpus, host_ram_bytes
from sizer.sweep import DEFAULT_OUT, STORE_NAME, SweepOptions, run_sweep
from sizer.sweep.gpu_share import DEFAULT_SHARING
from sizer.sweep.pairs import PAIR_SEPARATOR
from sizer.units import GIB, parse_duration, parse_shape_ram


def default_vcpus() -> int:
    """All the host's threads, down to a count whose halves are whole cores."""
    cpus = host_cpus()
    step = 2 * max(len(core) for core in cpus.cores)
    return max(step, cpus.threads - cpus.threads % step)


def default_ram() -> int:
    """Half the host's RAM, down to a whole half GiB."""
    half = host_ram_bytes() / 2
    return int(half // (GIB // 2) * (GIB // 2))


def render(data: dict[str, Any]) -> None:
    render_pairs(data.get("pairs") or [])
    if data.get("skipped"):
        console.print(f"{data['skipped']} point(s) were already stored and not measured again")
    console.print(f"store: {data.get('store')}")
    for note in data.get("notes", []):
        console.print(styled((note, "yellow")))


def _command_line() -> str:
    return "sizer " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("sizer") else "sizer colocate"


def colocate(
    first: Annotated[Optional[str], typer.Argument(
        help="The first workload (see `sizer workloads`), with settings as name:key=value, or --name's command job.")] = None,
    second: Annotated[Optional[str], typer.Argument(help="The second workload, as the first.")] = None,
    vcpus: Annotated[Optional[int], typer.Option(
        "--vcpus", min=2, help="vCPUs of the instance both jobs share; each gets half, as whole cores (default: the "
                               "host's threads, down to a count whose halves are whole cores).")] = None,
    ram: Annotated[Optional[str], typer.Option(
        "--ram", help="RAM of the instance (e.g. 64G); each job gets half (default: half the host's).")] = None,
    disk: Annotated[str, typer.Option(
        "--disk", help="Disk class of the instance; each job gets a throttle of its own at half its caps.")] = "local-nvme",
    share: ShareOption = DEFAULT_SHARING,
    more: Annotated[Optional[list[str]], typer.Option(
        "--pair", help="More pairs on the same instance, C+D (repeatable, or separated by commas): one run, each job "
                       "alone on its half measured once for all of them.")] = None,
    store: Annotated[Optional[Path], store_flag("SQLite store (default: results/sizer.sqlite).")] = None,
    data: Annotated[Optional[Path], typer.Option(
        "--data", help="Dataset folder (default: $SIZER_DATA or ~/.cache/sizer/data); with --command, the job's own.")] = None,
    profile: Annotated[str, typer.Option("--profile", help="auto, gpu or cpu-small.")] = "auto",
    budget: Annotated[Optional[float], typer.Option(
        "--budget", callback=finite, help="Seconds of each job's warm-up and measured window.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Workload config override key=value for both jobs (repeatable).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the newest run of the same pair: stored points are not measured again.")] = False,
    max_time: Annotated[Optional[str], typer.Option(
        "--max-time", help="Start nothing that would end later than this (e.g. 5m); go on with --resume.")] = None,
    limits: LimitBackendName = None,
    cpu_quota: CpuQuota = False,
    command: CommandLine = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="The command job's name: give it as one of the two workloads.")] = None,
    metric_regex: MetricRegexOption = None,
    unit: UnitOption = None,
    as_json: JsonOutput = False,
) -> None:
    """Measure two workloads on one GPU at once, each on half of one instance (half its vCPUs as whole
    cores, half its RAM, a disk throttle of its own at half the class's caps), then each alone on
    its half: each job's slowdown r (its rate alone over its rate shared) and whether the pair,
    shared, ends sooner than one after the other (1/r_AB + 1/r_BA > 1).

    Points are committed as they finish: after Ctrl-C or a crash, the same command with --resume goes on.

    Example: sizer colocate resnet50-train ptb-lstm-train --vcpus 16 --ram 64G --disk local-nvme --json

    Example: sizer colocate resnet50-infer matmul --command 'python loop.py' --name matmul --share mps

    Example: sizer colocate resnet50-train ptb-lstm-train --pair resnet50-infer+ptb-lstm-train --vcpus 16
    """
    if first is None or second is None:
        raise SizerError("give two workloads to measure together (see `sizer workloads`)")
    if command is not None:
        if not name:
            raise SizerError("--command needs --name NAME, and NAME as one of the workloads of a pair")
        define_command_job(CommandJob(command=command, name=name, metric_regex=metric_regex or "",
                                      unit=unit or "samples/s", data=data))
    elif name is not None or metric_regex is not None or unit is not None:
        raise SizerError("--name, --metric-regex and --unit go with --command")
    opts = SweepOptions(
        vcpus=[vcpus or default_vcpus()], ram_bytes=[parse_shape_ram(ram) if ram else default_ram()], disks=[disk],
        profile=profile, store=store or DEFAULT_OUT / STORE_NAME, out_dir=None, data_dir=data, resume=resume,
        config=parse_set(set_), time_budget_s=budget, calibrate=False, ceiling=False, limits=limits,
        max_seconds=parse_duration(max_time, "--max-time") if max_time else None, cpu_quota=cpu_quota,
        command=_command_line(), report=False, colocate=[f"{first}{PAIR_SEPARATOR}{second}", *(more or [])],
        gpu_sharing=share,
        pairs_only=True,
    )
    try:
        result = run_sweep(opts, progress=True)
    except KeyboardInterrupt:
        err_console.print("stopped: committed points are kept; continue with the same command and --resume")
        raise
    emit(result, as_json, render)
