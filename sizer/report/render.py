"""The report's files: `write_context` writes a context as `results.json`, renders it through
`reports/templates/report.html.j2` into one self-contained `report.html` (inline CSS and SVG, no
scripts) and writes the points as `points.csv`."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from sizer.errors import SizerError
from sizer.points import Point, write_points_csv
from sizer.preflight import write_failure
from sizer.report.charts import workload_charts
from sizer.report.context import build_context
from sizer.units import unit_noun
from sizer.values import finite_number


# ---------------------------------------------------------------------------- formatters (template filters)
def format_number(value: Any, digits: int = 3) -> str:
    """Readable figures: thousands separators, `digits` significant digits for small values."""
    number = finite_number(value)
    if number is None:
        return "–"
    if abs(number) >= 10 ** digits or number == int(number) and abs(number) >= 1:
        return f"{number:,.0f}"
    return f"{number:,.{digits}g}"


def format_percent(value: Any, digits: int = 1) -> str:
    number = finite_number(value)
    return "–" if number is None else f"{number * 100:.{digits}f}%"


def format_money(value: Any) -> str:
    """Dollars in cents, and an amount under ten cents in four decimals (a million tokens can cost $0.0137)."""
    number = finite_number(value)
    if number is None:
        return "–"
    return f"${number:,.4f}" if 0 < abs(number) < 0.1 else f"${number:,.2f}"


def format_gib(value: Any) -> str:
    number = finite_number(value)
    return "–" if number is None else f"{number:g} GiB"


def catalog_groups(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Options grouped by instance (first appearance order, so cheapest first): one row per instance
    in the report, its disk options listed inside it."""
    out: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row["cloud"], row["instance_type"], row["region"])
        if key not in out:
            out[key] = {**row, "options": []}
        out[key]["options"].append(row)
    return list(out.values())


# ---------------------------------------------------------------------------- HTML
def templates_dir() -> Any:
    return resources.files("reports").joinpath("templates")


def _inline_css(templates: Any) -> str:
    css = templates.joinpath("report.css").read_text()
    if "</" in css:
        raise SizerError("report.css must not contain '</'")  # it is inlined in a <style> element
    return css


def render_html(context: dict[str, Any]) -> str:
    """report.html from the context: one self-contained file (inline CSS and SVG, no scripts)."""
    import jinja2
    from markupsafe import Markup


    templates = templates_dir()
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: templates.joinpath(name).read_text()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=format_number, pct=format_percent, money=format_money, gib=format_gib, noun=unit_noun)
    charts = {
        wl["workload"]: [dict(c, svg=Markup(c["svg"])) for c in workload_charts(wl, i)]
        for i, wl in enumerate(context["workloads"])
        if wl["fitted"]
    }
    groups = {wl["workload"]: catalog_groups(wl["catalog_rows"]) for wl in context["workloads"]}
    css = Markup(_inline_css(templates))
    return env.get_template("report.html.j2").render(ctx=context, charts=charts, groups=groups, css=css)


# ---------------------------------------------------------------------------- files
def _replace_file(path: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file, so a reader never sees half a file. A write that fails (a
    full disk, a read-only one) leaves the earlier file as it was and no temporary file behind, and
    says so in one line."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise write_failure(path, exc) from None


def _replace_text(path: Path, text: str) -> None:
    _replace_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_context(context: dict[str, Any], points: Iterable[Point], out_dir: str | Path) -> dict[str, Path]:
    """Write report.html, results.json and points.csv of a context into out_dir; returns their paths."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SizerError(f"cannot create output folder {out}: {exc.strerror}") from None
    html = render_html(context)  # render before writing anything, so a failure leaves no half report
    paths = {"report.html": out / "report.html", "results.json": out / "results.json", "points.csv": out / "points.csv"}
    _replace_text(paths["report.html"], html)
    _replace_text(paths["results.json"], json.dumps(context, indent=2, sort_keys=True) + "\n")
    _replace_file(paths["points.csv"], lambda tmp: write_points_csv(points, tmp))
    return paths


def write_outputs(points: Sequence[Point], out_dir: str | Path, **kwargs: Any) -> dict[str, Path]:
    """Write report.html, results.json and points.csv into out_dir (`build_context`'s options as
    keywords); returns their paths."""
    context = build_context(points, **kwargs)
    return write_context(context, points, out_dir)
