"""Re-derive stored points' figures from their raw steps with today's window rule.

Points measured before windows were aligned to whole loader rounds (workloads/stats.py) could end
with a window holding only part of a burst (seen on an H200: one window of 146,202 images/s beside
four of about 400). The raw steps are in every stored result, so the figures can be derived again
with the current rule: median window rate, spread, window rates and the ok/noisy status. Each
changed point keeps its previous figures under result.extra["rewindowed"]. Points already
derived this way are left alone, so running it twice changes nothing.

`--first-seconds S --workload NAME`: re-derive NAME's points from their first S seconds of measured
steps only. Meters before CHECK_EVERY_S judged the spread at every step once `min_seconds` (a third
of the budget) of the window had passed, at a cost growing with the steps so far; a workload of
many fast steps (ptb-lstm-train: 6 ms) slowed down from then on. The steps before it are untouched
by that cost: S = the sweep's budget / 3.

`--whole-window`: re-derive every point's figure as its whole window's rate (samples over seconds,
over whole loader rounds), the figure workers give since the median of sub-window rates was
dropped (workloads/stats.py). The earlier figure is kept under result.extra["whole_window"];
points whose figure already took every step (the input ended) are left as they are.

`--drained`: re-derive the window of every loader-fed point measured before loaders were drained
(workers now take the batches made before the window and drop them, torch_common.drain_ready):
from its stored steps, the window opens where the loop was seen to catch up with that backlog
(`workloads.stats.window_start`, at most a third of its sweep's budget past the warm-up). A
consumer faster than its loader spent the window's first seconds on that backlog at its own pace,
and the figure took them in. The figure, spread, window rates and status follow from the steps;
the counters stay those of the window as measured. Where the rule would have measured on past the
stored steps, the point stays as measured. The earlier figure is kept under result.extra["drained"].

`--drain-overrun`: re-derive the points whose drain went on at the loader's own pace. A drain that
began with the loader's queue already empty took its first fetch's wait for the pace of a ready
batch and dropped batch after batch as they were made (fixed in torch_common.drain_ready, which now
ends a drain after DRAIN_MAX_S): on an H100 at 2 vCPUs, 20 batches in 10.9 s, and the window that
followed, cut short by the budget, held 6 steps and read 791 images/s where the same shape's other
pass read 461. Those dropped batches were made at the loader's pace, as the window's were: the
figure of a point whose window came out short after a drain longer than DRAIN_MAX_S and than the
window itself is the samples of the drain and the window over their seconds. The earlier figure is
kept under result.extra["drain_overrun"], with the window's CPU time per sample, which no longer
goes with the figure (the drain's CPU time was not counted).

Usage: python benchmarks/rewindow_store.py STORE [--spread-target 0.05] [--first-seconds S --workload NAME | --whole-window | --drained | --drain-overrun]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workloads import stats  # noqa: E402
from workloads.torch_common import DRAIN_MAX_S  # noqa: E402


def _rederive(path: Path, rule, spread_target: float, n_windows: int, workload: str | None = None
              ) -> list[tuple[str, float, float]]:
    """Apply `rule(result) -> (steps, round_steps, note) | None` to every usable point not yet
    re-derived (of `workload` when given); returns (key, old throughput, new throughput) of each change."""
    changed = []
    conn = sqlite3.connect(path)
    with conn:
        query, args = "SELECT id, key, status, result FROM points", ()
        if workload is not None:
            query, args = query + " WHERE workload=?", (workload,)
        for point_id, key, status, raw in conn.execute(query, args).fetchall():
            result = json.loads(raw)
            extra = result.setdefault("extra", {})
            chosen = rule(result) if status in ("ok", "noisy") and "rewindowed" not in extra else None
            if chosen is None:
                continue
            steps, round_steps, note = chosen
            throughput, spread, rates = stats.summarize(steps, n_windows, round_steps)
            if throughput <= 0:
                continue
            extra["rewindowed"] = {"throughput": result["throughput"], "spread": result["spread"],
                                   "window_rates": result.get("window_rates"), **note}
            short = bool(extra.get("window_short"))
            new_status = "ok" if spread <= spread_target and not short else "noisy"
            result.update(throughput=throughput, spread=spread, window_rates=rates, status=new_status)
            conn.execute("UPDATE points SET throughput=?, spread=?, status=?, result=? WHERE id=?",
                         (throughput, spread, new_status, json.dumps(result), point_id))
            changed.append((key, extra["rewindowed"]["throughput"], throughput))
    conn.close()
    return changed


def rewindow(path: Path, spread_target: float = 0.05, n_windows: int = 5) -> list[tuple[str, float, float]]:
    """Round-aligned windows for every loader-fed point; returns the changes."""

    def rule(result: dict):
        workers = round_steps_of(result)
        if workers < 2:
            return None
        return result.get("steps") or [], workers, {"round_steps": workers}

    return _rederive(path, rule, spread_target, n_windows)


def round_steps_of(result: dict) -> int:
    """The loader round a worker's meter used: W workers feeding files, else single steps."""
    workers = result.get("extra", {}).get("loader_workers")
    if not isinstance(workers, int) or workers < 2 or result.get("config", {}).get("input") == "synthetic":
        return 1
    return workers


def whole_window(path: Path) -> list[tuple[str, float, float]]:
    """Every usable point's figure as its whole window's rate; returns (key, old, new) of each change."""
    changed = []
    conn = sqlite3.connect(path)
    with conn:
        for point_id, key, status, raw in conn.execute("SELECT id, key, status, result FROM points").fetchall():
            result = json.loads(raw)
            extra = result.setdefault("extra", {})
            if status not in ("ok", "noisy") or "whole_window" in extra or extra.get("figure"):
                continue
            rate = stats.window_rate(result.get("steps") or [], round_steps_of(result))
            if rate <= 0:
                continue
            extra["whole_window"] = {"throughput": result["throughput"], "rule": "whole window, not the median of sub-windows"}
            result["throughput"] = rate
            conn.execute("UPDATE points SET throughput=?, result=? WHERE id=?", (rate, json.dumps(result), point_id))
            changed.append((key, extra["whole_window"]["throughput"], rate))
    conn.close()
    return changed


MIN_STEPS = 10  # the least window the meter takes (workloads/measure.Meter's min_steps default)


def loader_fed(result: dict) -> bool:
    """A point whose batches came from loader workers reading files (not input already on the device)."""
    workers = result.get("extra", {}).get("loader_workers")
    return isinstance(workers, int) and workers >= 1 and result.get("config", {}).get("input") != "synthetic"


def drained(path: Path, spread_target: float = 0.05, n_windows: int = 5) -> list[tuple[str, float, float]]:
    """Every loader-fed point's window opened once the loop caught up with its loader's backlog (see
    the module's docstring); returns (key, old, new) of each change. Each point once."""
    changed = []
    conn = sqlite3.connect(path)
    budgets = {sweep_id: json.loads(config).get("time_budget_s")
               for sweep_id, config in conn.execute("SELECT id, config FROM sweeps")}
    with conn:
        rows = conn.execute("SELECT id, sweep_id, key, status, result FROM points").fetchall()
        for point_id, sweep_id, key, status, raw in rows:
            result = json.loads(raw)
            extra = result.setdefault("extra", {})
            steps = result.get("steps") or []
            budget = budgets.get(sweep_id)
            if (status not in ("ok", "noisy") or "drained" in extra or extra.get("figure") or not loader_fed(result)
                    or not budget or not steps or "drained_batches" in result.get("counters", {})):
                continue
            warmup = int(sum(1 for row in steps if len(row) > 2 and row[2]))
            rounds = round_steps_of(result)
            n = stats.drained_warmup([float(row[0]) for row in steps], warmup, budget / 3, rounds)
            marked = [[row[0], row[1], 1.0 if i < n else 0.0] for i, row in enumerate(steps)]
            throughput, spread, rates = stats.summarize(marked, n_windows, rounds)
            if n == warmup or throughput <= 0 or len(steps) - n < max(MIN_STEPS, 2 * rounds):
                # Nothing before the window to leave out; or the rule would have measured on past the
                # steps there are, with two rounds left at most (a job bound by its own speed, which
                # waits for no input, draining for a third of the budget: its rate is its own with or
                # without a backlog): as measured.
                extra["drained"] = {"drain_steps": 0, "as_measured": n != warmup}
                conn.execute("UPDATE points SET result=? WHERE id=?", (json.dumps(result), point_id))
                continue
            extra["drained"] = {"throughput": result["throughput"], "spread": result["spread"],
                                "window_rates": result.get("window_rates"), "drain_steps": n - warmup}
            counters = result.setdefault("counters", {})
            counters.update(warmup_steps=n, drain_steps=n - warmup)
            short = bool(extra.get("window_short"))
            new_status = "ok" if spread <= spread_target and not short else "noisy"
            result.update(throughput=throughput, spread=spread, window_rates=rates, status=new_status, steps=marked)
            conn.execute("UPDATE points SET throughput=?, spread=?, status=?, result=? WHERE id=?",
                         (throughput, spread, new_status, json.dumps(result), point_id))
            changed.append((key, extra["drained"]["throughput"], throughput))
    conn.close()
    return changed


def drain_overrun(path: Path) -> list[tuple[str, float, float]]:
    """Points whose drain ran at the loader's pace past DRAIN_MAX_S and left a short window take the
    drain's batches into their figure (see the module's docstring); returns (key, old, new) of each
    change. Each point once."""
    changed = []
    conn = sqlite3.connect(path)
    with conn:
        for point_id, key, status, raw in conn.execute("SELECT id, key, status, result FROM points").fetchall():
            result = json.loads(raw)
            extra, counters = result.setdefault("extra", {}), result.get("counters", {})
            drain_s = float(counters.get("drain_seconds") or 0.0)
            measured = [row for row in result.get("steps") or [] if not (len(row) > 2 and row[2])]
            window_s = sum(float(row[0]) for row in measured)
            samples = float(counters.get("drained_samples") or 0.0) + sum(float(row[1]) for row in measured)
            if (status not in ("ok", "noisy") or "drain_overrun" in extra or not extra.get("window_short")
                    or drain_s <= max(DRAIN_MAX_S, window_s) or samples <= 0):
                continue
            rate = samples / (drain_s + window_s)
            extra["drain_overrun"] = {"throughput": result["throughput"], "drain_seconds": drain_s,
                                      "cpu_ms_per_sample": counters.pop("cpu_ms_per_sample", None),
                                      "rule": "drained batches and the short window, over their seconds"}
            result["throughput"] = rate
            conn.execute("UPDATE points SET throughput=?, result=? WHERE id=?", (rate, json.dumps(result), point_id))
            changed.append((key, extra["drain_overrun"]["throughput"], rate))
    conn.close()
    return changed


def first_seconds(steps: list, seconds: float) -> list:
    """Warm-up steps, then the measured steps that ended within `seconds` of measured time."""
    out, measured = [], 0.0
    for row in steps:
        if len(row) > 2 and row[2]:
            out.append(row)
            continue
        measured += float(row[0])
        if measured > seconds:
            break
        out.append(row)
    return out


def rewindow_prefix(path: Path, workload: str, seconds: float, spread_target: float = 0.05,
                    n_windows: int = 5) -> list[tuple[str, float, float]]:
    """Re-derive `workload`'s points from their first `seconds` of measured steps (see the module's
    docstring); returns the changes."""
    note = {"rule": f"first {seconds:g} s of measured steps, before per-step spread checks"}
    return _rederive(path, lambda result: (first_seconds(result.get("steps") or [], seconds), 1, note),
                     spread_target, n_windows, workload)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--spread-target", type=float, default=0.05)
    parser.add_argument("--first-seconds", type=float, help="keep only this many seconds of measured steps")
    parser.add_argument("--workload", help="the workload whose points --first-seconds re-derives")
    parser.add_argument("--whole-window", action="store_true", help="every figure as its whole window's rate")
    parser.add_argument("--drained", action="store_true",
                        help="every loader-fed window opened once the loop caught up with its loader's backlog")
    parser.add_argument("--drain-overrun", action="store_true",
                        help="a short window after a drain at the loader's pace takes the drain's batches in")
    args = parser.parse_args(argv)
    if not args.store.is_file():
        print(f"rewindow_store: error: no store at {args.store}", file=sys.stderr)
        return 2
    if (args.first_seconds is None) != (args.workload is None):
        print("rewindow_store: error: --first-seconds and --workload go together", file=sys.stderr)
        return 2
    if sum(bool(x) for x in (args.whole_window, args.drained, args.drain_overrun, args.first_seconds is not None)) > 1:
        print("rewindow_store: error: --whole-window, --drained, --drain-overrun and --first-seconds go alone", file=sys.stderr)
        return 2
    if args.whole_window:
        changed = whole_window(args.store)
    elif args.drained:
        changed = drained(args.store, args.spread_target)
    elif args.drain_overrun:
        changed = drain_overrun(args.store)
    elif args.first_seconds is not None:
        changed = rewindow_prefix(args.store, args.workload, args.first_seconds, args.spread_target)
    else:
        changed = rewindow(args.store, args.spread_target)
    for key, old, new in changed:
        print(f"{key:<60} {old:>10.1f} -> {new:>10.1f}  ({new / old - 1:+.1%})")
    print(f"{len(changed)} point(s) re-derived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
