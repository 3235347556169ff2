"""The pairs of a store measured with `sizer colocate` (lab/gpu/colocate.sh): one row per pair with
r_AB and r_BA, whether sharing is faster, the GPU's busy share alone (each job) and shared, the PCIe
host-to-device traffic alone (the two jobs' sum) and shared, and each slowdown as the model predicts
it with the pair held out (`sizer.model.colocation`) and its error; then the mean held-out error and
the seed study's two questions: does the job that uses less of the GPU suffer more, and does the
GPU's occupancy stay while host copies slow?

usage: python3 lab/gpu/colocate_table.py STORE [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sizer.model.colocation import fit_colocation
from sizer.model.pairs import pair_records
from sizer.store import Store


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def rows_of(store: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with Store(store, create=False) as opened:
        points = opened.points()
    records = [r for r in pair_records(points) if r.measured]
    models = {s: fit_colocation(records, s) for s in sorted({r.sharing for r in records})}
    shared_pcie: dict[str, list[float]] = {}
    for p in points:
        if p.partner and p.pcie_rx_mbps is not None:
            shared_pcie.setdefault(p.share_of + "|" + "+".join(sorted((p.job, p.partner))), []).append(p.pcie_rx_mbps)
    rows = []
    for r in records:
        a, b = r.alone
        held = {h.job: h for h in models[r.sharing].held_out if h.pair == r.key}
        pcie_alone = [x.copy_gbps for x in (a, b) if x is not None and x.copy_gbps is not None]
        pcie_shared = shared_pcie.get(r.share_of + "|" + "+".join(r.jobs))
        r_ab, r_ba = r.slowdowns
        rows.append({
            "pair": f"{r.jobs[0]} + {r.jobs[1]}", "sharing": r.sharing, "r_ab": r_ab, "r_ba": r_ba,
            "shared_faster": r.shared_faster,
            "gpu_alone_pct": [None if x is None or x.gpu_busy is None else 100 * x.gpu_busy for x in (a, b)],
            "gpu_shared_pct": r.gpu_util_shared_pct,
            "pcie_alone_gbps": sum(pcie_alone) if len(pcie_alone) == 2 else None,
            "pcie_shared_gbps": None if not pcie_shared else max(pcie_shared) / 1000.0,
            "predicted": [None if job not in held else held[job].predicted for job in r.jobs],
            "error": [None if job not in held else held[job].error for job in r.jobs],
        })
    return rows, {s: {"pairs": m.pairs, "mean_error": m.mean_error, "coefficients": dict(m.coefficients)}
                  for s, m in models.items()}


def questions(rows: list[dict[str, Any]]) -> list[str]:
    """The seed study's two findings, asked of these pairs."""
    smaller, occupancy = 0, []
    counted = 0
    for row in rows:
        ga, gb = row["gpu_alone_pct"]
        if ga is None or gb is None or ga == gb:
            continue
        counted += 1
        less_gpu_r = row["r_ab"] if ga < gb else row["r_ba"]
        if less_gpu_r >= max(row["r_ab"], row["r_ba"]):
            smaller += 1
        if row["gpu_shared_pct"] is not None:
            occupancy.append(row["gpu_shared_pct"] - min(100.0, ga + gb))
    lines = [f"the job using less of the GPU alone slowed more in {smaller} of {counted} pairs"]
    if occupancy:
        middle = sorted(occupancy)[len(occupancy) // 2]
        lines.append(f"GPU busy shared minus the sum alone (capped at 100%): median {middle:+.0f} points "
                     "(0: the GPU's occupancy is what the two jobs ask of it)")
    copies = [(r["pcie_alone_gbps"], r["pcie_shared_gbps"]) for r in rows if r["pcie_alone_gbps"] and r["pcie_shared_gbps"]]
    if copies:
        lines.append("host-to-device copies shared against the sum alone: "
                     + ", ".join(f"{s / a:.0%}" for a, s in copies))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    if not args.store.exists():
        print(f"no store at {args.store}", file=sys.stderr)
        return 2
    rows, models = rows_of(args.store)
    print(f"{'pair':<52} {'share':<5} {'r_AB':>5} {'r_BA':>5} {'faster':>6} {'GPU% alone':>11} {'shared':>6} "
          f"{'pred r_AB':>9} {'err':>6} {'pred r_BA':>9} {'err':>6}")
    for row in rows:
        pred, err = row["predicted"], row["error"]
        alone = f"{_pct(row['gpu_alone_pct'][0]):>5}/{_pct(row['gpu_alone_pct'][1]):<5}"
        print(f"{row['pair'][:52]:<52} {row['sharing']:<5} {row['r_ab']:>5.2f} {row['r_ba']:>5.2f} "
              f"{'yes' if row['shared_faster'] else 'no':>6} {alone} {_pct(row['gpu_shared_pct']):>6} "
              f"{pred[0] or 0:>9.2f} {err[0] or 0:>+6.1%} {pred[1] or 0:>9.2f} {err[1] or 0:>+6.1%}")
    for sharing, model in models.items():
        mean = model["mean_error"]
        print(f"{sharing}-shared: {model['pairs']} pairs, held-out error "
              f"{'-' if mean is None else f'{mean:.1%}'} (mean); coefficients {model['coefficients']}")
    for line in questions(rows):
        print(line)
    if args.json_out:
        args.json_out.write_text(json.dumps({"pairs": rows, "models": models, "questions": questions(rows)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
