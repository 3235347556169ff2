"""A sweep's datasets: where each lives under the data root, how large the generated ones are, and
generating (or finding) each once before the first point."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sizer import cache
from sizer.variants import SYNTHETIC_INPUT

if TYPE_CHECKING:
    from sizer.sweep.plan import SweepPlan

GENERATED_DATASETS = ("imagenet", "ptb")
# Synthetic dataset sizes: many times a loader's prefetch depth, so a cold pass is disk-bound
# for long enough to be measured (see DESIGN, "Measuring a point").
DATASET_IMAGES = {"cpu-small": 2048, "gpu": 50_000}
IMAGE_BYTES_ESTIMATE = 115_000  # the synthetic JPEGs average about 110 KB
PTB_BYTES_ESTIMATE = 6_000_000


@dataclass
class Dataset:
    kind: str
    path: Path  # what is evicted before each point
    info: dict[str, Any]

    @property
    def nbytes(self) -> int:
        for key in ("bytes", "total_bytes", "size_bytes"):
            if isinstance(self.info.get(key), (int, float)):
                return int(self.info[key])
        return cache.total_bytes(self.path)


def dataset_bytes_estimate(kind: str, profile: str) -> int:
    """The size of a generated dataset before it exists (0 for one the workload brings)."""
    if kind == "imagenet":
        return DATASET_IMAGES.get(profile, 2048) * IMAGE_BYTES_ESTIMATE
    if kind == "ptb":
        return PTB_BYTES_ESTIMATE
    return 0


def dataset_dir(data_root: Path, kind: str) -> Path:
    """Each generated dataset has its own folder under the data root (imagenet/, ptb/); a workload
    reading other files gets the root itself."""
    return data_root / kind if kind in GENERATED_DATASETS else data_root


def _info_path(info: dict[str, Any], fallback: Path) -> Path:
    for key in ("path", "dir", "root", "data_dir"):
        if info.get(key):
            return Path(info[key])
    return fallback


def _image_count(plan: SweepPlan) -> int:
    """The most images any workload of the plan asks for, at least the profile's default."""
    counts = [DATASET_IMAGES.get(plan.profile, 2048)]
    for cls in plan.classes.values():
        cfg = cls.defaults.get(plan.profile, {})
        if cls.dataset == "imagenet" and isinstance(cfg.get("dataset_images"), int):
            counts.append(int(cfg["dataset_images"]))
    return max(counts)


def _image_formats(plan: SweepPlan) -> tuple[str, ...]:
    """The image files plus every packed format (lmdb, rec, tar) a point of the plan reads."""
    formats = {"files"}
    for p in plan.points:
        cls = plan.classes[p.workload]
        if cls.dataset != "imagenet":
            continue
        cfg = dict(cls.defaults.get(plan.profile, {}))
        cfg.update(p.config)
        fmt = cfg.get("input")
        if isinstance(fmt, str) and fmt not in (SYNTHETIC_INPUT, "files", ""):
            formats.add(fmt)
    return tuple(sorted(formats))


def prepare_datasets(plan: SweepPlan, kinds: list[str] | None = None) -> dict[str, Dataset]:
    """Generate (or find) each dataset once; returns kind -> Dataset."""
    out: dict[str, Dataset] = {}
    kinds = plan.datasets if kinds is None else kinds
    plan.data_dir.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        where = dataset_dir(plan.data_dir, kind)
        if kind == "imagenet":
            from sizer.datasets import ensure_imagenet

            where.mkdir(exist_ok=True)
            info = ensure_imagenet(where, images=_image_count(plan), seed=0, formats=_image_formats(plan))
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        elif kind == "ptb":
            from sizer.datasets import ensure_ptb

            where.mkdir(exist_ok=True)
            info = ensure_ptb(where)
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        else:
            out[kind] = Dataset(kind, where, {"path": str(where)})
    return out
