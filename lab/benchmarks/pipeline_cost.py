"""What does sizer's own training pipeline cost, where the CPU decides? Measures on this host.

Compares sizer's built-in `resnet50-train` (`sizer run resnet50-train ...`) with a minimal PyTorch
loop (`loop` below: a plain DataLoader over the same class folders, PIL decode, RandomResizedCrop,
horizontal flip, uint8 tensors collated by `default_collate`, normalized on the device; the same
model, batch, precision and optimizer as the built-in) on the same files and the same cores, both
measured by `sizer run` (the loop as a `--command` job reporting through `sizer_progress`): the
same cpuset, memory limit, eviction of the dataset before each point, warm-up and window. It runs
in the CPU-bound regime (vCPUs well below the knee: 4 and 8 on a GPU host), so the GPU caps neither.

Two conditions: `cold`, the files on the disk, evicted before each point as a sweep does; `warm`, a
copy in /dev/shm (`--warm-dir`), read with no disk at all. The pipelines alternate (sizer, loop,
sizer, loop, ...) `--repeats` times per vCPU level and condition.

Per vCPU level and condition it prints both rates (the median of the repeats), sizer / loop, and a
breakdown in CPU milliseconds per image from the pipelines' own counters: all of the point's CPU
(the meter's CPU time of the process tree over the window), the decode and augment (sizer's
`decode_cpu_ms_per_image`; the loop's timed `__getitem__` part after the read), the file opens and
reads (the loop's; sizer's loader CPU less its decoding, which holds its reads and batch
assembly), the collation (the loop's `default_collate`), the training process's own CPU (the
harness: sizer's meter, step clock and copies; the loop's loop), and file opens and bytes read per
image.

On the GPU: python lab/benchmarks/pipeline_cost.py --vcpus 4,8 --data /root/sizer-data --repeats 2
Smoke test on a CPU host: python lab/benchmarks/pipeline_cost.py --profile cpu-small --vcpus 1 --repeats 1 --budget 6
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The minimal loop's settings per profile: what the built-in resnet50-train runs there.
LOOP = {
    "gpu": {"model": "resnet50", "image_size": 224, "batch": 256, "device": "cuda", "precision": "bf16"},
    "cpu-small": {"model": "resnet18", "image_size": 112, "batch": 16, "device": "cpu", "precision": "fp32"},
}
# Shared counters of the loop's loader workers: seconds reading, seconds decoding and augmenting,
# images, file opens, bytes read, seconds collating.
COUNTERS = ("read_s", "decode_s", "images", "opens", "bytes", "collate_s")


# ---------------------------------------------------------------- the minimal loop (a --command job)
def run_loop(args: argparse.Namespace) -> None:
    """A plain training loop over `<data>/train/<class>/*.jpg`, reporting through `sizer_progress`
    and writing its counters to `--counters` every half second (the job is ended, not asked to stop)."""
    import multiprocessing as mp

    import sizer_progress
    import torch
    import torchvision
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset, default_collate
    from torchvision import transforms

    cfg = LOOP[args.profile]
    sums = mp.get_context("fork").Array("d", len(COUNTERS))  # forked workers add to it
    files = sorted((d.name, f.path) for d in os.scandir(Path(args.data) / "train") if d.is_dir()
                   for f in os.scandir(d.path) if f.name.lower().endswith((".jpg", ".jpeg")))
    classes = {name: i for i, name in enumerate(sorted({c for c, _ in files}))}
    augment = transforms.Compose([transforms.RandomResizedCrop(cfg["image_size"]), transforms.RandomHorizontalFlip(),
                                  transforms.PILToTensor()])

    def add(**values: float) -> None:
        with sums.get_lock():
            for key, value in values.items():
                sums[COUNTERS.index(key)] += value

    class Folder(Dataset):
        def __len__(self) -> int:
            return len(files)

        def __getitem__(self, i: int):
            label, path = files[i]
            t0 = time.thread_time()
            with open(path, "rb") as f:
                data = f.read()
            t1 = time.thread_time()
            image = augment(Image.open(__import__("io").BytesIO(data)).convert("RGB"))
            add(read_s=t1 - t0, decode_s=time.thread_time() - t1, images=1, opens=1, bytes=len(data))
            return image, classes[label]

    def collate(batch):
        t0 = time.thread_time()
        out = default_collate(batch)
        add(collate_s=time.thread_time() - t0)
        return out

    device = torch.device(cfg["device"])
    cuda = device.type == "cuda"
    loader = DataLoader(Folder(), batch_size=cfg["batch"], shuffle=True, num_workers=args.workers, collate_fn=collate,
                        pin_memory=cuda, drop_last=True, persistent_workers=args.workers > 0,
                        prefetch_factor=2 if args.workers > 0 else None)
    model = getattr(torchvision.models, cfg["model"])(weights=None).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
    snapshots: list[dict[str, float]] = []
    last = 0.0
    waited = 0.0
    while True:
        it = iter(loader)
        while True:
            t0 = time.monotonic()
            try:
                images, labels = next(it)
            except StopIteration:
                break
            waited += time.monotonic() - t0
            x = (images.to(device, non_blocking=cuda).float() - mean) / std
            if cuda:
                x = x.contiguous(memory_format=torch.channels_last)
            y = labels.to(device, non_blocking=cuda)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg["precision"] == "bf16"):
                loss = loss_fn(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if cuda:
                torch.cuda.synchronize()
            sizer_progress.step(len(labels))
            now = time.monotonic()
            if now - last >= 0.5:
                last = now
                snapshots.append({"t": now, "main_cpu_s": time.process_time(), "waited_s": waited,
                                  **{k: sums[i] for i, k in enumerate(COUNTERS)}})
                _write_json(Path(args.counters), snapshots[-200:])


def _write_json(path: Path, data: Any) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)


# ---------------------------------------------------------------- measuring both with sizer run
def sizer_run(args: argparse.Namespace, vcpus: int, data_root: Path, command: str | None) -> dict[str, Any]:
    """One `sizer run` point (the built-in, or the loop as a --command job), its JSON result."""
    base = [sys.executable, "-m", "sizer.cli", "run", "--vcpus", str(vcpus), "--ram", args.ram, "--disk", "local-nvme",
            "--profile", args.profile, "--budget", str(args.budget), "--json"]
    if command is None:
        cmd = [*base[:4], "resnet50-train", *base[4:], "--data", str(data_root)]
    else:
        cmd = [*base, "--command", command, "--data", str(data_root / "imagenet"), "--unit", "images/s"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"pipeline_cost: {' '.join(cmd[2:])} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout)


def window_counters(path: Path, seconds: float) -> dict[str, float]:
    """The loop's counters over its last `seconds` (the window sizer measured ends as the job is ended)."""
    try:
        snaps = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if len(snaps) < 2:
        return {}
    end = snaps[-1]
    start = min(snaps, key=lambda s: abs(end["t"] - s["t"] - seconds))
    span = end["t"] - start["t"]
    diff = {k: end[k] - start[k] for k in end if k != "t"}
    images = diff.get("images") or 0
    if images <= 0 or span <= 0:
        return {}
    return {"decode_ms": 1000 * diff["decode_s"] / images, "read_ms": 1000 * diff["read_s"] / images,
            "collate_ms": 1000 * diff["collate_s"] / images, "opens_per_image": diff["opens"] / images,
            "bytes_per_image": diff["bytes"] / images, "main_cpu_cores": diff["main_cpu_s"] / span,
            "waited_share": diff["waited_s"] / span}


def sizer_counters(counters: dict[str, Any]) -> dict[str, float | None]:
    """The built-in's breakdown from its own counters (per image)."""
    decode, loader = counters.get("decode_cpu_ms_per_image"), counters.get("loader_cpu_ms_per_sample")
    samples = counters.get("measured_samples") or 0
    return {"decode_ms": decode, "read_ms": None if decode is None or loader is None else loader - decode,
            "collate_ms": None, "opens_per_image": None,
            "bytes_per_image": (counters.get("read_bytes") or 0) / samples if samples else None,
            "main_cpu_cores": counters.get("main_cpu_cores")}


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every vCPU level and condition, the two pipelines alternating; each measurement's figures."""
    warm_root = args.warm_dir / "pipeline-cost"
    rows = []
    for condition in args.conditions:
        root = args.data
        if condition == "warm":
            if not (warm_root / "imagenet").is_dir():
                shutil.copytree(args.data / "imagenet", warm_root / "imagenet")
            root = warm_root
        for vcpus in args.vcpus:
            for repeat in range(args.repeats):
                for pipeline in ("sizer", "loop"):
                    rows.append(_one(args, pipeline, condition, vcpus, repeat, root))
    return rows


def _one(args: argparse.Namespace, pipeline: str, condition: str, vcpus: int, repeat: int, root: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pipeline-cost-") as tmp:
        counters_file = Path(tmp) / "loop.json"
        command = None if pipeline == "sizer" else (
            f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} loop --data {{data}} "
            f"--workers {{workers}} --profile {args.profile} --counters {shlex.quote(str(counters_file))}")
        result = sizer_run(args, vcpus, root, command)
        counters = result.get("counters") or {}
        seconds = counters.get("measured_seconds") or 0.0
        breakdown = sizer_counters(counters) if pipeline == "sizer" else window_counters(counters_file, seconds)
    total = counters.get("cpu_ms_per_sample")
    if total is None and counters.get("cgroup_cpu_seconds") and counters.get("measured_samples"):
        total = None  # the cgroup's CPU covers the whole point, not the window: left out
    row = {"pipeline": pipeline, "condition": condition, "vcpus": vcpus, "repeat": repeat, "status": result["status"],
           "throughput": result["throughput"], "spread": result["spread"], "cpu_ms_per_image": total,
           "epochs": (result.get("result") or {}).get("extra", {}).get("epochs"), **breakdown}
    print(f"  {condition} {vcpus} vCPUs, {pipeline}: {result['status']} {result['throughput']:,.1f} images/s",
          file=sys.stderr, flush=True)
    return row


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per condition and vCPU level: each pipeline's medians and sizer / loop."""
    out = []
    keys = sorted({(r["condition"], r["vcpus"]) for r in rows})
    for condition, vcpus in keys:
        entry: dict[str, Any] = {"condition": condition, "vcpus": vcpus}
        for pipeline in ("sizer", "loop"):
            mine = [r for r in rows if (r["condition"], r["vcpus"], r["pipeline"]) == (condition, vcpus, pipeline)
                    and r["status"] in ("ok", "noisy")]
            entry[pipeline] = {k: _median([r.get(k) for r in mine]) for k in (
                "throughput", "cpu_ms_per_image", "decode_ms", "read_ms", "collate_ms", "main_cpu_cores",
                "opens_per_image", "bytes_per_image", "epochs")}
            entry[pipeline]["rates"] = [r["throughput"] for r in mine]
        s, loop = entry["sizer"]["throughput"], entry["loop"]["throughput"]
        entry["ratio"] = s / loop if s and loop else None
        out.append(entry)
    return out


def _median(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(numbers) if numbers else None


def _cell(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def render(summary: list[dict[str, Any]]) -> None:
    print(f"{'condition':<6} {'vCPUs':>5} {'sizer':>9} {'loop':>9} {'ratio':>6}   per image (ms CPU): all / "
          "decode+augment / read (sizer: and batch assembly) / collate; training process cores; opens; "
          "KB (sizer: from the disk; loop: read by its workers)")
    for e in summary:
        s, lp = e["sizer"], e["loop"]
        print(f"{e['condition']:<6} {e['vcpus']:>5} {_cell(s['throughput'], '{:,.0f}'):>9} "
              f"{_cell(lp['throughput'], '{:,.0f}'):>9} {_cell(e['ratio'], '{:.3f}'):>6}")
        for name, f in (("sizer", s), ("loop", lp)):
            kb = None if f["bytes_per_image"] is None else f["bytes_per_image"] / 1024
            print(f"{'':<14}{name:>6}: {_cell(f['cpu_ms_per_image'])} / {_cell(f['decode_ms'])} / "
                  f"{_cell(f['read_ms'])} / {_cell(f['collate_ms'])}; {_cell(f['main_cpu_cores'])} cores; "
                  f"{_cell(f['opens_per_image'])} opens; {_cell(kb, '{:.0f}')} KB")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "loop":
        parser = argparse.ArgumentParser(description="the minimal loop (run by sizer as a --command job)")
        parser.add_argument("loop")
        parser.add_argument("--data", required=True)
        parser.add_argument("--workers", type=int, required=True)
        parser.add_argument("--profile", choices=sorted(LOOP), default="gpu")
        parser.add_argument("--counters", required=True)
        run_loop(parser.parse_args())
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(LOOP), default="gpu")
    parser.add_argument("--vcpus", default="4,8", help="vCPU levels, well below the knee")
    parser.add_argument("--ram", default="64G", help="the shapes' RAM (enough to hold the dataset)")
    parser.add_argument("--budget", type=float, default=10.0, help="each point's seconds (sizer run --budget)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements of each pipeline per level and condition")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("SIZER_DATA", Path.home() / ".cache/sizer/data")),
                        help="the data root: <data>/imagenet/train/<class>/*.jpg (made by `sizer data imagenet`)")
    parser.add_argument("--warm-dir", type=Path, default=Path("/dev/shm"), help="where the warm copy goes")
    parser.add_argument("--conditions", default="cold,warm")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    args.vcpus = [int(v) for v in args.vcpus.split(",")]
    args.conditions = [c for c in args.conditions.split(",") if c]
    if not (args.data / "imagenet" / "train").is_dir():
        raise SystemExit(f"pipeline_cost: no dataset under {args.data}/imagenet/train "
                         f"(make one: sizer data imagenet --images N --out {args.data}/imagenet)")
    t0 = time.monotonic()
    rows = measure(args)
    summary = summarize(rows)
    render(summary)
    print(f"({len(rows)} points in {time.monotonic() - t0:.0f} s)")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
