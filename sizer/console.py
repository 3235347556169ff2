"""Output helpers shared by every command: rich for people, JSON for machines.

The consoles read no markup: a string printed through them appears as written, so a workload, an
instance, a command line or an error that holds `[/]` or `[bold red]` can neither break a table nor
style it. Styles are given as rich Text (`styled`, `Text(text, style=...)`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

console = Console(markup=False)
err_console = Console(stderr=True, markup=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text of plain parts and (text, style) parts, e.g. styled(("none", "yellow"), ": ", reason):
    each part appears as written, whatever brackets it holds."""
    return Text.assemble(*parts)


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


# A wrapping column keeps words up to this long whole before a column is dropped.
NARROWEST_TEXT = 12


def print_table(table: Table, drop: Sequence[str] = (), out: Console | None = None) -> None:
    """Print `table` at the console's width without cutting a cell.

    A column added with `no_wrap=True` holds figures or names that must stay whole: it keeps the
    width of its widest cell (its header may wrap). Every other column wraps at spaces and folds a
    word longer than its width, so no cell loses characters. Where the table is too wide, the
    columns whose headers `drop` names go, first named first, until the whole columns and a few
    characters of each other column fit; the columns then share what width is left.
    """
    out = out or console
    whole = [column.no_wrap for column in table.columns]
    for column in table.columns:
        column.no_wrap, column.overflow = False, "fold"
    ranges = [_column_range(out, table, column, keep) for column, keep in zip(table.columns, whole)]
    for name in drop:
        if _table_width(table, [low for low, _, _ in ranges]) <= out.width:
            break
        index = next((i for i, c in enumerate(table.columns) if str(c.header) == name), None)
        if index is not None and len(table.columns) > 1:
            del table.columns[index], ranges[index]
    if _table_width(table, [high for _, _, high in ranges]) > out.width:
        _share_width(table, ranges, out.width)
    out.print(table)


def _column_range(out: Console, table: Table, column: Column, whole: bool) -> tuple[int, int, int]:
    """(narrowest, longest word, widest) content width of a column. A whole column narrows to its
    widest cell (or its header's longest word); a wrapping one to its longest word, at most
    NARROWEST_TEXT."""
    cells = [Measurement.get(out, out.options, cell) for cell in column.cells]
    header = Measurement.get(out, out.options, column.header) if table.show_header else Measurement(0, 0)
    widest = max([header.maximum, *(m.maximum for m in cells)])
    if whole:
        narrowest = max([header.minimum, *(m.maximum for m in cells)])
        return narrowest, narrowest, widest
    longest_word = max([header.minimum, *(m.minimum for m in cells)])
    return min(longest_word, NARROWEST_TEXT), longest_word, widest


def _table_width(table: Table, content: list[int]) -> int:
    """The printed width of `table` with these content widths: borders, padding and content."""
    _, right, _, left = table.padding
    borders = (2 if table.box and table.show_edge else 0) + (len(table.columns) - 1 if table.box else 0)
    return borders + sum(content) + (left + right) * len(table.columns)


def _share_width(table: Table, ranges: list[tuple[int, int, int]], width: int) -> None:
    """Fix every column's width: its narrowest; then, as far as the room goes, its longest word
    (a name folded mid-word is hard to read); then the room left in proportion to how much wider
    each column would be."""
    widths = [low for low, _, _ in ranges]
    for target in ([word for _, word, _ in ranges], [high for _, _, high in ranges]):
        room = width - _table_width(table, widths)
        wants = [max(t - w, 0) for t, w in zip(target, widths)]
        total_want = sum(wants)
        if room <= 0 or total_want == 0:
            break
        widths = [w + min(want, room * want // total_want) for w, want in zip(widths, wants)]
    for column, w in zip(table.columns, widths):
        column.width = max(w, 1)
