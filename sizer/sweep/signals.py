"""Stopping a sweep: Ctrl-C or SIGTERM remove the limit group in use, and committed points stay."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Iterator


class SweepTerminated(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: the group in use is removed and committed points stay."""


# Set by the signal handler as well as raising: Python drops an exception raised while it runs
# certain internal hooks (at fork, say), and the flag still stops the sweep at the next check.
STOP = threading.Event()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the sweep cleanly (in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()
    STOP.clear()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a forked helper (a pool worker) inherited this: die as by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        STOP.set()
        raise SweepTerminated()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def check_stop() -> None:
    if STOP.is_set():
        raise SweepTerminated()
