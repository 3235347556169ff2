"""A sweep's datasets: where each lives under the data root, how large the generated ones are, and
generating (or finding) each once before the first point."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizer import cache
from sizer.datasets import ensure_imagenet, ensure_ptb

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


@dataclass(frozen=True)
class DatasetNeeds:
    """What a sweep's points read: the data root, the dataset kinds, and for the image dataset how
    many images and which packed formats (lmdb, rec, tar) besides the files (`SweepPlan.dataset_needs`)."""

    data_dir: Path
    kinds: tuple[str, ...]
    images: int
    image_formats: tuple[str, ...] = ("files",)


def prepare_datasets(needs: DatasetNeeds) -> dict[str, Dataset]:
    """Generate (or find) each dataset once; returns kind -> Dataset."""
    out: dict[str, Dataset] = {}
    needs.data_dir.mkdir(parents=True, exist_ok=True)
    for kind in needs.kinds:
        where = dataset_dir(needs.data_dir, kind)
        if kind == "imagenet":
            where.mkdir(exist_ok=True)
            info = ensure_imagenet(where, images=needs.images, seed=0, formats=needs.image_formats)
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        elif kind == "ptb":
            where.mkdir(exist_ok=True)
            info = ensure_ptb(where)
            out[kind] = Dataset(kind, _info_path(info, where), dict(info))
        else:
            out[kind] = Dataset(kind, where, {"path": str(where)})
    return out
