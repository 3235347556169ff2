"""Measurement code: one module per workload, discovered through one registry.

Imports only the standard library, each workload's own framework (lazily) and the protocol, so the
same package runs inside another interpreter (the MXNet environment). Besides the built-in modules,
installed packages add workloads through the entry-point group `sizer.workloads` (workloads.plugins),
and a user's command becomes one at plan time (workloads.command).
"""

from __future__ import annotations

import importlib

from workloads.plugins import PluginError, load_plugins
from workloads.protocol import Result, Spec, Workload, register, registry

# Modules that define workloads; each registers its classes when imported.
WORKLOAD_MODULES = (
    "workloads.imagenet_train",
    "workloads.imagenet_infer",
    "workloads.imagenet_preprocess",
    "workloads.ptb_lstm",
    "workloads.cpu_calibrate",
    "workloads.mxnet_inception",
    "workloads.mxnet_ptb_lstm",
    "workloads.stress",
    "workloads.command",
)

_loaded = False


def load_all() -> dict[str, type[Workload]]:
    """Import every workload module once, then the plugins, and return the registry (name ->
    class); PluginError names a plugin that cannot be used."""
    global _loaded
    if not _loaded:
        for name in WORKLOAD_MODULES:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:  # a missing dependency inside a module is a real error
                    raise
        load_plugins()
        _loaded = True
    return registry()


def get(name: str) -> Workload:
    reg = load_all()
    if name not in reg:
        raise KeyError(name)
    return reg[name]()


def for_spec(spec: Spec) -> Workload:
    """The workload a worker runs: the registered one of the spec's name, else a user's command
    job, whose spec carries all its settings (workloads.command)."""
    reg = load_all()
    if spec.workload not in reg and "command" in (spec.config or {}):
        from workloads.command import command_class

        return command_class(spec.workload, spec.config)()
    return get(spec.workload)


def declares_reads_once(name: str) -> bool:
    """Whether the registered workload `name` reads each sample once (Workload.reads_once); a name
    not registered (points of another tool) reads its data every pass, as training does."""
    cls = load_all().get(name)
    return bool(cls is not None and cls.reads_once)


__all__ = ["PluginError", "Result", "Spec", "Workload", "register", "registry", "load_all", "get", "for_spec",
           "declares_reads_once"]
