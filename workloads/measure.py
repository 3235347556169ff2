"""Measuring inside a worker: the steady-state meter, process-tree counters and the limits the
worker actually sees; the GPU's own figures come from `workloads.gpu_sampler`. Standard library only
(NVML is used when importable).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any, Callable

from workloads import stats
from workloads.gpu_sampler import GpuSampler
from workloads.pairing import PairSync
from workloads.protocol import ERROR, NOISY, OK, Result

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def process_age_s() -> float:
    """Seconds since this process started (its start time in /proc against the uptime), so a
    worker's timeline counts the interpreter's start and imports too."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / _CLK_TCK)
    except (OSError, IndexError, ValueError):
        return 0.0


_STAGES: dict[str, float] = {}


def stage_done(name: str) -> None:
    """Note that a stage of the worker's start ended (torch imported, model built, data opened), in
    seconds since the process started: the point's timeline then splits its start (see Meter)."""
    _STAGES[name] = round(process_age_s(), 3)  # the latest run's, where one process runs several


# ---------------------------------------------------------------- process tree counters
def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(raw.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def process_tree(root: int | None = None) -> list[int]:
    root = os.getpid() if root is None else root
    kids = children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _stat_fields(path: str) -> list[str]:
    """Fields of a /proc stat line after the command name (field 3 of proc(5) is index 0)."""
    return Path(path).read_text().rsplit(")", 1)[1].split()


def tree_counters(root: int | None = None) -> dict[str, float]:
    """CPU seconds, bytes read from storage and resident bytes of a process and its descendants
    (DataLoader workers are children, so they count), with the CPU time taken apart: user and
    kernel, the root process's own and its main thread's (the rest of the tree is its workers'),
    how often the tree's threads were preempted (involuntary context switches: a sign that more
    threads wanted the CPUs than there were) and its minor page faults (fresh memory, zeroed by the
    kernel: a loader's shared-memory batches)."""
    root = os.getpid() if root is None else root
    out = {"cpu_seconds": 0.0, "read_bytes": 0.0, "rss_bytes": 0.0, "cpu_user_seconds": 0.0,
           "cpu_system_seconds": 0.0, "root_cpu_seconds": 0.0, "root_main_thread_seconds": 0.0,
           "involuntary_switches": 0.0, "minor_faults": 0.0}
    for pid in process_tree(root):
        try:
            fields = _stat_fields(f"/proc/{pid}/stat")
            user, system = int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK
            out["cpu_user_seconds"] += user
            out["cpu_system_seconds"] += system
            out["cpu_seconds"] += user + system
            out["rss_bytes"] += int(fields[21]) * _PAGE
            out["minor_faults"] += int(fields[7])
            if pid == root:
                out["root_cpu_seconds"] = user + system
                main = _stat_fields(f"/proc/{pid}/task/{pid}/stat")
                out["root_main_thread_seconds"] = (int(main[11]) + int(main[12])) / _CLK_TCK
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    out["involuntary_switches"] += int(line.split()[1])
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("read_bytes:"):
                    out["read_bytes"] += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a worker that just exited
    return out


def steal_seconds(cpus: set[int] | None = None) -> float | None:
    """Seconds the hypervisor ran something else while these CPUs (default: this process's) wanted
    to run: the `steal` column of /proc/stat's per-CPU lines. None where the kernel reports none."""
    cpus = os.sched_getaffinity(0) if cpus is None else cpus
    total, seen = 0, False
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        fields = rest.split()
        if len(fields) > 7:
            total += int(fields[7])
            seen = True
    return total / _CLK_TCK if seen else None


# A fixed piece of single-threaded work (zlib level 6 over 256 KiB of seeded pseudo-random text):
# how fast one of this point's vCPUs runs right now. A shared host's vCPUs change speed from minute
# to minute with no stolen time (on an H200 VM, one 4-vCPU preprocessing shape ran 888 to 1,062
# images/s within four minutes, at 4.5 to 3.7 ms of CPU per image), so a point's probe hints how much
# of its figure is the host's moment rather than the shape.
_PROBE_BYTES = 256 * 1024
_probe_buffer: bytes | None = None


def cpu_speed_probe(seconds: float = 0.3, clock: Callable[[], float] = time.perf_counter) -> float:
    """MB/s of zlib compression on one thread over about `seconds` of `clock` (at least three rounds)."""
    import random
    import zlib

    global _probe_buffer
    if _probe_buffer is None:
        rng = random.Random(0)
        words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
        text = bytearray()
        while len(text) < _PROBE_BYTES:
            text += rng.choice(words) + b" "
        _probe_buffer = bytes(text[:_PROBE_BYTES])
    rounds, t0 = 0, clock()
    while True:
        zlib.compress(_probe_buffer, 6)
        rounds += 1
        elapsed = clock() - t0
        if rounds >= 3 and elapsed >= seconds:
            return rounds * _PROBE_BYTES / elapsed / 1e6


def peak_rss_bytes() -> int:
    """Peak RSS of this process or its largest reaped child, in bytes (ru_maxrss is KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, kids) * 1024)


def page_cache_bytes() -> int:
    """Page cache charged to this process's memory cgroup (v1 `cache`, v2 `file`), else host-wide."""
    for path in _cgroup_files("memory", ("memory.stat",)):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ("cache", "file"):
                return int(value)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------- limits as seen from inside
def _cgroup_dirs() -> dict[str, Path]:
    """controller -> this process's cgroup directory, for v1 hierarchies and the v2 one ('')."""
    dirs: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":
            for base in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
                if (base / "cgroup.controllers").exists():
                    dirs[""] = base / rel
                    break
        for c in controllers.split(","):
            if c and c != "":
                base = Path("/sys/fs/cgroup") / c
                if base.is_dir():
                    dirs[c] = base / rel
    return dirs


def _cgroup_files(controller: str, names: tuple[str, ...]) -> list[Path]:
    dirs = _cgroup_dirs()
    out = []
    for key in (controller, ""):
        d = dirs.get(key)
        if d is None:
            continue
        for n in names:
            if (d / n).exists():
                out.append(d / n)
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def limits_seen() -> dict[str, Any]:
    """The limits this process runs under, read back from the kernel: what was really enforced."""
    seen: dict[str, Any] = {"cpus_allowed": sorted(os.sched_getaffinity(0))}
    dirs = _cgroup_dirs()
    v2 = dirs.get("")
    if v2 is not None and (v2 / "memory.max").exists():
        seen["cgroup"] = "v2:" + str(v2)
        mem = _read(v2 / "memory.max")
        seen["memory_limit_bytes"] = None if mem in ("", "max") else int(mem)
        seen["io_max"] = _read(v2 / "io.max")
        seen["cpu_max"] = _read(v2 / "cpu.max")
        seen["cpuset_cpus"] = _read(v2 / "cpuset.cpus.effective")
    else:
        mem_dir = dirs.get("memory")
        if mem_dir is not None:
            seen["cgroup"] = "v1:" + str(mem_dir)
            raw = _read(mem_dir / "memory.limit_in_bytes")
            limit = int(raw) if raw.isdigit() else None
            seen["memory_limit_bytes"] = None if limit is None or limit >= 2**62 else limit
        blk = dirs.get("blkio")
        if blk is not None:
            seen["io_max"] = "; ".join(
                f"{n.split('.')[-1]}={_read(blk / n)}"
                for n in (
                    "blkio.throttle.read_bps_device",
                    "blkio.throttle.read_iops_device",
                    "blkio.throttle.write_bps_device",
                )
                if _read(blk / n)
            )
        cs = dirs.get("cpuset")
        if cs is not None:
            seen["cpuset_cpus"] = _read(cs / "cpuset.cpus")
    return seen


# ---------------------------------------------------------------- the steady-state meter
class Meter:
    """Collects step times, keeps warm-up out, and decides when the measurement is long enough.

    Warm-up lasts `warmup_steps` steps; for a loader-fed workload the caller passes at least the
    prefetch depth in batches. With `warmup_s` it also lasts until the steps after the first have
    taken that many seconds (a user's command, whose steps sizer cannot count in advance). The
    window opens when the last warm-up step completes: its counters and its seconds start at the
    same moment. A meter made with `drain` opens it only when the loop has taken the batches its
    loader made before and found the loader's queue empty (`workloads.loop.drain_ready`, which
    calls `drained`), and one round of `round_steps` steps more has run: a consumer faster than its
    loader would otherwise spend the window's first seconds on that backlog at its own pace, and
    the figure would take them in. After warm-up the meter wants at least `min_steps` steps and
    `min_seconds` seconds; then, if the spread of `n_windows` window rates exceeds the target, it
    keeps going (up to `time_budget_s`) and otherwise stops. The point is flagged noisy by the
    looser rule of `stats.is_noisy`, not by this target.

    The budget runs from the end of the first step. That step carries one-time costs no later step
    has (the loader's first batch, cuDNN's autotuning, the GPU libraries read from a cold disk): on a
    fresh H100 host it takes up to 17.5 s in a sweep's first point, which a budget counted from
    before it would take out of the window.

    A loader with W workers delivers batches in bursts of about W (each worker finishes a batch at
    about the same time), so `round_steps` = W makes every window span at least one whole round:
    shorter windows see a burst or a stall, not the rate (on an H200 host, 16 workers behind a
    140 MB/s throttle gave window rates from 440 to 3,909 images/s over a 3 s window). When the
    budget runs out first the meter goes on to `HARD_STOP` times the budget, then marks the
    window short.

    A worker started as one job of a pair (`workloads.pairing`: the environment says so) waits for
    its partner at its first step, measures for its whole budget, and after its window runs on,
    unmeasured, until the partner's window is closed too; its figures are those of its window.
    """

    HARD_STOP = 1.6
    # The spread is judged at most this often (seconds of measured time): judging it costs time in
    # the number of steps so far, and a check per step slows a step of 6 ms by 4 ms after 1,400 of
    # them (ptb-lstm-train on an H200 host), a slowdown the measurement would report.
    CHECK_EVERY_S = 0.5

    def __init__(
        self,
        warmup_steps: int,
        time_budget_s: float,
        min_steps: int = 10,
        min_seconds: float | None = None,
        n_windows: int = 5,
        spread_target: float = 0.05,
        gpu: bool = True,
        round_steps: int = 1,
        drain: bool = False,
        warmup_s: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.clock = clock
        self.warmup_steps = max(0, int(warmup_steps))
        self.drain = bool(drain)
        self.warmup_s = max(0.0, float(warmup_s))
        self._warm_s = 0.0  # seconds of the warm-up steps after the first
        self.time_budget_s = float(time_budget_s)
        self.round_steps = max(1, int(round_steps))
        self.min_steps = max(int(min_steps), n_windows * self.round_steps)
        self.min_seconds = float(min_seconds if min_seconds is not None else time_budget_s / 3)
        self.n_windows = n_windows
        self.spread_target = spread_target
        self.steps: list[list[float]] = []
        self.phases: dict[str, int] = {}  # phase name -> index of its first step
        self._measured_steps = 0
        self._measured_s = 0.0
        self._next_check_s = 0.0  # measured seconds at which the spread is judged next
        self.spread_checks = 0
        self._t_start: float | None = None  # the end of the first step (see the class)
        self._t_measure: float | None = None
        # Where a point's time goes, in seconds since the worker process started (see finish).
        self.timeline: dict[str, float] = {**_STAGES, "meter_created": process_age_s()}
        self._before: dict[str, float] = {}
        self._steal_before: float | None = None
        self._after: dict[str, float] = {}
        self._gpu = GpuSampler() if gpu else None
        self._tracked: list[tuple[Callable[[], dict[str, float]], Callable[[dict], None] | None]] = []
        self._tracked_before: list[dict[str, float]] = []
        self._drained: dict[str, float] = {}
        self._open_at = 1 << 62  # steps after which a draining meter opens its window (set by `drained`)
        self._pair = PairSync.from_env()  # one job of a pair on one GPU, else None
        if self._pair is not None:
            # The wait for the partner happens in the first step's call: the loop's next step time holds it.
            self.warmup_steps = max(self.warmup_steps, 2)
        self._closed: dict[str, Any] | None = None  # the window's end, where it closed before `finish`

    @property
    def measuring(self) -> bool:
        return self._t_measure is not None and self._closed is None

    def track(self, read: Callable[[], dict[str, float]], derive: Callable[[dict], None] | None = None) -> None:
        """Counters of the workload's own, cumulative (`read` returns them by name): read when the
        window starts and when it ends, their growth over the window goes into the result's counters,
        and `derive`, given those counters, adds what follows from them (a cost per sample, say)."""
        self._tracked.append((read, derive))

    def mark_phase(self, name: str) -> None:
        """Start a named phase (e.g. 'cold' for the first pass over the data, 'warm' after)."""
        self.phases.setdefault(name, len(self.steps))

    @property
    def needs_drain(self) -> bool:
        """Warm-up is done and the window waits for the loop to drain its loader (see the class)."""
        return self.drain and not self._drained and self._t_measure is None and len(self.steps) >= self.warmup_steps

    def _snapshot(self) -> dict[str, Any]:
        """The counters a window starting now would start from."""
        snap = {"before": tree_counters(), "steal": steal_seconds(), "tracked": [read() for read, _ in self._tracked]}
        return {**snap, "t": self.clock(), "age": process_age_s()}

    def _open_window(self, snap: dict[str, Any], ago_s: float = 0.0) -> None:
        """The measured window starts at `snap` (from `_snapshot`), less `ago_s` seconds (a step it holds already)."""
        self.timeline["window_start"] = snap["age"] - ago_s
        self._t_measure = snap["t"] - ago_s
        self._before, self._steal_before, self._tracked_before = snap["before"], snap["steal"], snap["tracked"]
        if self._gpu is not None:
            self._gpu.start()

    def drained(self, batches: int, samples: float, seconds: float) -> None:
        """The loader is drained (what it took is reported with the counters): the window opens
        after one more round of steps."""
        self._drained = {"drained_batches": batches, "drained_samples": samples, "drain_seconds": seconds}
        self._open_at = len(self.steps) + self.round_steps

    def step(self, seconds: float, samples: float) -> None:
        if self._closed is not None:
            return  # a pair's job running on after its window, for its partner's
        if not self.steps:
            self.timeline["first_step_done"] = process_age_s()
            if self._pair is not None:
                self._pair.start()  # the budget runs from the moment both jobs are ready
                self.timeline["partner_ready"] = process_age_s()
            self._t_start = self.clock()
        if self._t_measure is None and self.warmup_steps == 0 and not self.drain and not self.warmup_s:
            self._open_window(self._snapshot(), ago_s=seconds)  # no warm-up: the first step is measured whole
        if self._t_measure is None:
            self._warm_s += float(seconds) if self.steps else 0.0
            self.steps.append([float(seconds), float(samples), 1.0])
            if len(self.steps) >= (self._open_at if self.drain else self.warmup_steps) and self._warm_s >= self.warmup_s:
                self._open_window(self._snapshot())
            return
        self.steps.append([float(seconds), float(samples), 0.0])
        self._measured_steps += 1
        self._measured_s += seconds

    def elapsed(self) -> float:
        """Seconds of the budget spent: since the end of the first step."""
        return 0.0 if self._t_start is None else self.clock() - self._t_start

    @property
    def window_short(self) -> bool:
        return self._measured_steps < self.min_steps

    def done(self) -> bool:
        if self._pair is None:
            return self._window_done()
        if self._closed is None:
            if not self._window_done():
                return False
            self._close_window()
            self._pair.window_closed()
        return self._pair.may_stop()

    def _close_window(self) -> None:
        """The window ends now, though the job runs on: what `finish` reads at its end, read now."""
        self._closed = {"t": self.clock(), "after": tree_counters(), "steal": steal_seconds(),
                        "tracked": [read() for read, _ in self._tracked], "age": process_age_s(),
                        "gpu": self._gpu.stop() if self._gpu is not None else {}}

    def _window_done(self) -> bool:
        elapsed = self.elapsed()
        if elapsed >= self.HARD_STOP * self.time_budget_s and self._measured_steps >= self.n_windows:
            return True
        if self._measured_steps < self.min_steps:
            return False
        if elapsed >= self.time_budget_s:
            return True
        if self._pair is not None:
            return False  # a pair's windows run their whole budget, so they close together
        if self._measured_s < self.min_seconds or self._measured_s < self._next_check_s:
            return False
        self._next_check_s = self._measured_s + self.CHECK_EVERY_S
        self.spread_checks += 1
        _, spread, _ = stats.summarize(self.steps, self.n_windows, self.round_steps)
        return spread <= self.spread_target or self.elapsed() >= self.time_budget_s

    def finish(self, result: Result, vcpus: int, input_ended: bool = False) -> Result:
        """Fill the result's figures and counters from the measured window.

        `input_ended`: the job ran out of input before the meter had a steady figure (a one-pass
        job on a small folder), so its rate takes every measured step, an incomplete last round
        included, and says so (a cold pass through a throttle can run fast, then stall: the median
        of one such pass's windows read 1,831 images/s while the bytes it read, 105 MB/s of 107 kB
        images, said about 1,000).
        """
        closed = self._closed or {}
        end = closed.get("t", self.clock())
        wall = (end - self._t_measure) if self._t_measure is not None else 0.0
        after = closed.get("after") or tree_counters()
        throughput, spread, rates = stats.summarize(self.steps, self.n_windows, self.round_steps)
        measured = [s for s in self.steps if not s[2]]
        seconds = sum(s[0] for s in measured)
        if input_ended and seconds > 0:
            throughput = sum(s[1] for s in measured) / seconds
            result.extra["figure"] = "whole window: the input ended before a steady state"
        result.throughput = throughput
        result.spread = spread
        result.window_rates = rates
        result.steps = self.steps
        result.status = NOISY if stats.is_noisy(spread) else OK
        if not throughput > 0:  # a window that counted nothing measured nothing: no figure, no spread
            result.throughput, result.spread, result.status = 0.0, 0.0, ERROR
            result.error = result.error or (f"the measured window counted no samples ({len(measured)} measured "
                                            f"step(s) over {seconds:.2f} s): a rate of 0 is no measurement")
        if self.window_short:
            result.extra["window_short"] = f"{self._measured_steps} of {self.min_steps} steps measured"
        cpu = after["cpu_seconds"] - self._before.get("cpu_seconds", 0.0)
        result.counters.update(
            {
                "measured_seconds": wall,
                "measured_samples": sum(s[1] for s in self.steps if not s[2]),
                "warmup_steps": int(sum(1 for s in self.steps if s[2])),
                **self._drained,
                "cpu_seconds": cpu,
                "cpu_util_per_vcpu": (cpu / wall / max(1, vcpus)) if wall > 0 else 0.0,
                "read_bytes": after["read_bytes"] - self._before.get("read_bytes", 0.0),
                "rss_bytes": after["rss_bytes"],
                "peak_rss_bytes": peak_rss_bytes(),
                "page_cache_bytes": page_cache_bytes(),
            }
        )
        if wall > 0:
            result.counters.update(cpu_breakdown(self._before, after, wall, result.counters["measured_samples"]))
        steal_after = closed["steal"] if closed else steal_seconds()
        if self._steal_before is not None and steal_after is not None and wall > 0:
            # share of the window the hypervisor kept this point's vCPUs from running
            result.counters["steal_share"] = (steal_after - self._steal_before) / wall / max(1, len(os.sched_getaffinity(0)))
        if self._gpu is not None:
            result.counters.update(closed["gpu"] if closed else self._gpu.stop())
        ends = closed.get("tracked") or [read() for read, _ in self._tracked]
        for (_, derive), before, ended in zip(self._tracked, self._tracked_before, ends):
            result.counters.update({k: v - before.get(k, 0.0) for k, v in ended.items()})
            if derive is not None:
                derive(result.counters)
        for name, first in self.phases.items():
            phase_steps = [s for s in self.steps[first:] if not s[2]]
            later = [i for n, i in self.phases.items() if i > first]
            if later:
                phase_steps = [s for s in self.steps[first : min(later)] if not s[2]]
            secs = sum(s[0] for s in phase_steps)
            if secs > 0:
                result.extra[f"{name}_rate"] = sum(s[1] for s in phase_steps) / secs
        result.limits_seen = limits_seen()
        self.timeline["window_end"] = closed.get("age", process_age_s())
        if self._pair is not None:
            result.extra["pair_sync"] = self._pair.record()
        result.extra["timeline_s"] = {k: round(v, 3) for k, v in self.timeline.items()}
        return result


def cpu_breakdown(before: dict[str, float], after: dict[str, float], wall: float, samples: float) -> dict[str, float]:
    """Where a window's CPU time went, from two `tree_counters` readings: the main process in all,
    its main thread (the training loop), its other threads (pin memory, CUDA, samplers), the rest of the
    tree (loader workers), the share spent in the kernel, CPU milliseconds per sample (against the
    calibration's 1000 / rate), page faults per sample, and preemptions per second."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    if wall <= 0 or not before:
        return {}
    cpu = d["cpu_seconds"]
    out = {
        # The worker's own process (its training loop, pin-memory thread, CUDA launches) apart from
        # its loader workers: near 1 core, that one loop may be what binds the point.
        "main_cpu_cores": d["root_cpu_seconds"] / wall,
        "main_thread_cores": d["root_main_thread_seconds"] / wall,
        "main_other_threads_cores": (d["root_cpu_seconds"] - d["root_main_thread_seconds"]) / wall,
        "loader_cpu_cores": (cpu - d["root_cpu_seconds"]) / wall,
        "cpu_system_share": d["cpu_system_seconds"] / cpu if cpu > 0 else 0.0,
        "involuntary_switches_per_s": d["involuntary_switches"] / wall,
    }
    if samples > 0:
        out["cpu_ms_per_sample"] = 1000.0 * cpu / samples
        out["loader_cpu_ms_per_sample"] = 1000.0 * (cpu - d["root_cpu_seconds"]) / samples
        out["minor_faults_per_sample"] = d["minor_faults"] / samples
    return out


def add_read_bytes_per_sample(result: Result) -> None:
    """`read_bytes_per_sample` in the result's extra: bytes read from storage per measured sample."""
    measured = result.counters.get("measured_samples") or 0
    if measured:
        result.extra["read_bytes_per_sample"] = result.counters.get("read_bytes", 0.0) / measured


def bottleneck_label(counters: dict[str, Any], vcpus: int, disk_bps_cap: float | None = None) -> str:
    """A coarse label of what limited the point, from its counters: gpu / cpu / disk / memory.

    The GPU's share is the mean of its utilization samples: a GPU fed in bursts by starved loader
    workers is busy in most samples (median 90% or more) yet idle a quarter of the window."""
    gpu = counters.get("gpu_util_mean_pct", counters.get("gpu_util_pct"))
    if gpu is not None and gpu >= 90:
        return "gpu"
    secs = counters.get("measured_seconds") or 0.0
    read_bps = (counters.get("read_bytes") or 0.0) / secs if secs else 0.0
    if disk_bps_cap and read_bps >= 0.8 * disk_bps_cap:
        return "disk"
    if (counters.get("cpu_util_per_vcpu") or 0.0) >= 0.8:
        return "cpu"
    if gpu is not None and gpu >= 60:
        return "gpu"
    return "disk" if read_bps > 0 else "cpu"
