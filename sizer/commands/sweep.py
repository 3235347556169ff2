"""`sizer sweep` (measure workloads x shapes under real limits) and `sizer run` (one point)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.command_job import DEFAULT_NAME, CommandJob, command_options_problem, define_command_job
from sizer.commands.fleet import FleetNodeWait, FleetTargets, FleetWholeNode, RayAddress, fleet_from_options, renderer
from sizer.commands.measure_report import measure_and_report
from sizer.commands.options import (
    CatalogFiles,
    Confidence,
    CpuQuota,
    DiskClassesFile,
    JsonOutput,
    LimitBackendName,
    ReportFolder,
    finite,
    gpu_flag,
    store_flag,
)
from sizer.commands.pair_table import ColocateOption, ShareOption, render_pairs
from sizer.console import console, emit, err_console, print_table, styled
from sizer.errors import NothingSized, SizerError
from sizer.levels import DEFAULT_CONFIDENCE
from sizer.sweep import SweepOptions, format_duration, run_single
from sizer.sweep.gpu_share import DEFAULT_SHARING
from sizer.sweep.parallel import describe_parallel
from sizer.units import format_bytes, parse_duration, parse_int_list, parse_setting, parse_shape_ram, parse_str_list


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set key=value (repeatable): the value is read as JSON where it parses (8, 0.5, true), else text."""
    return dict(parse_setting(item, "--set") for item in items or [])


def _fmt_rate(value: Any) -> str:
    if not isinstance(value, (int, float)) or value <= 0:
        return "-"
    for factor, suffix in ((1e9, " G"), (1e6, " M"), (1e4, " k")):
        if value >= factor:
            return f"{value / factor:,.1f}{suffix}"
    return f"{value:,.1f}"


def _fmt_bytes(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else format_bytes(value)


def _command_line() -> str:
    return "sizer " + shlex.join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("sizer") else "sizer sweep"


def render_point(data: dict[str, Any]) -> None:
    gpus = f" / {data['gpus']} GPUs" if data.get("gpus", 1) > 1 else ""
    table = Table(title=f"{data['workload']} @ {data['vcpus']} vCPU / {data['ram_gib']:g} GiB / {data['disk_class']}{gpus}",
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value")
    status = data["status"]
    colour = "green" if status == "ok" else ("yellow" if status == "noisy" else "red")
    table.add_row("status", styled((status, colour), "".join(f"; {m}" for m in data.get("marks") or ())))
    table.add_row("throughput", f"{_fmt_rate(data['throughput'])} {data['unit']} (spread {data['spread']:.1%})")
    table.add_row("bottleneck", data["bottleneck"] or "-")
    c = data["counters"]
    table.add_row("CPU (cgroup)", f"{c.get('cgroup_cpu_seconds', 0) or 0:.2f} s on CPUs {','.join(map(str, data['cpus'] or []))}")
    table.add_row("read from disk", _fmt_bytes(c.get("cgroup_read_bytes")))
    table.add_row("memory peak", _fmt_bytes(c.get("cgroup_memory_peak_bytes")))
    enf = data["enforced"] or {}
    table.add_row("limits", f"{enf.get('backend', '-')}: {enf.get('cpus', '-')}")
    table.add_row("", str(enf.get("memory", "-")))
    table.add_row("", str(enf.get("disk", "-")))
    table.add_row("wall", f"{data['wall_s']:.1f} s")
    if data["error"]:
        table.add_row("error", data["error"])
    print_table(table)


# The options of a command job (`sizer run --command`, `sizer sweep --command`): docs/commands.md.
CommandLine = Annotated[Optional[str], typer.Option(
    "--command",
    help="Measure your own command instead of a built-in workload: run by /bin/sh in the folder sizer was "
         "started from. Placeholders {vcpus} {workers} {ram_gib} {data} {gpus} (also SIZER_VCPUS ... in its "
         "environment); {{ and }} are literal braces. Its progress: `import sizer_progress; "
         "sizer_progress.step(n)` per step, or --metric-regex.")]
MetricRegexOption = Annotated[Optional[str], typer.Option(
    "--metric-regex",
    help="Read the command's progress from its stdout and stderr (lines split on \\r too): the named group "
         "(?P<rate>...) is a rate in --unit, (?P<count>...) a cumulative count of samples, a plain group a rate.")]
UnitOption = Annotated[Optional[str], typer.Option("--unit", help="The command's unit (default samples/s), e.g. tokens/s.")]


def _command_job(command: str, name: str | None, metric_regex: str | None, unit: str | None,
                 data: Path | None) -> str:
    """The command job's workload, checked and registered; its name."""
    return define_command_job(CommandJob(command=command, name=name or DEFAULT_NAME, metric_regex=metric_regex or "",
                                         unit=unit or "samples/s", data=data))


def run(
    workload: Annotated[Optional[str], typer.Argument(
        help="Workload name (see `sizer workloads`); leave it out with --command.")] = None,
    vcpus: Annotated[int, typer.Option("--vcpus", min=1, help="vCPUs (hardware threads) of the shape.")] = 1,
    ram: Annotated[str, typer.Option("--ram", help="Host RAM of the shape, page cache included (e.g. 4G).")] = "4G",
    disk: Annotated[
        str,
        typer.Option("--disk", help="Disk class: local-nvme, ssd, standard or one of --disk-classes."),
    ] = "local-nvme",
    profile: Annotated[str, typer.Option("--profile", help="auto, gpu or cpu-small.")] = "auto",
    data: Annotated[Optional[Path], typer.Option("--data", help="Dataset folder (generated there when missing).")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Workload config override key=value (repeatable).")] = None,
    disk_classes: DiskClassesFile = None,
    budget: Annotated[
        Optional[float],
        typer.Option(
            "--budget",
            callback=finite,
            help="Seconds for the point's warm-up and measured window, counted from the end of its first step.",
        ),
    ] = None,
    limits: LimitBackendName = None,
    cpu_quota: CpuQuota = False,
    gpus: Annotated[int, typer.Option(
        "--gpus", min=1,
        help="GPUs of the instance: training runs data-parallel (one process per GPU), inference and "
             "preprocessing one stream per GPU, all in the shape's vCPUs, RAM and disk. Not more than the host "
             "has; with --profile cpu-small each GPU is a CPU process (a test mode).")] = 1,
    command: CommandLine = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="The command job's name in the output and the store (default: command).")] = None,
    metric_regex: MetricRegexOption = None,
    unit: UnitOption = None,
    as_json: JsonOutput = False,
) -> None:
    """Measure one point: WORKLOAD, or your own --command, under one instance shape, in a fresh
    worker under real limits.

    The dataset's pages are evicted first, so the point starts cold, as on a fresh instance. With
    --command, --data names the folder the job reads (the disk class applies to its device).

    Example: sizer run resnet50-train --vcpus 2 --ram 4G --disk standard --json

    Example: sizer run --command 'python train.py --workers {workers} --data {data}' --data /data/imagenet
    --vcpus 8 --ram 32G --disk standard --budget 60

    Example: sizer run resnet50-train --gpus 2 --vcpus 32 --ram 96G   (2 GPUs, 16 vCPUs each)
    """
    problem = command_options_problem(command, workload is not None, name, metric_regex, unit)
    if problem:
        raise SizerError(problem)
    if command is not None:
        workload = _command_job(command, name, metric_regex, unit, data)
    assert workload is not None
    data_out = run_single(
        workload,
        vcpus,
        parse_shape_ram(ram),
        disk,
        profile=profile,
        data_dir=data,
        config=parse_set(set_),
        disk_classes_file=str(disk_classes) if disk_classes else None,
        time_budget_s=budget,
        limits=limits,
        cpu_quota=cpu_quota,
        gpus=gpus,
    )
    emit(data_out, as_json, render_point)


def plan_lines(plan: dict[str, Any], adaptive: bool = False) -> list[str]:
    """The dry run's plan in words: the grid, then the passes and why (not for an `adaptive` sweep,
    which chooses its measurements as it goes: `adaptive_line` says what it may take)."""
    ram = ", ".join(f"{r:g}" for r in plan["ram_gib"])
    per_gpu = " per GPU" if plan.get("vcpus_per_gpu") else ""
    gpus = plan.get("gpus") or [1]
    grid = (f"plan: {', '.join(plan['workloads'])} x vCPUs{per_gpu} {', '.join(map(str, plan['vcpus']))} x RAM {ram} GiB "
            f"x disks {', '.join(plan['disks'])}" + (f" x GPUs {', '.join(map(str, gpus))}" if gpus != [1] else ""))
    passes = f"{plan['passes']} pass{'es' if plan['passes'] > 1 else ''}"
    passes += f", then --refine {plan['refine']}" if plan["refine"] else ""
    passes += f" ({plan['passes_reason']})" if plan.get("passes_reason") else ""
    return [grid] if adaptive else [grid, passes]


def adaptive_line(outline: dict[str, Any]) -> str:
    """An adaptive sweep's dry run: the table is the grid it chooses from, and this is what it may take."""
    each = "; ".join(f"{e['workload']}: at most {e['at_most']} measurements of {e['grid_shapes']} shapes"
                     for e in outline["entries"])
    cap = f"--max-points {outline['max_points']}" if outline["max_points"] else "no --max-points"
    passes = outline["passes"]
    each_shape = ("each once, again where its windows spread or the pick turns on it" if passes is None
                  else f"each {passes} time{'s' if passes > 1 else ''}")
    return (f"adaptive: measures the grid above one shape at a time where the answer can still change, "
            f"{each_shape}, and stops when it cannot ({cap}; {each}): "
            f"{outline['at_most']} at most, measuring only"
            + (f"; {outline['slots']} slots at once: {outline['at_most_in_slots']}" if outline.get("slots") else ""))


def render_dry_run(data: dict[str, Any]) -> None:
    table = Table(title=f"plan: {len(data['points'])} points, profile {data['profile']}", title_justify="left")
    for column in ("#", "workload", "vCPUs", "RAM GiB", "disk", "est. s"):
        table.add_column(column, justify="left" if column in ("workload", "disk") else "right",
                         no_wrap=column not in ("workload", "disk"))
    for i, p in enumerate(data["points"], 1):
        name = p["workload"] + (" (synthetic input)" if p["ceiling"] else "")
        name += f" ({p['settings']})" if p.get("settings") else ""
        name += f" (pass {p['pass']})" if p.get("pass", 1) > 1 else ""
        name += f" ({p['gpus']} GPUs)" if p.get("gpus", 1) > 1 else ""
        table.add_row(str(i), name, str(p["vcpus"]), f"{p['ram_gib']:g}", p["disk_class"], f"{p['estimated_s']:.0f}")
    print_table(table)

    backend = data["limit_backend"]
    for line in plan_lines(data["plan"], adaptive=bool(data.get("adaptive"))):
        console.print(line)
    console.print(styled(
        "estimated time: ", (str(data["estimate"]), "bold"), f" ({format_duration(data['estimated_seconds'])}; "
        f"{data['estimate_note']}{'; with the calibration and the host speed every 10 min' if data['calibration'] else ''})"
    ))
    if data.get("adaptive"):
        console.print(adaptive_line(data["adaptive"]))
    if data["plan"].get("if_start_spreads"):
        more = data["plan"]["if_start_spreads"]
        console.print(f"if the start calibration spreads by more than 10%: {more['passes']} passes and --refine "
                      f"{more['refine']}, {more['points']} points, {more['estimate']}")
    if data.get("refine"):
        refine = data["refine"]
        console.print(f"refine: after the passes, up to {refine['at_most']} more point(s): each workload's "
                      f"{refine['shapes_per_workload']} shape(s) the model predicts worst, measured once more (in the estimate)")
    console.print(f"limits: {backend['name']} ({', '.join(backend['writable'])}); data: {data['data_dir']} "
                  f"on {data['device'] or 'no block device'}; store: {data['store']}")
    for note in data["notes"]:
        console.print(styled((note, "yellow")))


def render_sweep(data: dict[str, Any]) -> None:
    table = Table(title=f"sweep {data.get('sweep_id')}: {len(data['points'])} points", title_justify="left")
    table.add_column("workload")
    table.add_column("shape (vCPU / GiB / disk)")
    table.add_column("status")
    table.add_column("throughput", justify="right")
    table.add_column("bottleneck")
    table.add_column("s", justify="right", no_wrap=True)
    for p in data["points"]:
        name = p["workload"] + (" (synthetic)" if p.get("ceiling") else "")
        name += f" (pass {p['pass']})" if p.get("pass", 1) > 1 else ""
        name += " (alone: interference check)" if p.get("alone") else ""
        shape = f"{p['vcpus']} / {p['ram_gib']:g} / {p['disk_class']}" + (f" / {p['gpus']} GPUs" if p.get("gpus", 1) > 1 else "")
        status = p["status"] + (" (stored)" if p.get("stored") else "")
        rate = f"{_fmt_rate(p.get('throughput'))} {p.get('unit', '')}".strip()
        table.add_row(name, shape, status, rate, p.get("bottleneck", "") or "",
                      f"{p['wall_s']:.0f}" if p.get("wall_s") else "-")
    print_table(table, drop=("bottleneck",))
    for chosen in data.get("refine") or []:
        console.print(f"refine: {chosen['key']} measured once more (held out {chosen['held_out_error']:.1%})")
    cal = data.get("calibration") or {}
    if cal.get("ips_per_vcpu"):
        console.print(f"calibration: {cal['ips_per_vcpu']:.1f} {cal.get('unit', '')} per vCPU")
    elif cal:
        console.print(styled((f"calibration: {cal.get('status')} {cal.get('reason', '') or cal.get('error', '')}", "yellow")))
    if data.get("skipped"):
        console.print(f"{data['skipped']} point(s) were already stored and not measured again")
    if data.get("parallel"):
        console.print(describe_parallel(data["parallel"]))
    render_pairs(data.get("pairs") or [])
    for name, path in (data.get("outputs") or {}).items():
        console.print(f"{name}: {path}")
    console.print(f"store: {data.get('store')}")
    for note in data.get("notes", []):
        console.print(styled((note, "yellow")))
    render_answers(data.get("answers") or [], (data.get("outputs") or {}).get("report.html"))


def _share_words(answer: dict[str, Any]) -> str:
    share, low, high = answer.get("share"), answer.get("share_low"), answer.get("share_high")
    if share is None:
        return ""
    spread = "" if low is None or high is None or f"{low:.0%}" == f"{high:.0%}" else f" ({low:.0%}-{high:.0%})"
    return f"{share:.0%}{spread}"


def render_answers(answers: list[dict[str, Any]], report: str | None) -> None:
    """Each workload's pick or why there is none, its share of the ceiling and its knee, in a table
    that fits 80 columns; then where the report is. The last thing a sweep prints."""
    if not answers:
        return
    table = Table(title="the answer", title_justify="left", width=min(console.width, 80))
    table.add_column("workload", overflow="fold")
    table.add_column("pick (disk)", overflow="fold")
    table.add_column("of ceiling", justify="right")
    table.add_column("knee vCPUs", justify="right")
    for a in answers:
        pick = "none" if a["instance"] is None else f"{a['instance']} ({a['disk_class']})"
        table.add_row(a["workload"], pick, _share_words(a), a["knee"])
    console.print(table)
    for a in answers:
        if a["instance"] is None and a.get("reason"):
            console.print(styled((a["workload"], "bold"), f": no pick: {a['reason']}"))
    if report:
        console.print(f"the report: {report}")


# The options of `sweep` alone.
Workloads = Annotated[Optional[str], typer.Option(
    "--workloads",
    help="Comma-separated workloads, each optionally with settings of its own as "
         "name:key=value[:key=value] (e.g. resnet50-train:decode=gpu). Default: resnet50-train on a GPU; "
         "without one, the four of the study.")]
VcpuLevels = Annotated[Optional[str], typer.Option(
    "--vcpus", help="vCPU counts, e.g. 1,2,4,8 (default on a GPU: 2 up to all the host's threads, "
                    "e.g. 2,4,8,12,16; without one: 1,2).")]
RamLevels = Annotated[Optional[str], typer.Option(
    "--ram", help="RAM sizes, e.g. 4G,8G (default on a GPU: one level too small to cache the dataset "
                  "beside the workload, one that caches it; without one: one that caches it).")]
DiskLevels = Annotated[Optional[str], typer.Option("--disks", help="Disk classes, e.g. local-nvme,ssd,standard "
                                                    "(default on a GPU: all three; without one: local-nvme,standard).")]
SweepProfile = Annotated[str, typer.Option(
    "--profile", help="auto (gpu when NVML sees a GPU, else cpu-small), gpu or cpu-small.")]
SweepStore = Annotated[Optional[Path], store_flag("SQLite store (default: OUT/sizer.sqlite).")]
SweepData = Annotated[Optional[Path], typer.Option(
    "--data", help="Dataset folder (default: $SIZER_DATA or ~/.cache/sizer/data).")]
SweepGpu = Annotated[Optional[str], gpu_flag("GPU model to recommend instances for (default: the host's).")]
Resume = Annotated[bool, typer.Option(
    "--resume", help="Continue the newest sweep with the same plan: stored points are not measured again.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the points and the estimated time; measure nothing.")]
SweepBudget = Annotated[Optional[float], typer.Option(
    "--budget",
    callback=finite,
    help="Seconds for each point's warm-up and measured window, counted from the end of its first step.")]
SweepSettings = Annotated[Optional[list[str]], typer.Option(
    "--set", help="Workload config override key=value for every point (repeatable).")]
NoCalibrate = Annotated[bool, typer.Option(
    "--no-calibrate",
    help="Skip the per-vCPU calibration (results then cannot be scaled to another CPU model).")]
MaxTime = Annotated[Optional[str], typer.Option(
    "--max-time",
    help="Start no point that would end later than this after the start (e.g. 9m, 540s): a slice of a "
         "longer sweep, continued with --resume.")]
RepeatNoisy = Annotated[Optional[float], typer.Option(
    "--repeat-noisy",
    callback=finite,
    help="Measure a point once more when its windows spread by more than this (0.2 = 20%); the steadier "
         "measurement is kept, the other stored with it.")]
Passes = Annotated[Optional[int], typer.Option(
    "--passes",
    help="Measure every shape this many times, each pass in another order (the first shuffled, the second "
         "its reverse, later ones shuffled anew); the model and the report take each shape's median. For "
         "hosts whose speed drifts over minutes (shared VMs). Default on a GPU: 2 and --refine 3 on a virtual "
         "machine or where the start calibration spreads by more than 10%, else 1; without a GPU: 1. With "
         "--strategy adaptive: the measurements of each shape it takes (default: once, and again where its windows "
         "spread or the pick turns on it).")]
GpuCounts = Annotated[Optional[str], typer.Option(
    "--gpus",
    help="GPU counts of the shapes, e.g. 1,2,4 (default 1): training runs data-parallel, inference and "
         "preprocessing one stream per GPU, each shape's vCPUs, RAM and disk shared by its GPUs. Not more than "
         "the host has; with --profile cpu-small each GPU is a CPU process (a test mode).")]
VcpusPerGpu = Annotated[Optional[str], typer.Option(
    "--vcpus-per-gpu",
    help="vCPU levels per GPU instead of --vcpus, e.g. 8,16: a shape of N GPUs gets N times each level "
         "(scaling at fixed vCPUs per GPU, with --gpus).")]
Refine = Annotated[Optional[int], typer.Option(
    "--refine",
    metavar="N",
    help="After the passes, fit each workload without each shape in turn and measure once more its N "
         "shapes the model predicts worst (a shape measured at a slow or fast moment of the host); they "
         "join the shape's median like another pass. 0: off.")]
Parallel = Annotated[Optional[int], typer.Option(
    "--parallel",
    metavar="K",
    min=1,
    help="Measure up to K one-GPU points at once, each on its own GPU with its own cores (NUMA-local where "
         "the host has NUMA nodes), limits and dataset copy (slot i>0 reads a copy: the dataset's size again "
         "on its disk per extra slot). Points of several GPUs run alone. With the default vCPU levels, fewer and "
         "wider slots where K would be too narrow for the vCPUs per GPU the target GPU is sold with. Default: 1 "
         "(side by side, points moved by up to 12% against alone on a 4-GPU host: docs/PERFORMANCE.md).")]
Interference = Annotated[Optional[int], typer.Option(
    "--interference",
    metavar="N",
    min=0,
    help="With --parallel: measure N CPU-bound shapes (the largest vCPU counts on the fastest disk at the largest "
         "RAM) first, with every slot busy, and alone as well (same slot, nothing else running); the report gives "
         "parallel against alone per shape, and the load factor judges instances of several GPUs. Default 2; 0: off.")]
Strategy = Annotated[str, typer.Option(
    "--strategy",
    help="grid: measure every shape of the grid. adaptive: per workload, start from the GPU ceiling and the "
         "largest and smallest vCPU counts on the fastest disk at the largest RAM, then take one shape at a time "
         "where the recommendation or the knee can still change (other disk classes and RAM levels only where "
         "they decide the pick), each once and again where its windows spread or the pick turns on it "
         "(--passes N: N times each), and stop when they hold at both ends of the ranges. With --parallel K, "
         "each free slot takes the next point of the entry with the fewest measurements, so K searches' points "
         "run at once (docs/design.md, \"Adaptive sweeps\").")]
SkipUnavailable = Annotated[bool, typer.Option(
    "--skip-unavailable",
    help="Leave out a workload whose Python modules (in its own interpreter) or whose dataset's are missing, "
         "measure the others, and name it in the report with what to install. Without it such a workload stops "
         "the sweep before any work, in one line naming the package.")]
MaxPoints = Annotated[Optional[int], typer.Option(
    "--max-points",
    metavar="N",
    help="With --strategy adaptive: measure at most N points per workload (its GPU ceiling included); a "
         "shape is taken only where all its passes fit.")]


def vcpu_levels(vcpus: str | None, vcpus_per_gpu: str | None) -> list[int] | None:
    """The vCPU levels of --vcpus or of --vcpus-per-gpu (one of them, or neither: the default)."""
    if vcpus and vcpus_per_gpu:
        raise SizerError("give --vcpus or --vcpus-per-gpu, not both")
    if vcpus_per_gpu:
        return parse_int_list(vcpus_per_gpu, "--vcpus-per-gpu")
    return parse_int_list(vcpus, "--vcpus") if vcpus else None


def sweep(
    workloads: Workloads = None,
    vcpus: VcpuLevels = None,
    ram: RamLevels = None,
    disks: DiskLevels = None,
    disk_classes: DiskClassesFile = None,
    profile: SweepProfile = "auto",
    store: SweepStore = None,
    out: ReportFolder = Path("results"),
    data: SweepData = None,
    gpu: SweepGpu = None,
    catalog: CatalogFiles = None,
    confidence: Confidence = DEFAULT_CONFIDENCE,
    resume: Resume = False,
    dry_run: DryRun = False,
    budget: SweepBudget = None,
    set_: SweepSettings = None,
    no_calibrate: NoCalibrate = False,
    limits: LimitBackendName = None,
    max_time: MaxTime = None,
    cpu_quota: CpuQuota = False,
    repeat_noisy: RepeatNoisy = None,
    passes: Passes = None,
    refine: Refine = None,
    gpus: GpuCounts = None,
    vcpus_per_gpu: VcpusPerGpu = None,
    command: CommandLine = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="The command job's name: its points, fit and report card (needed with --command).")] = None,
    metric_regex: MetricRegexOption = None,
    unit: UnitOption = None,
    parallel: Parallel = None,
    interference: Interference = None,
    strategy: Strategy = "grid",
    max_points: MaxPoints = None,
    colocate: ColocateOption = None,
    share: ShareOption = DEFAULT_SHARING,
    skip_unavailable: SkipUnavailable = False,
    ray: RayAddress = None,
    fleet_targets: FleetTargets = None,
    fleet_node_wait: FleetNodeWait = None,
    fleet_whole_node: FleetWholeNode = False,
    as_json: JsonOutput = False,
) -> None:
    """Measure workloads x instance shapes under real limits, point by point, and write the report.

    Every point runs in a fresh worker inside a cgroup with the shape's vCPUs (cpuset), RAM
    (memory limit, page cache included) and disk class (block-I/O throttle), starting cold for
    its dataset. Points are committed as they finish: after Ctrl-C or a crash, --resume goes on.
    When no workload has a usable point with real input, the report says why and the exit code is 3.

    Examples:

      sizer sweep --workloads resnet50-train --vcpus 1,2,4 --ram 8G --disks local-nvme,standard

      sizer sweep --workloads resnet50-train,resnet50-train:decode=gpu --vcpus 2,4,8,16 --ram 8G,32G

      sizer sweep --workloads resnet50-infer --vcpus 2,4,8 --passes 3 --max-time 9m --resume

      sizer sweep --workloads resnet50-train --vcpus 2,4,8,12,16 --ram 8G,32G --passes 2 --refine 3

      sizer sweep --workloads resnet50-train --gpus 1,2 --vcpus-per-gpu 8,16 --ram 96G --disks local-nvme

      sizer sweep --workloads resnet50-train --vcpus 4,8 --ram 32G --disks local-nvme,standard --parallel 2

      sizer sweep --workloads resnet50-train --strategy adaptive --max-points 12 --max-time 9m

      sizer sweep --workloads resnet50-train,ptb-lstm-train --vcpus 8,16 --ram 64G --colocate resnet50-train+ptb-lstm-train
      sizer sweep --workloads resnet50-train,resnet50-infer,ptb-lstm-train --strategy adaptive --parallel 4

      sizer sweep --command 'python train.py --workers {workers}' --name my-train --vcpus 4,8,16 --ram 32G
      --disks local-nvme,standard --data /data/imagenet

      sizer sweep --ray auto --fleet-targets instance:g5.2xlarge,instance:g6.2xlarge --workloads resnet50-train
      --vcpus 2,4,8 --ram 16G,30G --disks local-nvme --fleet-whole-node   (docs/fleet.md)
    """
    opts = sweep_options(**{k: v for k, v in locals().items() if k != "as_json"})  # every option, by name
    try:
        result = measure_and_report(opts, progress=not dry_run)
    except KeyboardInterrupt:
        err_console.print("sweep stopped: committed points are kept; continue with the same command and --resume")
        raise
    emit(result, as_json, renderer(result, dry_run, render_sweep, render_dry_run))
    if result.get("not_sized"):  # the report is written and says why
        raise NothingSized(result["not_sized"])


def sweep_options(
    *, workloads: str | None, vcpus: str | None, ram: str | None, disks: str | None, disk_classes: Path | None,
    profile: str, store: Path | None, out: Path, data: Path | None, gpu: str | None, catalog: list[Path] | None,
    confidence: float, resume: bool, dry_run: bool, budget: float | None, set_: list[str] | None,
    no_calibrate: bool, limits: str | None, max_time: str | None, cpu_quota: bool, repeat_noisy: float | None,
    passes: int | None, refine: int | None, gpus: str | None, vcpus_per_gpu: str | None, command: str | None,
    name: str | None, metric_regex: str | None, unit: str | None, parallel: int | None, interference: int | None,
    strategy: str, max_points: int | None, skip_unavailable: bool, ray: str | None, fleet_targets: str | None,
    fleet_node_wait: str | None, fleet_whole_node: bool, colocate: list[str] | None = None,
    share: str = DEFAULT_SHARING,
) -> Any:
    """`sizer sweep`'s options checked and gathered into SweepOptions (a SizerError names the first problem)."""
    problem = command_options_problem(command, workloads is not None, name, metric_regex, unit, "--workloads")
    if problem:
        raise SizerError(problem)
    if command is not None:
        if not name:
            raise SizerError("--command needs --name NAME in a sweep: the job's points, fit and report card go by it")
        workloads = _command_job(command, name, metric_regex, unit, data)
    opts = SweepOptions(
        workloads=parse_str_list(workloads) if workloads else None,
        vcpus=vcpu_levels(vcpus, vcpus_per_gpu),
        ram_bytes=[parse_shape_ram(r) for r in parse_str_list(ram)] if ram else None,
        disks=parse_str_list(disks) if disks else None,
        disk_classes_file=str(disk_classes) if disk_classes else None,
        profile=profile,
        store=store,
        out_dir=out,
        data_dir=data,
        gpu=gpu,
        catalog_files=tuple(catalog or ()),
        confidence=confidence,
        resume=resume,
        dry_run=dry_run,
        config=parse_set(set_),
        time_budget_s=budget,
        calibrate=not no_calibrate,
        limits=limits,
        max_seconds=parse_duration(max_time, "--max-time") if max_time else None,
        cpu_quota=cpu_quota,
        repeat_spread=repeat_noisy,
        passes=passes,
        refine=refine,
        command=_command_line(),
        gpus=parse_int_list(gpus, "--gpus") if gpus else None,
        vcpus_per_gpu=bool(vcpus_per_gpu),
        parallel=parallel,
        interference=interference,
        fleet=fleet_from_options(ray, fleet_targets, fleet_node_wait, fleet_whole_node),
        strategy=strategy,
        max_points=max_points,
        colocate=list(colocate or []),
        gpu_sharing=share,
        skip_unavailable=skip_unavailable,
    )
    if opts.fleet is not None and opts.colocate:
        raise SizerError("--colocate measures its pairs on this host: it does not go with --ray")
    if opts.workloads is not None and not opts.workloads:
        raise SizerError("--workloads: empty list")
    if opts.disks is not None and not opts.disks:
        raise SizerError("--disks: empty list")
    return opts
