"""Output helpers shared by every command: rich for people, JSON for machines."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

console = Console()
err_console = Console(stderr=True)


def _default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=_default)


def emit(data: Any, as_json: bool, render: Callable[[Any], None] | None = None) -> None:
    """Print `data` as JSON on stdout when asked, else call `render` to show it to a person."""
    if as_json or render is None:
        sys.stdout.write(to_json(data) + "\n")
        sys.stdout.flush()
    else:
        render(data)
