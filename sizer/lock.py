"""One sweep per host at a time: co-located measurements disturb each other.

An flock on a per-host file (released by the kernel when its holder dies, even by SIGKILL, so a
killed sweep never leaves a stale lock). The file holds the holder's pid and command for the
message a second sweep gets.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sizer.errors import LockHeld, SizerError


def default_lock_path() -> Path:
    """$SIZER_LOCK_FILE, else /run/lock/sizer.lock (per host), else one in the user's cache."""
    env = os.environ.get("SIZER_LOCK_FILE")
    if env:
        return Path(env)
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK):
        return run_lock / "sizer.lock"
    return Path.home() / ".cache" / "sizer" / "sizer.lock"


class HostLock:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_lock_path()
        self._fd: int | None = None

    def holder(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def acquire(self) -> "HostLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise SizerError(f"cannot open the host lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            who = self.holder()
            pid = who.get("pid", "unknown")
            cmd = f" ({who['command']})" if who.get("command") else ""
            raise LockHeld(
                f"another sweep holds the host lock {self.path}: pid {pid}{cmd}; wait for it or stop it"
            ) from None
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "command": " ".join(sys.argv[:6])[:200], "since": time.time()}
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "HostLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
