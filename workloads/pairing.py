"""Two jobs measured side by side on one GPU (`sizer colocate`): their windows cover the same seconds.

sizer starts both workers at once, each with `SIZER_PAIR_DIR` (a folder both may write),
`SIZER_PAIR_JOB` (1 or 2) and `SIZER_PAIR_WAIT_S` (how long a job waits for its partner). The
meter of each job (`workloads.measure.Meter`):

- at its first step marks itself ready and waits until the partner is ready too (or gone, or the
  wait is over): both budgets then run from one moment, whatever each job's start cost (imports,
  the model's build, the loader's start);
- measures for its whole budget, without the early stop on a steady spread, so both windows close
  at about the same time;
- once its window closes, marks itself done and runs on, unmeasured, until the partner is done too
  (or gone, or the wait is over): neither window has an idle neighbour at its end.

sizer marks a worker gone as soon as it exits, however it ended, so a failed partner holds nobody.
Standard library only: the MXNet workloads run this in their own interpreter.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

ENV_DIR = "SIZER_PAIR_DIR"
ENV_JOB = "SIZER_PAIR_JOB"
ENV_WAIT = "SIZER_PAIR_WAIT_S"
DEFAULT_WAIT_S = 120.0
POLL_S = 0.01


def marker(folder: Path, what: str, job: int) -> Path:
    """The file that says job `job` is `what` (ready, done, gone)."""
    return folder / f"{what}-{job}"


@dataclass
class PairSync:
    """One job's side of the pair: its folder, its number, how long it waits, and what it saw."""

    folder: Path
    job: int
    wait_s: float = DEFAULT_WAIT_S
    waited_s: float = 0.0
    held_s: float = 0.0
    partner_ready: bool = False
    partner_done: bool = False
    _hold_since: float | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PairSync | None:
        """The pair this worker belongs to, None where it runs alone (or the variables are malformed)."""
        env = os.environ if environ is None else environ
        folder, job = env.get(ENV_DIR, ""), env.get(ENV_JOB, "")
        if not folder or job not in ("1", "2"):
            return None
        try:
            wait_s = float(env.get(ENV_WAIT) or DEFAULT_WAIT_S)
        except ValueError:
            wait_s = DEFAULT_WAIT_S
        return cls(Path(folder), int(job), max(0.0, wait_s))

    @property
    def partner(self) -> int:
        return 2 if self.job == 1 else 1

    def _mark(self, what: str) -> None:
        try:
            marker(self.folder, what, self.job).touch()
        except OSError:
            pass  # a folder gone means sizer ended the pair: the partner waits no more either

    def _seen(self, what: str) -> bool:
        return marker(self.folder, what, self.partner).exists()

    def start(self) -> None:
        """Ready: wait until the partner is ready as well, gone, or the wait is over."""
        self._mark("ready")
        t0 = time.monotonic()
        while not (self._seen("ready") or self._seen("gone")) and time.monotonic() - t0 < self.wait_s:
            time.sleep(POLL_S)
        self.partner_ready = self._seen("ready")
        self.waited_s = time.monotonic() - t0

    def window_closed(self) -> None:
        """This job's window is closed: the partner may stop once its own is."""
        self._mark("done")
        self._hold_since = time.monotonic()

    def may_stop(self) -> bool:
        """After `window_closed`: whether the partner's window is closed too (or it is gone, or the
        wait is over), so this job may stop running."""
        since = self._hold_since if self._hold_since is not None else time.monotonic()
        done = self._seen("done")
        if done or self._seen("gone") or time.monotonic() - since >= self.wait_s:
            self.partner_done = done
            self.held_s = time.monotonic() - since
            return True
        return False

    def record(self) -> dict[str, Any]:
        """What the result keeps of the pairing: the job, whether the partner was there at both ends,
        and the seconds waited at the start and run on after the window."""
        return {"job": self.job, "partner_ready": self.partner_ready, "partner_done": self.partner_done,
                "waited_s": round(self.waited_s, 3), "held_s": round(self.held_s, 3)}
