"""Workloads of installed packages: the entry-point group `sizer.workloads`.

A distribution declares, in its entry_points.txt (or pyproject's [project.entry-points]):

    [sizer.workloads]
    my-job = my_package.sizer_jobs             # a module: the Workload classes it registers
    other  = my_package.jobs:OtherWorkload     # one Workload class

Each class gets the origin "plugin <distribution>". A plugin that fails to import, names what is no
Workload class, or takes a name another workload has raises PluginError naming the plugin. Standard
library only (importlib.metadata, Python 3.8 and later).
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from workloads.protocol import DuplicateName, Workload, register, registry

GROUP = "sizer.workloads"


class PluginError(Exception):
    """An installed plugin that cannot be used; the message names it and says why."""

    exit_code = 2


def _entry_points() -> Iterator[tuple[str, Any]]:
    """(distribution name and version, entry point) of the group, once per distribution and name:
    a distribution found twice on the path (an editable install beside a copy) counts once."""
    from importlib import metadata

    seen = set()
    for dist in metadata.distributions():
        for entry in dist.entry_points:
            if entry.group != GROUP:
                continue
            name = dist.metadata["Name"] or "?"  # read only for a plugin: reading every package's is slow
            if (name, entry.name) in seen:
                continue
            seen.add((name, entry.name))
            yield f"{name} {dist.version}", entry


def load_plugins() -> None:
    """Register every plugin's workloads, after the built-in ones (so a clash names the plugin)."""
    for dist, entry in _entry_points():
        where = f"plugin {entry.name!r} ({entry.value}) of {dist}"
        before = registry()
        try:
            loaded = entry.load()
        except DuplicateName as exc:  # a class it registered as it was imported
            raise PluginError(f"{where}: {exc}; rename the plugin's") from None
        except Exception as exc:  # any failure of someone else's import is that plugin's, named
            raise PluginError(f"{where} failed to load: {type(exc).__name__}: {exc}") from None
        _register(loaded, where, before)
        origin = f"plugin {dist.split()[0]}"
        for name, cls in registry().items():
            if name not in before:
                cls.origin = origin


def _register(loaded: Any, where: str, before: dict[str, type[Workload]]) -> None:
    """A class is registered here; a module has registered its classes as it was imported."""
    if inspect.ismodule(loaded):
        if len(registry()) == len(before):
            raise PluginError(f"{where}: the module registers no workload (decorate its classes with "
                              "workloads.protocol.register)")
        return
    if not (inspect.isclass(loaded) and issubclass(loaded, Workload)):
        raise PluginError(f"{where} names {loaded!r}, which is no Workload class")
    try:
        register(loaded)
    except DuplicateName as exc:
        raise PluginError(f"{where}: {exc}; rename the plugin's") from None
    except ValueError as exc:  # no name
        raise PluginError(f"{where}: {exc}") from None
