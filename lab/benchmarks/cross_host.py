"""Does a sweep of one host answer for another? From two stores, no measuring.

Takes a sweep from host A (`--a STORE`) and measurements from host B (`--b STORE`) of the same
workload variant (default resnet50-train, JPEGs decoded by CPU workers), fits A's one-GPU points,
translates the fit to B's CPU and load, and compares it with B's figure at every shape both measured:

- the CPU: the CPU term x the ratio of the per-vCPU rates with every vCPU busy, B's over A's, from
  each host's fingerprint (`--a-fingerprint`, `--b-fingerprint`: `sizer calibrate --out FILE`), else
  from the fingerprint each store's calibration record holds or makes (`sizer.fingerprint`), the
  ratio sizer's `--target-calibration` uses;
- the load: where most of A's CPU-bound points were measured with other slots busy (a parallel
  sweep), A's CPU term is divided by A's load factor; where B's figure was measured loaded (beside
  other slots, or a point of several GPUs) the prediction is multiplied by B's. A load factor comes
  from the store's interference checks on CPU-bound shapes (`sizer.model.load`) or is given
  (`--a-load`, `--b-load`: loaded / alone, e.g. 3,323 / 3,742 = 0.888); without one, 1, said so.

Per shape it prints A's figure, the prediction for B, the range sizer states there (what a
measurement would read at `--confidence`, the model's own error at unmeasured vCPU counts added),
B's figure, B / predicted, whether B lies inside the range; then the knee each implies (A's fit
translated; B's own fit) with their ranges, and the same comparison under the other translations
(the one-vCPU rates' ratio; none), to tell which carries. `--both` runs B to A as well.

Usage: python lab/benchmarks/cross_host.py --a x4.sqlite --b x1.sqlite [--workload resnet50-train]
           [--a-fingerprint F] [--b-fingerprint F] [--a-load X] [--b-load X] [--both] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sizer.diskclasses import load_disk_classes  # noqa: E402
from sizer.errors import SizerError  # noqa: E402
from sizer.fingerprint import HostFingerprint, read_fingerprint, translate  # noqa: E402
from sizer.levels import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE  # noqa: E402
from sizer.model import WorkloadFit, fit_points, group_points  # noqa: E402
from sizer.model.grouping import multi_gpu_groups  # noqa: E402
from sizer.model.level_error import vcpu_band  # noqa: E402
from sizer.model.load import measure_load  # noqa: E402
from sizer.model.uncertainty import fit_draws, model_range  # noqa: E402
from sizer.points import Point, combine_passes  # noqa: E402
from sizer.report import load_inputs  # noqa: E402
from sizer.sizing import knee_inputs, measured_fingerprint, sweep_host_speeds  # noqa: E402
from sizer.sizing.knee import fit_ceiling, knee_range_summary, measured_knees, predicted_knee  # noqa: E402
from sizer.variants import SYNTHETIC_INPUT  # noqa: E402


@dataclass
class Host:
    """One side: its store's points of the variant (each measurement), its fit, fingerprint and load."""

    name: str
    measured: list[Point]
    fit: WorkloadFit
    fingerprint: HostFingerprint | None
    load: float | None
    load_source: str
    speeds: tuple[tuple[float, ...], ...] = ()  # each sweep's calibration repeats (`sweep_host_speeds`)

    @property
    def shapes(self) -> dict[tuple, Point]:
        """Each real-input shape's combined figure (the median of its passes), loaded and alone apart."""
        out: dict[tuple, Point] = {}
        real = [p for p in self.measured if p.usable and p.input != SYNTHETIC_INPUT]
        for state in (False, True):
            for p in combine_passes([p for p in real if loaded(p) == state]):
                out[shape_key(p)] = p
        return out

    @property
    def fit_loaded(self) -> bool:
        return bool(self.fit.scaling is not None and self.fit.scaling.load.fit_loaded)


def shape_key(p: Point) -> tuple:
    """A shape and whether it was measured loaded (beside other slots): the two are compared apart."""
    return (p.vcpus, round(p.ram_gib, 2), p.disk_class, p.gpus, loaded(p))


def loaded(p: Point) -> bool:
    return (p.parallel is not None and p.parallel.slots > 1) or p.gpus > 1


def open_host(store: Path, variant: str, fingerprint: Path | None, load: float | None) -> Host:
    table = load_disk_classes()
    inputs = load_inputs(store, None, table)
    groups = group_points(inputs["points"])
    if variant not in groups:  # a store with both decode modes labels the CPU-decoding one
        variant = f"{variant}[decode=cpu]" if f"{variant}[decode=cpu]" in groups else variant
    if variant not in groups:
        raise SizerError(f"{store}: no variant {variant!r} (there: {', '.join(sorted(groups))})")
    fits = fit_points(inputs["points"], table)
    fp = read_fingerprint(fingerprint) if fingerprint else measured_fingerprint(inputs["sweeps"])
    source = "given"
    if load is None:
        load = measure_load(groups[variant]).factor
        source = "interference check" if load is not None else "none measured: 1"
    whole = multi_gpu_groups(inputs["points"]).get(variant, [])
    return Host(store.stem, groups[variant] + whole, fits[variant], fp, load, source,
                sweep_host_speeds(s.calibration for s in inputs["sweeps"]))


def timeline_median(host: Host) -> float | None:
    """The median of every calibration repeat over the host's sweeps (one vCPU busy)."""
    rates = [r for speeds in host.speeds for r in speeds]
    return statistics.median(rates) if rates else None


def cpu_factor(a: Host, b: Host, basis: str) -> tuple[float, str]:
    """A's CPU term carried to B's CPU under one basis: "all" (sizer's), "one" (one-vCPU rates), "none"."""
    if basis == "none":
        return 1.0, "none"
    if basis == "timeline":
        ours, theirs = timeline_median(a), timeline_median(b)
        return (theirs / ours, "the host's speed over the sweep") if ours and theirs else (1.0, "none (no timeline)")
    if basis == "one":
        ours = a.fit.calibration_ips or (a.fingerprint.one_busy_ips if a.fingerprint else None)
        theirs = b.fingerprint.one_busy_ips if b.fingerprint else None
        return (theirs / ours, "one vCPU busy") if ours and theirs else (1.0, "none (no one-vCPU rates)")
    t = translate(a.fingerprint, a.fit.calibration_ips, b.fingerprint)
    return t.factor, t.basis


def scale_of(a: Host, b: Host, p: Point, factor: float) -> float:
    """The factor on A's CPU term for B's point `p`: the CPU translation, A's load taken out where its
    points were loaded, B's put in where `p` was measured loaded."""
    scale = factor / (a.load if a.fit_loaded and a.load else 1.0)
    return scale * (b.load or 1.0) if loaded(p) else scale


def predict(a: Host, b: Host, p: Point, factor: float, confidence: float) -> tuple[float, float, float]:
    """A's prediction for B's point `p` (all its GPUs), with the range a measurement would read."""
    scale = scale_of(a, b, p, factor)
    per_gpu_vcpus = p.vcpus / p.gpus
    mbps = a.fit.disk_mbps(p.disk_class)
    # As B measured it: a window inside the first, cold pass read everything from the disk.
    predicted = a.fit.predict_share(p, per_gpu_vcpus, p.ram_gib / p.gpus if p.gpus > 1 else p.ram_gib,
                                    None if mbps is None else mbps / p.gpus, cpu_scale=scale)
    draws = fit_draws(a.fit)
    low, high = model_range(draws, predicted, confidence, vcpu_band(a.fit, per_gpu_vcpus, confidence))
    return predicted.throughput * p.gpus, low * p.gpus, high * p.gpus


def compare(a: Host, b: Host, basis: str, confidence: float) -> dict[str, Any]:
    factor, words = cpu_factor(a, b, basis)
    theirs, ours = b.shapes, a.shapes
    alone_a = {k[:4]: v for k, v in ours.items()}
    rows = []
    for key in sorted(theirs, key=lambda k: (k[3], k[2], k[1], k[0], k[4])):
        p = theirs[key]
        if key[:4] not in alone_a and p.gpus == 1:
            continue  # a shape A did not measure
        pred, low, high = predict(a, b, p, factor, confidence)
        mine = alone_a.get(key[:4])
        rows.append({"shape": p.shape_label() + (" (loaded)" if loaded(p) and p.gpus == 1 else ""),
                     "a": mine.throughput if mine else None,
                     # A's own figure carried over where A's point was CPU-bound (the rest do not move)
                     "a_translated": None if mine is None else mine.throughput * (
                         scale_of(a, b, p, factor) if mine.bottleneck == "cpu" else 1.0),
                     "predicted": pred, "low": low, "high": high, "b": p.throughput,
                     "ratio": p.throughput / pred if pred > 0 else None, "inside": low <= p.throughput <= high,
                     "within_5pct": pred > 0 and abs(p.throughput / pred - 1) <= 0.05})
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    return {"basis": words, "factor": factor, "rows": rows,
            "median_ratio": statistics.median(ratios) if ratios else None,
            "worst": max(ratios, key=lambda r: abs(r - 1)) if ratios else None,
            "inside": sum(r["inside"] for r in rows), "within_5pct": sum(r["within_5pct"] for r in rows)}


def knee(host: Host, points: list[Point], scale: float, confidence: float) -> dict[str, Any]:
    """The knee a fit implies (its CPU term x `scale`), with its range at `confidence`."""
    fit = host.fit
    ceiling = fit_ceiling(fit)
    group = combine_passes([p for p in points if p.gpus == 1])
    at = knee_inputs(group, fit)
    measured = measured_knees(group, ceiling, DEFAULT_TOLERANCE, fit.ceiling_name)
    summary = knee_range_summary(fit, fit_draws(fit), DEFAULT_TOLERANCE, confidence, at, measured, scale)
    return {"vcpus": predicted_knee(fit, ceiling, DEFAULT_TOLERANCE, at, scale), "low": summary.low,
            "high": summary.high, "open": summary.beyond_measured}


def direction(a: Host, b: Host, confidence: float) -> dict[str, Any]:
    main = compare(a, b, "all", confidence)
    unload = a.load if a.fit_loaded and a.load else 1.0
    return {
        "from": a.name, "to": b.name,
        "a_fingerprint": a.fingerprint.label + f" ({a.fingerprint.rate_words()})" if a.fingerprint else None,
        "b_fingerprint": b.fingerprint.label + f" ({b.fingerprint.rate_words()})" if b.fingerprint else None,
        "a_load": {"factor": a.load, "source": a.load_source, "fit_loaded": a.fit_loaded},
        "b_load": {"factor": b.load, "source": b.load_source},
        "translation": main,
        "alternatives": [compare(a, b, basis, confidence) for basis in ("one", "timeline", "none")],
        "knee": {"a_translated": knee(a, a.measured, main["factor"] / unload, confidence),
                 "b_own": knee(b, b.measured, 1.0, confidence)},
    }


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def render(result: dict[str, Any]) -> None:
    t = result["translation"]
    print(f"\n== {result['from']} -> {result['to']}: CPU term x {t['factor']:.3f} ({t['basis']}); "
          f"{result['from']}'s load {result['a_load']['factor'] or 1:.3g} ({result['a_load']['source']}"
          f"{', its points measured loaded' if result['a_load']['fit_loaded'] else ''}); "
          f"{result['to']}'s load {result['b_load']['factor'] or 1:.3g} ({result['b_load']['source']})")
    print(f"   {result['from']}: {result['a_fingerprint']}\n   {result['to']}: {result['b_fingerprint']}")
    print(f"{'shape':<40} {'A':>7} {'A x tr.':>7} {'predicted':>9} {'range':>15} {'B':>7} {'B/pred':>7} inside")
    for r in t["rows"]:
        print(f"{r['shape']:<40} {_num(r['a']):>7} {_num(r['a_translated']):>7} {_num(r['predicted']):>9} "
              f"{_num(r['low']) + '-' + _num(r['high']):>15} {_num(r['b']):>7} "
              f"{r['ratio']:>7.3f} {'yes' if r['inside'] else 'NO'}")
    k = result["knee"]
    for name, row in ((f"{result['from']} translated", k["a_translated"]), (f"{result['to']}'s own", k["b_own"])):
        print(f"knee, {name}: {row['vcpus']} vCPUs ({row['low']} to {row['high']}{', open above' if row['open'] else ''})")
    for alt in [t, *result["alternatives"]]:
        print(f"  translation by {alt['basis']} (x {alt['factor']:.3f}): median B/pred {alt['median_ratio']:.3f}, "
              f"worst {alt['worst']:.3f}, {alt['within_5pct']} of {len(alt['rows'])} within 5%, "
              f"{alt['inside']} inside the range")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="host A's store (the sweep translated)")
    parser.add_argument("--b", type=Path, required=True, help="host B's store (the measurements compared)")
    parser.add_argument("--workload", default="resnet50-train", help="the variant, as the report labels it")
    parser.add_argument("--a-fingerprint", type=Path)
    parser.add_argument("--b-fingerprint", type=Path)
    parser.add_argument("--a-load", type=float, help="A's load factor (loaded / alone) where its store has none")
    parser.add_argument("--b-load", type=float, help="B's load factor where its store has none")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--both", action="store_true", help="also B to A")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        a = open_host(args.a, args.workload, args.a_fingerprint, args.a_load)
        b = open_host(args.b, args.workload, args.b_fingerprint, args.b_load)
    except SizerError as exc:
        raise SystemExit(f"cross_host: {exc}") from None
    results = [direction(a, b, args.confidence)]
    if args.both:
        results.append(direction(b, a, args.confidence))
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return
    for result in results:
        render(result)


if __name__ == "__main__":
    main()
