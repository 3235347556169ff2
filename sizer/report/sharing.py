"""The report's shared option: two workloads of a sweep measured as a pair on one GPU (`sizer
colocate`, `sizer sweep --colocate`), priced as one instance for both against one instance each
(docs/report.md, "The shared option").

- The shared instance: the cheapest catalog row of the target GPU whose per-GPU share holds the
  instance the pair was measured on (its vCPUs and RAM, a disk class at least as fast per GPU) and
  whose GPU memory holds both jobs' peaks alone. It runs the pair at least as fast as measured.
- Priced per job at half its price per GPU-hour each: each job had half of the instance.
- A job's cost per million samples shared is its half of the price over its rate beside its
  partner: the slowdown is in it. Against it, the cost per million of the job's own pick
  (`sizer.sizing`), on an instance of its own.
- Sharing is cheaper where a million samples of each job cost less shared than on their own picks;
  where it is not, the option says why.

Pairs of the sweep's workloads not measured are predicted from each job's profile alone on its
half (`sizer.model.colocation`), with a range, and are not priced: only a measured pair is.
Pure: points, the workloads' cards and the sizing terms in, JSON-able data out.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from sizer.catalog import InstanceType, normalize_gpu
from sizer.model.colocation import ColocationModel, fit_colocation, predicted_verdict
from sizer.model.pairs import JobProfile, PairRecord, pair_json, pair_records
from sizer.points import Point
from sizer.sizing import SizingTerms
from sizer.values import finite_number, significant
from sizer.variants import SYNTHETIC_INPUT, Variant

JOB_PRICE_SHARE = 0.5  # each job pays half the shared instance: it had half of it
RULE = ("Sharing is faster when 1/r_AB + 1/r_BA > 1, r being a job's rate alone on its half over its rate beside "
        "its partner: for work that takes each job the same time T alone, the pair shared ends sooner than 2T, "
        "one after the other (its combined time shared is below the sum of its times alone).")
PRICING = ("One instance for both, the cheapest of the target GPU that holds the measured instance and both jobs' GPU "
           "memory, priced per job at half its price per GPU-hour; a job's cost per million samples shared is its "
           "half over its rate beside its partner, so the slowdown is in it. Against it: the job's own pick.")


# ---------------------------------------------------------------------------- the shared instance
def _mbps(name: str, terms: SizingTerms) -> float:
    disk = terms.disk_classes.get(name)
    return math.inf if disk is None or disk.read_mbps is None else float(disk.read_mbps)


def holds(row: InstanceType, record: PairRecord, terms: SizingTerms) -> bool:
    """Whether a row's per-GPU share holds the instance the pair was measured on: its vCPUs, its RAM
    and a disk class at least as fast per GPU as the measured one."""
    n = max(row.gpu_count, 1)
    if row.price_per_hour is None or row.vcpus / n < record.instance_vcpus or row.memory_gib / n < record.instance_ram_gib:
        return False
    return any(_mbps(disk, terms) / n >= _mbps(record.disk_class, terms) for disk in row.disk_classes)


def shared_instance(record: PairRecord, terms: SizingTerms, memory_gib: float | None) -> tuple[InstanceType | None, str]:
    """The cheapest row per GPU-hour that holds the pair (and `memory_gib` of GPU memory), or None
    with the reason."""
    rows = [row for row in terms.catalog if holds(row, record, terms)]
    if not rows:
        return None, (f"no priced {terms.target} instance holds the measured {record.instance_vcpus} vCPUs, "
                      f"{record.instance_ram_gib:g} GiB and a {record.disk_class} disk per GPU")
    fitting = [row for row in rows if memory_gib is None or row.gpu_memory_gib >= memory_gib]
    if not fitting:
        most = max(row.gpu_memory_gib for row in rows)
        return None, (f"the two jobs need {memory_gib:.3g} GiB of GPU memory together (their peaks alone); the "
                      f"{terms.target} has {most:g} GiB: they do not fit one GPU's memory")
    return min(fitting, key=lambda row: (row.price_per_hour or 0.0) / max(row.gpu_count, 1)), ""


# ---------------------------------------------------------------------------- each job's own pick
def _card_settings(card: dict[str, Any]) -> Variant:
    host = card.get("host") or {}
    return Variant.from_label(host.get("variant") or card["workload"])


def own_card(profile: JobProfile, record: PairRecord, cards: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The report card of the job's workload variant (its profile's decode and input), sized alone."""
    values = {"profile": record.profile, "decode": profile.decode, "input": profile.input}
    for card in cards:
        variant = _card_settings(card)
        if variant.workload == profile.workload and variant.matches(values):
            return card
    return None


def _own_pick(card: dict[str, Any] | None) -> dict[str, Any] | None:
    rec = (card or {}).get("recommendation") or {}
    chosen = rec.get("chosen")
    if not chosen:
        return None
    return {"workload": card["workload"] if card else None, "instance": f"{chosen['cloud']}:{chosen['instance_type']}",
            "disk_class": chosen["disk_class"], "price_per_gpu_hour": chosen["price_per_gpu_hour"],
            "predicted": chosen["predicted"], "cost_per_million": chosen["cost_per_million"]}


def _cost_per_million(price_per_hour: float, rate: float | None) -> float | None:
    return None if not rate or rate <= 0 else price_per_hour / (rate * 3600.0) * 1e6


# ---------------------------------------------------------------------------- the option
def shared_option(record: PairRecord, cards: Sequence[dict[str, Any]], terms: SizingTerms) -> dict[str, Any]:
    """The shared instance for a measured pair, priced per job against each job's own pick, and
    whether sharing is cheaper, or why not."""
    memories = [p.gpu_mem_gib for p in record.alone if p is not None]
    memory = sum(m for m in memories if m) if len(memories) == 2 and all(memories) else None
    row, why = shared_instance(record, terms, memory) if record.measured else (None, "")
    per_gpu_hour = None if row is None else float(row.price_per_hour or 0.0) / max(row.gpu_count, 1)
    jobs: list[dict[str, Any]] = []
    own_costs: list[float | None] = []
    for i, profile in enumerate(record.alone):
        own = None if profile is None else _own_pick(own_card(profile, record, cards))
        shared_cost = None if per_gpu_hour is None else _cost_per_million(JOB_PRICE_SHARE * per_gpu_hour, record.shared[i])
        own_cost = None if own is None else finite_number(own["cost_per_million"])
        own_costs.append(own_cost)
        jobs.append({"job": record.jobs[i], "rate_shared": significant(record.shared[i], 6), "own": own,
                     "cost_per_million_shared": significant(shared_cost, 4),
                     "saving_per_million": significant(None if shared_cost is None or own_cost is None
                                                       else own_cost - shared_cost, 4)})
    shared_total = _total(j["cost_per_million_shared"] for j in jobs)
    own_total = _total(own_costs)
    cheaper = None if shared_total is None or own_total is None else shared_total < own_total
    return {
        "instance": None if row is None else {
            "cloud": row.cloud, "instance_type": row.instance_type, "region": row.region, "vcpus": row.vcpus,
            "memory_gib": row.memory_gib, "gpu": row.gpu, "gpu_count": row.gpu_count,
            "gpu_memory_gib": row.gpu_memory_gib, "price_per_hour": row.price_per_hour,
            "price_per_gpu_hour": significant(per_gpu_hour, 6), "price_source": row.price_source,
            "price_date": row.price_date},
        "price_share_per_job": JOB_PRICE_SHARE,
        "gpu_memory_needed_gib": significant(memory, 4),
        "jobs": jobs,
        "cost_per_million_shared": shared_total,
        "cost_per_million_own": own_total,
        "cheaper": cheaper,
        "why_not": None if cheaper else why_not(record, jobs, why),
        "note": _gpu_note(record, terms),
    }


def _total(values: Any) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else significant(sum(values), 4)


def why_not(record: PairRecord, jobs: list[dict[str, Any]], instance_reason: str) -> str:
    """Why the shared option is not cheaper: the pair not measured, no instance for it, a job with no
    pick of its own, or the slowdown costing more than half the price saves."""
    if not record.measured:
        return "the pair has no usable figures: " + ("; ".join(record.failed) or "a measurement failed")
    if instance_reason:
        return instance_reason
    missing = list(dict.fromkeys(j["job"] for j in jobs if not j["own"]))
    if missing:
        return f"{', '.join(missing)} has no pick of its own in this report to compare with (its card says why)"
    r_ab, r_ba = record.slowdowns
    parts = [f"{j['job']} {r:.2f}x slower, ${j['cost_per_million_shared']:.4g} per million samples against "
             f"${j['own']['cost_per_million']:.4g} on {j['own']['instance']}" for j, r in zip(jobs, (r_ab, r_ba))]
    return ("sharing slows the jobs more than half the price saves: " + "; ".join(parts)
            + ("" if record.shared_faster else "; and the pair shared ends later than one after the other"))


def _gpu_note(record: PairRecord, terms: SizingTerms) -> str | None:
    models = {normalize_gpu(p.gpu_model) for p in record.alone if p is not None and p.gpu_model}
    if models and terms.target not in models:
        return f"measured on {', '.join(sorted(models))}: the shared rates are assumed for the {terms.target}"
    if record.profile != "gpu":
        return f"measured on the {record.profile} profile without a GPU: figures that show how sizer decides, not sizes"
    return None


# ---------------------------------------------------------------------------- pairs not measured
def _profiles(points: Sequence[Point]) -> dict[tuple, JobProfile]:
    """Each job's profile alone on a half, per (host, profile, share_of, job)."""
    alone: dict[tuple, list[Point]] = {}
    for p in points:
        if p.share_of and not p.partner:
            alone.setdefault((p.host_id, p.profile, p.share_of, p.job), []).append(p)
    profiles = {key: JobProfile.of(group) for key, group in alone.items()}
    return {key: prof for key, prof in profiles.items() if prof is not None}


def predicted_pairs(points: Sequence[Point], records: Sequence[PairRecord],
                    models: dict[str, ColocationModel]) -> list[dict[str, Any]]:
    """Each two jobs with a profile on the same half of one instance, not measured together: both
    slowdowns predicted with their ranges, and whether sharing would be faster."""
    profiles = _profiles(points)
    measured = {(r.host_id, r.profile, r.share_of, r.jobs) for r in records}
    where = sorted({key[:3] for key in profiles}, key=str)
    out = []
    for host, profile, share_of in where:
        jobs = sorted(job for (h, p, s, job) in profiles if (h, p, s) == (host, profile, share_of))
        sharing = share_of.rsplit("/", 1)[-1]
        model = models.get(sharing) or fit_colocation([], sharing)
        for i, a in enumerate(jobs):
            for b in jobs[i:]:
                if (host, profile, share_of, (a, b)) in measured:
                    continue
                ab = model.predict(profiles[(host, profile, share_of, a)], profiles[(host, profile, share_of, b)])
                ba = model.predict(profiles[(host, profile, share_of, b)], profiles[(host, profile, share_of, a)])
                out.append({"jobs": [a, b], "share_of": share_of, "host_id": host, "profile": profile,
                            "r_ab": significant(ab.slowdown, 4), "r_ab_range": [significant(ab.low, 4), significant(ab.high, 4)],
                            "r_ba": significant(ba.slowdown, 4), "r_ba_range": [significant(ba.low, 4), significant(ba.high, 4)],
                            "shared_faster": predicted_verdict(ab, ba), "basis": ab.basis})
    return out


# ---------------------------------------------------------------------------- the report's part
def shared_context(points: Sequence[Point], cards: Sequence[dict[str, Any]], terms: SizingTerms) -> dict[str, Any] | None:
    """The report's shared options (None where no pair was measured): each measured pair's record,
    its held-out prediction and its price against one instance each; the pairs predicted; the models."""
    records = pair_records(p for p in points if p.input != SYNTHETIC_INPUT)
    if not records:
        return None
    models = {sharing: fit_colocation(records, sharing) for sharing in sorted({r.sharing for r in records})}
    pairs = []
    for record in records:
        entry = pair_json(record)
        entry["held_out"] = [{"job": h.job, "predicted": significant(h.predicted, 4), "error": significant(h.error, 4)}
                             for h in models[record.sharing].held_out if h.pair == record.key]
        entry["option"] = shared_option(record, cards, terms)
        pairs.append(entry)
    cheaper = [p["key"] for p in pairs if p["option"]["cheaper"]]
    return {
        "rule": RULE,
        "pricing": PRICING,
        "pairs": pairs,
        "cheaper": cheaper,
        "predicted": predicted_pairs(points, records, models),
        "models": [model.summary() for model in models.values()],
        "note": (f"{len(records)} pair(s) of jobs were measured on one GPU, each job on half of the instance (half its "
                 "vCPUs as whole cores, half its RAM, a disk throttle of its own at half the class's caps) beside its "
                 f"partner and alone; sharing is cheaper for {len(cheaper)} of them."),
    }
