"""What a sweep's workloads need before any work: the Python modules each imports, looked for in
the workload's own interpreter (sizer's, or the MXNet environment's), and the modules sizer needs to
make the datasets each reads (the synthetic images; a packed format's writer).

A missing module is found once, here, not at every point of the workload: the plan refuses it in
one line naming what to install, or with `--skip-unavailable` leaves the workload out and says why.
Looking costs no import: `importlib.util.find_spec` in sizer's own interpreter, one short process
per other interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from sizer import runner
from sizer.errors import SizerError
from sizer.runner import interpreter_for
from workloads.formats import FORMAT_MODULES
from workloads.protocol import Workload

# What sizer imports to generate each dataset (workloads.synth): the images, then a packed format's writer.
DATASET_MODULES: dict[str, tuple[str, ...]] = {"imagenet": ("numpy", "PIL")}
_FIND = ("import importlib.util, json, sys\n"
         "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))")
FIND_TIMEOUT_S = 60.0
LEFT_OUT_KEY = "left_out"  # where a sweep's calibration record keeps the workloads it left out


@dataclass(frozen=True)
class Unavailable:
    """A workload entry that cannot run on this host: why, and what to run to change that."""

    workload: str
    reason: str
    install: str

    def line(self) -> str:
        return f"{self.workload} {self.reason}: {self.install}"

    def as_dict(self) -> dict[str, str]:
        return {"workload": self.workload, "reason": self.reason, "install": self.install}


def missing_modules(python: str, env: Mapping[str, str], modules: Sequence[str]) -> list[str]:
    """The modules of `modules` that interpreter `python` (with `env` added to this process's
    environment) cannot find."""
    if not modules:
        return []
    if python == sys.executable and not env:
        return [m for m in modules if not _findable(m)]
    try:
        done = subprocess.run([python, "-c", _FIND, *modules], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=FIND_TIMEOUT_S)
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        found = None
    if not isinstance(found, list):
        raise SizerError(f"cannot run the worker interpreter {python} to look for {', '.join(modules)}")
    return [str(m) for m in found]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a module without a spec
        return False


class DependencyCheck:
    """The plan's entries checked against this host's interpreters; each interpreter's answers kept,
    so a module several entries need is looked for once."""

    def __init__(self, profile: str):
        self.profile = profile
        self._missing: dict[tuple[str, str], bool] = {}

    def entry(self, label: str, cls: type[Workload], config: dict[str, Any]) -> Unavailable | None:
        """Why the entry `label` (workload `cls` with its settings) cannot run here, or None."""
        try:
            python, env = interpreter_for(cls.interpreter)
        except SizerError as exc:
            if cls.interpreter == "mxnet":
                return Unavailable(label, f"runs in the MXNet environment, which is missing ({runner.MXNET_PYTHON})",
                                   "make mxnet-env (it needs Python 3.8 to 3.11)")
            return Unavailable(label, str(exc), f"install the interpreter {cls.interpreter}")
        own = self._missing_in(python, env, cls.modules_for(self.profile, config))
        if own:
            return self._unavailable(label, cls, python, env, own, "")
        data = self._missing_in(sys.executable, {}, dataset_modules(cls, self.profile, config))
        if data:
            return self._unavailable(label, cls, sys.executable, {}, data, f" to make its {cls.dataset} dataset")
        return None

    def _missing_in(self, python: str, env: Mapping[str, str], modules: Sequence[str]) -> list[str]:
        unknown = [m for m in modules if (python, m) not in self._missing]
        gone = set(missing_modules(python, env, unknown))
        self._missing.update({(python, m): m in gone for m in unknown})
        return [m for m in modules if self._missing[(python, m)]]

    @staticmethod
    def _unavailable(label: str, cls: type[Workload], python: str, env: Mapping[str, str], modules: list[str],
                     purpose: str) -> Unavailable:
        packages = " ".join(dict.fromkeys(cls.pip_package(m) for m in modules))
        pip = "pip install" if python == sys.executable and not env else f"{python} -m pip install"
        names = ", ".join(modules)
        return Unavailable(label, f"needs the Python module{'s' if len(modules) > 1 else ''} {names}{purpose}, "
                                  f"which {python} cannot import", f"{pip} {packages}")


def dataset_modules(cls: type[Workload], profile: str, config: dict[str, Any]) -> tuple[str, ...]:
    """What sizer imports to make the dataset a point of `cls` reads: the synthetic images, and the
    writer of the packed format its `input` setting reads."""
    modules: tuple[str, ...] = DATASET_MODULES.get(cls.dataset, ())
    if cls.dataset == "imagenet":
        modules += FORMAT_MODULES.get(str({**cls.defaults.get(profile, {}), **config}.get("input")), ())
    return tuple(dict.fromkeys(modules))


def refusal(unavailable: Sequence[Unavailable]) -> str:
    """The one line a sweep stops with when workloads cannot run and --skip-unavailable is not given."""
    return ("; ".join(u.line() for u in unavailable)
            + "; or give --skip-unavailable to measure the other workloads and name this one in the report")
