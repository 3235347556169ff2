"""The watchdog: a small process that ends a point's processes and removes its limit group when
sizer is killed outright (SIGKILL, the OOM killer), where no clean-up of sizer's own can run.

sizer starts one per limit group, as `python -m sizer.limits.watchdog DIR...` (DIR: the group's
cgroup folders), with a pipe on its standard input whose write end only sizer holds. Lines on it:

    session PID   a worker's session: end it should sizer die
    ended PID     sizer ended that session itself: forget it
    done          sizer removed the group itself: exit and touch nothing

End of file without `done` means sizer died. The watchdog then SIGKILLs the sessions it was told
of and every process in the group's cgroups (re-reading cgroup.procs until it is empty), removes
the cgroups (their disk throttles go with them) and exits. It kills no other process: only sizer's
workers and what they start are ever in those cgroups or sessions. It runs in a session of its own
and ignores SIGINT, SIGHUP and SIGTERM, so Ctrl-C at sizer's terminal or a signal to sizer's
process group leaves it to do its work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from sizer.limits import sysfs

# How long the watchdog keeps trying to empty and remove one cgroup (a process in uninterruptible
# sleep dies only when its I/O returns); the next sizer start removes what is still left.
REMOVE_TIMEOUT_S = 10.0
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


class Watchdog:
    """sizer's side of one watchdog: starts the process and holds the pipe's write end."""

    def __init__(self, group_dirs: Sequence[Path] = ()) -> None:
        env = dict(os.environ)
        # The watchdog imports the same sizer as this process, wherever that came from.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
        read_end, self._write_end = os.pipe()  # neither end is inherited by the workers sizer starts
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, *(str(d) for d in group_dirs)],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd="/", env=env, start_new_session=True,
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)
        self._open = True

    def _send(self, line: str) -> None:
        if not self._open:
            return
        try:
            os.write(self._write_end, (line + "\n").encode())
        except OSError:  # the watchdog is gone (killed by someone): the next start cleans up instead
            pass

    def watch_session(self, pid: int) -> None:
        """End the session `pid` leads should sizer die before `forget_session(pid)`."""
        self._send(f"session {pid}")

    def forget_session(self, pid: int) -> None:
        self._send(f"ended {pid}")

    def release(self) -> None:
        """sizer cleaned up itself: the watchdog exits touching nothing. Idempotent. Not waited
        for: it may still be starting, and a point need not wait for that (subprocess reaps it)."""
        if not self._open:
            return
        self._send("done")
        self._open = False
        os.close(self._write_end)


def _read_orders(fd: int) -> tuple[bool, set[int]]:
    """Follow sizer's lines until `done` or end of file: (released, sessions still to end)."""
    sessions: set[int] = set()
    pending = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return False, sessions
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            word, _, arg = line.decode(errors="replace").partition(" ")
            if word == "done":
                return True, sessions
            if word == "session" and arg.isdigit():
                sessions.add(int(arg))
            elif word == "ended" and arg.isdigit():
                sessions.discard(int(arg))


def clean_up(group_dirs: Sequence[Path], sessions: set[int]) -> None:
    """SIGKILL the sessions and everything in the cgroups, then remove the cgroups."""
    for pid in sessions:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    for group_dir in group_dirs:
        sysfs.remove_dir(group_dir, REMOVE_TIMEOUT_S)
    for parent in dict.fromkeys(d.parent for d in group_dirs):
        sysfs.remove_parent_if_empty(parent)


def main(argv: Sequence[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    released, sessions = _read_orders(sys.stdin.fileno())
    if not released:
        clean_up([Path(a) for a in argv], sessions)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
