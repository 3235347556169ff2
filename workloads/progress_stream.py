"""A user's job reports its progress two ways; this module reads both and turns them into steps.

- The helper (`workloads/helper/sizer_progress.py`): the job appends "<monotonic seconds> <samples>"
  per step to the file named by SIZER_PROGRESS (`ProgressFile`).
- `--metric-regex`: a pattern matched against each line of the job's stdout and stderr, split on
  '\\r' too for progress bars (`MetricRegex`, fed by `OutputTap`); its named group `rate` is a rate
  in the job's unit, `count` a cumulative count of samples, and a first unnamed group a rate.
  `OutputTap` keeps a bounded copy of each stream (`RotatingCopy`) and bounded lines; the regex
  gets a time bound per line.

`StepFeed` makes the (seconds, samples) steps the meter takes from either. Standard library only.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SAMPLES, RATE, COUNT, DONE = "samples", "rate", "count", "done"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SHOWN_CHARS = 200
# What sizer keeps of a job's output (docs/commands.md, "What sizer keeps of the job's output"): per
# stream the last 4 to 8 MiB on disk (two files), lines cut at 4096 characters, at most 10,000
# lines waiting for the regex, and one second of matching per line.
KEEP_BYTES = 8 * 2**20
MAX_LINE_CHARS = 4096
MAX_QUEUED_LINES = 10_000
REGEX_LINE_BOUND_S = 1.0
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


class RegexTimeout(BadReport):
    """The --metric-regex took longer than its bound on one line; the message names the pattern."""


def _out_of_time(signum: int, frame: object) -> None:
    raise RegexTimeout("")


class MetricRegex:
    """A --metric-regex: which group holds the number, and whether it is a rate or a count.

    Each line gets REGEX_LINE_BOUND_S seconds of matching (a timer signal ends a pattern that
    backtracks without end, in the main thread, where `reports` runs it), so a catastrophic pattern
    ends the point with an error that names it instead of spinning on the shape's vCPUs."""

    def __init__(self, pattern: str, bound_s: float | None = None):
        problem = regex_problem(pattern)
        if problem:
            raise ValueError(problem)
        self.pattern = re.compile(pattern)
        self.bound_s = REGEX_LINE_BOUND_S if bound_s is None else bound_s
        names = self.pattern.groupindex
        self.group: str | int = RATE if RATE in names else (COUNT if COUNT in names else 1)
        self.kind = COUNT if self.group == COUNT else RATE

    def report(self, t: float, line: str) -> Report | None:
        """The line's report, None where the pattern does not match it or its group took no part."""
        return self.reports([(t, line)])[0]

    def reports(self, lines: list[tuple[float, str]]) -> list[Report | None]:
        """Each line's report (None where the pattern does not match), each line matched under the
        time bound; RegexTimeout names the pattern and the line's length where one takes longer."""
        if threading.current_thread() is not threading.main_thread() or not lines:
            return [self._report(t, line) for t, line in lines]
        previous = signal.signal(signal.SIGALRM, _out_of_time)
        try:
            out = []
            for t, line in lines:
                signal.setitimer(signal.ITIMER_REAL, self.bound_s)
                try:
                    out.append(self._report(t, line))
                except RegexTimeout:
                    raise RegexTimeout(
                        f"--metric-regex {self.pattern.pattern!r} took over {self.bound_s:g} s on one line of the "
                        f"job's output ({len(line)} characters, {line[:60]!r}...): a pattern that backtracks "
                        "this much cannot follow the job; make it match less (anchor it, avoid nested repeats)"
                    ) from None
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            return out
        finally:
            signal.signal(signal.SIGALRM, previous)

    def _report(self, t: float, line: str) -> Report | None:
        found = self.pattern.search(line)
        if found is None or found.group(self.group) is None:
            return None
        return Report(t, self.kind, _number(found.group(self.group), line))


class RotatingCopy:
    """The last part of one output stream in a file: `path` until it holds half of `keep_bytes`,
    then `path` becomes `<stem>.1<suffix>` (the older half, replacing the one before) and a new
    `path` starts. At most `keep_bytes` of the stream stay on disk, at least the last half of it."""

    def __init__(self, path: Path, keep_bytes: int = KEEP_BYTES):
        self.path, self.older = path, path.with_name(f"{path.stem}.1{path.suffix}")
        self.half = max(1, keep_bytes // 2)
        self.written = 0  # the stream's bytes in all
        self.older.unlink(missing_ok=True)
        self._file = open(path, "wb")
        self._size = 0

    def write(self, chunk: bytes) -> None:
        self.written += len(chunk)
        while chunk:
            room = self.half - self._size
            self._file.write(chunk[:room])
            self._size += min(room, len(chunk))
            chunk = chunk[room:]
            if self._size >= self.half:
                self._rotate()
        self._file.flush()

    def _rotate(self) -> None:
        self._file.close()
        os.replace(self.path, self.older)
        self._file = open(self.path, "wb")
        self._size = 0

    def close(self) -> None:
        self._file.close()

    def tail(self, max_bytes: int) -> bytes:
        """The stream's last `max_bytes` that the files keep."""
        out = b""
        for path in (self.path, self.older):
            try:
                with open(path, "rb") as fh:
                    fh.seek(max(0, fh.seek(0, os.SEEK_END) - (max_bytes - len(out))))
                    out = fh.read() + out
            except OSError:
                continue
            if len(out) >= max_bytes:
                break
        return out


class OutputTap:
    """Copies one of the job's output pipes into a RotatingCopy on a thread and, when asked, hands
    on each line (split on '\\r' and '\\n', cut at MAX_LINE_CHARS) with the moment it arrived: a rate
    the job prints applies to the time up to its line, which the reader would otherwise see only at
    its next look. Memory stays bounded whatever the job writes: lines are found in each new chunk
    only (a job that writes no line break costs nothing more as it goes on), a line keeps its first
    MAX_LINE_CHARS characters, and at most MAX_QUEUED_LINES lines wait for the reader (the oldest go
    first; `dropped` counts them)."""

    def __init__(self, pipe: IO[bytes], copy_to: Path, keep_lines: bool, keep_bytes: int = KEEP_BYTES):
        self.lines: deque[tuple[float, str]] = deque(maxlen=MAX_QUEUED_LINES)
        self.dropped = 0  # lines that waited too long and were left out
        self.cut = 0  # lines longer than MAX_LINE_CHARS, cut
        self.copy = RotatingCopy(copy_to, keep_bytes)
        self._pipe, self._keep_lines = pipe, keep_lines
        self._partial: list[str] = []
        self._partial_chars = 0
        self._cutting = False  # the line being read is past MAX_LINE_CHARS
        self._after_cr = False
        self._thread = threading.Thread(target=self._copy, daemon=True, name=f"tap-{copy_to.name}")
        self._thread.start()

    def _copy(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = self._pipe.fileno()
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                now = time.monotonic()
                self.copy.write(chunk)
                if self._keep_lines:
                    self._split(decoder.decode(chunk), now)
            if self._keep_lines:
                self._split(decoder.decode(b"", final=True), time.monotonic())
                if self._partial_chars:
                    self._put(time.monotonic(), "".join(self._partial))
        finally:
            self.copy.close()

    def _split(self, text: str, now: float) -> None:
        """The lines that `text` (the stream's next piece) ends; what follows its last break waits."""
        if self._after_cr and text.startswith("\n"):  # the "\r\n" of one line break, split over two reads
            text = text[1:]
        if text:
            self._after_cr = text.endswith("\r")
        *whole, rest = _LINE_BREAK.split(text)
        for piece in whole:
            self._hold(piece)
            self._put(now, "".join(self._partial))
            self._partial, self._partial_chars, self._cutting = [], 0, False
        self._hold(rest)

    def _hold(self, piece: str) -> None:
        """Part of the line being read: kept up to MAX_LINE_CHARS characters, the rest counted as cut."""
        room = MAX_LINE_CHARS - self._partial_chars
        if len(piece) > room:
            self.cut += not self._cutting
            self._cutting = True
            piece = piece[:room]
        if piece:
            self._partial.append(piece)
            self._partial_chars += len(piece)

    def _put(self, now: float, line: str) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append((now, line))

    def drain(self) -> list[tuple[float, str]]:
        """The lines that arrived since the last drain, oldest first."""
        out = []
        while True:
            try:
                out.append(self.lines.popleft())
            except IndexError:
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
