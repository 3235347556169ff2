"""The report's charts: matplotlib figures rendered to SVG strings that are inlined in report.html.

Every chart is drawn from the plain report context of one workload (`sizer.report.workload`): measured
points, the fitted curves sampled by the model, and the GPU ceiling. Nothing here fits or predicts.
Text stays text in the SVG (`svg.fonttype = none`), so it is searchable, selectable and printable,
and the SVG carries no metadata or date, so the same context renders the same bytes.
"""

from __future__ import annotations

import html
import io
import re
import textwrap
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # no display; figures are only ever saved

from matplotlib.figure import Figure  # noqa: E402  (after the backend is chosen)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from sizer.variants import SYNTHETIC_INPUT  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType, RcKeyType

# Fixed colours for the canonical disk classes (Okabe-Ito, readable by colour-blind readers and in
# grey print); other classes take the rest of the palette in order.
DISK_COLOURS = {"local-nvme": "#0072B2", "ssd": "#009E73", "standard": "#D55E00"}
_EXTRA_COLOURS = ["#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
# Line styles too, so coinciding curves stay distinguishable and the charts survive grey print.
DISK_STYLES: dict[str, LineStyleType] = {"local-nvme": "-", "ssd": "--", "standard": ":"}
DECODE_MARKERS = {"": "o", "cpu": "o", "gpu": "s"}
_EXTRA_MARKERS = ["^", "D", "v", "P"]

_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.fontsize": 9,
    "legend.frameon": False,
}

FIG_SIZE = (5.2, 3.3)  # inches; the SVG scales to the page width


def _plain(text: str) -> str:
    """Text for matplotlib without mathtext: a `$` in a workload name must not start a formula."""
    return str(text).replace("$", r"\$")


def disk_colour(disk_class: str, order: list[str]) -> str:
    if disk_class in DISK_COLOURS:
        return DISK_COLOURS[disk_class]
    others = [d for d in order if d not in DISK_COLOURS]
    index = others.index(disk_class) if disk_class in others else len(others)
    return _EXTRA_COLOURS[index % len(_EXTRA_COLOURS)]


def disk_style(disk_class: str) -> LineStyleType:
    return DISK_STYLES.get(disk_class, "-.")


def decode_marker(decode: str, order: list[str]) -> str:
    if decode in DECODE_MARKERS:
        return DECODE_MARKERS[decode]
    others = [d for d in order if d not in DECODE_MARKERS]
    index = others.index(decode) if decode in others else len(others)
    return _EXTRA_MARKERS[index % len(_EXTRA_MARKERS)]


def _to_svg(fig: Figure, chart_id: str, label: str) -> str:
    """The figure as an inline <svg> element: no XML prologue, scalable, ids unique to this chart."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)  # RDF boilerplate, no content
    # matplotlib numbers element ids per figure (patch_1, text_1...); several figures inline in one
    # page would share them, and a url(#...) reference could then resolve into another chart.
    prefix = re.sub(r"[^A-Za-z0-9_-]", "-", chart_id)
    svg = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}-{m.group(1)})", svg)
    svg = re.sub(r'xlink:href="#([^"]+)"', lambda m: f'xlink:href="#{prefix}-{m.group(1)}"', svg)
    svg = svg.replace("<svg", f'<svg class="chart" role="img" aria-label="{html.escape(label, quote=True)}"', 1)
    return svg.strip()


def _ceiling(ax: Any, ceiling: float | None, unit: str, name: str = "GPU ceiling") -> None:
    if ceiling:
        ax.axhline(ceiling, color="#444444", linestyle="--", linewidth=1)
        ax.annotate(
            f"{name[:1].upper()}{name[1:]} {ceiling:,.0f} {_plain(unit)}",
            xy=(0.01, ceiling),
            xytext=(0, 2),
            textcoords="offset points",
            xycoords=("axes fraction", "data"),
            ha="left",
            va="bottom",
            fontsize=9,
            color="#444444",
        )


def _new_figure() -> Figure:
    return Figure(figsize=FIG_SIZE, dpi=100)


def _title(ax: Any, text: str) -> str:
    ax.set_title(_plain(text), loc="left")
    return text


def _pipeline_points(wl: dict[str, Any]) -> list[dict[str, Any]]:
    """Usable points that ran the real input pipeline (not the GPU-alone ceiling points)."""
    return [p for p in wl["points"] if p["usable"] and p.get("input") != SYNTHETIC_INPUT]


def _gpu_alone(ax: Any, wl: dict[str, Any], x_key: str) -> bool:
    """Mark the points measured with the input already on the device: where the ceiling comes from."""
    alone = [p for p in wl["points"] if p["usable"] and p.get("input") == SYNTHETIC_INPUT]
    if alone:
        ax.scatter([p[x_key] for p in alone], [p["measured"] for p in alone], marker="*", s=90, color="#444444",
                   zorder=4)
    return bool(alone)


def _legend(ax: Any, disks: list[str], decodes: list[str], hollow_label: str | None, filled_label: str,
            gpu_alone: bool = False) -> None:
    """One legend entry per disk class (colour) and per kind of mark, instead of their product."""
    grey = "#555555"
    handles = [
        Line2D([], [], color=disk_colour(d, disks), linestyle=disk_style(d), linewidth=2, label=f"{d} (fitted)")
        for d in disks
    ]
    if len(decodes) > 1:
        for decode in decodes:
            handles.append(
                Line2D([], [], color=grey, marker=decode_marker(decode, decodes), linestyle="none",
                       label=f"measured, {decode or 'default'} decode")
            )
    else:
        handles.append(Line2D([], [], color=grey, marker="o", linestyle="none", label=filled_label))
    if hollow_label:
        handles.append(
            Line2D([], [], color=grey, marker="o", markerfacecolor="none", linestyle="none", label=hollow_label)
        )
    if gpu_alone:
        handles.append(
            Line2D([], [], color="#444444", marker="*", markersize=10, linestyle="none", label="GPU alone (input on device)")
        )
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, borderaxespad=0,
              columnspacing=1.2, handlelength=2.2)


def _headroom(ax: Any, wl: dict[str, Any], values: list[float]) -> None:
    """Room above the ceiling line for its label."""
    top = max([wl.get("ceiling") or 0.0] + values + [1.0])
    ax.set_ylim(0, top * 1.12)


def _highest(points: list[dict[str, Any]]) -> list[float]:
    """Each point's highest measurement: the top of its range where it has one."""
    return [max([p["measured"]] + list(p.get("pass_rates") or [])) for p in points]


def _scatter(ax: Any, points: list[dict[str, Any]], x: str, colour: str, marker: str, hollow: bool) -> None:
    """Measured points at their figure; a shape measured several times (`--passes`) is drawn at its
    median with a line over the range of its measurements."""
    if not points:
        return
    xs, ys = [p[x] for p in points], [p["measured"] for p in points]
    ranged = [p for p in points if p.get("pass_rates") and len(p["pass_rates"]) > 1]
    if ranged:
        ax.vlines([p[x] for p in ranged], [min(p["pass_rates"]) for p in ranged], [max(p["pass_rates"]) for p in ranged],
                  color=colour, linewidth=1.0, alpha=0.7, zorder=2)
    if hollow:
        ax.scatter(xs, ys, facecolors="none", edgecolors=colour, marker=marker, s=30, zorder=3)
    else:
        ax.scatter(xs, ys, color=colour, marker=marker, s=30, zorder=3)


def vcpu_chart(wl: dict[str, Any], chart_id: str) -> str:
    """Throughput vs vCPUs, one colour per disk class: measured points over the fitted curve.

    Curves are drawn at one RAM size (the largest measured); points measured at another RAM size
    are drawn hollow, as they need not lie on those curves.
    """
    unit = wl["unit"]
    curve = wl["curves"]["vcpu"]
    points = _pipeline_points(wl)
    disks = wl["disk_classes"]
    decodes = sorted({p["decode"] for p in points})
    with matplotlib.rc_context(_RC):
        fig = _new_figure()
        ax = fig.add_subplot()
        for disk in disks:
            colour = disk_colour(disk, disks)
            ys = curve["by_disk"].get(disk)
            if ys:
                ax.plot(curve["vcpus"], ys, color=colour, linestyle=disk_style(disk), linewidth=1.6)
            for decode in decodes:
                sel = [p for p in points if p["disk_class"] == disk and p["decode"] == decode]
                marker = decode_marker(decode, decodes)
                for hollow in (False, True):
                    part = [p for p in sel if (p["ram_gib"] != curve["ram_gib"]) == hollow]
                    _scatter(ax, part, "vcpus", colour, marker, hollow)
        gpu_alone = _gpu_alone(ax, wl, "vcpus")
        _ceiling(ax, wl.get("ceiling"), unit, wl.get("ceiling_name") or "GPU ceiling")
        label = _title(ax, f"{wl['workload']}: throughput vs vCPUs")
        ax.set_xlabel(f"vCPUs (hardware threads); curves at {curve['ram_gib']:g} GiB RAM")
        ax.set_ylabel(f"throughput ({_plain(unit)})")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(left=0)
        _headroom(ax, wl, _highest(points) + [y for ys in curve["by_disk"].values() for y in ys if y])
        other = any(p["ram_gib"] != curve["ram_gib"] for p in points)
        _legend(ax, disks, decodes, "measured at other RAM" if other else None, f"measured at {curve['ram_gib']:g} GiB",
                gpu_alone)
        return _to_svg(fig, chart_id, label)


def ram_chart(wl: dict[str, Any], chart_id: str) -> str:
    """Throughput vs host RAM, one colour per disk class, curves at the largest measured vCPU count."""
    unit = wl["unit"]
    curve = wl["curves"]["ram"]
    points = _pipeline_points(wl)
    disks = wl["disk_classes"]
    with matplotlib.rc_context(_RC):
        fig = _new_figure()
        ax = fig.add_subplot()
        for disk in disks:
            colour = disk_colour(disk, disks)
            ys = curve["by_disk"].get(disk)
            if ys:
                ax.plot(curve["ram_gib"], ys, color=colour, linestyle=disk_style(disk), linewidth=1.6)
            sel = [p for p in points if p["disk_class"] == disk]
            for hollow in (False, True):
                part = [p for p in sel if (p["vcpus"] != curve["vcpus"]) == hollow]
                _scatter(ax, part, "ram_gib", colour, "o", hollow)
        gpu_alone = _gpu_alone(ax, wl, "ram_gib")
        _ceiling(ax, wl.get("ceiling"), unit, wl.get("ceiling_name") or "GPU ceiling")
        label = _title(ax, f"{wl['workload']}: throughput vs host RAM")
        ax.set_xlabel(f"host RAM (GiB); curves at {curve['vcpus']} vCPUs")
        ax.set_ylabel(f"throughput ({_plain(unit)})")
        ax.set_xlim(left=0)
        _headroom(ax, wl, _highest(points) + [y for ys in curve["by_disk"].values() for y in ys if y])
        other = any(p["vcpus"] != curve["vcpus"] for p in points)
        _legend(ax, disks, [], "measured at other vCPUs" if other else None, f"measured at {curve['vcpus']} vCPUs",
                gpu_alone)
        return _to_svg(fig, chart_id, label)


def fit_chart(wl: dict[str, Any], chart_id: str) -> str:
    """Measured vs predicted throughput of every fitted point, with the identity line and a +-5% band."""
    unit = wl["unit"]
    points = [p for p in _pipeline_points(wl) if p["predicted"] is not None]
    disks = wl["disk_classes"]
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(3.6, 3.3), dpi=100)
        ax = fig.add_subplot()
        top = max([p["measured"] for p in points] + [p["predicted"] for p in points] + [1.0]) * 1.08
        ax.plot([0, top], [0, top], color="#444444", linewidth=1, label="predicted = measured")
        ax.fill_between([0, top], [0, top * 0.95], [0, top * 1.05], color="#bbbbbb", alpha=0.35, label="within 5%")
        for disk in disks:
            sel = [p for p in points if p["disk_class"] == disk]
            if sel:
                ax.scatter(
                    [p["measured"] for p in sel],
                    [p["predicted"] for p in sel],
                    color=disk_colour(disk, disks),
                    s=24,
                    zorder=3,
                    label=disk,
                )
        label = _title(ax, "\n".join(textwrap.wrap(f"{wl['workload']}: measured vs predicted", 44)))
        ax.set_xlabel(f"measured ({_plain(unit)})")
        ax.set_ylabel(f"predicted ({_plain(unit)})")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_aspect("equal")
        ax.legend(loc="best", fontsize=8.5)
        return _to_svg(fig, chart_id, label)


CHARTS = (
    ("vcpu", "Throughput vs vCPUs", vcpu_chart),
    ("ram", "Throughput vs RAM", ram_chart),
    ("fit", "Measured vs predicted", fit_chart),
)


def workload_charts(wl: dict[str, Any], index: int) -> list[dict[str, str]]:
    """Every chart of one workload context: [{id, kind, caption, svg}]."""
    out = []
    for kind, caption, draw in CHARTS:
        if kind == "vcpu" and not wl["curves"].get("vcpu"):
            continue
        if kind == "ram" and not wl["curves"].get("ram"):
            continue
        chart_id = f"chart-{index}-{kind}"
        out.append({"id": chart_id, "kind": kind, "caption": caption, "svg": draw(wl, chart_id)})
    return out
