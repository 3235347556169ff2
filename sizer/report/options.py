"""A workload's recommendation in the report: the catalog options considered, cheapest first, and
the sentence that says why, each figure taken from the recommendation's JSON form (`sizer.sizing.forms`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sizer.catalog import whole_cents
from sizer.recommend import Recommendation
from sizer.sizing import option_json
from sizer.units import unit_noun
from sizer.values import finite_number


def _price_order(option: dict[str, Any]) -> tuple:
    """Cheapest per GPU-hour in whole cents first (as the recommendation compares them), fewer GPUs
    first among equal prices, unpriced rows last."""
    price = option["price_per_gpu_hour"]
    return (price is None, whole_cents(price or 0.0), option["gpu_count"], option["cloud"],
            option["instance_type"], option["disk_class"])


def considered_options(rec: Recommendation | None) -> list[dict[str, Any]]:
    """Every option a recommendation considered, in its JSON form, cheapest first (none without one)."""
    if rec is None:
        return []
    ceiling = finite_number(rec.ceiling)
    return sorted((option_json(o, ceiling) for o in rec.considered), key=_price_order)


def _figure_words(option: dict[str, Any], unit: str) -> str:
    """Where the chosen option's figure comes from, in words: a measurement outranks the model."""
    basis, shape = option.get("basis"), option.get("measured_shape")
    if basis == "measured" and shape:
        return f"Measured at {shape}: {option['predicted']:,.0f} {unit}"
    if basis == "measured floor" and shape:
        return f"At least the {option['predicted']:,.0f} {unit} measured at {shape}"
    return f"The model predicts {option['predicted']:,.0f} {unit}"


def _share_words(c: dict[str, Any], ceiling_name: str, rec: dict[str, Any], unit: str) -> str:
    """The chosen option's share of the ceiling with its range; at a ceiling that is only a lower
    bound, at least the best measured (never "100%")."""
    if c.get("at_lower_bound"):
        return f", at least the best measured rate ({rec['ceiling']:,.0f} {unit}; the {ceiling_name} is a lower bound)"
    if c.get("fraction_of_ceiling") is None:
        return ""
    return (f", {c['fraction_of_ceiling']:.0%} of the {ceiling_name} ({rec['ceiling']:,.0f} {unit})"
            + _range_words(c, rec.get("confidence")))


def _range_words(option: dict[str, Any], confidence: float | None) -> str:
    low, high = option.get("share_pessimistic"), option.get("share_optimistic")
    if confidence is None or low is None or high is None or f"{low:.0%}" == f"{high:.0%}":
        return ""
    return f"; at {confidence:.0%} confidence {min(low, high):.0%} to {max(low, high):.0%}"


def summary_sentence(name: str, unit: str, rec: dict[str, Any] | None, why_none: str | None) -> str:
    """The recommendation in plain words, from the figures alone."""
    if rec is None or rec["chosen"] is None:
        reason = why_none or (rec or {}).get("reason") or "no catalog row meets the bound"
        return f"No instance is recommended for {name}: {reason}." + _optimistic_words(rec)
    c = rec["chosen"]
    ceiling_name = rec.get("ceiling_name", "GPU ceiling")
    parts = [
        f"Choose {c['instance_type']} ({c['cloud']}, {c['region']}) with {c['disk_class']} storage.",
        _figure_words(c, unit) + _share_words(c, ceiling_name, rec, unit) + ".",
    ]
    if c.get("price_per_gpu_hour") is not None:
        per = " per GPU" if c.get("gpu_count", 1) > 1 else ""
        parts.append(f"It costs ${c['price_per_gpu_hour']:,.2f} an hour{per}" + (
            f", ${c['cost_per_million']:,.2f} per million {unit_noun(unit)}." if c.get("cost_per_million") is not None
            else "."))
    rejected = rec["rejected_cheaper"]
    if rejected:
        reasons = Counter(o["bottleneck"] or "below the bound" for o in rejected)
        why = ", ".join(f"{n} by {b}" for b, n in reasons.most_common())
        parts.append(f"{len(rejected)} cheaper option(s) would slow the GPU ({why}).")
    return " ".join(parts) + _optimistic_words(rec)


def _optimistic_words(rec: dict[str, Any] | None) -> str:
    """The pick at the optimistic end of the ranges, where it differs from the one made."""
    other = (rec or {}).get("optimistic")
    if not other:
        return ""
    return (f" At the optimistic end of the ranges, {other['instance_type']} ({other['cloud']}) with "
            f"{other['disk_class']} storage would do.")
