"""`sizer data imagenet|ptb|pack`: generate the synthetic datasets and pack them into shard formats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from sizer import datasets
from sizer.commands.options import JsonOutput, finite, out_flag
from sizer.console import console, emit, print_table
from sizer.errors import SizerError
from sizer.units import format_bytes

SeedOption = Annotated[int, typer.Option("--seed", help="Seed; the same seed gives the same files.")]


def _render_imagenet(info: dict[str, Any]) -> None:
    state = "generated" if info.get("generated_now") else "already there"
    table = Table(title=f"ImageNet-like dataset at {info['path']} ({state})", show_header=False, title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value")
    table.add_row("images", f"{info['n_images']:,} ({info['n_train']:,} train, {info['n_val']:,} val)")
    table.add_row("classes", f"{info['n_classes']:,}")
    table.add_row("size", f"{format_bytes(info['total_bytes'])}, mean {info['mean_kb']:.1f} kB per JPEG")
    table.add_row("median dimensions", f"{info['median_width']:.0f} x {info['median_height']:.0f} px")
    if "seed" in info:
        table.add_row("seed", str(info["seed"]))
    for fmt, packed in info["formats"].items():
        if fmt == "files":
            continue
        parts = ", ".join(f"{s}: {v['records']:,} records, {format_bytes(v['bytes'])}" for s, v in packed["splits"].items())
        table.add_row(f"packed {fmt}", f"{packed['path']} ({parts})")
    print_table(table)


def _render_ptb(info: dict[str, Any]) -> None:
    kind = "synthetic" if info["synthetic"] else "real copy"
    table = Table(title=f"PTB-like corpus at {info['path']} ({kind})", title_justify="left")
    for column in ("file", "sentences", "tokens", "size"):
        table.add_column(column, justify="left" if column == "file" else "right", no_wrap=column != "file")
    for split in info["splits"].values():
        table.add_row(Path(split["file"]).name, f"{split['sentences']:,}", f"{split['tokens']:,}", format_bytes(split["bytes"]))
    print_table(table)
    console.print(f"vocabulary: {info['vocabulary']:,} words (with end of sentence)")


def _render_packed(info: dict[str, Any]) -> None:
    state = "packed" if info.get("packed_now") else "already up to date"
    table = Table(title=f"{info['format']} shards at {info['path']} ({state})", title_justify="left")
    for column in ("split", "records", "size", "files"):
        table.add_column(column, justify="left" if column == "split" else "right", no_wrap=column != "split")
    for split, v in info["splits"].items():
        table.add_row(split, f"{v['records']:,}", format_bytes(v["bytes"]), str(len(v["files"])))
    print_table(table)


def imagenet(
    out: Annotated[Path, out_flag("Directory to write the dataset into (train/, val/, manifest.json).")],
    images: Annotated[int, typer.Option("--images", help="Number of images (train + val).")] = datasets.DEFAULT_IMAGES,
    seed: SeedOption = 0,
    classes: Annotated[
        Optional[int], typer.Option("--classes", help="Number of classes (default: 100, or one per training image if fewer).")
    ] = None,
    processes: Annotated[
        Optional[int], typer.Option("--processes", help="Generator processes (default: every usable CPU).")
    ] = None,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", callback=finite, help="Share of the images that go to val/.")
    ] = 0.1,
    as_json: JsonOutput = False,
) -> None:
    """Generate synthetic ImageNet-like JPEGs: about 500x375 px, about 110 kB at quality 90.

    Writes OUT/train/<class>/*.JPEG, OUT/val/<class>/*.JPEG and OUT/manifest.json, in parallel with
    a progress bar. The same seed gives the same files; a dataset already there with the same
    parameters is reused.

    Example: sizer data imagenet --images 20000 --out /data/imagenet-synth --seed 1
    """
    info = datasets.ensure_imagenet(
        out, images=images, seed=seed, classes=classes, processes=processes, val_fraction=val_fraction, progress=not as_json
    )
    emit(info, as_json, _render_imagenet)


def ptb(
    out: Annotated[Path, out_flag("Directory for ptb.train.txt, ptb.valid.txt and ptb.test.txt.")],
    seed: SeedOption = 0,
    as_json: JsonOutput = False,
) -> None:
    """Generate a PTB-like corpus: 10k-word vocabulary, about 929k / 73k / 82k tokens.

    The files have PTB's names and layout, so a real PTB copy can take their place. A real copy
    already in OUT is validated and used as it is.

    Example: sizer data ptb --out /data/ptb --json
    """
    emit(datasets.ensure_ptb(out, seed=seed, progress=not as_json), as_json, _render_ptb)


def pack(
    data_dir: Annotated[Path, typer.Argument(help="An ImageNet-style folder (DIR/train/<class>/<image>, optional DIR/val/).")],
    fmt: Annotated[str, typer.Option("--format", help="Shard format: lmdb, rec or tar.")],
    seed: Annotated[
        Optional[int], typer.Option("--seed", help="Shuffle seed (default: the dataset's generator seed, else 0).")
    ] = None,
    as_json: JsonOutput = False,
) -> None:
    """Pack an image folder into LMDB (as convert_imageset), RecordIO (as im2rec) or tar shards (WebDataset).

    Writes DIR/packed/<format>/, shuffled, fsynced; an up-to-date copy is left as it is.

    Example: sizer data pack /data/imagenet-synth --format rec
    """
    if fmt not in datasets.PACKED_FORMATS:
        raise SizerError(f"--format must be one of {', '.join(datasets.PACKED_FORMATS)} (got {fmt!r})")
    if not data_dir.is_dir():
        raise SizerError(f"dataset directory {data_dir} does not exist")
    if seed is not None and seed < 0:
        raise SizerError(f"--seed must be a non-negative integer (got {seed})")
    datasets.check_imagenet_layout(data_dir)
    emit(datasets.ensure_packed(data_dir, fmt, progress=not as_json, seed=seed), as_json, _render_packed)
