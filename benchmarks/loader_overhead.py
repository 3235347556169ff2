"""Where does the JPEG pipeline's CPU time per image go? The loader alone, without a model.

resnet50-train's loader (DataLoader workers: read, decode, RandomResizedCrop, flip, uint8, collate
into shared memory) against the calibration's loop (`cpu-calibrate`: the same decode and augment of
images held in memory), each one after the other in this run, on the same CPUs:

- `calib`: the calibration loop on N CPUs at once (one process each, pinned), images/s per CPU;
- `calib-dataset`: the same loop over the dataset's own images (read into memory first);
- `warm`: the loader with N workers on those N CPUs, the dataset in the page cache, read-ahead on,
  each worker filling its shared-memory batches again (as a sweep runs it);
- `warm-fresh-blocks`: the same with a fresh shared-memory block per batch (`recycle_batches` off),
  as the stock collate allocates;
- `warm-per-image`: the same with a tensor per image collated into the batch (`assemble_batches`
  off) instead of the batch written image by image into shared memory;
- `cold`: the same after the dataset's pages were dropped (reads from the disk), read-ahead on;
- `cold-serial`: cold, each worker reading one file at a time (`read_threads=0`).

The consumer (the training process's place) only takes the batches, on a CPU of its own when the
host has one beyond the N, so the figures are the loader's own. Each loader figure is also given
over calibration x N: what the pipeline loses before any training step runs; and each variant's
cost per image from /proc: user and kernel CPU milliseconds and minor page faults of the processes
doing the work (a fresh shared-memory batch is zeroed page by page as the worker fills it).

Usage: python benchmarks/loader_overhead.py [--data DIR] [--workers N] [--seconds 6] [--repeats 3]
       [--batch 64] [--images 3000] [--json]
(--data: a dataset made by `sizer data imagenet`, or the data root of a sweep; default: a temporary
one of --images JPEGs)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("calib", "calib-dataset", "warm", "warm-fresh-blocks", "warm-per-image", "cold", "cold-serial")
SIZE = 224


def children_cost() -> dict[str, float]:
    """CPU seconds (user, kernel) and minor page faults of this process's children and theirs (the
    loader's workers, or the calibration's processes): the meter's own process-tree counters."""
    from workloads.measure import children_map, tree_counters

    total = {"user_s": 0.0, "sys_s": 0.0, "faults": 0.0}
    for child in children_map().get(os.getpid(), []):
        c = tree_counters(child)
        total["user_s"] += c["cpu_user_seconds"]
        total["sys_s"] += c["cpu_system_seconds"]
        total["faults"] += c["minor_faults"]
    return total


def per_image(before: dict[str, float], after: dict[str, float], images: float) -> dict[str, float]:
    """What each image cost the processes measured: user and kernel milliseconds, page faults."""
    d = {k: after[k] - before[k] for k in before}
    return {"user_ms": 1000 * d["user_s"] / images, "sys_ms": 1000 * d["sys_s"] / images, "faults": d["faults"] / images}


def calibration_rate(cpus: list[int], images: list[bytes] | None, seconds: float) -> tuple[float, dict]:
    """Images/s per CPU with every CPU running cpu-calibrate's own loop at once, over `images` or
    (None) the calibration's fixed set; and what each image cost."""
    from workloads.cpu_calibrate import CpuCalibrate, busy_neighbours

    with busy_neighbours(cpus, CpuCalibrate.defaults["gpu"], images) as rates:
        before, t0 = children_cost(), time.perf_counter()
        time.sleep(seconds)
        after, wall = children_cost(), time.perf_counter() - t0
    rate = statistics.mean(rates)
    return rate, per_image(before, after, rate * len(cpus) * wall)


def loader_rate(samples, worker_cpus: list[int], consumer_cpu: int, read_threads: int, batch: int,
                seconds: float, seed: int, assemble: bool = True, recycle: bool = True) -> tuple[float, dict]:
    """Images/s the loader hands over, its workers on `worker_cpus`, taken on `consumer_cpu`; and
    what each image cost the workers."""
    import torch

    from workloads import torch_common as tc

    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(worker_cpus))  # the workers inherit it when forked
    loader = tc.make_loader(tc.ImageSamples(samples, tc.train_transform(SIZE, "device"), read_threads, assemble), batch,
                            len(worker_cpus), 2, pin_memory=False, shuffle=True, seed=seed, recycle_batches=recycle)
    try:
        with tc.closing_loader(loader):
            it = iter(loader)
            next(it)  # the workers are forked now
            os.sched_setaffinity(0, {consumer_cpu})
            torch.set_num_threads(1)
            for _ in range(2 * len(worker_cpus)):  # spend the batches read ahead before timing
                next(it)
            n, before, t0 = 0, children_cost(), time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                n += next(it)[0].shape[0]
            rate, after = n / (time.perf_counter() - t0), children_cost()
            return rate, per_image(before, after, n)
    finally:
        os.sched_setaffinity(0, own)


def image_folder(path: Path) -> Path | None:
    """The image folder (with train/) of a dataset made by `sizer data imagenet` or of a sweep's data
    root (--data, as sizer lays it out); None if it has none."""
    for folder in (path, path / "imagenet"):
        if (folder / "train").is_dir():
            return folder
    return None


@contextlib.contextmanager
def images_at(folder: Path | None, images: int, prefix: str) -> Iterator[Path]:
    """`folder`, or a temporary dataset of `images` generated JPEGs removed afterwards."""
    if folder is not None:
        yield folder
        return
    from workloads.synth import generate_imagenet

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        generate_imagenet(tmp, images, 100, seed=0, val_fraction=0.0)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    if args.workers < 1 or args.workers > len(cpus):
        print(f"loader_overhead: error: --workers must be 1 to {len(cpus)} (the CPUs this process may use)", file=sys.stderr)
        return 2
    if args.seconds <= 0 or args.repeats < 1 or args.batch < 1:
        print("loader_overhead: error: --seconds, --repeats and --batch must be positive", file=sys.stderr)
        return 2
    if args.data:
        args.data = image_folder(args.data)
        if args.data is None:
            print("loader_overhead: error: no train/ folder in --data (make one with `sizer data imagenet`)", file=sys.stderr)
            return 2

    from sizer.cache import evict
    from workloads import formats

    with images_at(args.data, args.images, "loader-overhead-") as data:
        samples = formats.open_image_dataset(data, "files", split="train")
        worker_cpus = cpus[-args.workers:]
        consumer_cpu = cpus[0] if len(cpus) > args.workers else worker_cpus[0]
        step = max(1, len(samples) // 500)
        dataset_images = [samples[i][0] for i in range(0, len(samples), step)][:500]
        train_dir = data / "train"
        rows: dict[str, list[float]] = {v: [] for v in VARIANTS}
        costs: dict[str, list[dict]] = {v: [] for v in VARIANTS}

        def keep(name: str, measured: tuple[float, dict], per_cpu: int = 1) -> None:
            rows[name].append(measured[0] / per_cpu)
            costs[name].append(measured[1])

        for rep in range(args.repeats):
            keep("calib", calibration_rate(worker_cpus, None, args.seconds))
            keep("calib-dataset", calibration_rate(worker_cpus, dataset_images, args.seconds))
            for name, read_threads, cold, assemble, recycle in (
                    ("warm", 4, False, True, True), ("warm-fresh-blocks", 4, False, True, False),
                    ("warm-per-image", 4, False, False, False), ("cold", 4, True, True, True),
                    ("cold-serial", 0, True, True, True)):
                if cold:
                    evict(train_dir)
                else:
                    for i in range(len(samples)):  # into the page cache
                        samples[i]
                # per worker CPU, as the calibration
                keep(name, loader_rate(samples, worker_cpus, consumer_cpu, read_threads, args.batch, args.seconds, rep,
                                       assemble, recycle), args.workers)
            print(f"  run {rep + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items()), file=sys.stderr, flush=True)

    med = {k: statistics.median(v) for k, v in rows.items()}
    table = [{"variant": k, "images_per_s_per_cpu": med[k], "over_calib": med[k] / med["calib"],
              **{f"{c}_per_image": statistics.median(x[c] for x in costs[k]) for c in ("user_ms", "sys_ms", "faults")},
              "runs": [round(x, 1) for x in rows[k]]} for k in VARIANTS]
    shared = consumer_cpu in worker_cpus
    if args.json:
        print(json.dumps({"workers": args.workers, "worker_cpus": worker_cpus, "consumer_cpu": consumer_cpu,
                          "consumer_shares_a_worker_cpu": shared, "images": len(samples), "table": table}, indent=2))
        return 0
    print(f"{args.workers} worker(s) on CPUs {worker_cpus}, consumer on CPU {consumer_cpu}"
          f"{' (shared with a worker)' if shared else ''}; {len(samples)} images; medians of {args.repeats} runs")
    print(f"{'variant':<18} {'images/s per CPU':>16} {'over calib':>10} {'user ms':>8} {'kernel ms':>9} {'faults':>7}  (per image)")
    for t in table:
        print(f"{t['variant']:<18} {t['images_per_s_per_cpu']:>16,.0f} {t['over_calib']:>10.2f} "
              f"{t['user_ms_per_image']:>8.2f} {t['sys_ms_per_image']:>9.2f} {t['faults_per_image']:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
