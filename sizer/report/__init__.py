"""The report: a plain, tested context built from points and fits, then rendered.

- `load`: the inputs (points, sweeps, enforcement records) from a store or a points file;
- `analysis`: warnings about the measurements;
- `workload`, `options`: one workload's context (its sizing: `sizer.sizing`) and its recommendation;
- `context`: `build_context`, the whole report as JSON-able data (results.json);
- `render`: report.html through `reports/templates/`, and the files `write_context` writes;
- `charts`: the SVG charts inlined in report.html (imported when a report is rendered).
"""

from sizer.report.analysis import quality_warnings
from sizer.report.context import RESULTS_SCHEMA_VERSION, build_context, nothing_sized
from sizer.report.load import inputs_from_store, inputs_from_sweeps, load_inputs
from sizer.report.render import (
    catalog_groups,
    format_gib,
    format_money,
    format_number,
    format_percent,
    render_html,
    write_context,
    write_outputs,
)

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "build_context",
    "catalog_groups",
    "format_gib",
    "format_money",
    "format_number",
    "format_percent",
    "inputs_from_store",
    "inputs_from_sweeps",
    "load_inputs",
    "nothing_sized",
    "quality_warnings",
    "render_html",
    "write_context",
    "write_outputs",
]
