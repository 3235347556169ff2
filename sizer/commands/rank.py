"""`sizer recommend --gpu any`'s tables: each workload's GPU types by cost per million samples."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from sizer.console import console, print_table, styled
from sizer.units import unit_noun


def render_ranking(data: dict[str, Any]) -> None:
    for entry in data["rankings"]:
        if not entry["ranking"]:
            console.print(styled((entry["workload"], "bold"), f": {entry['reason']}"))
            continue
        table = Table(title=f"{entry['workload']}: every GPU type by cost per million {unit_noun(entry['unit'])} "
                            f"(within {data['tolerance']:.0%} of each GPU's ceiling)", title_justify="left")
        for column in ("#", "GPU", "basis", "instance", "disk", "vCPUs", "predicted", "$/GPU-hour", "$/million"):
            table.add_column(column, justify="right" if column in ("#", "vCPUs", "predicted", "$/GPU-hour", "$/million")
                             else "left")
        rank = 0
        for row in entry["ranking"]:
            chosen = row["chosen"]
            if row["left_out"] or chosen is None:
                continue
            rank += 1
            table.add_row(str(rank), row["gpu"], row["basis"], f"{chosen['instance_type']} ({chosen['cloud']})",
                          chosen["disk_class"], f"{chosen['share_vcpus']:g}", f"{chosen['predicted']:,.0f} {entry['unit']}",
                          f"${chosen['price_per_gpu_hour']:,.3f}", _money(chosen["cost_per_million"]))
        print_table(table, drop=("disk", "vCPUs"))
        for row in entry["ranking"]:
            if row["left_out"] or row["chosen"] is None:
                console.print(styled("  ", (f"{row['gpu']}: {row['reason']}", "dim")))


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:,.3f}"


