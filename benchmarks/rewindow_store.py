"""Re-derive stored points' figures from their raw steps with today's window rule.

Points measured before windows were aligned to whole loader rounds (workloads/stats.py) could end
with a window holding only part of a burst (seen on an H200: one window of 146,202 images/s beside
four of about 400). The raw steps are in every stored result, so the figures can be derived again
with the current rule: median window rate, spread, window rates and the ok/noisy status. Each
changed point keeps its previous figures under result.extra["rewindowed"]. Points already
derived this way are left alone, so running it twice changes nothing.

Usage: python benchmarks/rewindow_store.py STORE [--spread-target 0.05]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workloads import stats  # noqa: E402


def rewindow(path: Path, spread_target: float = 0.05, n_windows: int = 5) -> list[tuple[str, float, float]]:
    """Returns (key, old throughput, new throughput) of every point changed."""
    changed = []
    conn = sqlite3.connect(path)
    with conn:
        for point_id, key, status, raw in conn.execute("SELECT id, key, status, result FROM points").fetchall():
            result = json.loads(raw)
            extra = result.setdefault("extra", {})
            workers = extra.get("loader_workers")
            if status not in ("ok", "noisy") or "rewindowed" in extra or not isinstance(workers, int) or workers < 2:
                continue
            throughput, spread, rates = stats.summarize(result.get("steps") or [], n_windows, workers)
            if throughput <= 0:
                continue
            extra["rewindowed"] = {"throughput": result["throughput"], "spread": result["spread"],
                                   "window_rates": result.get("window_rates"), "round_steps": workers}
            short = bool(extra.get("window_short"))
            new_status = "ok" if spread <= spread_target and not short else "noisy"
            result.update(throughput=throughput, spread=spread, window_rates=rates, status=new_status)
            conn.execute("UPDATE points SET throughput=?, spread=?, status=?, result=? WHERE id=?",
                         (throughput, spread, new_status, json.dumps(result), point_id))
            changed.append((key, extra["rewindowed"]["throughput"], throughput))
    conn.close()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--spread-target", type=float, default=0.05)
    args = parser.parse_args(argv)
    if not args.store.is_file():
        print(f"rewindow_store: error: no store at {args.store}", file=sys.stderr)
        return 2
    changed = rewindow(args.store, args.spread_target)
    for key, old, new in changed:
        print(f"{key:<60} {old:>10.1f} -> {new:>10.1f}  ({new / old - 1:+.1%})")
    print(f"{len(changed)} point(s) re-derived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
