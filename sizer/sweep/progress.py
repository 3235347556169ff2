"""A sweep's progress bar: point i of N, the current shape, and the time left."""

from __future__ import annotations

import statistics
from typing import Any


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class SweepProgress:
    """Rich progress bar: point i of N, the current shape, ETA from measured point durations."""

    def __init__(self, total: int, estimate_point_s: float, enabled: bool = True):
        self.total = total
        self.estimate = estimate_point_s
        self.durations: list[float] = []
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            from sizer.console import err_console

            self._progress = Progress(
                TextColumn("[bold]point[/] {task.fields[index]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA {task.fields[eta]}"),
                TextColumn("{task.description}"),
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
        return format_duration(per_point * remaining)

    def start(self, index: int, label: str, done: int) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task, completed=done, index=f"{index}/{self.total}", description=label,
                eta=self.eta(self.total - done),
            )

    def finish(self, done: int, seconds: float | None) -> None:
        if seconds is not None:
            self.durations.append(seconds)
        if self._progress is not None:
            self._progress.update(self._task, completed=done, eta=self.eta(self.total - done))

    def note(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text)
