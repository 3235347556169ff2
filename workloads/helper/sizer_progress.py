"""Tell sizer how far a job has got: call `step(n)` once per training or inference step.

    import sizer_progress
    for batch in loader:
        ...                                  # the step's work
        sizer_progress.step(len(batch))      # samples (or tokens) done in this step
    sizer_progress.done()                    # optional: the job has no more steps

sizer puts this file's folder on the job's PYTHONPATH and names a file in the environment variable
SIZER_PROGRESS; each call appends one line to it, "<time.monotonic()> <n>", which sizer reads as
the job runs (CLOCK_MONOTONIC is one clock for every process of a Linux host). Outside sizer, where
SIZER_PROGRESS is unset, every call does nothing, so an instrumented job runs anywhere unchanged.

Standard library only, Python 3.8 or newer; a step costs one small write of a few microseconds.
"""

import os
import time

__all__ = ["step", "done"]

_ENV = "SIZER_PROGRESS"
_UNSET = -2
_fd = _UNSET  # the stream's file descriptor; -1 when there is none (outside sizer)


def _stream():
    """The progress file, opened once per process for appending (-1 outside sizer)."""
    global _fd
    if _fd == _UNSET:
        path = os.environ.get(_ENV, "")
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else -1
    return _fd


def step(samples):
    """One step done, of `samples` samples (or tokens, or whatever the job's unit counts)."""
    fd = _stream()
    if fd >= 0:
        # One write per line: appends of a few bytes are whole, even from several processes.
        os.write(fd, ("%.6f %r\n" % (time.monotonic(), float(samples))).encode())


def done():
    """The job has no more steps to report."""
    fd = _stream()
    if fd >= 0:
        os.write(fd, ("%.6f done\n" % time.monotonic()).encode())
