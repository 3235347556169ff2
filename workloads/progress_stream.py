"""A user's job reports its progress two ways; this module reads both and turns them into steps.

- The helper (`workloads/helper/sizer_progress.py`): the job appends "<monotonic seconds> <samples>"
  per step to the file named by SIZER_PROGRESS (`ProgressFile`).
- `--metric-regex`: a pattern matched against each line of the job's stdout and stderr, split on
  '\\r' too for progress bars (`MetricRegex`, fed by `OutputTap`); its named group `rate` is a rate
  in the job's unit, `count` a cumulative count of samples, and a first unnamed group a rate.

`StepFeed` makes the (seconds, samples) steps the meter takes from either. Standard library only.
"""

from __future__ import annotations

import math
import os
import queue
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SAMPLES, RATE, COUNT, DONE = "samples", "rate", "count", "done"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SHOWN_CHARS = 200
# A number printed with thousands separators, as f"{rate:,.0f}" does: "98,765" or "1,234,567.8".
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


class BadReport(ValueError):
    """A report that does not read as a number; the message names the line."""


@dataclass(frozen=True)
class Report:
    """One report: when (monotonic seconds) and what (samples done in a step, a rate, a count, done)."""

    t: float
    kind: str
    value: float = 0.0


def _number(text: str, line: str) -> float:
    """`text` as a finite number of at least 0 (thousands commas allowed), else BadReport naming the line."""
    if _THOUSANDS.fullmatch(text.strip()):
        text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BadReport(f"{text.strip()!r} is not a number of samples or a rate, in the line {line[:_SHOWN_CHARS]!r}")
    return value


# ---------------------------------------------------------------- the helper's stream
class ProgressFile:
    """The helper's append-only progress file, read from where the last read ended."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0
        self._partial = b""

    def read(self) -> list[Report]:
        """The reports appended since the last read (a line still being written waits)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [parse_progress_line(line.decode(errors="replace")) for line in lines if line.strip()]


def parse_progress_line(line: str) -> Report:
    """'<monotonic seconds> <samples>' or '<monotonic seconds> done' (what sizer_progress writes)."""
    parts = line.split()
    if len(parts) != 2:
        raise BadReport(f"a progress line must be '<seconds> <samples>', got {line[:_SHOWN_CHARS]!r}")
    stamp = _number(parts[0], line)
    if parts[1] == DONE:
        return Report(stamp, DONE)
    return Report(stamp, SAMPLES, _number(parts[1], line))


# ---------------------------------------------------------------- the regex on the job's output
def regex_problem(pattern: str) -> str | None:
    """What is wrong with a --metric-regex, or None: it must compile and hold a group to read."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"--metric-regex {pattern!r} is not a valid regular expression: {exc}"
    if compiled.groups == 0:
        return (f"--metric-regex {pattern!r} has no group: put the number in (?P<rate>...) for a rate, "
                "(?P<count>...) for a cumulative count of samples, or (...) for a rate")
    return None


class MetricRegex:
    """A --metric-regex: which group holds the number, and whether it is a rate or a count."""

    def __init__(self, pattern: str):
        problem = regex_problem(pattern)
        if problem:
            raise ValueError(problem)
        self.pattern = re.compile(pattern)
        names = self.pattern.groupindex
        self.group: str | int = RATE if RATE in names else (COUNT if COUNT in names else 1)
        self.kind = COUNT if self.group == COUNT else RATE

    def report(self, t: float, line: str) -> Report | None:
        """The line's report, None where the pattern does not match it or its group took no part."""
        found = self.pattern.search(line)
        if found is None or found.group(self.group) is None:
            return None
        return Report(t, self.kind, _number(found.group(self.group), line))


class OutputTap:
    """Copies one of the job's output pipes into a file on a thread and, when asked, hands on each
    line (split on '\\r' and '\\n') with the moment it arrived: a rate the job prints applies to
    the time up to its line, which the reader would otherwise see only at its next look."""

    def __init__(self, pipe: IO[bytes], copy_to: Path, keep_lines: bool):
        self.lines: queue.SimpleQueue[tuple[float, str]] = queue.SimpleQueue()
        self._pipe, self._copy_to, self._keep_lines = pipe, copy_to, keep_lines
        self._thread = threading.Thread(target=self._copy, daemon=True, name=f"tap-{copy_to.name}")
        self._thread.start()

    def _copy(self) -> None:
        import time

        partial = ""
        fd = self._pipe.fileno()
        with open(self._copy_to, "wb") as out:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                now = time.monotonic()
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
                if self._keep_lines:
                    *whole, partial = _LINE_BREAK.split(partial + chunk.decode(errors="replace"))
                    for line in whole:
                        self.lines.put((now, line))
            if self._keep_lines and partial:
                self.lines.put((time.monotonic(), partial))

    def drain(self) -> list[tuple[float, str]]:
        """The lines that arrived since the last drain, oldest first."""
        out = []
        while True:
            try:
                out.append(self.lines.get_nowait())
            except queue.Empty:
                return out

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


# ---------------------------------------------------------------- reports into steps
class StepFeed:
    """Turns reports into the meter's (seconds, samples) steps, in the order they came.

    A helper's step spans the time since the previous stamp (the first: since the job started). A
    rate's step spans the time since the previous report, at that rate; a cumulative count's holds
    the samples since the previous count (a count that goes down started again from 0). The first
    report of either spans the job's start, with no count known for it: 0 samples (warm-up)."""

    def __init__(self, started: float):
        self.last_t = started
        self.last_count: float | None = None
        self.reports = 0
        self.ended = False  # the job said it has no more steps (sizer_progress.done)

    def steps(self, reports: list[Report]) -> list[tuple[float, float]]:
        out = []
        for report in reports:
            if report.kind == DONE:
                self.ended = True
                continue
            seconds = max(0.0, report.t - self.last_t)
            self.last_t = max(self.last_t, report.t)
            if report.kind == SAMPLES:
                samples = report.value
            elif not self.reports:
                samples = 0.0  # a rate's or a count's first report: its span holds the job's start
            elif report.kind == RATE:
                samples = report.value * seconds
            else:
                previous = self.last_count or 0.0
                samples = report.value - previous if report.value >= previous else report.value
            if report.kind == COUNT:
                self.last_count = report.value
            self.reports += 1
            out.append((seconds, samples))
        return out
