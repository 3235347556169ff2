"""Disk measurement with fio: sequential 1 MiB and random 4 KiB direct reads on a scratch file.

`parse_fio_json` is a pure function over fio's JSON report (tested on captured output).
`run_fio_job` runs one fio job on a scratch file it creates and always removes (Ctrl-C and SIGTERM
included); `sizer disks verify` runs it with `preexec_fn` so the measured job lands in a throttled
cgroup. `probe_disk` measures both access patterns on one file that fio lays out itself.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from sizer.errors import SizerError
from sizer.probe import path_info
from sizer.units import format_bytes

FIO_INSTALL_HINT = "fio is not installed (sizer measures disks with it): install it with `apt-get install -y fio`"

KIB = 1024
MIB = 1024**2
GIB = 1024**3
SEQ_BS = MIB
RAND_BS = 4 * KIB
# Queue depths of a busy data loader: deep enough to reach a cloud disk's rated figures.
SEQ_IODEPTH = 16
RAND_IODEPTH = 32
DEFAULT_PROBE_SIZE = GIB
MIN_PROBE_SIZE = 16 * MIB
FREE_SPACE_MARGIN = 64 * MIB

SCRATCH_PREFIX = ".sizer-fio-"
_SCRATCH_NAME = re.compile(r"^\.sizer-fio-(\d+)-[0-9a-f]+\.tmp$")
_READ_MODES = {"read", "randread", "rw", "readwrite", "randrw"}
_FIO_MODES = _READ_MODES | {"write", "randwrite", "trim", "randtrim", "trimwrite"}

# (phase, done, total or None when unknown): seconds for a timed job, bytes for a layout; the last
# call of a phase passes total == done.
ProgressFn = Callable[[str, float, "float | None"], None]


# ---------------------------------------------------------------------------------------------
# Parsing fio's JSON report (pure)


def _parse_bs(value: Any) -> int | None:
    """fio block size text ('4k', '1M', '4KiB', '4096', '4k,8k' read,write) -> bytes (kb_base 1024)."""
    if value is None:
        return None
    text = str(value).split(",")[0].split("-")[0].strip().lower()
    m = re.fullmatch(r"(\d+)\s*([kmgt]?)(i?b?)", text)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": 1024**4}[m.group(2)]


def _percentile(table: dict[str, Any], wanted: float) -> float | None:
    for key, value in table.items():
        try:
            if abs(float(key) - wanted) < 1e-6:
                return float(value)
        except ValueError:
            continue
    return None


def _direction(stats: dict[str, Any]) -> dict[str, Any]:
    """One direction (read or write) of a fio job: bytes/s, IOPS, I/O count, clat p50/p99 in us."""
    if "bw_bytes" in stats:
        bytes_per_s = float(stats["bw_bytes"])
    else:  # fio 2.x reports only KiB/s
        bytes_per_s = float(stats.get("bw", 0)) * KIB
    iops = float(stats.get("iops", 0.0))
    ios = int(stats.get("total_ios", 0)) or (1 if iops > 0 or stats.get("io_bytes", 0) else 0)
    p50 = p99 = None
    if isinstance(stats.get("clat_ns"), dict):
        table, scale = stats["clat_ns"].get("percentile") or {}, 1e-3
    elif isinstance(stats.get("clat"), dict):  # fio 2.x: completion latency in microseconds
        table, scale = stats["clat"].get("percentile") or {}, 1.0
    else:
        table, scale = {}, 1.0
    if ios:
        raw50, raw99 = _percentile(table, 50.0), _percentile(table, 99.0)
        p50 = raw50 * scale if raw50 is not None else None
        p99 = raw99 * scale if raw99 is not None else None
    runtime_ms = float(stats.get("runtime", 0))
    return {"bytes_per_s": bytes_per_s, "iops": iops, "ios": ios, "p50": p50, "p99": p99, "runtime_ms": runtime_ms}


def _find_report(text: str) -> dict[str, Any]:
    """fio may print notes and errors ('note: ...', 'fio: pid=...') before its JSON; skip them."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^[ \t]*\{", text, re.MULTILINE):
        start = match.end() - 1
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "jobs" in obj:
            return obj
    raise ValueError("no fio JSON report found in fio's output")


def parse_fio_json(text: str) -> list[dict[str, Any]]:
    """fio's `--output-format=json` report -> one dict per job.

    Keys: name, rw, bs (bytes), read_mbps and write_mbps (10^6 B/s), read_iops, write_iops,
    lat_p50_us and lat_p99_us (completion latency of reads, or of writes in a write-only job),
    runtime_s, error (fio's errno, 0 when the job succeeded), fio_version.
    Raises ValueError when the text holds no fio report.
    """
    report = _find_report(text)
    global_opts = report.get("global options") or {}
    version = report.get("fio version")
    jobs = []
    for job in report.get("jobs") or []:
        opts = job.get("job options") or {}

        def option(*names: str, default: Any = None, opts: dict = opts) -> Any:
            for source in (opts, global_opts):
                for name in names:
                    if name in source:
                        return source[name]
            return default

        read = _direction(job.get("read") or {})
        write = _direction(job.get("write") or {})
        latency = read if read["ios"] or not write["ios"] else write
        jobs.append(
            {
                "name": job.get("jobname"),
                "rw": option("rw", "readwrite", default="read"),
                "bs": _parse_bs(option("bs", "blocksize")),
                "read_mbps": read["bytes_per_s"] / 1e6,
                "read_iops": read["iops"],
                "write_mbps": write["bytes_per_s"] / 1e6,
                "write_iops": write["iops"],
                "lat_p50_us": latency["p50"],
                "lat_p99_us": latency["p99"],
                "runtime_s": max(read["runtime_ms"], write["runtime_ms"]) / 1000.0,
                "error": int(job.get("error", 0) or 0),
                "fio_version": version,
            }
        )
    if not jobs:
        raise ValueError("fio's report holds no jobs")
    return jobs


# ---------------------------------------------------------------------------------------------
# Running fio


def fio_available() -> bool:
    return shutil.which("fio") is not None


def _require_fio() -> str:
    fio = shutil.which("fio")
    if fio is None:
        raise SizerError(FIO_INSTALL_HINT)
    return fio


@functools.lru_cache(maxsize=None)
def fio_version() -> str:
    out = subprocess.run([_require_fio(), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


@functools.lru_cache(maxsize=None)
def io_engine() -> str:
    """libaio where fio has it (queue depth without io_uring, which containers often forbid)."""
    out = subprocess.run([_require_fio(), "--enghelp"], capture_output=True, text=True, check=False)
    engines = {line.strip() for line in out.stdout.splitlines()}
    for engine in ("libaio", "posixaio", "psync"):
        if engine in engines:
            return engine
    return "psync"


def _fio_filename(path: Path) -> str:
    # fio splits filename= on ':' (several files); a literal colon must be escaped.
    return str(path).replace(":", "\\:")


def remove_stale_scratch(directory: str | os.PathLike[str]) -> list[str]:
    """Remove scratch files left in `directory` by sizer processes that no longer run (SIGKILL)."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _SCRATCH_NAME.match(entry.name)
        if m and not psutil.pid_exists(int(m.group(1))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.path)
    return removed


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit for the duration, so `finally` blocks remove scratch files.

    Left alone when not on the main thread or when the program already handles SIGTERM itself.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def check_directory(path: str | os.PathLike[str], size_bytes: int = 0) -> Path:
    """A directory sizer may put a scratch file of `size_bytes` in; SizerError (one line) otherwise."""
    directory = Path(path).expanduser()
    if not directory.exists():
        raise SizerError(f"{path}: no such directory")
    if not directory.is_dir():
        raise SizerError(f"{path}: not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SizerError(f"{path}: not writable (fio needs to create a scratch file there)")
    free = shutil.disk_usage(directory).free
    if size_bytes and free < size_bytes + FREE_SPACE_MARGIN:
        raise SizerError(
            f"{path}: {format_bytes(free)} free, the probe needs {format_bytes(size_bytes + FREE_SPACE_MARGIN)} "
            "(choose a smaller --size)"
        )
    return directory.resolve()


@contextlib.contextmanager
def scratch_file(directory: str | os.PathLike[str], direct: bool = True) -> Iterator[Path]:
    """A new uniquely named file under `directory`, removed on exit whatever happened."""
    base = check_directory(directory)
    remove_stale_scratch(base)
    target = base / f"{SCRATCH_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
    try:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
        except OSError as exc:
            raise SizerError(f"{directory}: cannot create a scratch file ({exc.strerror})") from None
        if direct:
            try:
                os.close(os.open(target, os.O_RDONLY | getattr(os, "O_DIRECT", 0)))
            except OSError as exc:
                raise SizerError(
                    f"{directory}: the filesystem does not support direct I/O ({exc.strerror}); "
                    "a disk probe needs a path on a real disk"
                ) from None
        yield target
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)


def _first_error_line(stderr: str, stdout: str) -> str:
    """fio's own complaint: stderr first, then any lines it printed before its JSON report."""
    preamble = stdout.split("\n{", 1)[0] if not stdout.lstrip().startswith("{") else ""
    lines = [line.strip() for line in (stderr + "\n" + preamble).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("fio:") or "error" in line.lower():
            return line
    return lines[0] if lines else "no message from fio"


def _bytes_written(proc: subprocess.Popen) -> int:
    """Bytes fio (main process and job processes) has passed to write() so far: layout progress."""
    total = 0
    try:
        family = [psutil.Process(proc.pid)]
        family += family[0].children(recursive=True)
    except psutil.Error:
        return total
    for member in family:
        try:
            total += member.io_counters().write_chars
        except (psutil.Error, AttributeError):
            continue
    return total


def _run_fio(
    args: list[str],
    phase: str,
    expected_s: float | None,
    timeout_s: float,
    preexec_fn: Callable[[], None] | None = None,
    progress: ProgressFn | None = None,
    layout: tuple[str, int] | None = None,
) -> tuple[list[dict[str, Any]], str, float]:
    """Run fio with `args`, report progress; returns (parsed jobs, command line, layout seconds).

    `layout` = (phase name, bytes) when fio lays the file out itself before the job: progress then
    shows the layout by bytes written, and the job's phase starts once it is done.
    """
    command = [_require_fio(), "--output-format=json", *args]
    started = time.monotonic()
    job_started = None if layout else started
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    try:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if job_started is None and layout is not None:
                    written = min(_bytes_written(proc), layout[1])
                    if progress is not None:
                        progress(layout[0], written, layout[1])
                    if written >= layout[1]:
                        job_started = now
                if job_started is not None and progress is not None:
                    progress(phase, now - job_started, expected_s)
                if now - started > timeout_s:
                    raise SizerError(f"fio did not finish {phase} within {timeout_s:.0f} s") from None
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finished = time.monotonic()
    if job_started is None:  # the layout ended between two polls, or fio failed during it
        job_started = finished
        if progress is not None and layout is not None:
            progress(layout[0], layout[1], layout[1])
    if progress is not None:  # done: total == done marks the phase complete
        progress(phase, finished - job_started, finished - job_started)
    try:
        jobs = parse_fio_json(stdout)
    except ValueError:
        raise SizerError(f"fio failed ({phase}, exit {proc.returncode}): {_first_error_line(stderr, stdout)}") from None
    failed = [job for job in jobs if job["error"]]
    if failed or proc.returncode != 0:
        code = failed[0]["error"] if failed else proc.returncode
        reason = os.strerror(code) if failed else f"exit {code}"
        raise SizerError(f"fio failed ({phase}): {reason}: {_first_error_line(stderr, stdout)}")
    return jobs, shlex.join(command), job_started - started


def lay_out(file: Path, size_bytes: int, progress: ProgressFn | None = None) -> float:
    """Write `file` in full with real data, so reads hit written blocks, not holes.

    fio's own setup phase does it (`create_only`): the file is written with fio's random buffers
    and fsynced, exactly as when a person runs a read job by hand. Returns the seconds it took.
    """
    started = time.monotonic()
    _run_fio(
        [
            "--name=layout",
            f"--filename={_fio_filename(file)}",
            "--rw=read",
            f"--bs={SEQ_BS}",
            f"--size={size_bytes}",
            "--create_only=1",
        ],
        phase=f"laying out {format_bytes(size_bytes)}",
        expected_s=None,
        timeout_s=60 + size_bytes / (5 * 10**6),
        progress=progress,
    )
    if os.stat(file).st_size < size_bytes:
        raise SizerError(f"fio did not lay out {file} ({format_bytes(size_bytes)})")
    return time.monotonic() - started


def _measure(
    file: Path,
    rw: str,
    bs: int,
    size_bytes: int,
    seconds: int,
    direct: bool,
    iodepth: int,
    numjobs: int,
    preexec_fn: Callable[[], None] | None,
    progress: ProgressFn | None,
    phase: str,
    layout_bytes: int | None = None,
) -> dict[str, Any]:
    """One time-based fio job on `file`; with `layout_bytes`, fio lays the file out first itself."""
    args = [
        f"--name={rw}-{bs}",
        f"--filename={_fio_filename(file)}",
        f"--rw={rw}",
        f"--bs={bs}",
        f"--size={size_bytes}",
        f"--direct={1 if direct else 0}",
        f"--ioengine={io_engine()}",
        f"--iodepth={iodepth}",
        f"--numjobs={numjobs}",
        "--group_reporting",
        f"--runtime={seconds}",
        "--time_based",
    ]
    layout = (f"laying out {format_bytes(layout_bytes)}", layout_bytes) if layout_bytes else None
    jobs, command, layout_s = _run_fio(
        args,
        phase=phase,
        expected_s=float(seconds),
        timeout_s=seconds * 3 + 60 + (layout_bytes or 0) / (5 * 10**6),
        preexec_fn=preexec_fn,
        progress=progress,
        layout=layout,
    )
    job = dict(jobs[0])
    if layout_bytes:
        job["layout_seconds"] = round(layout_s, 2)
    job.update(
        {
            "iodepth": iodepth,
            "numjobs": numjobs,
            "direct": direct,
            "size_bytes": size_bytes,
            "seconds": seconds,
            "engine": io_engine(),
            "command": command,
        }
    )
    return job


def _validate(rw: str, bs: int, size_bytes: int, seconds: int, iodepth: int, numjobs: int) -> None:
    if rw not in _FIO_MODES:
        raise SizerError(f"unknown fio access pattern {rw!r} (one of {', '.join(sorted(_FIO_MODES))})")
    if bs <= 0 or bs % 512:
        raise SizerError(f"block size must be a positive multiple of 512 bytes, not {bs}")
    if size_bytes < bs:
        raise SizerError(f"file size {size_bytes} is smaller than the block size {bs}")
    if seconds < 1:
        raise SizerError(f"seconds must be at least 1, not {seconds}")
    if iodepth < 1 or numjobs < 1:
        raise SizerError("iodepth and numjobs must be at least 1")


def run_fio_job(
    path: str | os.PathLike[str],
    rw: str,
    bs: int,
    size_bytes: int,
    seconds: int,
    direct: bool = True,
    iodepth: int = SEQ_IODEPTH,
    numjobs: int = 1,
    preexec_fn: Callable[[], None] | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """One time-based fio job on a fresh scratch file under the directory `path`.

    Read patterns get the file laid out first with real data; the layout runs outside `preexec_fn`
    so that only the measured job joins the caller's (throttled) cgroup. The scratch file is
    removed on return, on error, on Ctrl-C and on SIGTERM. Returns `parse_fio_json`'s dict for the
    job plus iodepth, numjobs, direct, size_bytes, seconds, engine and the fio command line.
    """
    _validate(rw, bs, size_bytes, seconds, iodepth, numjobs)
    _require_fio()
    check_directory(path, size_bytes)
    with _sigterm_as_exit(), scratch_file(path, direct=direct) as file:
        if rw in _READ_MODES:
            lay_out(file, size_bytes, progress=progress)
        return _measure(
            file, rw, bs, size_bytes, seconds, direct, iodepth, numjobs, preexec_fn, progress, phase=f"{rw} {format_bytes(bs)}"
        )


def probe_disk(
    path: str | os.PathLike[str],
    seconds: int = 5,
    size: int = DEFAULT_PROBE_SIZE,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Sequential 1 MiB and random 4 KiB direct reads on one laid-out scratch file under `path`.

    Returns the path's filesystem and device, the fio version and engine, and per pattern MB/s
    (10^6 B/s), IOPS and completion-latency p50/p99 (microseconds).
    """
    if seconds < 1:
        raise SizerError(f"--seconds must be at least 1, not {seconds}")
    size = size // MIB * MIB
    if size < MIN_PROBE_SIZE:
        raise SizerError(f"--size must be at least {format_bytes(MIN_PROBE_SIZE)}")
    _require_fio()
    directory = check_directory(path, size)
    where = path_info(str(directory))
    with _sigterm_as_exit(), scratch_file(directory, direct=True) as file:
        # fio lays the file out (real data, fsynced) in the same run as the sequential job, as in a
        # hand-run fio; after a separate layout run, sequential reads here came out 10-30% higher.
        sequential = _measure(
            file, "read", SEQ_BS, size, seconds, True, SEQ_IODEPTH, 1, None, progress, "sequential 1 MiB reads", size
        )
        if os.stat(file).st_blocks * 512 < size:
            raise SizerError(f"fio did not lay out {format_bytes(size)} of real data in {directory}")
        random_reads = _measure(
            file, "randread", RAND_BS, size, seconds, True, RAND_IODEPTH, 1, None, progress, "random 4 KiB reads"
        )
    return {
        "path": str(directory),
        "fstype": where["fstype"],
        "mount_point": where["mount_point"],
        "device": where["device"],
        "fio_version": fio_version(),
        "engine": io_engine(),
        "size_bytes": size,
        "seconds": seconds,
        "layout_seconds": sequential.get("layout_seconds"),
        "sequential_read": sequential,
        "random_read": random_reads,
    }
