"""`sizer disks verify`: does a disk-class throttle deliver its cap? fio inside a throttled group."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer import disks
from sizer.commands.options import DiskClassesFile, JsonOutput, limits_flag
from sizer.console import emit, print_table, styled
from sizer.diskclasses import get_disk_class, load_disk_classes
from sizer.errors import SizerError
from sizer.limits import DiskThrottle, LimitRequest, block_device_for, cleanup_leftovers, detect_backend, device_name
from sizer.lock import HostLock
from sizer.shapes import host_cpus
from sizer.units import format_bytes, parse_size

TOLERANCE = 0.15
SEQ_BS = 1024 * 1024


def verify_class(
    class_name: str,
    path: Path,
    size_bytes: int = 256 * 1024 * 1024,
    seconds: int = 5,
    disk_classes_file: str | None = None,
    limits: str | None = None,
    lock_path: Path | None = None,
) -> dict[str, Any]:
    """Sequential 1 MiB direct reads on a scratch file under `path`, in a group throttled as
    `class_name`; the measured rate against the class's cap."""
    disk = get_disk_class(class_name, load_disk_classes(disk_classes_file))
    if not disks.fio_available():
        raise SizerError(disks.FIO_INSTALL_HINT)
    if seconds < 1:
        raise SizerError(f"--seconds must be at least 1, not {seconds}")
    directory = disks.check_directory(path, size_bytes)
    device = block_device_for(directory)
    if device is None:
        raise SizerError(f"{path} is not on a block device (tmpfs or overlay?): nothing to throttle there")
    backend = detect_backend(limits)
    if disk.throttled and backend.name == "affinity":
        raise SizerError(f"disk class {class_name} needs a cgroup throttle, and this host offers none to sizer "
                         f"({'; '.join(backend.info().notes)})")
    throttle = DiskThrottle(device, read_bps=disk.read_bps, write_bps=disk.write_bps,
                            read_iops=disk.read_iops, write_iops=disk.write_iops)
    with HostLock(lock_path):
        cleanup_leftovers()
        request = LimitRequest(cpus=host_cpus().all(), throttle=throttle, label=f"verify-{class_name}")
        with backend.create(request) as group:
            before = group.read_bytes()
            job = disks.run_fio_job(directory, "read", SEQ_BS, size_bytes, seconds, direct=True, preexec_fn=group.preexec())
            cgroup_read = group.read_bytes() - before
            enforcement = dataclasses.asdict(group.enforcement())
    measured = float(job.get("read_mbps") or 0.0)
    cap = disk.read_mbps
    ratio = measured / cap if cap else None
    within = None if ratio is None else abs(ratio - 1.0) <= TOLERANCE
    return {
        "class": class_name,
        "path": str(directory),
        "device": device,
        "device_name": device_name(device),
        "cap_mbps": cap,
        "cap_iops": disk.read_iops,
        "measured_mbps": round(measured, 2),
        "measured_iops": job.get("read_iops"),
        "lat_p50_us": job.get("lat_p50_us"),
        "lat_p99_us": job.get("lat_p99_us"),
        "ratio": None if ratio is None else round(ratio, 4),
        "tolerance": TOLERANCE,
        "within_tolerance": within,
        "throttled": disk.throttled,
        "cgroup_read_bytes": cgroup_read,
        "size_bytes": size_bytes,
        "seconds": seconds,
        "enforcement": enforcement,
        "fio_command": job.get("command"),
    }


def render_verify(data: dict[str, Any]) -> None:
    table = Table(title=f"disk class {data['class']} on {data['device_name']} ({data['device']}), {data['path']}",
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value")
    cap = f"{data['cap_mbps']:g} MB/s" if data["cap_mbps"] else "none (the device's own)"
    table.add_row("cap", cap + (f", {data['cap_iops']} IOPS" if data["cap_iops"] else ""))
    table.add_row("measured", f"{data['measured_mbps']:,.1f} MB/s sequential 1 MiB direct reads "
                              f"({data['measured_iops'] or 0:,.0f} IOPS, p99 {data['lat_p99_us'] or 0:,.0f} µs)")
    table.add_row("read through the group", format_bytes(data["cgroup_read_bytes"]))
    if data["within_tolerance"] is None:
        table.add_row("verdict", "not throttled: this is the device's own rate")
    else:
        colour = "green" if data["within_tolerance"] else "red"
        word = "within" if data["within_tolerance"] else "NOT within"
        table.add_row("verdict", styled((f"{word} {data['tolerance']:.0%} of the cap", colour),
                                        f" (measured/cap {data['ratio']:.3f})"))
    table.add_row("enforced", f"{data['enforcement']['backend']}: {data['enforcement']['disk']}")
    print_table(table)


def verify(
    path: Annotated[Path, typer.Argument(help="A directory on the disk to test; a scratch file is written there and removed.")],
    class_: Annotated[
        str,
        typer.Option("--class", help="Disk class to verify: local-nvme, ssd, standard or one of --disk-classes."),
    ],
    size: Annotated[str, typer.Option("--size", help="Scratch file size (e.g. 256M).")] = "256M",
    seconds: Annotated[int, typer.Option("--seconds", min=1, max=600, help="Seconds of measured reads.")] = 5,
    disk_classes: DiskClassesFile = None,
    limits: Annotated[Optional[str], limits_flag("Limit backend: auto, cgroup-v2, cgroup-v1.")] = None,
    as_json: JsonOutput = False,
) -> None:
    """Check that a disk class's throttle delivers its cap: fio reads under the throttle vs the cap.

    Sequential 1 MiB direct reads of a scratch file under PATH run inside a cgroup throttled as the
    class; the measured MB/s must be within 15% of the cap (exit 1 otherwise). An unthrottled class
    (local-nvme) reports the device's own rate.

    Example: sizer disks verify --class standard /data --size 256M --json
    """
    data = verify_class(class_, path, parse_size(size), seconds, str(disk_classes) if disk_classes else None, limits)
    emit(data, as_json, render_verify)
    if data["within_tolerance"] is False:
        raise typer.Exit(1)
