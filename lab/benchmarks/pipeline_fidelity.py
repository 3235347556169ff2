"""Does the real JPEG pipeline reach what the CPU can decode? From a store, no measuring.

For every CPU-bound point of a CPU-decoding image workload (resnet50-train and the like on JPEG
files or shards, decode on CPU workers), compares its images/s with the sweep's calibration times
the shape's vCPUs: the per-vCPU rate with every vCPU decoding at once (`ips_per_vcpu_loaded`,
what one loader worker per vCPU can give) and alone (`ips_per_vcpu`). The target: within 10% of
the loaded rate times vCPUs. Also prints, where the store has one, the GPU ceiling point
(synthetic input) beside a plain PyTorch loop's figure given with --plain (the JSON of
lab/benchmarks/plain_resnet50.py).

Where a point carries the meter's CPU breakdown, the table also gives its CPU milliseconds per
image (against the calibration's 1000 / rate), the training process's share of its CPU and the
kernel's share: what, beyond the decoding, the vCPUs spent.

Only points that train on a GPU count (on a CPU the model shares the vCPUs with the decoder). A
point counts as CPU-bound when the sweep labelled it `cpu` and its CPUs were busy (at least 80%
per vCPU): a disk-bound or GPU-bound point says nothing about the decoder.

Usage: python lab/benchmarks/pipeline_fidelity.py --store gpu-runs/sizer.sqlite [--plain plain.json] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.errors import SizerError  # noqa: E402
from sizer.variants import SYNTHETIC_INPUT  # noqa: E402

TARGET = 0.10


def fidelity_rows(store_path: Path) -> tuple[list[dict], list[dict]]:
    """(rows of CPU-bound CPU-decoding points with their ratios, synthetic-input ceiling points)."""
    from sizer.store import Store

    rows, ceilings = [], []
    with Store(store_path, create=False) as store:
        calibration = {s.id: (s.calibration or {}) for s in store.sweeps()}
        for row, result in store.results():
            cfg = result.config or {}
            if row["status"] not in ("ok", "noisy") or not row["throughput"]:
                continue
            if cfg.get("input") == SYNTHETIC_INPUT:
                ceilings.append({"workload": row["workload"], "key": row["key"], "throughput": row["throughput"]})
                continue
            if cfg.get("decode", "cpu") != "cpu" or "image_size" not in cfg or row["unit"] != "images/s":
                continue
            if row["workload"].endswith("-infer") or row["workload"] == "imagenet-preprocess":
                continue  # their per-image work is not the calibration's (no random crop; encoding)
            if cfg.get("device") != "cuda":
                continue  # the model trains on the same CPUs: the decoder's share is unknown
            util = (result.counters or {}).get("cpu_util_per_vcpu") or 0.0
            cal = calibration.get(row["sweep_id"], {})
            loaded, alone = cal.get("ips_per_vcpu_loaded"), cal.get("ips_per_vcpu")
            v = int(row["vcpus"])
            rows.append({
                "workload": row["workload"], "key": row["key"], "vcpus": v, "ram_gib": row["ram_gib"],
                "disk_class": row["disk_class"], "throughput": row["throughput"], "bottleneck": row["bottleneck"],
                "cpu_util_per_vcpu": util, "cpu_bound": row["bottleneck"] == "cpu" and util >= 0.8,
                "normalize": cfg.get("normalize", "worker"),  # a point stored without the option normalized in its workers
                "calibration_method": cal.get("method", ""),
                "ratio_loaded": row["throughput"] / (v * loaded) if loaded else None,
                "ratio_alone": row["throughput"] / (v * alone) if alone else None,
                **cpu_split(result.counters or {}, util * v),
            })
    return rows, ceilings


def cpu_split(counters: dict, cores_busy: float) -> dict:
    """Where a point's CPU went, for points measured with the breakdown (None otherwise): CPU ms per
    image, the training process's share of it (main thread and its other threads) and the kernel's."""
    train = None
    if counters.get("main_thread_cores") is not None and cores_busy > 0:
        train = (counters["main_thread_cores"] + counters.get("main_other_threads_cores", 0.0)) / cores_busy
    return {"cpu_ms_per_image": counters.get("cpu_ms_per_sample"), "training_process_share": train,
            "kernel_share": counters.get("cpu_system_share")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--plain", type=Path, help="JSON of lab/benchmarks/plain_resnet50.py measured in the same run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        rows, ceilings = fidelity_rows(args.store)
    except SizerError as exc:
        print(f"pipeline_fidelity: error: {exc}", file=sys.stderr)
        return 2
    plain = None
    if args.plain and args.plain.exists():
        try:
            plain = json.loads(args.plain.read_text())
        except ValueError:  # an empty or broken file: a run without a GPU wrote no figure
            print(f"pipeline_fidelity: {args.plain} holds no plain-loop figure", file=sys.stderr)
    bound = [r for r in rows if r["cpu_bound"] and r["ratio_loaded"] is not None]
    summary = {
        "cpu_bound_points": len(bound),
        "within_target": sum(1 for r in bound if abs(r["ratio_loaded"] - 1) <= TARGET),
        "median_ratio_loaded": statistics.median(r["ratio_loaded"] for r in bound) if bound else None,
        "min_ratio_loaded": min((r["ratio_loaded"] for r in bound), default=None),
        "max_ratio_loaded": max((r["ratio_loaded"] for r in bound), default=None),
    }
    if plain:
        summary["plain_loop_ips"] = plain.get("images_per_s") or plain.get("throughput")
        if ceilings and summary["plain_loop_ips"]:
            summary["harness_over_plain"] = max(c["throughput"] for c in ceilings) / summary["plain_loop_ips"]
    if args.json:
        print(json.dumps({"rows": rows, "ceilings": ceilings, "summary": summary}, indent=2))
        return 0
    if not rows:
        print("pipeline_fidelity: no points of CPU decoding feeding a GPU in this store")
    else:
        print(f"{'point':<50} {'images/s':>9} {'bound':>6} {'cpu/vCPU':>8} {'/(v*loaded)':>11} {'/(v*alone)':>10} "
              f"{'CPU ms/img':>10} {'training':>8} {'kernel':>6}")
        for r in sorted(rows, key=lambda r: (r["workload"], r["disk_class"], r["ram_gib"], r["vcpus"])):
            ratio = "-" if r["ratio_loaded"] is None else f"{r['ratio_loaded']:.2f}"
            alone = "-" if r["ratio_alone"] is None else f"{r['ratio_alone']:.2f}"
            mark = "" if r["cpu_bound"] else "  (not CPU-bound)"
            split = (f"{r['cpu_ms_per_image']:>10.2f} {r['training_process_share']:>8.0%} {r['kernel_share']:>6.0%}"
                     if r["cpu_ms_per_image"] is not None and r["training_process_share"] is not None
                     and r["kernel_share"] is not None else f"{'-':>10} {'-':>8} {'-':>6}")
            print(f"{r['key'][:50]:<50} {r['throughput']:>9,.0f} {r['bottleneck']:>6} {r['cpu_util_per_vcpu']:>8.2f} "
                  f"{ratio:>11} {alone:>10} {split}{mark}")
        if bound:
            print(f"CPU-bound points: {summary['within_target']} of {len(bound)} within {TARGET:.0%} of the loaded "
                  f"calibration x vCPUs (ratios {summary['min_ratio_loaded']:.2f} to {summary['max_ratio_loaded']:.2f}, "
                  f"median {summary['median_ratio_loaded']:.2f})")
    for c in ceilings:
        line = f"GPU ceiling {c['key']}: {c['throughput']:,.0f} images/s"
        if plain and summary.get("plain_loop_ips"):
            plain_ips = summary["plain_loop_ips"]
            line += f"; plain PyTorch loop {plain_ips:,.0f}: ratio {c['throughput'] / plain_ips:.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
