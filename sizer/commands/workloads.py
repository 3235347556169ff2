"""`sizer workloads`: every workload sizer can measure, with its unit, framework, profiles and origin
(built-in, a plugin's distribution, or a user's command)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

import workloads
from sizer.commands.options import JsonOutput
from sizer.console import console, emit, print_table


def workload_rows() -> list[dict[str, Any]]:
    """describe() of every registered workload (MXNet ones when their module is present, plugins of
    the `sizer.workloads` entry points), by name, with each profile's default config."""
    rows = []
    for _name, cls in sorted(workloads.load_all().items()):
        row = cls.describe()
        row["defaults"] = {profile: dict(cfg) for profile, cfg in sorted(cls.defaults.items())}
        rows.append(row)
    return rows


def _render(rows: list[dict[str, Any]]) -> None:
    profile_sets = {tuple(row["profiles"]) for row in rows}
    shared = profile_sets.pop() if len(profile_sets) == 1 else None
    table = Table(title=f"{len(rows)} workloads", title_justify="left", box=box.SIMPLE_HEAD)
    # The origin gets a column where some workload is not built-in (a plugin's, a command job's).
    origins = {row["origin"] for row in rows}
    by_origin = origins != {"built-in"}
    columns = ["name", "framework", "unit", "dataset"] + ([] if shared else ["profiles"]) + ["stresses"]
    columns += ["origin"] if by_origin else []
    for column in columns:
        table.add_column(column, no_wrap=column != "stresses", min_width=12 if column == "stresses" else None)
    own_interpreter = False
    for row in rows:
        framework = row["framework"]
        if row["interpreter"] != "sizer":
            framework += " *"
            own_interpreter = True
        cells = [row["name"], framework, row["unit"], row["dataset"] or "-"]
        if not shared:
            cells.append(" ".join(row["profiles"]))
        table.add_row(*cells, row["stresses"], *([row["origin"]] if by_origin else []))
    print_table(table, drop=("dataset", "profiles"))
    if shared:
        console.print(f"Every workload has the profiles: {', '.join(shared)}.")
    if not by_origin:
        console.print("Every workload is built-in; installed packages add theirs through the `sizer.workloads` "
                      "entry points (origin \"plugin DIST\").")
    if own_interpreter:
        console.print("* runs in its own interpreter (the MXNet environment, `make mxnet-env`).")
    console.print(
        "gpu: full-size models, needs a CUDA GPU; cpu-small: smaller models and images for hosts without one. "
        "Default configs: sizer workloads --json"
    )


def list_workloads(as_json: JsonOutput = False) -> None:
    """List the workloads: name, framework, unit, profiles, dataset, what they stress, interpreter
    and origin: built-in, "plugin DIST" (an installed package's `sizer.workloads` entry point) or
    command (your own job: see docs/commands.md).

    With --json, each entry also carries the default config of every profile.

    Example: sizer workloads --json
    """
    emit(workload_rows(), as_json, _render)
