"""Harness fidelity and the gpu profile's code paths, on a GPU host, in a few minutes.

Runs a plain PyTorch ResNet-50 loop (lab/benchmarks/plain_resnet50.py) and then, each through the real
worker entry (`python -m workloads run`, a fresh process per point, CPU affinity set to the point's
vCPUs): resnet50-train on synthetic input (compared with the plain loop: sizer's harness must stay
within 10% of it), on JPEG files decoded by CPU workers, with nvjpeg decoding, resnet50-infer,
inception_v3-train (299 px, auxiliary head), ptb-lstm-train, imagenet-preprocess and cpu-calibrate.
Needs only torch, torchvision, numpy and PIL: it generates its own small datasets.

Usage: python lab/benchmarks/harness_fidelity.py [--out DIR] [--budget 30] [--images 20000] [--only NAME,...]
Writes every point's full Result to DIR/harness_fidelity.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sizer.variants import SYNTHETIC_INPUT  # noqa: E402
from workloads.protocol import Result, Spec  # noqa: E402


def points(data: Path, ptb: Path, cpus: int) -> list[tuple[str, str, int, dict]]:
    """(label, workload, vcpus, config) of every point to run."""
    many = min(16, cpus)
    return [
        ("train-synthetic", "resnet50-train", many, {"input": SYNTHETIC_INPUT}),
        ("train-jpeg-cpu", "resnet50-train", many, {"input": "files"}),
        ("train-jpeg-nvjpeg", "resnet50-train", min(4, cpus), {"input": "files", "decode": "gpu"}),
        ("infer-jpeg", "resnet50-infer", many, {"input": "files", "split": "train"}),
        ("inception-synthetic", "inception_v3-train", many, {"input": SYNTHETIC_INPUT}),
        ("ptb-lstm", "ptb-lstm-train", 2, {}),
        ("preprocess-tar", "imagenet-preprocess", many, {"format": "tar"}),
        ("calibrate", "cpu-calibrate", 1, {}),
    ]


def run_point(spec: Spec, work: Path, label: str) -> tuple[Result, float]:
    spec_path, out_path = work / f"{label}.spec.json", work / f"{label}.result.json"
    spec_path.write_text(spec.to_json())
    cpus = sorted(os.sched_getaffinity(0))[: spec.vcpus]
    env = dict(os.environ, OMP_NUM_THREADS=str(spec.vcpus), PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "workloads", "run", "--spec", str(spec_path), "--out", str(out_path)],
        cwd=REPO, env=env, capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )
    wall = time.perf_counter() - t0
    if not out_path.exists():
        raise SystemExit(f"{label}: no result (exit {proc.returncode})\n{proc.stderr[-3000:]}")
    return Result.from_json(out_path.read_text()), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to keep datasets and results (default: a temp dir)")
    parser.add_argument("--budget", type=float, default=30.0, help="time budget of each point, seconds")
    # Many times the prefetch depth (16 workers x 2 batches x 256 images), so windows see steady state.
    parser.add_argument("--images", type=int, default=20000, help="synthetic JPEGs to generate")
    parser.add_argument("--only", default="", help="comma-separated labels to run")
    args = parser.parse_args()

    from workloads.synth import generate_imagenet, generate_ptb

    work = args.out or Path(tempfile.mkdtemp(prefix="harness-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    data, ptb = work / "imagenet", work / "ptb"
    cpus = len(os.sched_getaffinity(0))
    if not (data / "manifest.json").exists():
        t0 = time.perf_counter()
        generate_imagenet(data, args.images, 100, seed=1, val_fraction=0.1, processes=cpus)
        print(f"generated {args.images} JPEGs in {time.perf_counter() - t0:.1f} s", flush=True)
    if not (ptb / "ptb.train.txt").exists():
        generate_ptb(ptb, seed=1)

    rows = []
    results = {}
    only = set(filter(None, args.only.split(",")))
    if not only or "plain" in only:
        proc = subprocess.run([sys.executable, str(REPO / "lab" / "benchmarks" / "plain_resnet50.py"), "--json"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        plain = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append({"label": "plain-loop", "throughput": plain["images_per_s"], "unit": "images/s", "gpu": plain["gpu"]})
        print(json.dumps(rows[-1]), flush=True)
    for label, workload, vcpus, config in points(data, ptb, cpus):
        if only and label not in only:
            continue
        spec = Spec(workload=workload, profile="gpu", vcpus=vcpus, data_dir=str(ptb if "ptb" in workload else data),
                    work_dir=str(work), config=config, time_budget_s=args.budget)
        r, wall = run_point(spec, work, label)
        c = r.counters
        row = {
            "label": label, "workload": workload, "vcpus": vcpus, "status": r.status, "throughput": r.throughput,
            "unit": r.unit, "spread": r.spread, "wall_s": round(wall, 1), "gpu_util_pct": c.get("gpu_util_pct"),
            "gpu_mem_peak_gib": (c.get("gpu_mem_peak_bytes") or 0) / 2**30, "cpu_util_per_vcpu": c.get("cpu_util_per_vcpu"),
            "error": r.error[-1500:],
            **{k: v for k, v in r.extra.items() if k in ("batch_latency_p50_ms", "batch_latency_p99_ms", "loss_start",
                                                          "loss_end", "read_mb_s", "write_mb_s", "loss_first", "loss_last")},
        }
        rows.append(row)
        results[label] = json.loads(r.to_json())
        print(json.dumps(row), flush=True)
    by = {row["label"]: row for row in rows}
    if "plain-loop" in by and "train-synthetic" in by and by["train-synthetic"]["throughput"]:
        ratio = by["train-synthetic"]["throughput"] / by["plain-loop"]["throughput"]
        print(f"harness / plain loop, ResNet-50 synthetic: {ratio:.3f}", flush=True)
    (work / "harness_fidelity.json").write_text(json.dumps({"rows": rows, "results": results}, indent=1))


if __name__ == "__main__":
    main()
