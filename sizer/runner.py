"""Run one point: a fresh worker process inside the shape's limit group, JSON in, JSON out.

The worker is `python -m workloads run --spec F --out F`, started by sizer's own interpreter or
another one (the MXNet environment). It joins the limit group between fork and exec (preexec_fn),
so only sizer's own child is ever moved. It runs in its own session and dies with sizer
(PR_SET_PDEATHSIG). Whatever way a point ends, its session and then its group are SIGKILLed before
the worker is reaped, so nothing it started runs into the next point; should sizer itself be
killed, the group's watchdog (sizer/limits/watchdog.py) does the same and removes the group.

Outcomes: the worker's own Result; `timeout` when it overruns; `oom` when the group's OOM events
say the kernel killed a process of it at the memory limit (read from the cgroup, never guessed);
`error` for any other crash, with the last lines of its stderr.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Sequence

from sizer.errors import SizerError
from sizer.limits import sysfs
from sizer.limits.base import Enforcement, LimitGroup
from sizer.limits.watchdog import Watchdog
from workloads.protocol import ERROR, OOM, TIMEOUT, Result, Spec

REPO_ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = REPO_ROOT / ".venv-mxnet" / "bin" / "python"
STDERR_TAIL_LINES = 20
# Allowance on top of a point's time budget for interpreter start, framework import and model build.
STARTUP_ALLOWANCE_S = 90.0
_PR_SET_PDEATHSIG = 1


@dataclass
class PointRun:
    """One measured point: the worker's Result (with sizer's figures added) and what was enforced."""

    result: Result
    enforced: dict[str, Any]
    started: float
    wall_s: float
    returncode: int | None
    cgroup: dict[str, Any] = field(default_factory=dict)


def pycache_dir() -> Path:
    """Where workers keep the bytecode their interpreter may not write beside its sources."""
    return Path.home() / ".cache" / "sizer" / "pycache"


def bytecode_env(environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """(variables to set, variables to drop) so a worker reads the frameworks' bytecode instead of
    compiling their sources on every start. Where bytecode may not be written
    (PYTHONDONTWRITEBYTECODE, as in an image whose site-packages hold no __pycache__), each point
    would compile PyTorch and torchvision again: 7.5-8 s of imports per point on an H100 host, 2.6 s
    from bytecode. The bytecode then goes to sizer's own cache (PYTHONPYCACHEPREFIX, or the one the
    caller set), never beside the sources."""
    if not environ.get("PYTHONDONTWRITEBYTECODE"):
        return {}, []
    return {"PYTHONPYCACHEPREFIX": environ.get("PYTHONPYCACHEPREFIX") or str(pycache_dir())}, ["PYTHONDONTWRITEBYTECODE"]


def interpreter_for(interpreter: str) -> tuple[str, dict[str, str]]:
    """(python executable, extra environment) for a workload class's `interpreter` attribute."""
    if not interpreter:
        return sys.executable, {}
    if interpreter == "mxnet":
        if not MXNET_PYTHON.exists():
            raise SizerError(f"the MXNet environment is missing ({MXNET_PYTHON}): run `make mxnet-env` "
                             "(it needs Python 3.8 to 3.11)")
        return str(MXNET_PYTHON), {"PYTHONPATH": str(REPO_ROOT)}
    path = Path(interpreter)
    if path.is_file() and os.access(path, os.X_OK):
        return str(path), {"PYTHONPATH": str(REPO_ROOT)}
    raise SizerError(f"unknown worker interpreter {interpreter!r}")


def _die_with_parent() -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # sizer died between fork and prctl
            os._exit(1)

    return arm


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _end_point_processes(proc: subprocess.Popen, group: LimitGroup | None) -> None:
    """End everything the worker started, then reap the worker: its session first (the worker is not
    reaped yet, so its id still names its session and no other), then whatever is left in the group
    (a process that left the session, a grandchild of a double fork)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if group is not None:
        group.kill_all()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def default_timeout(spec: Spec) -> float:
    return 2.0 * spec.time_budget_s + STARTUP_ALLOWANCE_S


def run_point(
    spec: Spec,
    group: LimitGroup | None = None,
    *,
    interpreter: str = "",
    timeout_s: float | None = None,
    work_dir: str | Path | None = None,
    env: dict[str, str] | None = None,
    unit: str = "",
    framework: str = "",
    should_stop: Callable[[], bool] | None = None,
) -> PointRun:
    """Measure one point in a fresh worker. Never raises for a worker's failure: that is a status."""
    python, extra_env = interpreter_for(interpreter)
    timeout_s = default_timeout(spec) if timeout_s is None else timeout_s
    if work_dir is not None:
        return _run_point_in(spec, group, python, extra_env, timeout_s, Path(work_dir), env, unit, framework, should_stop)
    # A point's own folder goes whatever happens to the point (Ctrl-C, SIGTERM, a failed start);
    # one left by a sizer killed outright goes with the next point.
    sysfs.remove_orphaned_dirs(Path(tempfile.gettempdir()), POINT_DIR_PREFIX)
    wdir = Path(tempfile.mkdtemp(prefix=f"{POINT_DIR_PREFIX}{os.getpid()}-"))
    try:
        return _run_point_in(spec, group, python, extra_env, timeout_s, wdir, env, unit, framework, should_stop)
    finally:
        _remove_tree(wdir)


POINT_DIR_PREFIX = "sizer-point-"


@dataclass
class _WorkerExit:
    """How a worker ended: its exit status (negative: the signal), whether it overran, how long it ran."""

    returncode: int | None
    timed_out: bool
    wall_s: float


def _run_point_in(
    spec: Spec,
    group: LimitGroup | None,
    python: str,
    extra_env: dict[str, str],
    timeout_s: float,
    wdir: Path,
    env: dict[str, str] | None,
    unit: str,
    framework: str,
    should_stop: Callable[[], bool] | None,
) -> PointRun:
    spec, spec_path, out_path, err_path = _write_spec(spec, wdir)
    child_env = worker_env(spec, extra_env, env)
    before_cpu = group.cpu_seconds() if group is not None else 0.0
    before_read = group.read_bytes() if group is not None else 0
    command = [python, "-m", "workloads", "run", "--spec", str(spec_path), "--out", str(out_path)]
    started = time.time()
    with open(err_path, "wb") as err, open(wdir / "stdout.txt", "wb") as out:
        ended = _run_worker(command, spec, group, child_env, out, err, timeout_s, should_stop)

    oom = _oom_killed(group, ended.returncode)
    result = _judge(_read_result(out_path), spec, ended, oom, timeout_s, err_path, unit, framework)
    figures: dict[str, Any] = {}
    enforced: dict[str, Any] = {}
    if group is not None:
        figures = {
            "cgroup_cpu_seconds": round(group.cpu_seconds() - before_cpu, 6),
            "cgroup_read_bytes": int(group.read_bytes() - before_read),
            "cgroup_memory_peak_bytes": group.memory_peak_bytes(),
            "cgroup_oom_kill": oom,
        }
        enf: Enforcement = group.enforcement()
        enforced = dataclasses.asdict(enf)
        result.counters.update(figures)
        result.extra["enforcement"] = enforced
    result.extra["worker_wall_s"] = round(ended.wall_s, 3)
    result.extra["returncode"] = ended.returncode
    return PointRun(result=result, enforced=enforced, started=started, wall_s=ended.wall_s,
                    returncode=ended.returncode, cgroup=figures)


def _write_spec(spec: Spec, wdir: Path) -> tuple[Spec, Path, Path, Path]:
    """The point's folder with the worker's spec in it and no result or stderr of an earlier run:
    (the spec, its path, the result's path, the stderr's path)."""
    wdir.mkdir(parents=True, exist_ok=True)
    spec_path, out_path, err_path = wdir / "spec.json", wdir / "result.json", wdir / "stderr.txt"
    for stale in (out_path, err_path):
        stale.unlink(missing_ok=True)
    if not spec.work_dir:
        spec = dataclasses.replace(spec, work_dir=str(wdir))
    spec_path.write_text(spec.to_json())
    return spec, spec_path, out_path, err_path


def gpu_env(indices: Sequence[int], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that give a worker the GPUs at `indices`, positions among the GPUs sizer may
    use (`sizer.shapes.host_gpu_ids`: the host's CUDA_VISIBLE_DEVICES entries where it sets them,
    else NVML's indices): CUDA_VISIBLE_DEVICES naming them, CUDA_DEVICE_ORDER=PCI_BUS_ID where the
    host sets no order (CUDA then numbers GPUs as NVML does), and SIZER_NVML_GPUS, the same GPUs
    for the worker's GPU sampler. Never an NCCL_* variable: those stay the host's (`worker_env`)."""
    env = os.environ if environ is None else environ
    if not indices or any(i < 0 for i in indices):
        raise SizerError(f"a point's GPUs must be indices 0 or more, got {list(indices)}")
    listed = env.get("CUDA_VISIBLE_DEVICES")
    ids = [part.strip() for part in listed.split(",") if part.strip()] if listed is not None else None
    if ids is not None and max(indices) >= len(ids):
        raise SizerError(f"GPU {max(indices)} is not among the {len(ids)} this host lets sizer use "
                         f"(CUDA_VISIBLE_DEVICES={listed})")
    names = [ids[i] if ids is not None else str(i) for i in indices]
    out = {"CUDA_VISIBLE_DEVICES": ",".join(names), "SIZER_NVML_GPUS": ",".join(names)}
    if "CUDA_DEVICE_ORDER" not in env:
        out["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return out


def host_nccl_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host's NCCL_* settings (NCCL_NVLS_ENABLE=0 keeps NVLink multicast off where the host
    needs it so): every worker and its processes get them as the host set them."""
    env = os.environ if environ is None else environ
    return {name: value for name, value in env.items() if name.startswith("NCCL_")}


def worker_env(spec: Spec, extra_env: dict[str, str], env: dict[str, str] | None) -> dict[str, str]:
    """The worker's environment: sizer's own, the interpreter's additions (PYTHONPATH ahead of
    sizer's), thread pools sized to the shape, the caller's `env`, and the bytecode cache. The
    host's NCCL_* variables come last, as the host set them: nothing sizer or its caller adds
    overrides them (a rank process inherits the worker's environment)."""
    child_env = dict(os.environ)
    child_env.update(extra_env)
    if "PYTHONPATH" in extra_env and os.environ.get("PYTHONPATH"):
        child_env["PYTHONPATH"] = extra_env["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]
    threads = str(max(1, spec.vcpus))
    # Framework thread pools follow the shape's vCPU count, as they would on that instance.
    child_env.update({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"})
    child_env.update(env or {})
    set_vars, drop_vars = bytecode_env(child_env)
    child_env.update(set_vars)
    for name in drop_vars:
        child_env.pop(name, None)
    child_env.update(host_nccl_env())
    return child_env


def _preexec(group: LimitGroup | None) -> Callable[[], None]:
    """What the child runs between fork and exec: die with sizer, then join the limit group."""
    join = group.preexec() if group is not None else None
    arm = _die_with_parent()

    def preexec() -> None:
        arm()
        if join is not None:
            join()

    return preexec


def _run_worker(
    command: list[str],
    spec: Spec,
    group: LimitGroup | None,
    child_env: dict[str, str],
    out: IO[bytes],
    err: IO[bytes],
    timeout_s: float,
    should_stop: Callable[[], bool] | None,
) -> _WorkerExit:
    """Start the worker in its own session inside the group and wait for it, ending it at the
    timeout. However the point ends (the worker's exit, the timeout, Ctrl-C, SIGTERM or
    `should_stop`), no process it started outlives it; the group's watchdog covers a killed sizer."""
    t0 = time.monotonic()
    watchdog = group.watchdog() if group is not None else Watchdog()
    try:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=child_env,
            cwd=str(REPO_ROOT),
            preexec_fn=_preexec(group),
            start_new_session=True,
        )
    except BaseException as exc:
        if group is None:
            watchdog.release()
        if isinstance(exc, subprocess.SubprocessError):
            raise SizerError(f"cannot start the worker for {spec.workload} in its limit group: {exc}") from None
        raise
    watchdog.watch_session(proc.pid)
    try:
        timed_out = _await_exit(proc.pid, t0 + timeout_s, should_stop)
        wall_s = time.monotonic() - t0
    finally:
        _end_point_processes(proc, group)
        watchdog.forget_session(proc.pid)
        if group is None:
            watchdog.release()
    return _WorkerExit(proc.returncode, timed_out, wall_s)


def _await_exit(pid: int, deadline: float, should_stop: Callable[[], bool] | None) -> bool:
    """Wait until the worker exits, leaving it unreaped; True when it overran the deadline instead.
    `should_stop` ends the wait as Ctrl-C does."""
    delay = 0.005
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return False
        except ChildProcessError:  # reaped already: nothing left to wait for
            return False
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt
        if time.monotonic() >= deadline:
            return True
        time.sleep(delay)
        delay = min(0.05, 2 * delay)


def _oom_killed(group: LimitGroup | None, returncode: int | None) -> bool:
    """The group's OOM events say the kernel killed a process of it; where those events are not
    exact, the worker must also have died of SIGKILL."""
    if group is None or not group.oom_killed():
        return False
    return bool(getattr(group, "oom_exact", True)) or returncode == -signal.SIGKILL


def _judge(
    result: Result | None,
    spec: Spec,
    ended: _WorkerExit,
    oom: bool,
    timeout_s: float,
    err_path: Path,
    unit: str,
    framework: str,
) -> Result:
    """The point's Result: the worker's own, with its status set by how the worker ended (oom,
    timeout, error) and the end of its stderr where it failed."""
    returncode = ended.returncode
    base = result or Result(workload=spec.workload, framework=framework, unit=unit, profile=spec.profile)
    if oom:
        base.status = OOM
        base.throughput = 0.0 if result is None else base.throughput
        base.error = (
            f"killed at the memory limit (cgroup OOM events; exit {returncode})"
            + (f": {base.error}" if base.error else "")
        )
    elif ended.timed_out:
        base.status = TIMEOUT
        base.error = f"no result within {timeout_s:.0f} s (time budget {spec.time_budget_s:g} s); worker killed"
    elif result is None:
        base.status = ERROR
        how = f"killed by signal {-returncode}" if returncode is not None and returncode < 0 else f"exit {returncode}"
        base.error = f"worker ended without a result ({how})\n{_tail(err_path)}".strip()
    elif base.status == ERROR and not base.error:
        base.error = _tail(err_path)
    if base.status == ERROR and returncode not in (0, None) and "stderr:" not in base.error:
        tail = _tail(err_path, 8)
        if tail and tail not in base.error:
            base.error += "\nstderr:\n" + tail
    if not base.wall_s:
        base.wall_s = ended.wall_s
    return base


def _read_result(path: Path) -> Result | None:
    try:
        return Result.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
