"""Datasets a sweep reads: generated once (synthetic ImageNet-like JPEGs, a PTB-like corpus), packed
into the shard formats the workloads read, or a real dataset the user points at.

Generation and packing are idempotent: a dataset whose manifest matches the request is reused, a
different one is regenerated. Work happens in a scratch directory beside the target that is renamed
into place at the end, so Ctrl-C or a crash never leaves a half-written dataset behind (a killed
run's scratch directory is removed by the next one).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence, TypeGuard

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sizer.console import err_console
from sizer.errors import SizerError
from sizer.limits import sysfs
from workloads import formats, synth

PACKED_FORMATS = ("lmdb", "rec", "tar")
DEFAULT_IMAGES = 10_000
DEFAULT_CLASSES = 100
PACK_VERSION = 1
SCRATCH_PREFIX = ".sizer-tmp-"
# Generated JPEGs average about 110 kB; room for that plus the filesystem's own overhead.
_BYTES_PER_IMAGE_ESTIMATE = 140_000
_PTB_BYTES_ESTIMATE = 8_000_000


# ---------------------------------------------------------------- helpers
@contextmanager
def _progress_bar(enabled: bool, description: str, total: int) -> Iterator[Any]:
    """A rich progress bar on stderr (stdout stays clean for --json); a no-op when disabled."""
    if not enabled:
        yield lambda done, _total=None: None
        return
    columns = (
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done, _total=None: bar.update(task, completed=done)


@contextmanager
def _scratch(parent: Path, tag: str) -> Iterator[Path]:
    """A scratch directory in `parent` (same filesystem, so results rename into place), removed on
    exit whatever happens."""
    parent.mkdir(parents=True, exist_ok=True)
    sysfs.remove_orphaned_dirs(parent, SCRATCH_PREFIX)  # left by a killed run
    path = parent / f"{SCRATCH_PREFIX}{os.getpid()}-{tag}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _replace(src: Path, dst: Path) -> None:
    """Move `src` to `dst`, removing what `dst` held."""
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif dst.exists() or dst.is_symlink():
        dst.unlink()
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)


def _check_writable_dir(path: Path, what: str) -> None:
    if path.exists() and not path.is_dir():
        raise SizerError(f"{what} {path} exists and is not a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SizerError(f"{what} {path} is not writable (no write permission on {probe})")


def _check_free_space(path: Path, need: int, what: str) -> None:
    probe = path
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise SizerError(
            f"not enough free disk space for {what} under {path}: about {need / 1e9:.1f} GB needed, {free / 1e9:.1f} GB free"
        )


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- ImageNet-like
_IDENTITY_KEYS = ("generator", "generator_version", "seed", "n_images", "n_classes", "val_fraction")


def _is_generated(manifest: dict | None, generator: str = "synthetic-imagenet") -> TypeGuard[dict]:
    """Whether `manifest` is one sizer's `generator` wrote."""
    return manifest is not None and manifest.get("generator") == generator


def default_classes(images: int, val_fraction: float = 0.1) -> int:
    """DEFAULT_CLASSES, or fewer when there are fewer training images than that."""
    return max(1, min(DEFAULT_CLASSES, images - int(round(images * val_fraction))))


def validate_imagenet_request(images: int, classes: int, seed: int, val_fraction: float, processes: int | None) -> None:
    """Raise SizerError for a request that cannot make a usable dataset."""
    if images < 1:
        raise SizerError(f"--images must be at least 1 (got {images})")
    if classes < 1:
        raise SizerError(f"--classes must be at least 1 (got {classes})")
    if seed < 0:
        raise SizerError(f"--seed must be a non-negative integer (got {seed})")
    if not 0.0 <= val_fraction <= 0.5:
        raise SizerError(f"--val-fraction must be between 0 and 0.5 (got {val_fraction})")
    n_train = images - int(round(images * val_fraction))
    if classes > n_train:
        raise SizerError(f"--classes {classes} exceeds the {n_train} training images: every class needs at least one")
    if processes is not None and processes < 1:
        raise SizerError(f"--processes must be at least 1 (got {processes})")


def ensure_imagenet(
    data_dir: str | os.PathLike,
    images: int = DEFAULT_IMAGES,
    seed: int = 0,
    formats: Sequence[str] = ("files",),
    val_fraction: float = 0.1,
    progress: bool = True,
    classes: int | None = None,
    processes: int | None = None,
) -> dict:
    """Make sure `data_dir` holds the synthetic ImageNet-like set (train/ and val/ class folders of
    JPEGs, manifest.json) for these parameters (`classes` default: 100, fewer for a set with fewer
    training images), packed into each requested format under
    `data_dir/packed/`; generate or pack only what is missing or stale. Returns `imagenet_info`."""
    data_dir = Path(data_dir).expanduser()
    fmts = _check_formats(formats)
    if classes is None:
        classes = default_classes(images, val_fraction)
    validate_imagenet_request(images, classes, seed, val_fraction, processes)
    _check_writable_dir(data_dir, "dataset directory")
    want = {
        "generator": "synthetic-imagenet",
        "generator_version": synth.GENERATOR_VERSION,
        "seed": int(seed),
        "n_images": int(images),
        "n_classes": int(classes),
        "val_fraction": float(val_fraction),
    }
    current = _read_json(data_dir / "manifest.json")
    generated = False
    if not (_is_generated(current) and all(current.get(k) == v for k, v in want.items())):
        if not _is_generated(current) and any((data_dir / s).exists() for s in ("train", "val", "packed")):
            raise SizerError(
                f"{data_dir} holds a dataset sizer did not generate (no synthetic manifest.json); "
                "use it as a real dataset or choose an empty directory"
            )
        need = images * _BYTES_PER_IMAGE_ESTIMATE * (1 + len([f for f in fmts if f != "files"]))
        _check_free_space(data_dir, need, f"{images} images")
        with _scratch(data_dir, "imagenet") as tmp:
            with _progress_bar(progress, "generating JPEGs", images) as update:
                synth.generate_imagenet(tmp, images, classes, seed, val_fraction, processes, update)
            # The old set (ours, per its manifest) goes; the new one moves in, manifest last.
            (data_dir / "manifest.json").unlink(missing_ok=True)
            shutil.rmtree(data_dir / "packed", ignore_errors=True)
            for split in ("train", "val"):
                if (tmp / split).exists():
                    _replace(tmp / split, data_dir / split)
                else:
                    shutil.rmtree(data_dir / split, ignore_errors=True)
            _replace(tmp / "manifest.json", data_dir / "manifest.json")
        generated = True
    for fmt in fmts:
        if fmt != "files":
            ensure_packed(data_dir, fmt, progress=progress, seed=seed)
    info = imagenet_info(data_dir)
    info["generated_now"] = generated
    return info


def _check_formats(fmts: Sequence[str]) -> list[str]:
    if isinstance(fmts, str):
        fmts = [fmts]
    unknown = [f for f in fmts if f not in formats.FORMATS]
    if unknown:
        raise SizerError(f"unknown dataset format(s) {', '.join(unknown)} (known: {', '.join(formats.FORMATS)})")
    return list(dict.fromkeys(fmts))


def _splits(data_dir: Path) -> list[str]:
    return [s for s in ("train", "val") if (data_dir / s).is_dir()]


def _source_identity(data_dir: Path, folders: dict[str, formats.ImageFolder]) -> dict:
    """What a packed copy was made from: the generator manifest, or counts and bytes of a real set."""
    manifest = _read_json(data_dir / "manifest.json")
    if _is_generated(manifest):
        return {k: manifest.get(k) for k in _IDENTITY_KEYS}
    return {
        split: {"images": len(folder), "bytes": sum(p.stat().st_size for p in folder.files())}
        for split, folder in folders.items()
    }


def ensure_packed(data_dir: str | os.PathLike, fmt: str, progress: bool = True, seed: int | None = None) -> dict:
    """Pack every split of the JPEG folder `data_dir` into `data_dir/packed/<fmt>` (shuffled with
    `seed`, as convert_imageset --shuffle and im2rec do; default: the generator's seed, else 0),
    unless an up-to-date copy is there.
    Returns {format, path, splits: {split: {records, bytes, files}}, packed_now}."""
    data_dir = Path(data_dir).expanduser()
    if fmt not in PACKED_FORMATS:
        raise SizerError(f"unknown packed format {fmt!r} (known: {', '.join(PACKED_FORMATS)})")
    splits = _splits(data_dir)
    if "train" not in splits:
        raise SizerError(f"{data_dir} has no train/ folder of class subfolders to pack")
    _check_writable_dir(data_dir / "packed", "packed dataset directory")
    if seed is None:
        manifest = _read_json(data_dir / "manifest.json")
        seed = int(manifest.get("seed", 0)) if _is_generated(manifest) else 0
    folders = {split: formats.ImageFolder(data_dir / split) for split in splits}
    for split, folder in folders.items():
        if len(folder) == 0:
            raise SizerError(f"{data_dir / split} holds no images (.JPEG/.jpg/.png in class subfolders)")
    stamp = {"pack_version": PACK_VERSION, "format": fmt, "seed": int(seed), "source": _source_identity(data_dir, folders)}
    packed_root = data_dir / "packed"
    stamp_path = packed_root / fmt / "stamp.json"
    packed_now = False
    if _read_json(stamp_path) != stamp or not all(_packed_complete(packed_root, fmt, s) for s in splits):
        total_bytes = sum(sum(p.stat().st_size for p in f.files()) for f in folders.values())
        _check_free_space(packed_root, int(total_bytes * 1.1), f"the {fmt} copy")
        total = sum(len(f) for f in folders.values())
        with _scratch(packed_root, fmt) as tmp, _progress_bar(progress, f"packing {fmt}", total) as update:
            done = 0
            for split, folder in folders.items():
                order = list(range(len(folder)))
                random.Random(f"{seed}-{split}").shuffle(order)
                keys = _tar_keys(folder) if fmt == "tar" else None
                writer = formats.open_writer(fmt, tmp, split, fsync=True)
                with writer:
                    for i in order:
                        data, label = folder[i]
                        writer.write(keys[i] if keys else folder.relpath(i), data, label)
                        done += 1
                        if done % 64 == 0:
                            update(done)
            update(done)
            _write_json(tmp / fmt / "stamp.json", stamp)
            formats.close_lmdb_envs()
            _replace(tmp / fmt, packed_root / fmt)
        packed_now = True
    info = packed_info(data_dir, fmt)
    info["packed_now"] = packed_now
    return info


def _tar_keys(folder: formats.ImageFolder) -> list[str]:
    """WebDataset keys: the file's stem where stems are unique (ImageNet's are), else its path."""
    stems = [Path(folder.relpath(i)).stem for i in range(len(folder))]
    if len(set(stems)) == len(stems):
        return stems
    return [folder.relpath(i).rsplit(".", 1)[0] for i in range(len(folder))]


def _packed_complete(root: Path, fmt: str, split: str) -> bool:
    return all(p.exists() for p in formats.packed_paths(root, fmt, split))


def packed_info(data_dir: str | os.PathLike, fmt: str) -> dict:
    data_dir = Path(data_dir)
    out: dict[str, Any] = {"format": fmt, "path": str(data_dir / "packed" / fmt), "splits": {}}
    for split in _splits(data_dir):
        if not _packed_complete(data_dir / "packed", fmt, split):
            continue
        reader = formats.open_image_dataset(data_dir, fmt, split)
        files = reader.files()
        out["splits"][split] = {
            "records": len(reader),
            "bytes": sum(p.stat().st_size for p in files),
            "files": [str(p) for p in files],
        }
    return out


def imagenet_info(data_dir: str | os.PathLike) -> dict:
    """Describe an ImageNet-style folder (generated or real): counts, bytes, sizes, packed copies."""
    data_dir = Path(data_dir)
    manifest = _read_json(data_dir / "manifest.json")
    splits = {}
    sizes: list[int] = []
    classes: set[str] = set()
    for split in _splits(data_dir):
        folder = formats.ImageFolder(data_dir / split)
        split_sizes = [p.stat().st_size for p in folder.files()]
        sizes += split_sizes
        classes.update(folder.classes)
        splits[split] = {"images": len(folder), "bytes": sum(split_sizes), "classes": len(folder.classes)}
    info: dict[str, Any] = {
        "kind": "imagenet",
        "path": str(data_dir),
        "synthetic": _is_generated(manifest),
        "n_images": len(sizes),
        "n_train": splits.get("train", {}).get("images", 0),
        "n_val": splits.get("val", {}).get("images", 0),
        "n_classes": len(classes),
        "total_bytes": sum(sizes),
        "mean_kb": (sum(sizes) / len(sizes) / synth.KB) if sizes else 0.0,
        "splits": splits,
    }
    if _is_generated(manifest):
        info.update(
            seed=manifest["seed"],
            generator_version=manifest["generator_version"],
            median_width=manifest["median_width"],
            median_height=manifest["median_height"],
        )
    else:
        info.update(_sample_dimensions(data_dir))
    info["formats"] = {"files": {"format": "files", "path": str(data_dir), "splits": splits}}
    for fmt in PACKED_FORMATS:
        if (data_dir / "packed" / fmt).is_dir():
            info["formats"][fmt] = packed_info(data_dir, fmt)
    return info


def _sample_dimensions(data_dir: Path, n: int = 200) -> dict:
    """Median width and height of up to n images of train (headers only)."""
    from PIL import Image

    folder = formats.ImageFolder(data_dir / "train")
    step = max(1, len(folder) // n)
    widths, heights = [], []
    for i in range(0, len(folder), step):
        try:
            with Image.open(folder.root / folder.relpath(i)) as img:
                widths.append(img.width)
                heights.append(img.height)
        except OSError:
            continue
    if not widths:
        return {"median_width": 0.0, "median_height": 0.0}
    widths.sort()
    heights.sort()
    return {"median_width": float(widths[len(widths) // 2]), "median_height": float(heights[len(heights) // 2])}


def check_imagenet_layout(path: str | os.PathLike) -> Path:
    """Raise SizerError unless `path` is an ImageNet-style folder: `path/train/<class>/<images>`
    (val/ optional, same layout), readable. Returns the path."""
    data_dir = Path(path).expanduser()
    if not data_dir.exists():
        raise SizerError(f"dataset path {data_dir} does not exist")
    if not data_dir.is_dir():
        raise SizerError(f"dataset path {data_dir} is not a directory")
    if not os.access(data_dir, os.R_OK | os.X_OK):
        raise SizerError(f"dataset path {data_dir} is not readable")
    if not (data_dir / "train").is_dir():
        raise SizerError(f"{data_dir} has no train/ directory (expected train/<class>/<image>.JPEG)")
    for split in _splits(data_dir):
        classes = [e for e in os.scandir(data_dir / split) if e.is_dir()]
        if not classes:
            raise SizerError(f"{data_dir / split} has no class subdirectories (expected {split}/<class>/<image>.JPEG)")
        folder = formats.ImageFolder(data_dir / split)
        if len(folder) == 0:
            raise SizerError(f"{data_dir / split} has class subdirectories but no .JPEG/.jpg/.png images in them")
        first = folder.root / folder.relpath(0)
        if not os.access(first, os.R_OK):
            raise SizerError(f"cannot read {first}")
    return data_dir


def accept_real_imagenet(path: str | os.PathLike) -> dict:
    """Validate a user's ImageNet-style dataset (see `check_imagenet_layout`); raises SizerError
    naming what is missing; returns `imagenet_info`."""
    return imagenet_info(check_imagenet_layout(path))


# ---------------------------------------------------------------- PTB
def ptb_info(data_dir: str | os.PathLike) -> dict:
    data_dir = Path(data_dir)
    manifest = _read_json(data_dir / "manifest.json")
    splits = {}
    vocab: set[str] = set()
    for name in synth.PTB_FILES:
        split = name.split(".")[1]
        text = (data_dir / name).read_text(encoding="utf-8")
        lines = [line for line in text.split("\n") if line.strip()]
        words = text.split()
        if split == "train":
            vocab = set(words)
        splits[split] = {
            "file": str(data_dir / name),
            "sentences": len(lines),
            "tokens": len(words) + len(lines),  # + one end-of-sentence per line, as PTB counts
            "bytes": (data_dir / name).stat().st_size,
        }
    synthetic = _is_generated(manifest, "synthetic-ptb")
    info: dict[str, Any] = {
        "kind": "ptb",
        "path": str(data_dir),
        "synthetic": synthetic,
        "vocabulary": len(vocab) + 1,  # + end of sentence
        "total_bytes": sum(s["bytes"] for s in splits.values()),
        "splits": splits,
    }
    if _is_generated(manifest, "synthetic-ptb"):
        info["seed"] = manifest.get("seed")
        info["generator_version"] = manifest.get("generator_version")
    return info


def ensure_ptb(data_dir: str | os.PathLike, seed: int = 0, progress: bool = True) -> dict:
    """Make sure `data_dir` holds ptb.train.txt, ptb.valid.txt and ptb.test.txt: a real copy found
    there is used as it is; otherwise the synthetic corpus for `seed` is generated (or regenerated
    when the one there was made with another seed or generator version). Returns `ptb_info`."""
    data_dir = Path(data_dir).expanduser()
    if seed < 0:
        raise SizerError(f"--seed must be a non-negative integer (got {seed})")
    _check_writable_dir(data_dir, "corpus directory")
    manifest = _read_json(data_dir / "manifest.json")
    present = all((data_dir / f).is_file() for f in synth.PTB_FILES)
    synthetic_here = _is_generated(manifest, "synthetic-ptb")
    if present and not synthetic_here:
        return accept_real_ptb(data_dir)  # a real copy dropped in
    current = (_is_generated(manifest, "synthetic-ptb") and manifest.get("seed") == seed
               and manifest.get("generator_version") == synth.GENERATOR_VERSION)
    if not (present and current):
        if not synthetic_here and any((data_dir / f).exists() for f in synth.PTB_FILES):
            raise SizerError(
                f"{data_dir} holds part of a corpus sizer did not generate "
                f"(expected all of {', '.join(synth.PTB_FILES)}); complete it or choose an empty directory"
            )
        _check_free_space(data_dir, _PTB_BYTES_ESTIMATE, "the PTB-like corpus")
        with _scratch(data_dir, "ptb") as tmp, _progress_bar(progress, "generating PTB-like corpus", 1) as update:
            synth.generate_ptb(tmp, seed=seed)
            (data_dir / "manifest.json").unlink(missing_ok=True)
            for name in synth.PTB_FILES:
                _replace(tmp / name, data_dir / name)
            _replace(tmp / "manifest.json", data_dir / "manifest.json")
            update(1)
    return ptb_info(data_dir)


def accept_real_ptb(path: str | os.PathLike) -> dict:
    """Validate a user's PTB copy (the three files of Mikolov's preprocessing). Raises SizerError
    naming what is missing or malformed; returns `ptb_info`."""
    data_dir = Path(path).expanduser()
    if not data_dir.is_dir():
        raise SizerError(f"PTB path {data_dir} is not a directory")
    missing = [f for f in synth.PTB_FILES if not (data_dir / f).is_file()]
    if missing:
        raise SizerError(f"{data_dir} lacks {', '.join(missing)} (a PTB copy has {', '.join(synth.PTB_FILES)})")
    for name in synth.PTB_FILES:
        p = data_dir / name
        if not os.access(p, os.R_OK):
            raise SizerError(f"cannot read {p}")
        try:
            with open(p, encoding="utf-8") as fh:
                head = fh.read(65536)
        except UnicodeDecodeError:
            raise SizerError(f"{p} is not UTF-8 text") from None
        if not head.split():
            raise SizerError(f"{p} is empty")
    info = ptb_info(data_dir)
    counts: Counter[str] = Counter()
    train_words = set((data_dir / "ptb.train.txt").read_text(encoding="utf-8").split())
    for split in ("valid", "test"):
        for w in (data_dir / f"ptb.{split}.txt").read_text(encoding="utf-8").split():
            if w not in train_words:
                counts[split] += 1
    if counts:
        detail = ", ".join(f"{n} in {s}" for s, n in counts.items())
        raise SizerError(
            f"{data_dir}: words of valid/test missing from ptb.train.txt ({detail}); "
            "a PTB copy maps them to <unk> so a vocabulary built from train covers every split"
        )
    return info
