"""Where does the JPEG pipeline's CPU time per image go? The loader alone, then step by step to training.

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

Those take the batches and drop them. The ladder from there to training (warm, each step adding what
the training process of a sweep does with a batch; --variants picks them):

- `warm-copy`: the batch's pixels copied into a second host buffer (the pin-memory copy, no CUDA);
- `warm-pin`: the DataLoader's pin-memory thread copies each batch into pinned memory (CUDA);
- `warm-h2d`: pinned, then copied to the GPU and normalized there (CUDA);
- `warm-train`: pinned, copied, and a ResNet-50 bf16 SGD step on it: resnet50-train's own consumer;
- `warm-train-registered`: the same step, with no pin-memory thread: each worker's recycled buffer is
  registered with CUDA once (cudaHostRegister) and the batch is copied to the GPU straight from it;
- `warm-train-unordered`, `warm-train-registered-unordered`: those two with batches taken as the
  workers finish them (`in_order=False`), so no finished batch waits behind a slower worker's.

The consumer (the training process's place) runs on a CPU of its own when the host has one beyond
the N (--consumer-cpu own, the default), so the figures are the loader's own; or on the workers' N
CPUs (--consumer-cpu shared), as a sweep's training process runs. Each loader figure is also given
over calibration x N: what the pipeline loses; and each variant's cost per image from /proc: user
and kernel CPU milliseconds and minor page faults of the processes doing the work (a fresh
shared-memory batch is zeroed page by page as the worker fills it), the consumer process's own
CPU milliseconds (its pin-memory thread and CUDA threads included), and the workers' decoding
threads' own CPU time in decode and augmentation (the calibration's per-image work, timed inside the
loader: what the workers spend beyond it is the reads, the batches and the hand-over).

Usage: python benchmarks/loader_overhead.py [--data DIR] [--workers N] [--seconds 6] [--repeats 3]
       [--batch 64] [--images 3000] [--variants calib,warm,...] [--consumer-cpu own|shared] [--json]
       python benchmarks/loader_overhead.py --from RUN.json    (the table of a --json run again, measuring nothing)
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

# loader variants: (read threads per worker, cold page cache, assembled batches, recycled buffers, consumer,
# batches taken in order)
LOADER_VARIANTS = {
    "warm": (4, False, True, True, "drop", True),
    "warm-fresh-blocks": (4, False, True, False, "drop", True),
    "warm-per-image": (4, False, False, False, "drop", True),
    "cold": (4, True, True, True, "drop", True),
    "cold-serial": (0, True, True, True, "drop", True),
    "warm-copy": (4, False, True, True, "copy", True),
    "warm-pin": (4, False, True, True, "pin", True),
    "warm-h2d": (4, False, True, True, "h2d", True),
    "warm-train": (4, False, True, True, "train", True),
    "warm-train-registered": (4, False, True, True, "registered", True),
    "warm-train-unordered": (4, False, True, True, "train", False),
    "warm-train-registered-unordered": (4, False, True, True, "registered", False),
}
VARIANTS = ("calib", "calib-dataset", *LOADER_VARIANTS)
DEFAULT_VARIANTS = ("calib", "calib-dataset", "warm", "warm-fresh-blocks", "warm-per-image", "cold", "cold-serial")
CUDA_CONSUMERS = ("pin", "h2d", "train", "registered")
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


def own_cpu_seconds() -> float:
    """User + kernel CPU seconds of this process, all its threads (pin memory, CUDA) included."""
    t = os.times()
    return t.user + t.system


class Consumer:
    """What the training process's place does with each batch the loader hands over (`kind`, one of
    the ladder's: drop, copy, pin, h2d, train, registered); made once the workers are forked."""

    def __init__(self, kind: str, recycler) -> None:
        import torch

        from workloads import torch_common as tc

        self.kind, self.torch = kind, torch
        self.spare: dict[tuple, object] = {}
        self.cuda = kind in CUDA_CONSUMERS
        self.registered = tc.RegisteredCopy(recycler, "cuda") if kind == "registered" else None
        if not self.cuda:
            return
        self.to_input = tc.DeviceInput("cuda", "device", channels_last=True)
        self.step = None
        if kind in ("train", "registered"):
            model = tc.build_cnn("resnet50", "cuda", channels_last=True)
            model.train()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
            self.step = tc.cnn_sgd_step(model, optimizer, "cuda", "bf16")

    @property
    def pins(self) -> bool:
        """Whether the DataLoader's pin-memory thread copies each batch into pinned memory."""
        return self.kind in ("pin", "h2d", "train")

    def __call__(self, batch) -> None:
        images, labels = batch[0], batch[1]
        if self.kind == "copy":
            out = self.spare.get(tuple(images.shape))
            if out is None:
                out = self.spare[tuple(images.shape)] = self.torch.empty_like(images)
            out.copy_(images)
        elif self.kind in ("h2d", "train", "registered"):
            x = self.to_input(self.registered(images) if self.registered else images)
            if self.step is not None:
                self.step(x, labels)
            else:
                self.torch.cuda.current_stream().synchronize()

    def finish(self) -> None:
        """Wait for the device's queued work, so the window's time includes it."""
        if self.cuda:
            self.torch.cuda.synchronize()

    def close(self) -> None:
        if self.registered is not None:
            self.registered.close()


def loader_rate(samples, worker_cpus: list[int], consumer_cpus: list[int], read_threads: int, batch: int,
                seconds: float, seed: int, assemble: bool = True, recycle: bool = True,
                consumer: str = "drop", in_order: bool = True) -> tuple[float, dict]:
    """Images/s the loader hands over, its workers on `worker_cpus`, taken on `consumer_cpus` and
    used as `consumer` says; and what each image cost the workers (and the consumer's process)."""
    import torch

    from workloads import torch_common as tc

    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(worker_cpus))  # the workers inherit it when forked
    dataset = tc.ImageSamples(samples, tc.train_transform(SIZE, "device"), read_threads, assemble)
    loader = tc.make_loader(dataset, batch, len(worker_cpus), 2, pin_memory=consumer in ("pin", "h2d", "train"),
                            shuffle=True, seed=seed, recycle_batches=recycle, in_order=in_order)
    use = None
    try:
        with tc.closing_loader(loader):
            it = iter(loader)
            next(it)  # the workers are forked now: CUDA may start in this process
            os.sched_setaffinity(0, set(consumer_cpus))
            torch.set_num_threads(1)
            use = Consumer(consumer, dataset.recycler)
            for _ in range(2 * len(worker_cpus) + 2):  # spend the batches read ahead (and warm the step) before timing
                use(next(it))
            use.finish()
            decoding_before = dataset.decode_counters()
            n, before, own_before, t0 = 0, children_cost(), own_cpu_seconds(), time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                got = next(it)
                use(got)
                n += got[0].shape[0]
            use.finish()
            rate, after, own_after = n / (time.perf_counter() - t0), children_cost(), own_cpu_seconds()
            cost = per_image(before, after, n)
            cost["consumer_ms"] = 1000 * (own_after - own_before) / n
            decoding = {k: v - decoding_before[k] for k, v in dataset.decode_counters().items()}
            tc.decode_cost(decoding)
            if "decode_cpu_ms_per_image" in decoding:
                cost["decode_ms"] = decoding["decode_cpu_ms_per_image"]
            return rate, cost
    finally:
        if use is not None:
            use.close()
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


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"comma-separated, run in this order each repeat: {', '.join(VARIANTS)}")
    parser.add_argument("--consumer-cpu", choices=("own", "shared"), default="own",
                        help="the consumer on a CPU beside the workers' (own) or on the workers' CPUs (shared)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--from", dest="from_file", type=Path, help="print the table of a run's --json output again")
    args = parser.parse_args(argv)
    if args.from_file:
        try:
            print_run(json.loads(args.from_file.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"loader_overhead: error: cannot read a run from {args.from_file}: {exc}", file=sys.stderr)
            return 2
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if not variants or unknown:
        print(f"loader_overhead: error: unknown variant(s) {', '.join(unknown) or '(none given)'}; "
              f"choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
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
    on_gpu = [v for v in variants if v in LOADER_VARIANTS and LOADER_VARIANTS[v][4] in CUDA_CONSUMERS]
    if on_gpu and not cuda_available():
        print(f"loader_overhead: error: variants {', '.join(on_gpu)}: a CUDA GPU is needed and this host has none", file=sys.stderr)
        return 2

    from workloads import formats

    with images_at(args.data, args.images, "loader-overhead-") as data:
        samples = formats.open_image_dataset(data, "files", split="train")
        worker_cpus = cpus[-args.workers:]
        own_cpu = len(cpus) > args.workers and args.consumer_cpu == "own"
        consumer_cpus = [cpus[0]] if own_cpu else worker_cpus
        step = max(1, len(samples) // 500)
        dataset_images = [samples[i][0] for i in range(0, len(samples), step)][:500]
        train_dir = data / "train"
        rows: dict[str, list[float]] = {v: [] for v in variants}
        costs: dict[str, list[dict]] = {v: [] for v in variants}

        errors: dict[str, str] = {}
        for rep in range(args.repeats):
            for name in variants:
                if name in errors:
                    continue
                try:
                    rate, cost = measure_variant(name, samples, dataset_images, train_dir, worker_cpus, consumer_cpus,
                                                 args, rep)
                except Exception as exc:  # one variant failing (a GPU step, say) leaves the others measured
                    errors[name] = f"{type(exc).__name__}: {exc}"[:500]
                    print(f"  {name} failed: {errors[name]}", file=sys.stderr, flush=True)
                    continue
                rows[name].append(rate)
                costs[name].append(cost)
            print(f"  run {rep + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rows.items() if v), file=sys.stderr,
                  flush=True)

    run = {"workers": args.workers, "worker_cpus": worker_cpus, "consumer_cpus": consumer_cpus,
           "consumer_shares_worker_cpus": consumer_cpus == worker_cpus, "images": len(samples), "batch": args.batch,
           "repeats": args.repeats, "variants": variants,
           "table": summary_table({k: v for k, v in rows.items() if v}, costs), "errors": errors}
    if args.json:
        print(json.dumps(run, indent=2))
    else:
        print_run(run)
    return 0


def measure_variant(name: str, samples, dataset_images: list[bytes], train_dir: Path, worker_cpus: list[int],
                    consumer_cpus: list[int], args: argparse.Namespace, rep: int) -> tuple[float, dict]:
    """One run of a variant: images/s per worker CPU and what each image cost."""
    if name.startswith("calib"):
        return calibration_rate(worker_cpus, dataset_images if name == "calib-dataset" else None, args.seconds)
    from sizer.cache import evict

    read_threads, cold, assemble, recycle, consumer, in_order = LOADER_VARIANTS[name]
    if cold:
        evict(train_dir)
    else:
        for i in range(len(samples)):  # into the page cache
            samples[i]
    rate, cost = loader_rate(samples, worker_cpus, consumer_cpus, read_threads, args.batch, args.seconds, rep,
                             assemble, recycle, consumer, in_order)
    return rate / len(worker_cpus), cost  # per worker CPU, as the calibration


def print_run(run: dict) -> None:
    print(f"{run['workers']} worker(s) on CPUs {run['worker_cpus']}, consumer on CPU(s) {run['consumer_cpus']}"
          f"{' (shared with the workers)' if run['consumer_shares_worker_cpus'] else ''}; {run['images']} images, "
          f"batches of {run['batch']}; medians of {run['repeats']} runs")
    print(f"{'variant':<31} {'images/s per CPU':>16} {'over calib':>10} {'user ms':>8} {'kernel ms':>9} {'faults':>7} "
          f"{'consumer ms':>11} {'decoding ms':>11}  (per image)  runs")

    def ms(value: float | None) -> str:
        return f"{value:>11.2f}" if value is not None else f"{'-':>11}"

    for t in run["table"]:
        over = f"{t['over_calib']:>10.2f}" if t["over_calib"] is not None else f"{'-':>10}"
        print(f"{t['variant']:<31} {t['images_per_s_per_cpu']:>16,.0f} {over} {t['user_ms_per_image']:>8.2f} "
              f"{t['sys_ms_per_image']:>9.2f} {t['faults_per_image']:>7.1f} {ms(t['consumer_ms_per_image'])} "
              f"{ms(t.get('decode_ms_per_image'))}  " + ", ".join(f"{x:,.0f}" for x in t["runs"]))
    for name, error in run.get("errors", {}).items():
        print(f"{name:<31} failed: {error}")


def summary_table(rows: dict[str, list[float]], costs: dict[str, list[dict]]) -> list[dict]:
    """Medians per variant, each over the calibration's median (None where no `calib` ran)."""
    med = {k: statistics.median(v) for k, v in rows.items()}
    calib = med.get("calib")
    table = []
    for k in rows:
        optional = {c: [x[c] for x in costs[k] if c in x] for c in ("consumer_ms", "decode_ms")}
        table.append({"variant": k, "images_per_s_per_cpu": med[k], "over_calib": med[k] / calib if calib else None,
                      **{f"{c}_per_image": statistics.median(x[c] for x in costs[k]) for c in ("user_ms", "sys_ms", "faults")},
                      **{f"{c}_per_image": statistics.median(v) if v else None for c, v in optional.items()},
                      "runs": [round(x, 1) for x in rows[k]]})
    return table


if __name__ == "__main__":
    sys.exit(main())
