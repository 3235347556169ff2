"""What the CPU-decoding input pipeline costs, variant by variant, measured in one run.

At each vCPU count, each a fresh `sizer run` point under real limits (interleaved, so drift on a
shared host falls on every variant alike):

- `default`: resnet50-train as a sweep measures it (workers hand over uint8, normalized on the device;
  on a GPU, batches copied straight from the workers' registered buffers and taken as they finish);
- `normalize=worker`: torchvision's reference recipe (ToTensor + Normalize in the workers, float batches);
- `--cpu-quota`: the default plus a CFS quota of the vCPUs on top of the cpuset;
- `serial-read`: the default with each worker reading its files one at a time (`read_threads=0`),
  as torchvision's ImageFolder does, instead of a batch's files ahead on a few threads;
- `per-image`: the default with a tensor per image collated into the batch (`assemble_batches=false`)
  instead of the batch written image by image into shared memory;
- `pinned`: the default with each loader worker pinned to a vCPU of its own (`pin_workers=true`)
  instead of free to run on any of the shape's;
- `fresh-blocks`: the default with a fresh shared-memory block per batch (`recycle_batches=false`),
  as the stock collate allocates, instead of each worker filling its own buffers again;
- `pin-thread`: the default with the DataLoader's pin-memory thread copying every batch into pinned
  memory (`register_buffers=false`) instead of the copy to the GPU straight from the workers' buffers;
- `in-order`: the default with batches taken in the order they were asked for (`in_order=true`), as
  the stock DataLoader does, instead of as the workers finish them;
- `pin-thread-in-order`: both of those: the default before either change;
- `no-drain`: the default with the window opening right after warm-up (`drain=false`), on whatever
  batches the loader made before it, as windows did before the loader's backlog was dropped;
- `registered`, `unordered`, `registered-unordered`: those settings named outright (on a GPU each
  is the default now; runs from before they were kept their names);
- the calibration (`cpu-calibrate` with every vCPU of the shape decoding at once) for both per-image
  methods, so each pipeline is compared with its own per-vCPU rate times vCPUs.

Prints two tables: images/s per variant, each pipeline over its calibration, and the variants over
the default; then where each pipeline point's CPU went, in milliseconds per image against the
calibration's (1000 / its rate): the loader workers, and of theirs the decoding threads' own CPU time
in decode and augmentation (the calibration's per-image work, timed inside the pipeline), the
training process's main thread and its other threads (pin memory, CUDA), the kernel's share,
preemptions per second and page faults per image. Full results go to --out as JSON.

Bracketed pairs: list `calib` before and after a pipeline (`--variants calib,default,calib`) and each
pipeline point is also compared with the mean of the two calibrations measured right before and
right after it, at its vCPU count. A shared host's speed drifts from minute to minute; a bracket
takes the drift between the two out of the comparison, where a median over the run does not.

--from FILE prints the tables again from a run's --out JSON, measuring nothing.

Usage: python benchmarks/loader_variants.py [--vcpus 4,16] [--ram 32G] [--budget 18] [--calib-budget S]
                                           [--repeats 1] [--data DIR] [--profile auto] [--out FILE] [--from FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

VARIANTS = {
    "default": ("resnet50-train", [], False),
    "worker": ("resnet50-train", ["normalize=worker"], False),
    "quota": ("resnet50-train", [], True),
    "serial-read": ("resnet50-train", ["read_threads=0"], False),
    "per-image": ("resnet50-train", ["assemble_batches=false"], False),
    "pinned": ("resnet50-train", ["pin_workers=true"], False),
    "fresh-blocks": ("resnet50-train", ["recycle_batches=false"], False),
    "registered": ("resnet50-train", ["register_buffers=true"], False),
    "unordered": ("resnet50-train", ["in_order=false"], False),
    "registered-unordered": ("resnet50-train", ["register_buffers=true", "in_order=false"], False),
    "pin-thread": ("resnet50-train", ["register_buffers=false"], False),
    "in-order": ("resnet50-train", ["in_order=true"], False),
    "pin-thread-in-order": ("resnet50-train", ["register_buffers=false", "in_order=true"], False),
    "no-drain": ("resnet50-train", ["drain=false"], False),
    "calib": ("cpu-calibrate", [], False),
    "calib-worker": ("cpu-calibrate", ["normalize=worker"], False),
}

OTHERS = ("per-image", "pinned", "fresh-blocks", "registered", "unordered", "registered-unordered", "pin-thread",
          "in-order", "pin-thread-in-order", "no-drain")  # compared with the default and the calibration


def sizer_cmd() -> list[str]:
    found = shutil.which("sizer")
    return [found] if found else [sys.executable, "-c", "from sizer.cli import entry; entry()"]


def run_point(variant: str, vcpus: int, args: argparse.Namespace) -> dict:
    workload, settings, quota = VARIANTS[variant]
    cmd = [*sizer_cmd(), "run", workload, "--vcpus", str(vcpus), "--ram", args.ram, "--disk", "local-nvme",
           "--profile", args.profile, "--json"]
    if workload == "cpu-calibrate":
        settings = [*settings, f"parallel={vcpus}"]  # every vCPU of the shape decoding at once
        if args.calib_budget:
            cmd += ["--budget", str(args.calib_budget)]
    else:
        cmd += ["--budget", str(args.budget)]
    if args.data:
        cmd += ["--data", str(args.data)]
    for item in settings:
        cmd += ["--set", item]
    if quota:
        cmd.append("--cpu-quota")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"variant": variant, "vcpus": vcpus, "status": "error", "error": proc.stderr.strip()[-500:]}
    data = json.loads(proc.stdout)
    figure = data["throughput"]
    if workload == "cpu-calibrate":
        figure = data["result"]["extra"].get("rate_per_vcpu_loaded", figure)  # per vCPU, all busy
    return {"variant": variant, "vcpus": vcpus, "status": data["status"], "figure": figure,
            "spread": data["spread"], "bottleneck": data["bottleneck"], "wall_s": data["wall_s"],
            "cpu_util_per_vcpu": data["counters"].get("cpu_util_per_vcpu"),
            "gpu_util_mean_pct": data["counters"].get("gpu_util_mean_pct"), "enforced": data["enforced"].get("cpus"),
            **{k: data["counters"].get(k) for k in BREAKDOWN},
            # [seconds, samples, warm-up] per step: where a window opened can be checked afterwards
            "steps": data["result"]["steps"] if workload != "cpu-calibrate" else None}


BREAKDOWN = ("cpu_ms_per_sample", "loader_cpu_ms_per_sample", "decode_cpu_ms_per_image", "main_thread_cores",
             "main_other_threads_cores", "loader_cpu_cores", "cpu_system_share", "involuntary_switches_per_s",
             "minor_faults_per_sample", "drained_batches", "drained_samples",
             "drain_seconds")  # the last three: what the loader made before the window, dropped


def bracket_calibration(rows: list[dict], index: int, key: str = "figure") -> float | None:
    """The mean of `key` (the per-vCPU rate, or another figure of theirs) over the calibrations run
    right before and right after rows[index] at its vCPU count (one side where only one is there);
    None when neither neighbour is one."""
    vcpus = rows[index]["vcpus"]
    neighbours = [rows[i] for i in (index - 1, index + 1) if 0 <= i < len(rows)]
    figures = [r[key] for r in neighbours if r["variant"] == "calib" and r["vcpus"] == vcpus and r.get(key)]
    return statistics.mean(figures) if figures else None


def bracketed_pairs(rows: list[dict]) -> list[dict]:
    """Each pipeline point between two calibrations: its images/s over the bracket's rate x vCPUs,
    its loader workers' CPU per image over the calibration's, and its decoding threads' CPU per image
    over the calibration's own (the same per-image work, timed the same way in both)."""
    pairs = []
    for i, r in enumerate(rows):
        if r["variant"].startswith("calib") or not r.get("figure"):
            continue
        calib = bracket_calibration(rows, i)
        if calib:
            calib_decode = bracket_calibration(rows, i, "decode_cpu_ms_per_image")
            pairs.append({"vcpus": r["vcpus"], "variant": r["variant"], "figure": r["figure"], "calib": calib,
                          "ratio": r["figure"] / (calib * r["vcpus"]),
                          "workers_over_calib": (r["loader_cpu_ms_per_sample"] * calib / 1000
                                                 if r.get("loader_cpu_ms_per_sample") else None),
                          "decode_over_calib": (r["decode_cpu_ms_per_image"] / calib_decode
                                                if r.get("decode_cpu_ms_per_image") and calib_decode else None)})
    return pairs


def bracket_lines(pairs: list[dict]) -> list[str]:
    lines = [f"{'vCPUs':>5} {'variant':<20} {'pairs':>5} {'each: images/s over bracket x vCPUs':<40} {'median':>6} "
             f"{'workers CPU/img over calib':>26} {'decoding over calib':>19}"]

    def median_of(group: list[dict], key: str) -> str:
        values = [p[key] for p in group if p.get(key)]
        return f"{statistics.median(values):.2f}" if values else "-"

    for key in sorted({(p["vcpus"], p["variant"]) for p in pairs}):
        group = [p for p in pairs if (p["vcpus"], p["variant"]) == key]
        each = ", ".join(f"{p['ratio']:.2f}" for p in group)
        lines.append(f"{key[0]:>5} {key[1]:<20} {len(group):>5} {each:<40} "
                     f"{statistics.median(p['ratio'] for p in group):>6.2f} "
                     f"{median_of(group, 'workers_over_calib'):>26} {median_of(group, 'decode_over_calib'):>19}")
    return lines


def breakdown_lines(rows: list[dict]) -> list[str]:
    """Where each pipeline point's CPU went, per image, beside its calibration's cost per image (the
    bracket's where the point has one, else the last calibration at its vCPU count)."""
    calib = {r["vcpus"]: r["figure"] for r in rows if r["variant"] == "calib" and r.get("figure")}
    lines = [f"{'vCPUs':>5} {'variant':<20} {'images/s':>8} {'calib ms':>8} {'CPU ms':>7} {'workers':>7} {'decoding':>8} "
             f"{'main thr':>8} {'other thr':>9} {'kernel':>6} {'preempt/s':>9} {'faults':>6}"]
    for i, r in enumerate(rows):
        if r["variant"].startswith("calib") or not r.get("cpu_ms_per_sample") or not r.get("figure"):
            continue
        per_core = 1000.0 / r["figure"]  # ms of one core per image of the point's rate
        cal = bracket_calibration(rows, i) or calib.get(r["vcpus"])
        lines.append(
            f"{r['vcpus']:>5} {r['variant']:<20} {fmt(r['figure']):>8} {fmt(1000 / cal if cal else None, 1):>8} "
            f"{r['cpu_ms_per_sample']:>7.2f} {r['loader_cpu_ms_per_sample']:>7.2f} "
            f"{fmt(r.get('decode_cpu_ms_per_image'), 1):>8} {r['main_thread_cores'] * per_core:>8.2f} "
            f"{r['main_other_threads_cores'] * per_core:>9.2f} "
            f"{r['cpu_system_share']:>6.0%} {r['involuntary_switches_per_s']:>9,.0f} "
            f"{fmt(r.get('minor_faults_per_sample')):>6}")
    return lines


def summarize(rows: list[dict], vcpus: list[int]) -> list[dict]:
    table = []
    for v in vcpus:
        med = {}
        for name in VARIANTS:
            figures = [r["figure"] for r in rows if r["vcpus"] == v and r["variant"] == name and r.get("figure")]
            med[name] = statistics.median(figures) if figures else None

        def ratio(a, b):
            return a / b if a and b else None

        table.append({
            "vcpus": v, **{f"{k}_ips": x for k, x in med.items()},
            "default_over_calib": ratio(med["default"], (med["calib"] or 0) * v),
            "worker_over_calib": ratio(med["worker"], (med["calib-worker"] or 0) * v),
            "worker_over_default": ratio(med["worker"], med["default"]),
            "quota_over_default": ratio(med["quota"], med["default"]),
            "serial-read_over_calib": ratio(med["serial-read"], (med["calib"] or 0) * v),
            "default_over_serial-read": ratio(med["default"], med["serial-read"]),
            **{f"{n}_over_calib": ratio(med[n], (med["calib"] or 0) * v) for n in OTHERS},
            **{f"{n}_over_default": ratio(med[n], med["default"]) for n in OTHERS},
        })
    return table


def save(path: Path, rows: list[dict], vcpus: list[int]) -> None:
    """The run so far, replaced whole (written beside, then renamed), so the file is never half-written."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"rows": rows, "table": summarize(rows, vcpus), "bracketed": bracketed_pairs(rows)},
                                  indent=2))
    partial.replace(path)


def fmt(x, pct=False):
    if x is None:
        return "-"
    return f"{x:.2f}" if pct else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vcpus", default="4,16")
    parser.add_argument("--ram", default="32G")
    parser.add_argument("--budget", type=float, default=18.0)
    parser.add_argument("--calib-budget", type=float, help="the calibration points' budget (default: sizer's)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--variants", default="calib,default,calib,pin-thread-in-order,calib",
                        help=f"comma-separated, run in this order at each vCPU count: {', '.join(VARIANTS)}")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--from", dest="from_file", type=Path, metavar="FILE",
                        help="print the tables of an earlier run's --out JSON; measure nothing")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"loader_variants: error: unknown variant {unknown[0]!r} (known: {', '.join(VARIANTS)})", file=sys.stderr)
        return 2
    if args.from_file:
        try:
            rows = json.loads(args.from_file.read_text())["rows"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"loader_variants: error: cannot read rows from {args.from_file}: {exc}", file=sys.stderr)
            return 2
        vcpus = sorted({r["vcpus"] for r in rows})
        variants = sorted({r["variant"] for r in rows})
    else:
        vcpus = [int(v) for v in args.vcpus.split(",")]
        rows = []
        for _ in range(args.repeats):
            for v in vcpus:
                for name in variants:
                    row = run_point(name, v, args)
                    rows.append(row)
                    if args.out:  # after every point: a run cut short (a lease that ends) keeps what it measured
                        save(args.out, rows, vcpus)
                    print(f"  {v:>3} vCPU {name:<13} {row.get('status'):<6} {fmt(row.get('figure')):>8}  "
                          f"{row.get('enforced') or row.get('error', '')}", flush=True)
    if args.out and args.from_file:  # measured rows went to --out point by point above
        save(args.out, rows, vcpus)
    table = summarize(rows, vcpus)
    pairs = bracketed_pairs(rows)
    print(f"{'vCPUs':>5} {'calib/vCPU':>10} {'default':>8} {'/(v*cal)':>8} {'calib fl':>8} {'worker':>8} "
          f"{'/(v*cal)':>8} {'wrk/def':>7} {'quota':>8} {'quo/def':>7} {'serial':>8} {'/(v*cal)':>8} {'def/ser':>7}")
    for t in table:
        print(f"{t['vcpus']:>5} {fmt(t['calib_ips']):>10} {fmt(t['default_ips']):>8} {fmt(t['default_over_calib'], 1):>8} "
              f"{fmt(t['calib-worker_ips']):>8} {fmt(t['worker_ips']):>8} {fmt(t['worker_over_calib'], 1):>8} "
              f"{fmt(t['worker_over_default'], 1):>7} {fmt(t['quota_ips']):>8} {fmt(t['quota_over_default'], 1):>7} "
              f"{fmt(t['serial-read_ips']):>8} {fmt(t['serial-read_over_calib'], 1):>8} {fmt(t['default_over_serial-read'], 1):>7}")
    others = [name for name in OTHERS if name in variants]
    if others:
        print(f"{'vCPUs':>5} " + " ".join(f"{n:>9} {'/(v*cal)':>8} {'/default':>8}" for n in others))
        for t in table:
            print(f"{t['vcpus']:>5} " + " ".join(
                f"{fmt(t[n + '_ips']):>9} {fmt(t[n + '_over_calib'], 1):>8} {fmt(t[n + '_over_default'], 1):>8}" for n in others))
    if pairs:
        print("\n".join(bracket_lines(pairs)))
    print("\n".join(breakdown_lines(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
