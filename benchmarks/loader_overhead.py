"""Where does the JPEG pipeline's CPU time per image go? The loader alone, without a model.

resnet50-train's loader (DataLoader workers: read, decode, RandomResizedCrop, flip, uint8, collate
into shared memory) against the calibration's loop (`cpu-calibrate`: the same decode and augment of
images held in memory), each one after the other in this run, on the same CPUs:

- `calib`: the calibration loop on N CPUs at once (one process each, pinned), images/s per CPU;
- `calib-dataset`: the same loop over the dataset's own images (read into memory first);
- `warm`: the loader with N workers on those N CPUs, the dataset in the page cache, read-ahead on;
- `cold`: the same after the dataset's pages were dropped (reads from the disk), read-ahead on;
- `cold-serial`: cold, each worker reading one file at a time (`read_threads=0`).

The consumer (the training process's place) only takes the batches, on a CPU of its own when the
host has one beyond the N, so the figures are the loader's own. Each loader figure is also given
over calibration x N: what the pipeline loses before any training step runs.

Usage: python benchmarks/loader_overhead.py [--data DIR] [--workers N] [--seconds 6] [--repeats 3]
       [--batch 64] [--images 3000] [--json]
(--data: a dataset made by `sizer data imagenet`, or the data root of a sweep; default: a temporary
one of --images JPEGs)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("calib", "calib-dataset", "warm", "cold", "cold-serial")
SIZE = 224


def calibration_rate(cpus: list[int], images: list[bytes] | None, seconds: float) -> float:
    """Images/s per CPU with every CPU running cpu-calibrate's own loop at once, over `images` or
    (None) the calibration's fixed set."""
    from workloads.cpu_calibrate import CpuCalibrate, busy_neighbours

    with busy_neighbours(cpus, CpuCalibrate.defaults["gpu"], images) as rates:
        time.sleep(seconds)
    return statistics.mean(rates)


def loader_rate(samples, worker_cpus: list[int], consumer_cpu: int, read_threads: int, batch: int,
                seconds: float, seed: int) -> float:
    """Images/s the loader hands over, its workers on `worker_cpus`, taken on `consumer_cpu`."""
    import torch

    from workloads import torch_common as tc

    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(worker_cpus))  # the workers inherit it when forked
    loader = tc.make_loader(tc.ImageSamples(samples, tc.train_transform(SIZE, "device"), read_threads), batch,
                            len(worker_cpus), 2, pin_memory=False, shuffle=True, seed=seed)
    try:
        with tc.closing_loader(loader):
            it = iter(loader)
            next(it)  # the workers are forked now
            os.sched_setaffinity(0, {consumer_cpu})
            torch.set_num_threads(1)
            for _ in range(2 * len(worker_cpus)):  # spend the batches read ahead before timing
                next(it)
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                n += next(it)[0].shape[0]
            return n / (time.perf_counter() - t0)
    finally:
        os.sched_setaffinity(0, own)


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
    if args.data and not (args.data / "train").is_dir() and (args.data / "imagenet" / "train").is_dir():
        args.data = args.data / "imagenet"  # the data root a sweep takes (--data), as sizer lays it out
    if args.data and not (args.data / "train").is_dir():
        print(f"loader_overhead: error: no train/ folder in {args.data} (make one with `sizer data imagenet`)", file=sys.stderr)
        return 2

    from sizer.cache import evict
    from workloads import formats
    from workloads.synth import generate_imagenet

    tmp = None
    data = args.data
    if data is None:
        tmp = Path(tempfile.mkdtemp(prefix="loader-overhead-"))
        data = tmp
        generate_imagenet(data, args.images, 100, seed=0, val_fraction=0.0)
    try:
        samples = formats.open_image_dataset(data, "files", split="train")
        worker_cpus = cpus[-args.workers:]
        consumer_cpu = cpus[0] if len(cpus) > args.workers else worker_cpus[0]
        step = max(1, len(samples) // 500)
        dataset_images = [samples[i][0] for i in range(0, len(samples), step)][:500]
        train_dir = data / "train"
        rows: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for rep in range(args.repeats):
            rows["calib"].append(calibration_rate(worker_cpus, None, args.seconds))
            rows["calib-dataset"].append(calibration_rate(worker_cpus, dataset_images, args.seconds))
            for name, read_threads, cold in (("warm", 4, False), ("cold", 4, True), ("cold-serial", 0, True)):
                if cold:
                    evict(train_dir)
                else:
                    for i in range(len(samples)):  # into the page cache
                        samples[i]
                rate = loader_rate(samples, worker_cpus, consumer_cpu, read_threads, args.batch, args.seconds, rep)
                rows[name].append(rate / args.workers)  # per worker CPU, as the calibration
            print(f"  run {rep + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items()), file=sys.stderr, flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in rows.items()}
    table = [{"variant": k, "images_per_s_per_cpu": med[k], "over_calib": med[k] / med["calib"],
              "runs": [round(x, 1) for x in rows[k]]} for k in VARIANTS]
    shared = consumer_cpu in worker_cpus
    if args.json:
        print(json.dumps({"workers": args.workers, "worker_cpus": worker_cpus, "consumer_cpu": consumer_cpu,
                          "consumer_shares_a_worker_cpu": shared, "images": len(samples), "table": table}, indent=2))
        return 0
    print(f"{args.workers} worker(s) on CPUs {worker_cpus}, consumer on CPU {consumer_cpu}"
          f"{' (shared with a worker)' if shared else ''}; {len(samples)} images; medians of {args.repeats} runs")
    print(f"{'variant':<14} {'images/s per CPU':>16} {'over calib':>10}")
    for t in table:
        print(f"{t['variant']:<14} {t['images_per_s_per_cpu']:>16,.0f} {t['over_calib']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
