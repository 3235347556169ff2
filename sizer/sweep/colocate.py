"""Measuring a sweep's pairs (`sizer colocate`, `sizer sweep --colocate`): two jobs at once on one
GPU, each on its half of the instance (`sizer.sweep.pairs`), then each job alone on its half.

Both workers start together, each in a limit group of its own (its half's cores, memory limit and
disk throttle), with the same GPU visible, and their meters line their windows up through a folder
of the pair's (`workloads.pairing`): each waits for the other at its first step, measures for its
whole budget and runs on, unmeasured, until the other's window is closed. A worker that exits,
however, is marked gone there at once, so its partner waits for nothing.

The pair's two points are committed in one transaction once both ended, then each job alone on its
half, point by point: a kill loses at most what was in flight, and `--resume` measures only what is
missing (a job alone on a half is measured once per sweep, whatever pairs it is in). Worker threads
measure; the main thread alone writes to the store and watches for Ctrl-C and SIGTERM, which end
both workers (each removes its group).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path

from sizer.model.pairs import pair_json, pair_records
from sizer.runner import STARTUP_ALLOWANCE_S, PointRun, default_timeout, gpu_env
from sizer.shapes import HostCpus
from sizer.sweep.data import prepare_datasets
from sizer.sweep.gpu_share import gpu_sharing
from sizer.sweep.measure import measure_point
from sizer.sweep.outputs import stored_point_summary
from sizer.sweep.pairs import JOB_SHARE, PlannedPair, halve_cpus
from sizer.sweep.signals import STOP, check_stop
from sizer.sweep.state import SweepRun
from workloads.pairing import ENV_DIR, ENV_JOB, ENV_WAIT, marker
from workloads.protocol import Spec

POLL_S = 0.2  # how often the main thread looks for a stop while a pair runs
GPU = (0,)  # the GPU a pair shares: the first sizer may use (`sizer.runner.gpu_env`)


def pair_wait_s(budget_s: float) -> float:
    """How long a job waits for its partner, at its first step and after its window: the longest
    start a worker is allowed, and one more budget."""
    return STARTUP_ALLOWANCE_S + budget_s


class PairRunner:
    """Measures and commits a sweep's pairs, then each job alone on its half, skipping what is stored."""

    def __init__(self, sweep: SweepRun):
        self.sweep = sweep
        self.plan = sweep.plan

    def run(self) -> None:
        """Every pair not stored yet (under the time limit), then the summary's pair records."""
        plan, sweep = self.plan, self.sweep
        todo = [pair for pair in plan.pairs if not self._stored(pair)]
        sweep.bar.grow(2 * len(plan.pairs) + len({pair.alone_key(j) for pair in plan.pairs for j in (0, 1)}))
        if todo and plan.datasets and not sweep.datasets:  # a pairs-only sweep has no grid that prepared them
            sweep.datasets = prepare_datasets(plan.dataset_needs())
        gpus = gpu_env(GPU) if plan.profile == "gpu" else {}
        with gpu_sharing(plan.pairs[0].sharing, plan.profile, gpus) as sharing_env:
            for pair in plan.pairs:
                self._pair(pair, sharing_env)
        sweep.summary["pairs"] = [pair_json(r) for r in pair_records(sweep.store.points(sweep.sweep_id))]

    def _stored(self, pair: PlannedPair) -> bool:
        done = self.sweep.done
        return all(key in done for key in (pair.shared_key(0), pair.shared_key(1), pair.alone_key(0), pair.alone_key(1)))

    def _pair(self, pair: PlannedPair, sharing_env: dict[str, str]) -> None:
        """The pair side by side, then each job alone on its half: whatever of it is not stored."""
        sweep = self.sweep
        halves = halve_cpus(pair.instance.vcpus, self.plan.cpus)
        if pair.shared_key(0) in sweep.done:
            self._report_stored(pair, [(pair.shared_key(j), j) for j in (0, 1)])
        elif self._may_start(pair, self._longer(pair)):
            t0 = time.monotonic()
            sweep.bar.start(sweep.completed + 1, pair.label(), sweep.completed)
            runs = self._side_by_side(pair, halves, sharing_env)
            sweep.commit_together([(pair.halves[j], runs[j], pair.shared_key(j), f"{pair.jobs[j]} beside "
                                    f"{pair.jobs[1 - j]} ({pair.sharing}) @ half of {pair.instance.label()}")
                                   for j in (0, 1)], t0)
        for job in (0, 1):
            key = pair.alone_key(job)
            if key in sweep.done:
                if not any(r.get("key") == key for r in sweep.summary["points"]):
                    self._report_stored(pair, [(key, job)])
            elif self._may_start(pair, job):
                self._alone(pair, job, halves[job], sharing_env)

    def _longer(self, pair: PlannedPair) -> int:
        return max((0, 1), key=lambda j: self.plan.estimate_point_s(pair.halves[j]))

    def _may_start(self, pair: PlannedPair, job: int) -> bool:
        """Whether the slice has time for the pair's (or the job's) measurement now; an entry of the
        host's speed that is due is measured first."""
        check_stop()
        point = pair.halves[job]
        if not self.sweep.has_time_for(point):
            return False
        if self.sweep.host_speed.due():
            entry = self.sweep.host_speed.measure()
            if entry is not None:
                self.sweep.summary.setdefault("host_speed", []).append(entry)
        return True

    def _report_stored(self, pair: PlannedPair, keys: list[tuple[str, int]]) -> None:
        for key, job in keys:
            row = stored_point_summary(pair.halves[job], self.sweep.stored.get(key)) if key in self.sweep.stored else None
            if row is not None:
                row["key"] = key
                self.sweep.summary["points"].append(row)
            self.sweep.summary["skipped"] = self.sweep.summary.get("skipped", 0) + 1
            self.sweep.completed += 1

    def _alone(self, pair: PlannedPair, job: int, cpus: HostCpus, sharing_env: dict[str, str]) -> None:
        """The job alone on its half (its cores, memory limit and throttle; the GPU to itself)."""
        sweep, point = self.sweep, pair.halves[job]
        t0 = time.monotonic()
        label = pair.alone_label(job)
        sweep.bar.start(sweep.completed + 1, label, sweep.completed)
        run = measure_point(self.plan, point, sweep.datasets, cpus=cpus, gpus=GPU if self.plan.profile == "gpu" else None,
                            disk_share=JOB_SHARE, env=sharing_env or None)
        run.result.extra["colocated"] = pair.mark(job, True, tuple(run.result.extra.get("cpus") or ()), JOB_SHARE)
        sweep.commit(point, run, t0, key=pair.alone_key(job), label=label)

    def _side_by_side(self, pair: PlannedPair, halves: tuple[HostCpus, HostCpus], sharing_env: dict[str, str]) -> list[PointRun]:
        """Both jobs at once, each in a worker thread; Ctrl-C or SIGTERM end both."""
        folder = Path(tempfile.mkdtemp(prefix="sizer-pair-"))
        wait_s = pair_wait_s(self.plan.time_budget_s)
        try:
            with ThreadPoolExecutor(2, thread_name_prefix="sizer-pair") as pool:
                futures = [pool.submit(self._job, pair, j, halves[j], folder, wait_s, sharing_env) for j in (0, 1)]
                self._watch(futures)
                return [f.result() for f in futures]
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _watch(self, futures: list[Future[PointRun]]) -> None:
        """Wait for both jobs, stopping both on Ctrl-C, SIGTERM or a worker thread's exception."""
        try:
            while True:
                check_stop()
                done, pending = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
                failed = next((f for f in done if f.exception() is not None), None)
                if failed is not None:
                    STOP.set()  # the other job ends now too, removing its group
                    raise failed.exception()  # type: ignore[misc]
                if not pending:
                    return
        except BaseException:
            STOP.set()
            raise

    def _job(self, pair: PlannedPair, job: int, cpus: HostCpus, folder: Path, wait_s: float,
             sharing_env: dict[str, str]) -> PointRun:
        """A worker thread's part: one job of the pair in its half, marked gone once it ended."""
        point = pair.halves[job]
        env = {**sharing_env, ENV_DIR: str(folder), ENV_JOB: str(job + 1), ENV_WAIT: f"{wait_s:g}"}
        spec = Spec(workload=point.workload, time_budget_s=self.plan.time_budget_s)
        try:
            run = measure_point(self.plan, point, self.sweep.datasets, cpus=cpus,
                                gpus=GPU if self.plan.profile == "gpu" else None, disk_share=JOB_SHARE, env=env,
                                timeout_s=default_timeout(spec) + 2 * wait_s)
        finally:
            marker(folder, "gone", job + 1).touch()
        run.result.extra["colocated"] = pair.mark(job, False, tuple(run.result.extra.get("cpus") or ()), JOB_SHARE)
        return run

