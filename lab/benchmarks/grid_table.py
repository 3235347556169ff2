"""A store's grid as Markdown: one table per workload variant, vCPUs down, (disk class, RAM) across.

Each cell is the point's figure (its unit in the table's title), `OOM` / `timeout` / `error` for
points that did not measure, `d` after a disk-bound point, `-` where the grid has no point; a shape
measured in several passes shows its median and, in brackets, the range of its passes. This is
how the tables of docs/PERFORMANCE.md are made.

Usage: python lab/benchmarks/grid_table.py --store examples/h200/sizer.sqlite [--workload NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.errors import SizerError  # noqa: E402


def _cell(point) -> str:
    if point is None:
        return "-"
    if point.status not in ("ok", "noisy"):
        return point.status.upper() if point.status == "oom" else point.status
    text = f"{point.throughput:,.0f}" + (" d" if point.bottleneck == "disk" else "")
    rates = list(point.pass_rates)
    return text + (f" ({min(rates):,.0f}-{max(rates):,.0f})" if len(rates) > 1 else "")


DISK_ORDER = ("local-nvme", "ssd", "standard")


def _column_order(column: tuple[str, float]) -> tuple:
    """Disk classes fastest first (others after them), then RAM."""
    disk, _ = column
    return (DISK_ORDER.index(disk) if disk in DISK_ORDER else len(DISK_ORDER), column)


def grid_tables(points, only: str | None = None) -> list[str]:
    from sizer.model import group_points
    from sizer.points import combine_passes
    from sizer.variants import SYNTHETIC_INPUT

    out = []
    for name, group in sorted(group_points(combine_passes(points)).items()):
        if only and only not in name:
            continue
        real = [p for p in group if p.input != SYNTHETIC_INPUT]
        if not real:
            continue
        columns = sorted({(p.disk_class, p.ram_gib) for p in real}, key=_column_order)
        cells = {(p.vcpus, p.disk_class, p.ram_gib): p for p in real}
        lines = [f"{name} ({real[0].unit}; d = disk-bound)", "",
                 "| vCPUs | " + " | ".join(f"{d} {r:g}G" for d, r in columns) + " |",
                 "|---|" + "---|" * len(columns)]
        for v in sorted({p.vcpus for p in real}):
            lines.append(f"| {v} | " + " | ".join(_cell(cells.get((v, d, r))) for d, r in columns) + " |")
        ceilings = [p for p in group if p.input == SYNTHETIC_INPUT and p.usable]
        for p in ceilings:
            lines.append(f"\nInput already on the device ({p.vcpus} vCPUs): {p.throughput:,.0f} {p.unit}")
        out.append("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--workload", help="only variants whose name contains this")
    args = parser.parse_args(argv)
    from sizer.commands.model import load_points

    try:
        tables = grid_tables(load_points(args.store, None), args.workload)
    except SizerError as exc:
        print(f"grid_table: error: {exc}", file=sys.stderr)
        return 2
    print("\n\n".join(tables) if tables else "grid_table: no points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
