"""A worker's processes die with it: every process it forks from its main thread is armed with
PR_SET_PDEATHSIG(SIGKILL), and so on down the tree, so a worker that dies (killed with sizer, at
the memory limit, by a crash) takes its loader workers and pools with it, also where no cgroup
collects them (the affinity-only backend) or where one left the worker's session.

Forks from other threads stay unarmed: the kernel sends the signal when the forking *thread*
ends, which would kill a child of a short-lived thread early. The limit group and the worker's
session still collect those. Linux only; elsewhere nothing is armed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import Any


class _Fork:
    """The fork under way, noted in the parent just before it (the child inherits the note)."""

    parent = 0
    from_main_thread = False


_PR_SET_PDEATHSIG = 1


def _prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _note_fork() -> None:
    _Fork.parent = os.getpid()
    _Fork.from_main_thread = threading.current_thread() is threading.main_thread()


def forks_die_with_this_process() -> bool:
    """Arm every later fork of this process (and theirs) to die with its parent; False where the
    system cannot."""
    prctl = _prctl()
    if prctl is None:
        return False

    def arm() -> None:  # in the child, just after the fork
        if not _Fork.from_main_thread:
            return
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != _Fork.parent:  # the parent died before the child was armed
            os._exit(1)

    os.register_at_fork(before=_note_fork, after_in_child=arm)
    return True
