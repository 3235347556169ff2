"""The worker protocol shared by sizer and every workload.

sizer hands a worker a JSON `Spec` and gets back a JSON `Result`. This module imports only the
standard library, so a workload can run in another interpreter (the MXNet environment).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

RESULT_SCHEMA_VERSION = 1

METHOD_VERSION = 4
"""The rule a point's figure (Result.throughput) follows; it goes up whenever that rule changes.

1: the median of the rates of up to five sub-windows of the measured steps.
2: the whole window's samples over its seconds, over whole loader rounds (`stats.window_rate`).
3: as 2, with the window opened once the loop has dropped the batches its loader made before it
   (`loop.drain_ready`).
4: as 3, with the drain ended after `loop.DRAIN_MAX_S`: a drain that went on at the
   loader's own pace left a short window.
sizer/method.py brings stored figures of older methods to this one where their steps allow.
"""

# Result status values. `ok` and `noisy` carry a throughput; the others describe why none exists.
OK, NOISY, OOM, TIMEOUT, ERROR = "ok", "noisy", "oom", "timeout", "error"
STATUSES = (OK, NOISY, OOM, TIMEOUT, ERROR)

PROFILES = ("gpu", "cpu-small")

# Config `input` of a point measured with its batches already on the device: the GPU's own ceiling.
SYNTHETIC_INPUT = "synthetic"

# A throughput unit: what is counted, per second ("images/s"; a user's command names its own).
UNIT_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*/s")

# The pip package of a module where the two names differ (`Workload.pip_package`).
PIP_PACKAGES = {"PIL": "pillow", "cv2": "opencv-python", "yaml": "pyyaml", "sklearn": "scikit-learn"}


@dataclass(frozen=True)
class Range:
    """The numbers a setting allows: at least `low` (above it, where `low_open`) and at most `high`;
    None leaves that side open. A null value is the type check's to judge, not the range's."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def problem(self, key: str, value: Any) -> str | None:
        """What is wrong with `key=value` against the range, or None (also for what is no number)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            need = f"above {_shown(self.low)}" if self.low_open else f"at least {_shown(self.low)}"
            return f"{key}={_shown(value)} is out of range: it must be {need}"
        if self.high is not None and value > self.high:
            return f"{key}={_shown(value)} is out of range: it must be at most {_shown(self.high)}"
        return None


# The ranges most settings take: a count of one or more, a count or length that may be 0, a share,
# and a positive amount (seconds, a size).
AT_LEAST_ONE = Range(1)
NOT_NEGATIVE = Range(0)
SHARE = Range(0, 1)
POSITIVE = Range(0, low_open=True)


@dataclass(frozen=True)
class Spec:
    """What one point runs: the workload, its profile and config, and the shape it runs in."""

    workload: str
    profile: str = "cpu-small"
    vcpus: int = 1
    # The shape's host RAM (page cache included; 0: not limited) and the GPUs its processes use.
    ram_bytes: int = 0
    gpus: int = 1
    data_dir: str = ""
    work_dir: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # Bounds for the measured part: the worker stops measuring past this, the runner kills past more.
    time_budget_s: float = 30.0
    spread_target: float = 0.05

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Spec":
        raw = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


@dataclass
class Result:
    """What a worker saw. Raw steps are kept so the figure can be recomputed later."""

    workload: str
    framework: str
    unit: str
    profile: str
    status: str = OK
    throughput: float = 0.0  # the measured window's samples over its seconds, in `unit`
    spread: float = 0.0  # (max - min) / median of the sub-window rates
    window_rates: list[float] = field(default_factory=list)
    # One row per step: [seconds, samples, warmup (0/1)].
    steps: list[list[float]] = field(default_factory=list)
    counters: dict[str, Any] = field(default_factory=dict)
    limits_seen: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    bottleneck: str = ""
    error: str = ""
    wall_s: float = 0.0
    schema_version: int = RESULT_SCHEMA_VERSION
    method: int = METHOD_VERSION  # the rule `throughput` follows (METHOD_VERSION)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Result":
        raw = json.loads(text)
        version = raw.get("schema_version", 0)
        if version > RESULT_SCHEMA_VERSION:
            raise ValueError(
                f"result schema {version} is newer than this sizer understands ({RESULT_SCHEMA_VERSION})"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


class Workload(abc.ABC):
    """One measurable workload. Subclasses set the class attributes and implement `run`.

    `defaults[profile]` is the default config for a profile; a spec's `config` overrides it.
    `choices`, `setting_types`, `ranges` and `requires` state what a setting allows
    (`setting_problem`, `config_problem`); sizer checks a sweep's settings against them before
    anything runs, for built-in, plugin and command workloads alike.
    `prepare` readies data under `data_dir` (idempotent); `run` measures and returns a Result.
    Framework imports happen inside methods so listing workloads never needs the framework.
    """

    name: ClassVar[str] = ""
    framework: ClassVar[str] = ""
    unit: ClassVar[str] = "samples/s"
    description: ClassVar[str] = ""
    # Which dataset the workload reads: "imagenet", "ptb" or "" (none; e.g. synthetic input).
    dataset: ClassVar[str] = ""
    # Resources a result mainly depends on, shown in `sizer workloads`.
    stresses: ClassVar[str] = ""
    # Interpreter the workload must run in: "" for sizer's own, "mxnet" for the MXNet environment.
    interpreter: ClassVar[str] = ""
    # A job that reads each sample once (preprocessing a folder, batch inference over a corpus): no
    # later pass finds its data in the page cache, so RAM beyond its own footprint cannot lift a disk
    # bound, whatever the dataset's size. Training reads its dataset every epoch.
    reads_once: ClassVar[bool] = False
    # How a point of more than one GPU (`Spec.gpus` > 1) runs: "data-parallel" (one training process
    # per GPU, gradients all-reduced: workloads.distributed), "streams" (one independent process per
    # GPU), "own" (a user's command, which runs its GPUs itself: workloads.command) or "" (it cannot).
    multi_gpu: ClassVar[str] = ""
    defaults: ClassVar[dict[str, dict[str, Any]]] = {}
    # The values a setting allows, for settings that take one of a few (`decode`: cpu or gpu).
    choices: ClassVar[dict[str, tuple[Any, ...]]] = {}
    # The types a setting allows where its default does not say (a default of null: chosen by the shape).
    setting_types: ClassVar[dict[str, tuple[type, ...]]] = {}
    # The numbers a number setting allows (`Range`): a count of processes, a batch size, seconds.
    ranges: ClassVar[dict[str, Range]] = {}
    # A value that works only beside another setting's value: (key, value) -> (other key, its value).
    requires: ClassVar[dict[tuple[str, Any], tuple[str, Any]]] = {}
    # Where the class comes from: "built-in", "plugin <distribution>" (the `sizer.workloads` entry
    # points) or "command" (a user's command, `sizer run --command`).
    origin: ClassVar[str] = "built-in"
    # What the worker imports beyond the standard library and this package (top-level module names,
    # in the workload's own interpreter): sizer checks them before any point (`modules_for` adds
    # those a setting brings in), so a missing one stops the sweep before its first point.
    requires_modules: ClassVar[tuple[str, ...]] = ()
    # The pip package of a required module where its name differs (besides PIP_PACKAGES).
    pip_packages: ClassVar[dict[str, str]] = {}

    def config_for(self, spec: Spec) -> dict[str, Any]:
        if spec.profile not in self.defaults:
            raise ValueError(f"{self.name} has no profile {spec.profile!r} (has {sorted(self.defaults)})")
        cfg = dict(self.defaults[spec.profile])
        cfg.update(spec.config or {})
        return cfg

    @classmethod
    def spec_config(cls, profile: str, config: dict[str, Any]) -> dict[str, Any]:
        """The config a point's spec carries to its worker: the point's own settings, which the
        worker lays over the defaults of the class it finds by name."""
        return dict(config)

    @classmethod
    def modules_for(cls, profile: str, config: dict[str, Any]) -> tuple[str, ...]:
        """The modules a point of this profile and these settings imports: `requires_modules`, and
        in a subclass whose settings choose a library (a packed format's), that one too."""
        return cls.requires_modules

    @classmethod
    def pip_package(cls, module: str) -> str:
        """What `pip install` takes to bring `module`."""
        return cls.pip_packages.get(module) or PIP_PACKAGES.get(module, module)

    def prepare(self, spec: Spec) -> None:  # pragma: no cover - default does nothing
        return None

    @abc.abstractmethod
    def run(self, spec: Spec) -> Result:
        """Measure one point and return its Result."""

    def new_result(self, spec: Spec, config: dict[str, Any]) -> Result:
        return Result(
            workload=self.name,
            framework=self.framework,
            unit=self.unit,
            profile=spec.profile,
            config=config,
        )

    @classmethod
    def setting_problem(cls, profile: str, key: str, value: Any) -> str | None:
        """What is wrong with `key=value` for this workload's profile, or None when it is allowed.

        A setting must exist in the profile's defaults. Its value must be one of `choices[key]`
        where given, else of `setting_types[key]` where given, else of its default's type: true or
        false, a whole number, a finite number (a whole one too) or text. A default of null with
        no declared types allows any value. A number must lie in `ranges[key]` where given."""
        known = cls.defaults.get(profile, {})
        if key not in known:
            return f"has no setting {key!r} (has: {', '.join(sorted(known))})"
        if key in cls.choices:
            allowed = cls.choices[key]
            if any(type(value) is type(choice) and value == choice for choice in allowed):
                return None
            return f"{key}={_shown(value)} is not one of {', '.join(_shown(c) for c in allowed)}"
        types = cls.setting_types.get(key) or ((type(known[key]),) if known[key] is not None else ())
        if types and not _of_types(value, types):
            return f"{key}={_shown(value)} is not {' or '.join(_TYPE_WORDS.get(t, t.__name__) for t in types)}"
        return cls.ranges[key].problem(key, value) if key in cls.ranges else None

    @classmethod
    def config_problem(cls, profile: str, config: dict[str, Any]) -> str | None:
        """What is wrong with the profile's defaults under `config` taken together (`requires`), or None."""
        cfg = {**cls.defaults.get(profile, {}), **config}
        for (key, value), (needed_key, needed) in cls.requires.items():
            if cfg.get(key) == value and cfg.get(needed_key) != needed:
                return (f"{key}={_shown(value)} needs {needed_key}={_shown(needed)}, not "
                        f"{needed_key}={_shown(cfg.get(needed_key))} (profile {profile})")
        return None

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "framework": cls.framework,
            "unit": cls.unit,
            "description": cls.description,
            "dataset": cls.dataset,
            "stresses": cls.stresses,
            "interpreter": cls.interpreter or "sizer",
            "reads_once": cls.reads_once,
            "multi_gpu": cls.multi_gpu,
            "profiles": sorted(cls.defaults),
            "origin": cls.origin,
        }


_TYPE_WORDS = {bool: "true or false", int: "a whole number", float: "a finite number", str: "text",
               type(None): "null"}


def _of_types(value: Any, types: tuple[type, ...]) -> bool:
    """Whether a setting's value is of one of `types`; true and false count as no number, and a
    number as a float only when finite."""
    for kind in types:
        if kind is bool or isinstance(value, bool):
            matched = kind is bool and isinstance(value, bool)
        elif kind is float:
            matched = isinstance(value, (int, float)) and math.isfinite(value)
        else:
            matched = isinstance(value, kind)
        if matched:
            return True
    return False


def _shown(value: Any) -> str:
    """A setting's value as the command line spells it: text as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


_REGISTRY: dict[str, type[Workload]] = {}


class DuplicateName(ValueError):
    """A second workload class took a registered name."""


def register(cls: type[Workload], replace: bool = False) -> type[Workload]:
    """Class decorator; refuses a second workload of the same name unless told to `replace` it."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls and not replace:
        taken = _REGISTRY[cls.name]
        raise DuplicateName(f"duplicate workload name {cls.name!r}: taken by the {taken.origin} workload "
                            f"{taken.__module__}.{taken.__name__}, so {cls.__module__}.{cls.__name__} cannot have it")
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Workload]]:
    return dict(_REGISTRY)


WorkloadFactory = Callable[[], Workload]
