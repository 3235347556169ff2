"""Each workload's answer in a few words, from a report's context: the pick with its share of the
ceiling and range, the knee with its range, or why there is none. What `sizer sweep` prints last."""

from __future__ import annotations

from typing import Any


def _knee_words(knee: dict[str, Any]) -> str:
    predicted = knee.get("predicted_vcpus")
    span = knee.get("range") or {}
    low, high = span.get("low"), span.get("high")
    if predicted is None and low is None:
        return "not reached"
    around = "" if low is None else f" ({low} to {'more' if high is None or span.get('beyond_measured') else high})"
    return f"{predicted if predicted is not None else low}{around}"


def workload_answers(context: dict[str, Any]) -> list[dict[str, Any]]:
    """Per workload card: its pick (instance, cloud, disk), the pick's share of the ceiling at the
    figure and at both ends of its range, the knee in vCPUs with its range, and the reason where
    nothing is picked."""
    out = []
    for card in context["workloads"]:
        rec = card.get("recommendation") or {}
        chosen = rec.get("chosen")
        low = None if chosen is None else chosen.get("share_pessimistic")
        high = None if chosen is None else chosen.get("share_optimistic")
        out.append({
            "workload": card["workload"],
            "instance": None if chosen is None else chosen["instance_type"],
            "cloud": None if chosen is None else chosen["cloud"],
            "disk_class": None if chosen is None else chosen["disk_class"],
            "share": None if chosen is None else chosen.get("fraction_of_ceiling"),
            "share_low": None if low is None or high is None else min(low, high),
            "share_high": None if low is None or high is None else max(low, high),
            "knee": _knee_words(card["knee"]) if card.get("knee") else "not fitted",
            "reason": None if chosen is not None else card.get("no_recommendation") or rec.get("reason"),
        })
    return out
