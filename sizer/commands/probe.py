"""`sizer probe`: what this host offers (CPU topology, RAM, GPUs, the disk under a path, limits)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer.commands.options import JsonOutput
from sizer.console import emit, print_table, styled
from sizer.probe import probe_host
from sizer.units import format_bytes


def _siblings_text(siblings: list[list[int]], limit: int = 16) -> str:
    groups = ["(" + ",".join(map(str, g)) + ")" for g in siblings]
    shown = " ".join(groups[:limit])
    return shown + (f" ... {len(groups) - limit} more" if len(groups) > limit else "")


def render_host(data: dict[str, Any]) -> None:
    cpu, mem, gpu, limits = data["cpu"], data["memory"], data["gpu"], data["limits"]
    table = Table(title=f"host {data['hostname']}", show_header=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value")
    table.add_row("kernel", data["kernel"])
    table.add_row("python", data["python"]["version"])
    table.add_row("CPU", f"{cpu['model']} ({cpu['architecture']})" + (", virtual machine" if cpu["virtual_machine"] else ""))
    table.add_row(
        "topology",
        f"{cpu['sockets']} socket(s), {cpu['physical_cores']} core(s), {cpu['hardware_threads']} hardware threads"
        f" ({'SMT, ' + str(cpu['threads_per_core']) + ' per core' if cpu['smt'] else 'no SMT'}),"
        f" {cpu['numa_nodes']} NUMA node(s)",
    )
    table.add_row("SMT siblings", _siblings_text(cpu["siblings"]))
    if cpu["usable"] != cpu["online"]:
        table.add_row("usable CPUs", ",".join(map(str, cpu["usable"])))
    ram = format_bytes(mem["total_bytes"])
    if mem["cgroup_limit_bytes"]:
        ram += f" (own cgroup limit {format_bytes(mem['cgroup_limit_bytes'])})"
    table.add_row("RAM", ram)
    for note in mem["notes"]:
        table.add_row("", styled((note, "dim")))
    if gpu["count"]:
        for device in gpu["devices"]:
            table.add_row(f"GPU {device['index']}", f"{device['name']}, {device['memory_gib']} GiB")
        table.add_row("GPU driver", f"{gpu['driver']} (CUDA {gpu.get('cuda_driver') or '?'})")
    else:
        table.add_row("GPU", f"none: {gpu['reason']}")
    for name, info in data["frameworks"].items():
        if info.get("version"):
            cuda = f" (built for CUDA {info['cuda']})" if info.get("cuda") else " (CPU only)"
            if info.get("cuda") and info.get("cuda_available") is False:
                cuda += ", no usable GPU"
            table.add_row(name, info["version"] + cuda)
        else:
            table.add_row(name, styled((str(info.get("reason", "not installed")), "dim")))
    if "error" in limits:
        table.add_row("limits", styled((str(limits["error"]), "yellow")))
    else:
        table.add_row("limit backend", f"{limits['backend']}: writable {', '.join(limits['writable']) or 'none'}")
        table.add_row("limit groups", f"{limits['root']} ({limits['placement']})")
        for note in limits["notes"]:
            table.add_row("", styled((note, "dim")))
    if "path" in data:
        where = data["path"]
        table.add_row("path", where["path"])
        table.add_row("filesystem", f"{where['fstype']} mounted at {where['mount_point']} from {where['mount_source']}")
        device = where["device"]
        if device:
            part = f", partition {device['partition']} ({device['partition_major_minor']})" if device["partition"] else ""
            kind = "" if device["rotational"] is None else (", rotational" if device["rotational"] else ", non-rotational")
            table.add_row("block device", f"{device['name']} ({device['major_minor']}){part}{kind}")
        else:
            table.add_row("block device", f"none: {where.get('note', '')}")
    print_table(table)


def probe(
    path: Annotated[
        Optional[str], typer.Option("--path", help="Also describe the filesystem and block device holding this path.")
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Describe this host: CPU topology, RAM, GPUs, the disk under a path and the limit backend.

    The limit backend (cgroup v2, cgroup v1 or affinity only) and its writable controllers are found by creating and removing a probe cgroup. No GPU is a normal answer.

    Example: sizer probe --path /data/imagenet --json
    """  # noqa: E501 (typer shows the docstring's line breaks as written)
    emit(probe_host(path), as_json, render_host)
