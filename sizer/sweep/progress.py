"""A sweep's progress on stderr: a live bar on a terminal, plain lines in a log.

A log (stdout or stderr redirected to a file or a pipe) keeps only a live bar's last state, so
there each finished point gets one line of its own: point i of N, its label, its figure and status,
its seconds, the time since measuring began and the time left.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from sizer.console import console, err_console


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def interactive() -> bool:
    """True where a person watches both streams: a live bar only makes sense there."""
    return console.is_terminal and err_console.is_terminal


def outcome_text(row: dict[str, Any]) -> str:
    """A measured point's status and figure, as a sweep's summary row holds them."""
    status = row.get("status", "")
    if not row.get("throughput"):
        return f"{status}: {row['error']}" if row.get("error") else status
    rate = row["throughput"]
    figure = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
    marks = "".join(f"; {mark}" for mark in row.get("marks") or ())
    return f"{status}, {figure} {row.get('unit', '')} (spread {row.get('spread') or 0.0:.1%}{marks})"


class SweepProgress:
    """Point i of N, the current shape, the time left from the measured points' durations: a live
    bar when `interactive()`, else a plain line per finished point; `note` prints a line in both."""
    def __init__(self, total: int, estimate_point_s: float, enabled: bool = True, live: bool | None = None):
        self.total = total
        self.estimate = estimate_point_s
        self.durations: list[float] = []
        self.slots = 1  # points measured at once (`sizer sweep --parallel`): the time left divides by it
        self.enabled = enabled
        self.live = enabled and (interactive() if live is None else live)
        self.started = time.monotonic()
        self._current = ("-", "")  # "i/N" and the label of the point being measured
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        self.started = time.monotonic()
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


            self._progress = Progress(
                TextColumn("[bold]point[/] {task.fields[index]}"),  # index: "i/N", no user text
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                TextColumn("{task.description}", markup=False),  # the point's label, as written
                console=err_console,
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("", total=self.total, index="-", eta=self.eta(self.total))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def grow(self, more: int) -> None:
        """Points added after the bar started (`--refine`'s, chosen once the passes are done)."""
        self.total += more
        if self._progress is not None and more:
            self._progress.update(self._task, total=self.total)

    def eta(self, remaining: int) -> str:
        per_point = statistics.mean(self.durations) if self.durations else self.estimate
        return format_duration(per_point * remaining / max(1, self.slots))

    def start(self, index: int, label: str, done: int) -> None:
        self._current = (f"{index}/{self.total}", label)
        if self._progress is not None:
            self._progress.update(
                self._task, completed=done, index=self._current[0], description=label,
                eta=self.eta(self.total - done),
            )

    def finish(self, done: int, seconds: float | None, row: dict[str, Any] | None = None,
               label: str | None = None) -> None:
        """A point is done; `row` (its summary) gives the plain line its status and figure, `label`
        its name where several points are in flight (else the one `start` named)."""
        if seconds is not None:
            self.durations.append(seconds)
        if self._progress is not None:
            self._progress.update(self._task, completed=done, eta=self.eta(self.total - done))
        elif self.enabled:
            index, label = (f"{done}/{self.total}", label) if label is not None else self._current
            took = "" if seconds is None else f" in {seconds:.0f} s"
            self.note(f"point {index} {label}: {outcome_text(row or {})}{took}; "
                      f"elapsed {format_duration(time.monotonic() - self.started)}, ETA {self.eta(self.total - done)}")

    def note(self, text: Any) -> None:
        """One line (a string, printed as written, or rich Text) beside the bar, or in the log;
        nothing where progress is off."""
        if self._progress is not None:
            self._progress.console.print(text)
        elif self.enabled:
            # One line per message, however long: a log is read line by line.
            err_console.print(text, soft_wrap=True, highlight=False)
