"""How much of a sweep's point-to-point scatter is the host's moment rather than the shape?

On a shared (virtual) host a vCPU's speed changes over minutes. Every point records a single-thread
probe of one of its vCPUs just before and after it (`extra.host_speed`, MB/s of zlib). For each
workload this prints, over
points whose vCPUs were busy (CPU util per vCPU >= --busy, default 0.85, or all points of a job
bound by one thread's speed, with --all):

- the scatter of the rate at each vCPU count (max / min, points of one count should agree),
- the correlation of the rate, relative to its vCPU count's median, with the probe relative to the
  workload's median probe, and the scatter once each rate is divided by its relative probe.

A correlation near 1 and a smaller scatter after dividing say the scatter was the host's moment.

Usage: python benchmarks/host_drift.py --store gpu-runs/sizer.sqlite [--all] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sizer.errors import SizerError  # noqa: E402
from sizer.points import Point  # noqa: E402


def host_speed(point: Point) -> float | None:
    """The mean of a point's probe before and after it, or None for a point stored without one."""
    speed = (point.extra or {}).get("host_speed") or {}
    values = [speed.get(k) for k in ("before_mbps", "after_mbps")]
    values = [float(x) for x in values if isinstance(x, (int, float)) and x > 0]
    return sum(values) / len(values) if values else None


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sxx * syy) ** 0.5


def _scatter(groups: dict[int, list[float]]) -> float | None:
    """The largest max/min - 1 among vCPU counts with at least two points."""
    ratios = [max(g) / min(g) - 1.0 for g in groups.values() if len(g) >= 2 and min(g) > 0]
    return max(ratios) if ratios else None


def drift(points: list[Point], busy: float = 0.85, every_point: bool = False) -> dict:
    """Scatter, correlation with the probe, and scatter after dividing by it, for one workload."""
    chosen = [p for p in points if p.usable and host_speed(p)
              and (every_point or (p.cpu_util_per_vcpu or 0.0) >= busy)]
    probes = [host_speed(p) for p in chosen]
    out = {"points": len(chosen), "probe_min": None, "probe_max": None, "correlation": None,
           "scatter": None, "scatter_normalized": None}
    if len(chosen) < 3:
        return out
    probe_median = statistics.median(probes)
    by_vcpus: dict[int, list[Point]] = {}
    for p in chosen:
        by_vcpus.setdefault(p.vcpus, []).append(p)
    rel_rate, rel_probe = [], []
    raw: dict[int, list[float]] = {}
    normalized: dict[int, list[float]] = {}
    for v, group in by_vcpus.items():
        median_rate = statistics.median(p.throughput for p in group)
        for p in group:
            speed = host_speed(p) / probe_median
            rel_rate.append(p.throughput / median_rate)
            rel_probe.append(speed)
            raw.setdefault(v, []).append(p.throughput)
            normalized.setdefault(v, []).append(p.throughput / speed)
    out.update(probe_min=min(probes), probe_max=max(probes), correlation=_pearson(rel_probe, rel_rate),
               scatter=_scatter(raw), scatter_normalized=_scatter(normalized))
    return out


def _load(store: Path) -> dict[str, list[Point]]:
    from sizer.commands.model import load_points
    from sizer.model import group_points

    return group_points(load_points(store, None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--busy", type=float, default=0.85)
    parser.add_argument("--all", action="store_true", help="every point, not only those with busy vCPUs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        groups = _load(args.store)
    except SizerError as exc:
        print(f"host_drift: error: {exc}", file=sys.stderr)
        return 2
    rows = {name: drift(points, args.busy, args.all) for name, points in sorted(groups.items())}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def pct(x):
        return "-" if x is None else f"{x:.0%}"

    print(f"{'workload':<34} {'pts':>4} {'probe MB/s':>14} {'r':>6} {'scatter':>8} {'divided':>8}")
    for name, r in rows.items():
        probe = "-" if r["probe_min"] is None else f"{r['probe_min']:.0f}-{r['probe_max']:.0f}"
        corr = "-" if r["correlation"] is None else f"{r['correlation']:.2f}"
        print(f"{name:<34} {r['points']:>4} {probe:>14} {corr:>6} {pct(r['scatter']):>8} "
              f"{pct(r['scatter_normalized']):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
