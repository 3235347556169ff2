"""`sizer sweep --ray ADDRESS`: the fleet options of `sizer sweep` and how a fleet sweep is shown
(the library is sizer.fleet; docs/fleet.md)."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Optional

import typer
from rich.table import Table

from sizer.console import console, print_table, styled
from sizer.fleet.cluster import require_ray
from sizer.fleet.options import fleet_options
from sizer.units import parse_duration

RayAddress = Annotated[Optional[str], typer.Option(
    "--ray",
    metavar="ADDRESS",
    help="Measure on the nodes of a Ray cluster (a fleet sweep, docs/fleet.md): its head's host:port, "
         "ray://host:port or auto. Each point runs on a node of its target type, one point per node at a "
         "time; results come back into the one local store. Needs pip install 'sizer[ray]'. "
         "Example: --ray auto --fleet-targets host:gpu-a,host:gpu-b")]
FleetTargets = Annotated[Optional[str], typer.Option(
    "--fleet-targets",
    help="The node types to measure on, each a custom resource of its nodes: instance:<type> (a real instance "
         "type) or host:<name> (a host that emulates shapes), e.g. instance:g5.2xlarge,instance:g6.2xlarge. "
         "Default: every such resource the cluster's nodes offer.")]
FleetNodeWait = Annotated[Optional[str], typer.Option(
    "--fleet-node-wait",
    help="How long a target may have no node (none started yet, or its node lost) before its points are "
         "stored as lost (e.g. 30s, 10m; default 10m).")]
FleetWholeNode = Annotated[bool, typer.Option(
    "--fleet-whole-node",
    help="Each target also measures each workload at its whole node (all its vCPUs and RAM, the first "
         "unthrottled disk class of --disks): a point of the real instance, marked real in the report.")]


def fleet_from_options(address: str | None, targets: str | None, node_wait: str | None, whole_node: bool) -> Any:
    """The FleetOptions of `sizer sweep`'s fleet options; None without --ray. Ray itself is needed
    (one line and exit 2 without it) before any work."""
    wait = parse_duration(node_wait, "--fleet-node-wait") if node_wait else None
    fleet = fleet_options(address, targets, wait, whole_node)
    if fleet is not None:
        require_ray()
    return fleet


def renderer(data: dict[str, Any], dry_run: bool, plain: Callable[[dict[str, Any]], None],
             plain_dry_run: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """The render function of a sweep's summary: a fleet's, where it is one."""
    if "fleet" not in data:
        return plain_dry_run if dry_run else plain
    if dry_run:
        return lambda d: render_fleet_dry_run(d, plain_dry_run)
    return render_fleet


def render_fleet_dry_run(data: dict[str, Any], render_plan: Callable[[dict[str, Any]], None]) -> None:
    """Each target's plan, as a node of it made it."""
    for target, planned in data["fleet"]["targets"].items():
        console.print(styled((str(target), "bold"), f": planned on {planned['planned_on']} ({planned['node']})"))
        render_plan(planned)


def _rate(row: dict[str, Any]) -> str:
    rate = row.get("throughput") or 0.0
    if rate <= 0:
        return "-"
    return (f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}") + f" {row.get('unit', '')}"


def render_fleet(data: dict[str, Any]) -> None:
    fleet = data["fleet"]
    table = Table(title=f"fleet sweep at {fleet['address']}: {len(data['points'])} points", title_justify="left")
    for column in ("target", "workload", "shape (vCPU / GiB / disk)", "status", "throughput", "node"):
        table.add_column(column, justify="right" if column == "throughput" else "left", no_wrap=column == "throughput")
    for p in data["points"]:
        status = p["status"] + (" (stored)" if p.get("stored") else "") + (" (lost)" if p.get("lost") else "")
        shape = f"{p['vcpus']} / {p['ram_gib']:g} / {p['disk_class']}" + (", real" if p.get("real_instance") else "")
        table.add_row(p.get("target", ""), p["workload"], shape, status, _rate(p), p.get("node") or "")
    print_table(table, drop=("node",))
    for target, summary in fleet["targets"].items():
        lost = f", {len(summary['lost'])} lost" if summary["lost"] else ""
        console.print(f"{target}: {summary['stored']} of {summary['points']} points stored{lost}; "
                      f"hosts: {', '.join(summary['hosts']) or '-'}")
    for name, path in (data.get("outputs") or {}).items():
        console.print(f"{name}: {path}")
    console.print(f"store: {data.get('store')}")
    for note in data.get("notes", []):
        console.print(styled((note, "yellow")))
