"""Which GPU: one fitted workload sized on every GPU type the catalogs sell, ranked by cost per
million samples (`sizer recommend --gpu any`).

On the GPU that measured it the workload is sized as measured; on every other one its ceiling is
predicted (`sizer.model.gpu_speed.fit_for_gpu`: the measured ceiling's time split into tensor-,
memory- and latency-bound shares, each scaled by the target's figures) and the same CPU, RAM and
disk terms feed it, so a slower GPU needs fewer vCPUs. A GPU type whose every card is too small for
the job's measured GPU memory, or whose pick falls below a stated rate (`--min-rate`), is left out
with the reason."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from sizer.catalog import InstanceType, normalize_gpu
from sizer.gpu_table import GpuTable
from sizer.model import WorkloadFit
from sizer.model.gpu_speed import TimeSplit, fit_for_gpu
from sizer.points import Point
from sizer.recommend import Option
from sizer.sizing.size import Sizing, SizingTerms, size

MEASURED = "measured"
PREDICTED = "predicted"
# (the split, its alternatives) a workload's ceiling is carried to other GPUs with; called once.
SplitSource = Callable[[], tuple[TimeSplit, Sequence[TimeSplit]]]


@dataclass(frozen=True)
class GpuChoice:
    """One GPU type for one workload: measured or predicted there, its ceiling with its range, its
    sizing (None where it is left out), and why it is left out."""

    gpu: str
    basis: str
    ceiling: float | None
    ceiling_low: float | None
    ceiling_high: float | None
    sizing: Sizing | None
    left_out: str = ""

    @property
    def chosen(self) -> Option | None:
        return None if self.sizing is None else self.sizing.chosen

    @property
    def cost_per_million(self) -> float | None:
        chosen = self.chosen
        return None if chosen is None else chosen.cost_per_million

    def rank_key(self) -> tuple:
        """Left out last, then GPU types where nothing meets the tolerance, then by cost per million."""
        cost = self.cost_per_million
        return (bool(self.left_out), self.chosen is None, math.inf if cost is None else cost, self.gpu)


def _memory_reason(fit: WorkloadFit, rows: Sequence[InstanceType]) -> str:
    needed = fit.gpu_memory_gib
    if needed is None or any(r.gpu_memory_gib >= needed for r in rows):
        return ""
    largest = max(r.gpu_memory_gib for r in rows)
    return f"needs {needed:.3g} GiB of GPU memory (measured); its cards have {largest:g} GiB"


def _pessimistic_rate(choice: Sizing) -> float | None:
    chosen = choice.chosen
    if chosen is None or choice.ceiling is None:
        return None
    share = chosen.share_pessimistic if chosen.share_pessimistic is not None else chosen.predicted / choice.ceiling
    return share * choice.ceiling


def rank_gpus(points: Sequence[Point], fit: WorkloadFit, catalog: Sequence[InstanceType], terms: SizingTerms,
              table: GpuTable, split: SplitSource | None, min_rate: float | None = None) -> list[GpuChoice]:
    """Every GPU type of `catalog` for one workload (`terms`: the levels and the job, its catalog and
    target are replaced per GPU type), best first (see the module). `split` is needed for GPU types
    other than the measured one; without it they are left out, saying so."""
    measured = normalize_gpu(fit.gpu_model) if fit.gpu_model else ""
    by_gpu: dict[str, list[InstanceType]] = {}
    for row in catalog:
        by_gpu.setdefault(normalize_gpu(row.gpu), []).append(row)
    carried: tuple[TimeSplit, Sequence[TimeSplit]] | None = None
    out = []
    for gpu, rows in sorted(by_gpu.items()):
        if gpu == measured:
            own, basis = fit, MEASURED
        elif gpu not in table or measured not in table:
            missing = gpu if gpu not in table else measured
            out.append(GpuChoice(gpu, PREDICTED, None, None, None, None, f"no figures of the {missing} in the GPU table"))
            continue
        elif split is None:
            out.append(GpuChoice(gpu, PREDICTED, None, None, None, None,
                                 "its speed cannot be predicted: no kernel split was recorded and the analytic "
                                 "count needs torch (pip install 'sizer[torch]')"))
            continue
        else:
            carried = carried or split()
            own, basis = fit_for_gpu(fit, gpu, table, carried[0], carried[1]), PREDICTED
        ceiling = own.params["gpu_ceiling"]
        reason = _memory_reason(fit, rows)
        if reason:
            out.append(GpuChoice(gpu, basis, ceiling.value, ceiling.low, ceiling.high, None, reason))
            continue
        sizing = size(points, own, dataclasses.replace(terms, catalog=tuple(rows), target=gpu))
        rate = _pessimistic_rate(sizing)
        if min_rate is not None and rate is not None and rate < min_rate:
            reason = f"its pick reads {rate:,.0f} {fit.unit} at the pessimistic end, below --min-rate {min_rate:,.0f}"
        out.append(GpuChoice(gpu, basis, ceiling.value, ceiling.low, ceiling.high, sizing, reason))
    return sorted(out, key=GpuChoice.rank_key)
