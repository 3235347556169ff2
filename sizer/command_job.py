"""The user's own command as a workload of `sizer run` and `sizer sweep`: the command-line options
checked before any work, then made into the workload class the sweep plans (workloads.command)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizer.errors import SizerError
from workloads import PluginError, load_all
from workloads.command import define

DEFAULT_NAME = "command"


@dataclass(frozen=True)
class CommandJob:
    """A command job as given: the command line (with placeholders), its name in the store and the
    report, where its progress comes from (a regex over its output, else the helper), its unit and
    the dataset folder it reads (None: none)."""
    command: str
    name: str = DEFAULT_NAME
    metric_regex: str = ""
    unit: str = "samples/s"
    data: Path | None = None


def checked_data_folder(path: Path) -> Path:
    """A command's --data: an existing folder sizer may read, never generated."""
    path = path.expanduser()
    if not path.is_dir():
        raise SizerError(f"--data {path}: {'not a folder' if path.exists() else 'no such folder'} "
                         "(a command job reads its own dataset; sizer does not make one)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SizerError(f"--data {path}: not readable")
    return path.resolve()


def define_command_job(job: CommandJob, cwd: Path | None = None) -> str:
    """Check the job (its name, placeholders, regex, unit and data folder) and register its
    workload class, which runs the command in `cwd` (default: here); returns the workload's name.
    A SizerError names the first problem."""
    try:
        load_all()  # the built-in and plugin names first: the job's may not take one of theirs
    except PluginError as exc:
        raise SizerError(str(exc)) from None
    data = checked_data_folder(job.data) if job.data is not None else None
    settings: dict[str, Any] = {
        "command": job.command,
        "metric_regex": job.metric_regex or "",
        "unit": job.unit,
        "cwd": str((cwd or Path.cwd()).resolve()),
        "data": str(data or ""),
    }
    try:
        define(job.name, settings)
    except ValueError as exc:
        raise SizerError(str(exc)) from None
    return job.name


def command_options_problem(command: str | None, workload_given: bool, name: str | None, metric_regex: str | None,
                            unit: str | None, workload_option: str = "WORKLOAD") -> str | None:
    """What is wrong with the mix of --command and its companions on a command line, or None:
    exactly one of --command and `workload_option`; --name, --metric-regex and --unit only with
    --command."""
    if command is not None and workload_given:
        return f"give either {workload_option} or --command, not both"
    if command is None and not workload_given and workload_option == "WORKLOAD":
        return "give a WORKLOAD (see `sizer workloads`) or --command 'CMD'"
    if command is None:
        for option, value in (("--name", name), ("--metric-regex", metric_regex), ("--unit", unit)):
            if value is not None:
                return f"{option} goes with --command"
    return None
