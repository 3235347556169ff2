"""The user's own command as a workload: `sizer run --command CMD` and `sizer sweep --command CMD
--name NAME` measure any training or inference job under the shape's limits, as a built-in one.

The worker starts `/bin/sh -c CMD` (placeholders filled in) in the folder sizer was started from,
in a process group of its own inside the point's limit group, and reads how far the job has got:
from the stdlib helper `sizer_progress` (its folder is put on the job's PYTHONPATH) or, with
`metric_regex`, from the job's own output (`workloads.progress_stream`). The reports become the
meter's steps, so warm-up (by time: `warmup_s`), the window, its spread and the noisy flag, GPU
sampling and the CPU and read counters follow the built-in workloads' rules. When the measurement is
done the job's group gets SIGTERM, then SIGKILL; the runner then empties the whole limit group.

Outcomes besides a measurement: `error` for a job that ends, crashes or prints what is no number
(with the reason and the end of its stderr), `timeout` for one that does not report within
`start_timeout_s` or stops reporting. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import string
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, cast

from workloads.gpu_memory_use import ProcessGpuMemory
from workloads.measure import Meter, _cgroup_dirs, bottleneck_label
from workloads.progress_stream import (
    MAX_LINE_CHARS,
    BadReport,
    MetricRegex,
    OutputTap,
    ProgressFile,
    Report,
    StepFeed,
    regex_problem,
)
from workloads.protocol import (
    AT_LEAST_ONE,
    ERROR,
    NOT_NEGATIVE,
    PROFILES,
    TIMEOUT,
    UNIT_PATTERN,
    Range,
    Result,
    Spec,
    Workload,
    register,
    registry,
)

HELPER_DIR = Path(__file__).resolve().parent / "helper"
PROGRESS_ENV = "SIZER_PROGRESS"
# Placeholder -> the environment variable that carries the same value to the job.
PLACEHOLDERS = {"vcpus": "SIZER_VCPUS", "workers": "SIZER_WORKERS", "ram_gib": "SIZER_RAM_GIB",
                "data": "SIZER_DATA", "gpus": "SIZER_GPUS"}
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
DEFAULT_START_TIMEOUT_S = 60.0
# The runner kills a worker STARTUP_ALLOWANCE_S (90 s) past twice its budget: a job's start waits
# less, so the worker still ends it and says why.
MAX_START_TIMEOUT_S = 80.0
POLL_S = 0.05
END_GRACE_S = 2.0  # between SIGTERM and SIGKILL to the job's process group
STDERR_TAIL_LINES = 12
_GIB = 1024**3
_PR_SET_PDEATHSIG = 1

SETTINGS: dict[str, Any] = {
    "command": "",  # the command line, with placeholders
    "metric_regex": "",  # "" reads the helper's stream
    "unit": "samples/s",
    "cwd": "",  # where the job runs ("" : where sizer was started)
    "data": "",  # the dataset folder the disk class and the eviction apply to ("" : none)
    "warmup_s": None,  # seconds of warm-up after the first report (null: a third of the budget)
    "start_timeout_s": DEFAULT_START_TIMEOUT_S,  # seconds the job has to make its first report
    # Reports per sub-window at least (null: the job's loader workers for the helper's per-step
    # reports, since W workers hand over batches in bursts of about W; 1 for --metric-regex lines,
    # each of which already spans the job's own logging interval).
    "round_steps": None,
}


# ---------------------------------------------------------------- checks made before any work
def placeholder_problem(command: str) -> str | None:
    """What is wrong with the command's placeholders, or None. Known: {vcpus} {workers} {ram_gib}
    {data} {gpus}, without format or conversion; {{ and }} are literal braces."""
    braces = "write {{ and }} for a literal brace"
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(command) if name is not None]
    except ValueError as exc:
        return f"--command {command!r}: {exc} ({braces})"
    for name, spec, conv in fields:
        if name not in PLACEHOLDERS:
            return (f"--command: unknown placeholder {{{name}}} (known: "
                    f"{' '.join('{' + p + '}' for p in PLACEHOLDERS)}; {braces})")
        if spec or conv:
            return f"--command: placeholder {{{name}}} takes no format or conversion: write {{{name}}}"
    return None


def command_problem(cfg: dict[str, Any]) -> str | None:
    """What is wrong with a command job's settings, or None."""
    command = cfg.get("command")
    if not isinstance(command, str) or not command.strip():
        return "the command workload needs a command: sizer run --command 'CMD' (see docs/commands.md)"
    problem = placeholder_problem(command)
    if problem:
        return problem
    if cfg.get("metric_regex"):
        problem = regex_problem(str(cfg["metric_regex"]))
        if problem:
            return problem
    if not UNIT_PATTERN.fullmatch(str(cfg.get("unit") or "")):
        return f"--unit {cfg.get('unit')!r}: a unit is what the job counts, per second: samples/s, tokens/s, ..."
    timeout = cfg.get("start_timeout_s")
    if not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_START_TIMEOUT_S:
        return f"start_timeout_s wants seconds above 0 and at most {MAX_START_TIMEOUT_S:g}, got {timeout!r}"
    warmup = cfg.get("warmup_s")
    if warmup is not None and (not isinstance(warmup, (int, float)) or isinstance(warmup, bool) or not warmup >= 0):
        return f"warmup_s wants seconds of 0 or more (or null: a third of the budget), got {warmup!r}"
    rounds = cfg.get("round_steps")
    if rounds is not None and (not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1):
        return f"round_steps wants a whole number of 1 or more (or null: chosen by the route), got {rounds!r}"
    return None


def name_problem(name: str) -> str | None:
    """What is wrong with a command job's name, or None: letters, digits, '.', '_' and '-', and no
    workload of another origin by that name."""
    if not NAME_PATTERN.fullmatch(name or ""):
        return f"--name {name!r}: use letters, digits, '.', '_' and '-' (it names the job in keys and reports)"
    other = registry().get(name)
    if other is not None and not issubclass(other, CommandWorkload):
        return f"--name {name}: the {other.origin} workload {name} has this name; choose another"
    return None


# ---------------------------------------------------------------- the classes
def command_class(name: str, settings: dict[str, Any], origin: str = "command") -> type[CommandWorkload]:
    """A workload class named `name` whose defaults hold the job's settings (a sweep plans, stores
    and reports it as any workload); a worker makes the same class from its spec's config."""
    cfg = {**SETTINGS, **{k: v for k, v in settings.items() if k in SETTINGS}}
    attrs = {
        "name": name,
        "unit": str(cfg["unit"]),
        "dataset": "files" if cfg["data"] else "",
        "origin": origin,
        "description": f"your command: {cfg['command']}",
        "defaults": {profile: dict(cfg) for profile in PROFILES},
    }
    return cast("type[CommandWorkload]", type(f"CommandWorkload[{name}]", (CommandWorkload,), attrs))


def define(name: str, settings: dict[str, Any]) -> type[CommandWorkload]:
    """Make and register the class of a command job (replacing an earlier command job's of that
    name); ValueError names what is wrong with the name or the settings."""
    problem = name_problem(name) or command_problem({**SETTINGS, **settings})
    if problem:
        raise ValueError(problem)
    cls = command_class(name, settings)
    register(cls, replace=True)
    return cls


@register
class CommandWorkload(Workload):
    name = "command"
    framework = "command"
    unit = "samples/s"
    description = "your own command (sizer run --command CMD): progress from sizer_progress or --metric-regex"
    stresses = "what the command does"
    defaults = {profile: dict(SETTINGS) for profile in PROFILES}
    setting_types = {"warmup_s": (int, float, type(None)), "round_steps": (int, type(None))}
    ranges = {"warmup_s": NOT_NEGATIVE, "round_steps": AT_LEAST_ONE,
              "start_timeout_s": Range(0, MAX_START_TIMEOUT_S, low_open=True)}
    multi_gpu = "own"  # the command gets the shape's GPUs ({gpus}, SIZER_GPUS) and runs them itself

    @classmethod
    def config_problem(cls, profile: str, config: dict[str, Any]) -> str | None:
        return command_problem({**cls.defaults.get(profile, SETTINGS), **config})

    @classmethod
    def spec_config(cls, profile: str, config: dict[str, Any]) -> dict[str, Any]:
        """Everything: the worker may know no class of this name. The job runs where sizer was
        started unless the settings say otherwise."""
        cfg = {**cls.defaults.get(profile, SETTINGS), **config}
        cfg["cwd"] = cfg.get("cwd") or os.getcwd()
        return cfg

    def new_result(self, spec: Spec, config: dict[str, Any]) -> Result:
        result = super().new_result(spec, config)
        result.unit = str(config.get("unit") or self.unit)
        return result

    def run(self, spec: Spec) -> Result:
        cfg = self.config_for(spec)
        result = self.new_result(spec, cfg)
        problem = command_problem(cfg)
        if problem:
            result.status, result.error = ERROR, problem
            return result
        work_dir = Path(spec.work_dir or os.getcwd())
        warmup_s = cfg["warmup_s"] if cfg["warmup_s"] is not None else spec.time_budget_s / 3
        meter = Meter(warmup_steps=1, time_budget_s=spec.time_budget_s, min_steps=5, n_windows=5,
                      spread_target=spec.spread_target, gpu=True, warmup_s=float(warmup_s),
                      round_steps=report_rounds(cfg, spec))
        meter.track(cgroup_usage, _prefer_cgroup_counters(spec.vcpus))
        regex = MetricRegex(cfg["metric_regex"]) if cfg["metric_regex"] else None
        line = str(cfg["command"]).format(**placeholder_values(spec, cfg))
        try:
            job = Job(line, cfg["cwd"] or os.getcwd(), job_env(spec, cfg, work_dir), work_dir, keep_lines=regex is not None)
        except OSError as exc:  # a folder that is gone, no /bin/sh
            result.status, result.error = ERROR, f"cannot start the command in {cfg['cwd']}: {exc}"
            return result
        follow = _Follow(job, meter, regex, float(cfg["start_timeout_s"]), spec.time_budget_s)
        gpu_memory = ProcessGpuMemory(job.proc.pid)  # NVML's per-process figure of the job's tree
        gpu_memory.start()
        try:
            follow.run()
            follow.conclude(result, spec)  # the window's counters end while the job still runs
        finally:
            result.counters.update(gpu_memory.stop())
            job.end()
        result.extra.update({"command": line, "progress": "metric-regex" if regex else "sizer_progress",
                             "reports": follow.feed.reports, "job_exit": job.returncode,
                             "job_output": job.output_kept()})
        return result


def report_rounds(cfg: dict[str, Any], spec: Spec) -> int:
    """Reports a sub-window spans at least: the setting, else one loader round of the job's
    workers for per-step reports, else 1 (a --metric-regex line covers the job's own interval)."""
    if cfg.get("round_steps") is not None:
        return int(cfg["round_steps"])
    return 1 if cfg.get("metric_regex") else max(1, spec.vcpus)


# ---------------------------------------------------------------- the job's values and process
def placeholder_values(spec: Spec, cfg: dict[str, Any]) -> dict[str, str]:
    """The placeholders' values: the shape's vCPUs, loader workers (one per vCPU, the built-in rule
    of `image_loader.loader_workers`), RAM in GiB (0: not limited), the dataset folder ("" without
    --data) and GPUs."""
    return {
        "vcpus": str(spec.vcpus),
        "workers": str(max(1, spec.vcpus)),
        "ram_gib": f"{spec.ram_bytes / _GIB:g}" if spec.ram_bytes else "0",
        "data": spec.data_dir if cfg.get("data") else "",
        "gpus": str(spec.gpus),
    }


def job_env(spec: Spec, cfg: dict[str, Any], work_dir: Path) -> dict[str, str]:
    """The worker's environment (thread pools sized to the shape), the placeholders' values as
    SIZER_* variables, the helper's stream and its folder ahead on PYTHONPATH."""
    env = dict(os.environ)
    env.update({PLACEHOLDERS[k]: v for k, v in placeholder_values(spec, cfg).items()})
    env[PROGRESS_ENV] = str(work_dir / "progress.txt")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HELPER_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _own_group_dying_with_worker() -> Callable[[], None]:
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:  # in the child, before exec
        os.setpgid(0, 0)
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


class Job:
    """The running command: `/bin/sh -c LINE` in a process group of its own (in the worker's
    session, which the runner ends) that dies with the worker; the last part of its output is kept
    in job-stdout.txt and job-stderr.txt in the point's folder (with the part before in
    job-stdout.1.txt and job-stderr.1.txt: `progress_stream.RotatingCopy`)."""

    def __init__(self, line: str, cwd: str, env: dict[str, str], work_dir: Path, keep_lines: bool):
        Path(env[PROGRESS_ENV]).unlink(missing_ok=True)  # a stream of an earlier run in this folder
        self.progress = ProgressFile(env[PROGRESS_ENV])
        self.started = time.monotonic()
        self.proc = subprocess.Popen(["/bin/sh", "-c", line], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=_own_group_dying_with_worker())
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.taps = [OutputTap(self.proc.stdout, work_dir / "job-stdout.txt", keep_lines),
                     OutputTap(self.proc.stderr, work_dir / "job-stderr.txt", keep_lines)]
        self.returncode: int | None = None  # as the job ended on its own; None: sizer ended it

    def poll(self) -> int | None:
        self.returncode = self.proc.poll()
        return self.returncode

    def lines(self) -> list[tuple[float, str]]:
        """Output lines since the last call, stdout's and stderr's, in the order they arrived."""
        return sorted((line for tap in self.taps for line in tap.drain()), key=lambda item: item[0])

    def wait_output(self, timeout: float = 1.0) -> None:
        """Let the taps take what the job wrote before it ended."""
        for tap in self.taps:
            tap.join(timeout)

    def end(self) -> None:
        """SIGTERM to the job's group, SIGKILL after END_GRACE_S (or once the command has exited)."""
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + END_GRACE_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        self._signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        text = self.taps[1].copy.tail(16384).decode(errors="replace")
        return "\n".join(line[:MAX_LINE_CHARS] for line in re.split(r"\r\n|\r|\n", text.rstrip())[-lines:])

    def output_kept(self) -> dict[str, int]:
        """What the job wrote and what sizer left out of it: bytes per stream, lines cut and lines
        the regex never saw (they waited too long)."""
        out, err = self.taps
        return {"stdout_bytes": out.copy.written, "stderr_bytes": err.copy.written,
                "lines_cut": out.cut + err.cut, "lines_dropped": out.dropped + err.dropped}


# ---------------------------------------------------------------- following the job
class _Follow:
    """Reads the job's reports into the meter until the measurement is done or the job fails; the
    outcome (`how`) and what it says (`why`) go into the result."""

    # After the first report: the meter's own hard stop, then this long without enough steps.
    STALL_S = 5.0

    def __init__(self, job: Job, meter: Meter, regex: MetricRegex | None, start_timeout_s: float, budget_s: float):
        self.job, self.meter, self.regex = job, meter, regex
        self.start_timeout_s, self.budget_s = start_timeout_s, budget_s
        self.feed = StepFeed(job.started)
        self.how, self.why = "", ""

    def _reports(self) -> list[Report]:
        if self.regex is None:
            return self.job.progress.read()
        return [r for r in self.regex.reports(self.job.lines()) if r is not None]

    def _take(self) -> None:
        for seconds, samples in self.feed.steps(self._reports()):
            self.meter.step(seconds, samples)

    def run(self) -> None:
        try:
            self._watch()
        except BadReport as exc:
            self.how, self.why = "garbage", str(exc)

    def _watch(self) -> None:
        while True:
            self._take()
            if self.feed.reports and self.meter.done():
                self.how = "measured"
                return
            if self.job.poll() is not None or self.feed.ended:
                self.job.wait_output()
                self._take()  # what it wrote last
                self.how = "ended"
                return
            waited = time.monotonic() - self.job.started
            if not self.feed.reports and waited > self.start_timeout_s:
                self.how = "silent"
                return
            if self.feed.reports and self.meter.elapsed() > Meter.HARD_STOP * self.budget_s + self.STALL_S:
                self.how = "stalled"
                return
            time.sleep(POLL_S)

    def conclude(self, result: Result, spec: Spec) -> None:
        """The result of how following ended: a measurement (also of a job that ended well or
        stopped reporting after two measured steps, then with the whole window's rate and marked),
        else `error` or `timeout` with the reason."""
        measured = sum(1 for s in self.meter.steps if not s[2])
        code = self.job.returncode
        ended_well = self.how == "ended" and (code == 0 or self.feed.ended)
        if self.how == "measured" or (measured >= 2 and (ended_well or self.how == "stalled")):
            self.meter.finish(result, spec.vcpus, input_ended=self.how == "ended")
            result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
            if self.how != "measured":
                result.extra["ended_early"] = self._what_happened(code, measured)
            return
        result.steps = self.meter.steps
        result.status = TIMEOUT if self.how in ("silent", "stalled") else ERROR
        result.error = self._what_happened(code, measured)
        tail = self.job.stderr_tail()
        if tail:
            result.error += "\nstderr:\n" + tail

    def _what_happened(self, code: int | None, measured: int) -> str:
        source = f"lines matching {self.regex.pattern.pattern!r}" if self.regex else "sizer_progress.step() calls"
        reports = f"{self.feed.reports} report(s), {measured} in the measured window"
        if self.how == "garbage":
            return self.why
        if self.how == "silent":
            return f"no progress within {self.start_timeout_s:g} s of the command's start (no {source})"
        if self.how == "stalled":
            return f"the reports stopped: {reports}, then nothing for {self.meter.elapsed():.0f} s"
        if code is not None and code < 0:
            how = f"was killed by signal {-code}"
        elif code == 127:
            how = "exited with code 127 (command not found)"
        elif code is not None and code > 128:  # the shell's way of saying a child died of a signal
            how = f"exited with code {code} (its process died of signal {code - 128})"
        elif code is not None:
            how = f"exited with code {code}"
        else:
            how = "said done (sizer_progress.done())"
        return f"the command {how} before its measurement was done ({reports})"


# ---------------------------------------------------------------- counters of the point's cgroup
def cgroup_usage() -> dict[str, float]:
    """CPU seconds and bytes read of the point's own limit group (every process in it, those that
    left the job's tree too), by the kernel's accounting; {} outside a group sizer made."""
    dirs = {k: d for k, d in _cgroup_dirs().items() if d.name.startswith("sizer-")}
    usage: dict[str, float] = {}
    if "" in dirs and (dirs[""] / "cpu.stat").exists():
        stat = _keyed((dirs[""] / "cpu.stat").read_text())
        usage["cgroup_window_cpu_seconds"] = stat.get("usage_usec", 0) / 1e6
        usage["cgroup_window_read_bytes"] = sum(
            int(kv.split("=", 1)[1]) for line in _lines(dirs[""] / "io.stat") for kv in line.split()[1:]
            if kv.startswith("rbytes="))
        return usage
    if "cpuacct" in dirs:
        raw = _lines(dirs["cpuacct"] / "cpuacct.usage")
        if raw and raw[0].isdigit():
            usage["cgroup_window_cpu_seconds"] = int(raw[0]) / 1e9
    if "blkio" in dirs:
        rows = (line.split() for line in _lines(dirs["blkio"] / "blkio.throttle.io_service_bytes_recursive"))
        usage["cgroup_window_read_bytes"] = sum(int(row[2]) for row in rows if len(row) == 3 and row[1] == "Read")
    return usage


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _prefer_cgroup_counters(vcpus: int) -> Callable[[dict], None]:
    """The window's CPU seconds and bytes read by the group's accounting where there is one: the
    process tree misses what left it (a double fork); the tree's figures stay as tree_*. The figures
    derived from CPU seconds follow them, so a point's CPU cost per sample is the group's too."""

    def derive(counters: dict) -> None:
        cpu, read = counters.get("cgroup_window_cpu_seconds"), counters.get("cgroup_window_read_bytes")
        seconds = counters.get("measured_seconds") or 0.0
        samples = counters.get("measured_samples") or 0
        if cpu is not None:
            counters["tree_cpu_seconds"] = counters.get("cpu_seconds", 0.0)
            counters["cpu_seconds"] = cpu
            counters["cpu_util_per_vcpu"] = cpu / seconds / max(1, vcpus) if seconds > 0 else 0.0
            if samples > 0 and "cpu_ms_per_sample" in counters:
                counters["tree_cpu_ms_per_sample"] = counters["cpu_ms_per_sample"]
                counters["cpu_ms_per_sample"] = 1000.0 * cpu / samples
        if read is not None:
            counters["tree_read_bytes"] = counters.get("read_bytes", 0.0)
            counters["read_bytes"] = read

    return derive
