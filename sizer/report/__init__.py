"""The report: a plain, tested context built from points and fits, then rendered.

- `load`: the inputs (points, sweeps, enforcement records) from a store or a points file;
- `analysis`: the vCPU knee, RAM needs, out-of-memory bounds and warnings about the measurements;
- `workload`, `options`: one workload's context and its recommendation;
- `context`: `build_context`, the whole report as JSON-able data (results.json);
- `render`: report.html through `reports/templates/`, and the files `write_context` writes;
- `charts`: the SVG charts inlined in report.html (imported when a report is rendered).
"""

from sizer.report.analysis import out_of_memory, predicted_knee, quality_warnings, ram_needs, vcpu_knee
from sizer.report.context import RESULTS_SCHEMA_VERSION, build_context
from sizer.report.load import host_gpu_names, inputs_from_store, load_inputs
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
from sizer.store import sweep_calibration_ips

__all__ = [
    "RESULTS_SCHEMA_VERSION",
    "build_context",
    "catalog_groups",
    "format_gib",
    "format_money",
    "format_number",
    "format_percent",
    "host_gpu_names",
    "inputs_from_store",
    "load_inputs",
    "out_of_memory",
    "predicted_knee",
    "quality_warnings",
    "ram_needs",
    "render_html",
    "sweep_calibration_ips",
    "vcpu_knee",
    "write_context",
    "write_outputs",
]
