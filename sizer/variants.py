"""One value type for a workload variant: a workload name and the settings that set it apart.

Two spellings name the same thing:
- on the command line, `resnet50-train:decode=gpu:batch_size=128` (`Variant.parse`): settings of
  that entry alone, on top of `--set`;
- in fits, reports and baselines, `resnet50-train[decode=gpu]` (`Variant.label`,
  `Variant.from_label`): the name of a fitted group of points. A value `-` there means "unset".

Everything that reads or writes either spelling goes through this module; nothing parses them by
string matching elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sizer.errors import SizerError
from sizer.units import parse_setting
from workloads.protocol import SYNTHETIC_INPUT

__all__ = ["SYNTHETIC_INPUT", "Variant"]


@dataclass(frozen=True)
class Variant:
    """A workload and its distinguishing settings, kept sorted by key so equal variants compare equal."""

    workload: str
    settings: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, workload: str, settings: dict[str, Any] | None = None) -> Variant:
        return cls(workload.strip(), tuple(sorted((settings or {}).items())))

    @classmethod
    def parse(cls, entry: str) -> Variant:
        """'resnet50-train' or 'resnet50-train:decode=gpu[:key=value...]' (the command line's spelling)."""
        name, *items = entry.strip().split(":")
        if not name.strip():
            raise SizerError(f"workload {entry.strip()!r} has no name before its settings")
        what = f"workload {entry.strip()!r}"
        return cls.of(name, dict(parse_setting(item, what) for item in items))

    @classmethod
    def from_label(cls, label: str) -> Variant:
        """'resnet50-train[decode=gpu]' -> Variant('resnet50-train', (('decode', 'gpu'),)); a plain name
        has no settings. Values stay text: labels name groups, they do not configure runs."""
        if not label.endswith("]") or "[" not in label:
            return cls(label)
        base, _, tags = label[:-1].partition("[")
        settings: dict[str, Any] = {}
        for tag in tags.split(","):
            key, _, value = tag.partition("=")
            settings[key.strip()] = "" if value.strip() == "-" else value.strip()
        return cls.of(base, settings)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.settings)

    @property
    def label(self) -> str:
        """The fitted group's name: 'resnet50-train[decode=gpu]', or the bare workload name."""
        if not self.settings:
            return self.workload
        tags = ",".join(f"{k}={'-' if v in ('', None) else v}" for k, v in self.settings)
        return f"{self.workload}[{tags}]"

    @property
    def entry(self) -> str:
        """The command line's spelling: 'resnet50-train:decode=gpu'."""
        return ":".join([self.workload, *(f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
                                          for k, v in self.settings)])

    def matches(self, values: dict[str, Any]) -> bool:
        """Whether an object's attributes (given as a dict) carry every setting of this variant."""
        return all(str(values.get(k) or "") == str(v or "") for k, v in self.settings)

    def __str__(self) -> str:
        return self.label
