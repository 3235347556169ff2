"""How long does stopping the image loader take once a point's window is over?

A point ends by closing its DataLoader (`torch_common.closing_loader`). A worker in the middle of a
batch used to finish it first (256 images: about a second of decoding per worker), though nothing
reads it; now the loader's `stop` flag makes the worker drop it at its next image. Measured here in
one run, each variant after the other, on the same CPUs:

- `drop`: as a point closes its loader now (the flag reaches the workers);
- `finish`: the flag hidden from the workers, so each finishes its batch as before.

Each repeat: a fresh loader (resnet50-infer's eval transform to uint8, batches assembled in shared
memory), a few batches taken, then the time `closing_loader` takes to stop the workers.

Usage: python benchmarks/loader_teardown.py [--data DIR] [--workers 2] [--batch 256] [--repeats 5]
       [--images 1200] [--json]
(--data: a dataset made by `sizer data imagenet`, or the data root of a sweep; default: a temporary
one of --images JPEGs)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("drop", "finish")


def close_time(data: Path, variant: str, workers: int, batch: int, taken: int = 3) -> float:
    """Seconds from the end of the loop over `taken` batches to the loader's workers stopped."""
    from workloads import formats
    from workloads import torch_common as tc

    samples = formats.open_image_dataset(data, "files", "train")
    dataset = tc.ImageSamples(samples, tc.eval_transform(224, 256), read_threads=4)
    loader = tc.make_loader(dataset, batch, workers, prefetch_factor=2, pin_memory=False, shuffle=False, seed=0)
    with tc.closing_loader(loader):
        batches = iter(loader)
        for _ in range(taken):
            next(batches)
        if variant == "finish":
            dataset.stop = types.SimpleNamespace(value=0)  # the workers keep the real flag, never set
        started = time.perf_counter()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--images", type=int, default=1200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.batch < 1 or args.repeats < 1:
        print("loader_teardown: error: --workers, --batch and --repeats must be at least 1", file=sys.stderr)
        return 2
    from loader_overhead import image_folder, images_at

    if args.data is not None:
        args.data = image_folder(args.data)
        if args.data is None:
            print("loader_teardown: error: no train/ folder in --data (make one with `sizer data imagenet`)", file=sys.stderr)
            return 2
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with images_at(args.data, args.images, "loader-teardown-") as data:
        for _ in range(args.repeats):
            for variant in VARIANTS:  # interleaved: a drifting host falls on both alike
                times[variant].append(close_time(data, variant, args.workers, args.batch))
    rows = [{"variant": v, "median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "runs": t}
            for v, t in times.items()]
    if args.json:
        print(json.dumps({"workers": args.workers, "batch": args.batch, "rows": rows}, indent=2))
        return 0
    print(f"closing the loader: {args.workers} workers, batches of {args.batch}, {args.repeats} runs each")
    print(f"{'variant':<8} {'median':>8} {'min':>8} {'max':>8}")
    for r in rows:
        print(f"{r['variant']:<8} {r['median_s']:>7.2f}s {r['min_s']:>7.2f}s {r['max_s']:>7.2f}s")
    finish = next(r["median_s"] for r in rows if r["variant"] == "finish")
    drop = next(r["median_s"] for r in rows if r["variant"] == "drop")
    if drop > 0:
        print(f"finish / drop: {finish / drop:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
