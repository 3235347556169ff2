"""ImageNet preprocessing: a JPEG folder -> images resized to a short side (256 on the GPU profile)
and re-encoded, packed into shards (config `format`: lmdb as NVCaffe's convert_imageset writes,
rec as MXNet's im2rec writes, or tar as WebDataset shards), output fsynced.

N = vCPUs worker processes (config `processes` overrides) read, decode, resize and encode, each
with a few threads reading its files ahead (config `read_threads`) so cold reads overlap decoding;
the main process writes the shard, as the frameworks' own tools do. Decoding uses PIL's draft mode (DCT-domain
downscaling by 1/2, 1/4 or 1/8, never below the target size), as fast preprocessing scripts do. The
cpu-small profile writes 32 px thumbnails so that on a small host the CPU side outruns a
standard cloud disk and the result depends on the disk, as the full-size job does on a large host.

`short_side: 0` packs the JPEGs as they are (im2rec --pass-through, convert_imageset --encoded
without resizing): no decoding, so the job is bound by the disk on any host.

One pass over the folder, from whatever cache state the runner left (cold, normally); the point
stops early once the meter has a stable figure. Reports images/s, and MB/s read (JPEG bytes in)
and written (encoded bytes out) in `extra`.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workloads import distributed
from workloads.distributed import STREAMS, run_ranks
from workloads.formats.readers import open_image_dataset, read_ahead, read_file, with_format_modules
from workloads.formats.writers import open_writer
from workloads.measure import Meter, bottleneck_label
from workloads.protocol import AT_LEAST_ONE, NOT_NEGATIVE, Range, Result, Spec, Workload, register

_SHARD_FORMATS = ("lmdb", "rec", "tar")


def resize_short_side(data: bytes, short_side: int, quality: int, draft: bool) -> bytes:
    """JPEG bytes -> JPEG bytes of the image scaled so its short side is `short_side`."""
    from PIL import Image

    img: Image.Image = Image.open(io.BytesIO(data))
    if draft:
        img.draft("RGB", (short_side, short_side))  # picks the largest DCT scale keeping both sides >= target
    img = img.convert("RGB")
    w, h = img.size
    scale = short_side / min(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    if size != img.size:
        # Image.BILINEAR (also on Pillow 9.0, before Image.Resampling) is set through globals(), unseen by mypy
        img = img.resize(size, Image.BILINEAR, reducing_gap=None)  # type: ignore[attr-defined]
    out = io.BytesIO()
    img.save(out, "JPEG", quality=quality)
    return out.getvalue()


def _process_chunk(task: tuple[str, list[tuple[str, int]], int, int, bool, int]) -> list[tuple[str, bytes, int, int]]:
    """Worker: (root, [(relative path, label)], short side, quality, draft, read threads) ->
    [(key, bytes, label, bytes in)]. A few threads read the chunk's files ahead while this process
    decodes, so a cold read's latency overlaps decoding instead of adding to it."""
    root, items, short_side, quality, draft, read_threads = task
    contents = read_ahead(read_file, [os.path.join(root, rel) for rel, _ in items], max(1, read_threads))
    out = []
    for (rel, label), data in zip(items, contents):
        packed = data if short_side <= 0 else resize_short_side(data, short_side, quality, draft)
        out.append((rel, packed, label, len(data)))
    return out


def _serve(conn: Any, fn: Any) -> None:
    """A worker's loop: a task in, `fn(task)` out, over the worker's own pipe."""
    while True:
        conn.send(fn(conn.recv()))


class ChunkWorkers:
    """N forked processes running `fn` on tasks, each fed over a pipe of its own, results taken as
    they come.

    Not `multiprocessing.Pool`: its workers share one task queue and one result queue, each behind
    a lock, and `Pool.terminate()` with megabyte results in flight can hang for good (3 of 85
    preprocessing points on an H200 host, at 12 and 16 vCPUs). Here no lock is shared: `stop()`
    kills the processes at any moment and nothing waits on them.
    """

    def __init__(self, processes: int, fn: Any = _process_chunk, depth: int = 2):
        ctx = multiprocessing.get_context("fork")
        self.depth = depth  # tasks queued per worker, so none waits for the next
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        for _ in range(processes):
            mine, theirs = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_serve, args=(theirs, fn), daemon=True)
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)

    def imap_unordered(self, tasks: list[Any]):
        from multiprocessing.connection import Connection, wait

        todo = iter(tasks)
        pending = {conn: 0 for conn in self.conns}

        def feed(conn: Any) -> None:
            task = next(todo, None)
            if task is not None:
                conn.send(task)
                pending[conn] += 1

        try:
            for conn in self.conns:
                for _ in range(self.depth):
                    feed(conn)
            while any(pending.values()):
                # wait() returns some of the objects it was given: these pipes' Connections
                for conn in cast("list[Connection]", wait([c for c, n in pending.items() if n])):
                    part = conn.recv()
                    pending[conn] -= 1
                    feed(conn)
                    yield part
        except (EOFError, OSError):  # its end of the pipe closed under it
            raise RuntimeError("a preprocessing worker process died (killed at the memory limit?)") from None

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.join()
        for conn in self.conns:
            conn.close()

    def __enter__(self) -> "ChunkWorkers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@register
class ImagenetPreprocess(Workload):
    name = "imagenet-preprocess"
    framework = "pillow"
    unit = "images/s"
    description = "JPEG folder -> short-side-resized, re-encoded LMDB / RecordIO / tar shards, fsynced"
    dataset = "imagenet"
    stresses = "disk, CPU"
    reads_once = True
    multi_gpu = STREAMS  # one independent job per GPU, each on its shard of the folder (workloads.distributed)
    requires_modules = ("PIL",)
    choices = {"format": _SHARD_FORMATS}
    setting_types = {"processes": (int, type(None)), "max_images": (int, type(None))}
    # short_side 0 packs the JPEGs as they are; JPEG quality runs from 1 to 100.
    ranges = {"short_side": NOT_NEGATIVE, "quality": Range(1, 100), "processes": AT_LEAST_ONE,
              "read_threads": NOT_NEGATIVE, "chunk": AT_LEAST_ONE, "max_images": AT_LEAST_ONE}
    defaults = {
        "gpu": {"format": "lmdb", "split": "train", "short_side": 256, "quality": 90, "draft": True,
                "processes": None, "read_threads": 4, "chunk": 32, "max_images": None, "keep_output": False},
        "cpu-small": {"format": "lmdb", "split": "train", "short_side": 32, "quality": 90, "draft": True,
                      "processes": None, "read_threads": 4, "chunk": 16, "max_images": None, "keep_output": False},
    }

    @classmethod
    def modules_for(cls, profile: str, config: dict[str, Any]) -> tuple[str, ...]:
        """PIL, and the writer of the output `format` (lmdb)."""
        return with_format_modules(cls.requires_modules, {**cls.defaults.get(profile, {}), **config}.get("format"))

    def _folder(self, spec: Spec, cfg: dict[str, Any]):
        if not spec.data_dir:
            raise ValueError("spec.data_dir is empty: point it at a JPEG folder made by `sizer data imagenet`")
        folder = open_image_dataset(spec.data_dir, "files", cfg["split"])
        if len(folder) == 0:
            raise ValueError(f"no JPEG images under {Path(spec.data_dir) / cfg['split']}")
        return folder

    def prepare(self, spec: Spec) -> None:
        self._folder(spec, self.config_for(spec))

    def run(self, spec: Spec) -> Result:
        if spec.gpus > 1:  # one stream per GPU, each on its shard of the folder
            return run_ranks(self, spec)
        cfg = self.config_for(spec)
        fmt = cfg["format"]
        if fmt not in _SHARD_FORMATS:
            raise ValueError(f"config format={fmt!r} is not one of {', '.join(_SHARD_FORMATS)}")
        result = self.new_result(spec, cfg)
        folder = self._folder(spec, cfg)
        items = list(folder.samples)
        if cfg.get("max_images"):
            items = items[: int(cfg["max_images"])]
        plan = distributed.current()
        if plan is not None:  # a stream of a multi-GPU point: its shard of the folder
            items = list(distributed.shard(items, plan.rank, plan.world))
        processes = int(cfg.get("processes") or max(1, spec.vcpus))
        tasks = _tasks(str(folder.root), items, cfg)
        # Warm-up: the workers' start and each one's first chunk (nothing is read ahead beyond that).
        meter = distributed.new_meter(
            warmup_steps=processes + 1,
            time_budget_s=spec.time_budget_s,
            min_steps=int(cfg.get("min_steps", 10)),
            spread_target=spec.spread_target,
            gpu=False,
        )
        out_parent = Path(tempfile.mkdtemp(prefix="preprocess-", dir=spec.work_dir or None))
        extra = result.extra
        tally = _Tally()
        t_start = time.perf_counter()
        try:
            writer = open_writer(fmt, out_parent, cfg["split"], fsync=True)
            with ChunkWorkers(processes) as workers:
                stopped_by_meter = _write_parts(workers.imap_unordered(tasks), writer, meter, tally)
                if not any(not s[2] for s in meter.steps):
                    raise ValueError(
                        f"{len(items)} images make {len(tasks)} chunks, too few to measure past the "
                        f"{meter.warmup_steps}-chunk warm-up: use a larger folder or a smaller chunk"
                    )
                # While the workers live: their counters count.
                meter.finish(result, spec.vcpus, input_ended=not stopped_by_meter)
            t_sync = time.perf_counter()
            writer.close()  # commits and fsyncs the shard
            extra["fsync_s"] = time.perf_counter() - t_sync
            extra["output_bytes"] = sum(_size(p) for p in writer.outputs())
        finally:
            if not cfg.get("keep_output"):
                shutil.rmtree(out_parent, ignore_errors=True)
        extra.update(tally.report(len(items), time.perf_counter() - t_start, result.counters.get("measured_seconds") or 0.0),
                     processes=processes, output_dir=str(out_parent) if cfg.get("keep_output") else "")
        result.bottleneck = bottleneck_label(result.counters, spec.vcpus)
        return result


def _tasks(root: str, items: list[tuple[str, int]], cfg: dict[str, Any]) -> list[tuple]:
    """The folder's images in chunks of config `chunk`, as `_process_chunk` takes them."""
    chunk = max(1, int(cfg["chunk"]))
    return [
        (root, items[i : i + chunk], int(cfg["short_side"]), int(cfg["quality"]), bool(cfg["draft"]),
         int(cfg["read_threads"]))
        for i in range(0, len(items), chunk)
    ]


@dataclass
class _Tally:
    """Images and bytes through the job: all of them, and the bytes of the measured window's."""

    images_done: int = 0
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    measured_in: float = 0.0
    measured_out: float = 0.0

    def report(self, images_total: int, wall_s: float, measured_s: float) -> dict[str, Any]:
        return {
            "images_total": images_total,
            "images_done": self.images_done,
            "complete_pass": self.images_done == images_total,
            # one pass at most: the page cache never helps
            "epochs": self.images_done / images_total if images_total else 0.0,
            "input_bytes": self.bytes_in,
            "encoded_bytes": self.bytes_out,
            "pass_images_per_s": self.images_done / wall_s if wall_s > 0 else 0.0,
            "read_mb_s": self.measured_in / measured_s / 1e6 if measured_s else 0.0,
            "write_mb_s": self.measured_out / measured_s / 1e6 if measured_s else 0.0,
        }


def _write_parts(parts: Iterable[list[tuple[str, bytes, int, int]]], writer: Any, meter: Meter, tally: _Tally) -> bool:
    """Write each chunk's images as the workers finish them, a chunk a step of the meter, until the
    chunks run out or the meter is done; returns whether the meter stopped it."""
    last = time.perf_counter()
    for part in parts:
        for key, data, label, n_in in part:
            writer.write(key, data, label)
            tally.bytes_in += n_in
            tally.bytes_out += len(data)
        now = time.perf_counter()
        was_measuring = meter.measuring
        meter.step(now - last, len(part))
        last = now
        tally.images_done += len(part)
        if was_measuring:
            tally.measured_in += sum(p[3] for p in part)
            tally.measured_out += sum(len(p[1]) for p in part)
        if meter.done():
            return True
    return False


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0
