"""GPU predictions against measurements, as Markdown tables (issue 47's validation):

1. the ResNet-50 GPU ceiling (bf16, batch 256, training and inference) predicted on the H100 from
   the H200 and on the H200 from the H100 (sizer.model.gpu_speed), against the ceilings measured
   on each: the synthetic-input points of the stores named (default: the H100 and H200 examples
   and their replicates), and the figures the repository documents without a store
   (data/documented_ceilings.csv);
2. the ratios of the ceilings predicted on the V100, A10, A100 and H100 against the ratios of
   Lambda's public ResNet-50 training table (data/lambda_resnet50_train_fp16.csv);
3. the analytic GPU memory estimate (workloads.memory_estimate) against peaks measured by
   `sizer gpumem --json` (files given with --memory; data/h200_gpumem.json holds the H200's), and
   the fitted memory(batch) at each batch size held out of the fit.

A prediction from the H200 uses the kernel split measured there (data/h200_kernel_splits.json, the
ceiling points of this code on a lent H200); the H100's stores predate the split, so a prediction
from the H100 uses the analytic split (operator costs on fake tensors, needs torch). Targets:
within 5% of the measured ceiling, within 15% of Lambda's ratios, the analytic memory within 10%
and never more than 5% under the measured peak, the fit within 5% at held-out batch sizes.

Usage: python lab/benchmarks/cross_gpu.py [--store STORE ...] [--memory lab/benchmarks/data/h200_gpumem.json]
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATA = Path(__file__).resolve().parent / "data"

from sizer.catalog import normalize_gpu  # noqa: E402
from sizer.gpu_table import GpuTable, load_gpu_table  # noqa: E402
from sizer.model import gpu_speed  # noqa: E402
from sizer.model.gpu_memory import fit_memory  # noqa: E402

DEFAULT_STORES = ("examples/h100/sizer.sqlite", "examples/h100/replicates/resnet50-train-1.sqlite",
                  "examples/h100/replicates/resnet50-train-2.sqlite", "examples/h200/sizer.sqlite",
                  "examples/h200/replicates/resnet50-train-1.sqlite", "examples/h200/replicates/resnet50-train-2.sqlite")
WORKLOADS = ("resnet50-train", "resnet50-infer")
BATCH, PRECISION = 256, "bf16"
CEILING_TARGET, RATIO_TARGET = 0.05, 0.15
MEMORY_OVER, MEMORY_UNDER, FIT_TARGET = 0.10, 0.05, 0.05
LAMBDA_GPUS = ("V100", "A10", "A100-80GB", "H100")


def _comment_free(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def ceilings_from_stores(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Usable synthetic-input points at the ResNet-50 recipe (batch 256, bf16), with their source."""
    from sizer.store import Store
    from sizer.variants import SYNTHETIC_INPUT

    out = []
    for path in paths:
        with Store(path, create=False) as store:
            for sweep in store.sweeps():
                for (_row, result), point in zip(store.results(sweep.id), store.points(sweep.id)):
                    cfg = result.config or {}
                    if (point.input == SYNTHETIC_INPUT and point.usable and point.gpus == 1
                            and cfg.get("batch_size") == BATCH and cfg.get("precision") == PRECISION):
                        out.append({"gpu": normalize_gpu(point.gpu_model), "workload": point.workload,
                                    "ceiling": point.throughput, "source": f"{_short(path)} (sweep {sweep.id})"})
    return out


def documented_ceilings() -> list[dict[str, Any]]:
    return [{"gpu": r["gpu"], "workload": r["workload"], "ceiling": float(r["ceiling"]),
             "source": "documented: " + r["source"].split(" (")[0]} for r in _comment_free(DATA / "documented_ceilings.csv")]


def _short(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def measured_splits() -> dict[str, dict[str, Any]]:
    data = json.loads((DATA / "h200_kernel_splits.json").read_text())
    return {p["workload"]: p["gpu_kernel_split"] for p in data["points"]}


@functools.lru_cache(maxsize=None)
def _analytic(workload: str):
    try:
        from workloads.fake_step import analytic_costs
    except ImportError:
        return None
    try:
        return analytic_costs(workload, BATCH)
    except ImportError:
        return None


def _split(table: GpuTable, source: str, workload: str, method: str, ceiling: float):
    src = table.get(source)
    if method == gpu_speed.MEASURED:
        return gpu_speed.measured_split(measured_splits()[workload], ceiling, src), []
    costs = _analytic(workload)
    if costs is None:
        return None, []
    return gpu_speed.analytic_splits(costs, src)


def _range(values: list[float]) -> str:
    return f"{min(values):,.0f}" if min(values) == max(values) else f"{min(values):,.0f}-{max(values):,.0f}"


def ceiling_table(table: GpuTable, ceilings: list[dict[str, Any]]) -> list[str]:
    lines = ["### Predicted against measured GPU ceilings (ResNet-50, bf16, batch 256, images/s)", "",
             "| workload | from | to | split | source ceiling | predicted (range) | measured | error | within 5% |",
             "|---|---|---|---|---|---|---|---|---|"]
    for workload in WORKLOADS:
        for source, target, method in (("H200", "H100", gpu_speed.MEASURED), ("H100", "H200", gpu_speed.ANALYTIC),
                                       ("H200", "H100", gpu_speed.ANALYTIC)):
            src = [c["ceiling"] for c in ceilings if c["gpu"] == source and c["workload"] == workload]
            dst = [c["ceiling"] for c in ceilings if c["gpu"] == target and c["workload"] == workload]
            if not src or not dst:
                lines.append(f"| {workload} | {source} | {target} | {method} | – | – | – | no measured ceiling | – |")
                continue
            value = statistics.median(src)
            split, alternatives = _split(table, source, workload, method, value)
            if split is None:
                lines.append(f"| {workload} | {source} | {target} | {method} | – | needs torch | – | – | – |")
                continue
            p = gpu_speed.predict_ceiling(value, split, table.get(source), table.get(target), min(src), max(src),
                                          alternatives)
            error = p.value / statistics.median(dst) - 1
            lines.append(f"| {workload} | {source} | {target} | {method} | {_range(src)} | {p.value:,.0f} "
                         f"({p.low:,.0f}-{p.high:,.0f}) | {_range(dst)} | {error:+.1%} | "
                         f"{'yes' if abs(error) <= CEILING_TARGET else 'no'} |")
    lines += ["", "Measured ceilings, by source:", ""]
    lines += [f"- {c['gpu']} {c['workload']}: {c['ceiling']:,.0f} ({c['source']})" for c in ceilings]
    return lines


def lambda_table(table: GpuTable, ceilings: list[dict[str, Any]]) -> list[str]:
    rows = _comment_free(DATA / "lambda_resnet50_train_fp16.csv")
    lam = {r["gpu"]: float(r["resnet50"]) for r in rows}
    src = [c["ceiling"] for c in ceilings if c["gpu"] == "H200" and c["workload"] == "resnet50-train"]
    if not src:
        return ["(no H200 ResNet-50 training ceiling in the stores: the Lambda table is skipped)"]
    value = statistics.median(src)
    lines = ["### Predicted ratios against Lambda's ResNet-50 training table (fp16 there, bf16 here)", "",
             "Each GPU's ceiling predicted from the H200's "
             f"{value:,.0f} images/s; Lambda: lambdal/deeplearning-benchmark, commit 0551cb70.", "",
             "| ratio | Lambda | predicted (measured split) | error | within 15% | predicted (analytic split) | error |",
             "|---|---|---|---|---|---|---|"]
    predicted = {}
    for method in (gpu_speed.MEASURED, gpu_speed.ANALYTIC):
        split, alternatives = _split(table, "H200", "resnet50-train", method, value)
        if split is not None:
            predicted[method] = {g: gpu_speed.predict_ceiling(value, split, table.get("H200"), table.get(g),
                                                              alternatives=alternatives).value for g in LAMBDA_GPUS}
    for i, a in enumerate(LAMBDA_GPUS):
        for b in LAMBDA_GPUS[i + 1:]:
            truth = lam[b] / lam[a]
            cells = []
            for method in (gpu_speed.MEASURED, gpu_speed.ANALYTIC):
                if method not in predicted:
                    cells.append("– | –")
                    continue
                ratio = predicted[method][b] / predicted[method][a]
                error = ratio / truth - 1
                cells.append(f"{ratio:.2f} | {error:+.1%}" + (f" | {'yes' if abs(error) <= RATIO_TARGET else 'no'}"
                                                             if method == gpu_speed.MEASURED else ""))
            lines.append(f"| {b} / {a} | {truth:.2f} | " + " | ".join(cells) + " |")
    lines += ["", "Predicted ceilings: " + "; ".join(
        f"{g} {predicted[gpu_speed.MEASURED][g]:,.0f}" for g in LAMBDA_GPUS) if gpu_speed.MEASURED in predicted else ""]
    return lines


def _held_out(points: list[tuple[int, float]]) -> dict[int, float]:
    """Each batch's relative error of the fit made without it (three points or more)."""
    out = {}
    if len(points) < 3:
        return out
    for i, (batch, peak) in enumerate(points):
        rest = points[:i] + points[i + 1:]
        try:
            out[batch] = fit_memory(rest).predict(batch) / peak - 1
        except ValueError:
            continue
    return out


def memory_table(reports: list[dict[str, Any]]) -> list[str]:
    lines = ["### Analytic GPU memory against measured peaks (allocator's peak, GiB)", "",
             "| workload | batch | measured | analytic | error | -5%..+10% | fit, this batch held out |",
             "|---|---|---|---|---|---|---|"]
    worst_under, worst_over, worst_fit = 0.0, 0.0, 0.0
    for report in reports:
        analytic = {a["batch_size"]: a for a in report.get("analytic") or []}
        measured = [m for m in report.get("measured") or [] if m["status"] == "ok" and m["allocated_bytes"]]
        held = _held_out([(m["batch"], float(m["allocated_bytes"])) for m in measured])
        for m in measured:
            a = analytic.get(m["batch"])
            error = a["peak_bytes"] / m["allocated_bytes"] - 1 if a else None
            ok = error is not None and -MEMORY_UNDER <= error <= MEMORY_OVER
            fit = held.get(m["batch"])
            if error is not None:
                worst_under, worst_over = min(worst_under, error), max(worst_over, error)
            if fit is not None:
                worst_fit = max(worst_fit, abs(fit))
            estimate = "–" if a is None else f"{a['peak_bytes'] / 2**30:.2f}"
            cells = (report["workload"], m["batch"], f"{m['allocated_bytes'] / 2**30:.2f}", estimate,
                     "–" if error is None else f"{error:+.1%}", "yes" if ok else "no",
                     "–" if fit is None else f"{fit:+.1%}")
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", f"Analytic: from {worst_under:+.1%} to {worst_over:+.1%}; fit held out: at most {worst_fit:.1%}."]
    return lines


def _memory_reports(paths: list[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        data = json.loads(path.read_text())
        out.extend(data if isinstance(data, list) else [data])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", type=Path, default=[],
                        help="A store with GPU-ceiling points (repeatable; default: the H100 and H200 examples).")
    parser.add_argument("--memory", action="append", type=Path, default=[],
                        help="`sizer gpumem --json` output (one report or a list; repeatable).")
    args = parser.parse_args(argv)
    table = load_gpu_table()
    stores = args.store or [ROOT / s for s in DEFAULT_STORES]
    ceilings = ceilings_from_stores(stores) + documented_ceilings()
    print("\n".join(ceiling_table(table, ceilings)))
    print()
    print("\n".join(lambda_table(table, ceilings)))
    print()
    if args.memory:
        print("\n".join(memory_table(_memory_reports(args.memory))))
    else:
        print("(memory: no `sizer gpumem --json` file given with --memory, measured on a GPU: table skipped; "
              "lab/benchmarks/data/h200_gpumem.json holds the H200's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
