"""Sweeps: plan workloads x shapes, check everything, then measure point by point under real limits.

Order of work (nothing is measured before every input is known good):
  1. plan and validate (`plan`): workloads, profiles, shapes against the host, disk classes, data
     path, worker interpreters and the modules each workload and its dataset import
     (`dependencies`; a SizerError, exit 2, names what to install, or `--skip-unavailable` leaves
     the workload out);
  2. take the per-host lock; remove limit groups left by a killed sweep (`execute`);
  3. probe the host, open the store, start (or resume) the sweep;
  4. prepare datasets once (`data`); calibrate one vCPU (cpu-calibrate) once per host (`calibration`);
     measure the host's speed at the start of the run, every 10 minutes and at the end (`timeline`);
     a plan that leaves its passes to the host takes them now (`defaults`);
  5. for each point (`measure`): evict the dataset's pages, create the shape's limit group, run a
     fresh worker in it, remove the group, commit the point at once; with `--refine N`, once the
     passes are stored, fit each workload and measure once more its N shapes the model predicts
     worst (`refine`); with `--parallel K`, up to K one-GPU points at once, each in a slot of its
     own GPU, cores and dataset copy, committed by the main thread as they end (`parallel`,
     `placement`, `slot_copies`); an adaptive sweep feeds its points as slots free up (`adaptive_run`);
     with `--colocate A+B` (or `sizer colocate`), then each pair of jobs on halves of one instance at
     once on one GPU, and each job alone on its half (`pairs`, `colocate`, `gpu_share`);
  6. hand back a summary naming the store and the sweep (`outputs`); the command layer then writes
     report.html, results.json and points.csv (`sizer.report`: the sweep never imports it).
The run's state, shared by the grid, the adaptive loop (`adaptive_run`) and the parallel runner,
is `state.SweepRun`.
Ctrl-C or SIGTERM stop after removing the group in use (`signals`); committed points stay and
`--resume` continues with the rest.
"""

from sizer.sweep.calibration import calibrate
from sizer.sweep.data import Dataset, dataset_dir, prepare_datasets
from sizer.sweep.execute import run_single, run_sweep
from sizer.sweep.measure import keep_steadier, limit_request, measure_point, wants_repeat
from sizer.sweep.outputs import dry_run_summary
from sizer.sweep.plan import (
    CALIBRATION_WORKLOAD,
    DEFAULT_OUT,
    STORE_NAME,
    SweepOptions,
    SweepPlan,
    default_data_dir,
    parse_workload_entry,
    plan_sweep,
)
from sizer.sweep.progress import SweepProgress, format_duration
from sizer.sweep.refine import refine_points
from sizer.sweep.signals import SweepTerminated, check_stop, stop_on_signals
from sizer.sweep.state import OnPoint, SweepRun, check_same_host

__all__ = [
    "CALIBRATION_WORKLOAD",
    "DEFAULT_OUT",
    "STORE_NAME",
    "Dataset",
    "OnPoint",
    "SweepOptions",
    "SweepPlan",
    "SweepProgress",
    "SweepRun",
    "SweepTerminated",
    "calibrate",
    "check_same_host",
    "check_stop",
    "dataset_dir",
    "default_data_dir",
    "dry_run_summary",
    "format_duration",
    "keep_steadier",
    "limit_request",
    "measure_point",
    "parse_workload_entry",
    "plan_sweep",
    "prepare_datasets",
    "refine_points",
    "run_single",
    "run_sweep",
    "stop_on_signals",
    "wants_repeat",
]
