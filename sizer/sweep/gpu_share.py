"""How a pair of jobs shares one GPU (`--share`): time-sliced (the driver's default, each context in
turn) or through MPS (NVIDIA's Multi-Process Service, kernels of both jobs at once).

MPS is used only where the host allows it: a control daemon already running (the jobs join it), or
`nvidia-cuda-mps-control` installed, which sizer then starts for the pairs alone (its own pipe and
log folders, given to its jobs only; it dies with sizer and is told to quit at the end). Where
neither is there, `--share mps` is refused before any work.

A time-sliced pair on a host whose MPS daemon runs would join that daemon: its jobs get a pipe
folder of their own with no server in it, so they run as plain CUDA processes, one context each.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from sizer.errors import SizerError

SHARING = ("time", "mps")
DEFAULT_SHARING = "time"
MPS_CONTROL = "nvidia-cuda-mps-control"
PIPE_ENV, LOG_ENV = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
_PR_SET_PDEATHSIG = 1


def mps_daemon_running(proc: Path = Path("/proc")) -> bool:
    """Whether an MPS control daemon runs on this host (a process named nvidia-cuda-mps-control;
    the kernel keeps 15 characters of a name)."""
    for entry in proc.glob("[0-9]*"):
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name and MPS_CONTROL.startswith(name) and name.startswith("nvidia-cuda-mps"):
            return True
    return False


def check_sharing(sharing: str, profile: str, *, daemon: bool | None = None, control: str | None = None) -> str:
    """The GPU sharing asked for, checked before any work (a SizerError names the problem). MPS
    needs a GPU and either a running control daemon or `nvidia-cuda-mps-control` to start one."""
    if sharing not in SHARING:
        raise SizerError(f"--share {sharing!r}: choose time (time-sliced, the default) or mps")
    if sharing == "mps":
        if profile != "gpu":
            raise SizerError(f"--share mps needs a GPU: the {profile} profile runs its jobs on the CPU (use --share time)")
        running = mps_daemon_running() if daemon is None else daemon
        binary = shutil.which(MPS_CONTROL) if control is None else control
        if not running and not binary:
            raise SizerError("--share mps: no MPS control daemon runs on this host and nvidia-cuda-mps-control is not "
                             "installed (start one, or use --share time)")
    return sharing


def _die_with_sizer() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@contextlib.contextmanager
def gpu_sharing(sharing: str, profile: str, gpu_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The variables a pair's jobs (and the same jobs alone) get for `sharing` while the pairs are
    measured: for MPS, the running daemon's (none to add) or those of a daemon started here for the
    pairs alone on the GPU of `gpu_env`; for a time-sliced pair on a host whose daemon runs, an
    empty pipe folder, so the jobs stay plain CUDA processes."""
    running = profile == "gpu" and mps_daemon_running()
    if profile != "gpu" or (sharing == "time" and not running) or (sharing == "mps" and running):
        yield {}  # nothing to add: no GPU, no daemon to avoid, or the host's daemon to join
        return
    folder = Path(tempfile.mkdtemp(prefix="sizer-mps-"))
    env = {PIPE_ENV: str(folder / "pipe"), LOG_ENV: str(folder / "log")}
    for path in env.values():
        Path(path).mkdir()
    daemon = None
    try:
        if sharing == "mps":
            daemon = _start_daemon(env, gpu_env)
        yield env
    finally:
        if daemon is not None:
            _quit(daemon, env)
        shutil.rmtree(folder, ignore_errors=True)


def _start_daemon(env: dict[str, str], gpu_env: dict[str, str], wait_s: float = 10.0) -> subprocess.Popen:
    """An MPS control daemon of sizer's own, in the foreground of a session of its own (it dies
    with sizer), once its control pipe is there: a job started before would run without MPS."""
    daemon = subprocess.Popen([shutil.which(MPS_CONTROL) or MPS_CONTROL, "-f"], env={**os.environ, **gpu_env, **env},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=_die_with_sizer, start_new_session=True)
    control = Path(env[PIPE_ENV]) / "control"
    deadline = time.monotonic() + wait_s
    while not control.exists():
        if daemon.poll() is not None or time.monotonic() > deadline:
            _quit(daemon, env)
            raise SizerError(f"--share mps: {MPS_CONTROL} did not start (no control pipe in {control.parent} "
                             f"after {wait_s:g} s): start one yourself, or use --share time")
        time.sleep(0.05)
    return daemon


def _quit(daemon: subprocess.Popen, env: dict[str, str]) -> None:
    """Ask the daemon started here to quit (its server goes with it), and end it if it does not."""
    try:
        subprocess.run([shutil.which(MPS_CONTROL) or MPS_CONTROL], input=b"quit\n", env={**os.environ, **env},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        daemon.wait(timeout=10)
    except (OSError, subprocess.SubprocessError):
        pass
    if daemon.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()
