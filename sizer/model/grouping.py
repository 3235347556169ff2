"""Which points are fitted together: one group per workload variant, of one-GPU points; the
multi-GPU points of each variant go beside its fit (sizer.model.scaling). Points measured on half
an instance for a pair of jobs on one GPU (`Point.share_of`: beside the partner, or alone on that
half, whose disk throttle is half the class's) describe no instance of one job: no group takes them
(`sizer.model.pairs` reads them)."""

from __future__ import annotations

from sizer.points import Point
from sizer.variants import SYNTHETIC_INPUT, Variant

# The settings that tell variants of one workload apart, where its real-input points differ in them.
VARIANT_SETTINGS = ("profile", "decode", "input")


def variant_labels(points: list[Point], basis: list[Point] | None = None) -> dict[int, str]:
    """The fitted group's label of each point (keyed by `id`): its workload's name, with the
    settings of `VARIANT_SETTINGS` in which that workload's real-input points of `basis` (default:
    `points`) differ (`resnet50-train[decode=gpu]`), and any setting whose value no basis point of the
    workload has. A synthetic-input point carries the plain workload name."""
    basis = points if basis is None else basis
    seen: dict[str, dict[str, set[str]]] = {}
    for p in basis:
        if p.input != SYNTHETIC_INPUT:
            values = seen.setdefault(p.workload, {attr: set() for attr in VARIANT_SETTINGS})
            for attr in VARIANT_SETTINGS:
                values[attr].add(getattr(p, attr) or "")
    labels: dict[int, str] = {}
    for p in points:
        values = seen.get(p.workload, {attr: set() for attr in VARIANT_SETTINGS})
        own = {attr: getattr(p, attr) or "" for attr in VARIANT_SETTINGS}
        settings = {} if p.input == SYNTHETIC_INPUT else {
            attr: own[attr] for attr in VARIANT_SETTINGS if len(values[attr]) > 1 or own[attr] not in values[attr]}
        labels[id(p)] = Variant.of(p.workload, settings).label
    return labels


def group_points(points: list[Point]) -> dict[str, list[Point]]:
    """One-GPU points per fitted workload variant: the model describes one GPU (a multi-GPU point
    measures a whole instance: `multi_gpu_groups`). Synthetic-input points join every variant of their
    workload that decodes on the CPU. A variant decoding on the GPU does not get them: decoding
    takes GPU time from training, so the rate with input already on the device does not bound it,
    and its own ceiling is fitted from its points (GPU-decoded training can level off at about
    3,000 images/s from 2 vCPUs up, against 4,673 with input on the device)."""
    points = [p for p in points if p.gpus == 1 and not p.on_shared_instance]
    labels = variant_labels(points)
    groups: dict[str, list[Point]] = {}
    gpu_decoded: set[str] = set()
    for p in points:
        if p.input != SYNTHETIC_INPUT:
            groups.setdefault(labels[id(p)], []).append(p)
            if p.decode == "gpu":
                gpu_decoded.add(labels[id(p)])
    for p in points:
        if p.input == SYNTHETIC_INPUT:
            targets = [g for g in groups if Variant.from_label(g).workload == p.workload and g not in gpu_decoded]
            targets = targets or ([p.workload] if p.workload not in gpu_decoded else [])
            for g in targets:
                groups.setdefault(g, []).append(p)
    return groups


def multi_gpu_groups(points: list[Point]) -> dict[str, list[Point]]:
    """The real-input points of more than one GPU per workload variant, labelled as `group_points`
    labels that variant's one-GPU points (a multi-GPU point whose settings no one-GPU point shares
    gets a label of its own, which no fit has)."""
    labels = variant_labels(points, basis=[p for p in points if p.gpus == 1 and not p.on_shared_instance])
    groups: dict[str, list[Point]] = {}
    for p in points:
        if p.gpus > 1 and p.input != SYNTHETIC_INPUT and not p.on_shared_instance:
            groups.setdefault(labels[id(p)], []).append(p)
    return groups
