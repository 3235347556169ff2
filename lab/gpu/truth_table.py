"""The short table of lab/gpu/truth.sh: the host's fingerprint, resnet50-train's figures alone, with
every slot busy and on the whole node, the load factor, the recommendation for the H200's rows and
the pipeline-cost ratios, from what the script left in its folder. Reads files, measures nothing.

Usage: python lab/gpu/truth_table.py OUT [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from pathlib import Path
from typing import Any


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _points(store: Path) -> list[dict[str, Any]]:
    """Every stored point of resnet50-train with CPU decoding: key, shape, rate, and where it ran."""
    if not store.is_file():
        return []
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT key, vcpus, status, throughput, result FROM points WHERE workload='resnet50-train'")
        out = []
        for key, vcpus, status, rate, result in rows:
            extra = json.loads(result).get("extra", {})
            config = json.loads(result).get("config", {})
            if config.get("decode", "cpu") != "cpu":
                continue
            out.append({"key": key, "vcpus": vcpus, "status": status, "rate": rate,
                        "gpus": (extra.get("shape") or {}).get("gpus", 1), "synthetic": config.get("input") == "synthetic",
                        "parallel": bool(extra.get("parallel")), "alone": "alone" in extra})
        return out
    finally:
        conn.close()


def table(out: Path) -> dict[str, Any]:
    fingerprint = _json(out / "fingerprint.json") or {}
    cal = fingerprint.get("calibration", {})
    alone = _points(out / "alone" / "sizer.sqlite")
    loaded = _points(out / "loaded" / "sizer.sqlite")
    usable = ("ok", "noisy")
    rows: dict[str, Any] = {
        "cpu": (fingerprint.get("cpu") or {}).get("model"),
        "threads": (fingerprint.get("cpu") or {}).get("threads"),
        "one_busy_ips": (cal.get("one_busy") or {}).get("ips_per_vcpu"),
        "all_busy_ips": (cal.get("all_busy") or {}).get("ips_per_vcpu"),
        "memory_gbps": (fingerprint.get("memory") or {}).get("copy_gbps"),
        "alone": {p["vcpus"]: p["rate"] for p in alone if p["gpus"] == 1 and not p["synthetic"] and p["status"] in usable},
        "ceiling": next((p["rate"] for p in alone if p["synthetic"] and p["status"] in usable), None),
        "whole_node": [{"gpus": p["gpus"], "vcpus": p["vcpus"], "rate": p["rate"], "per_gpu": p["rate"] / p["gpus"]}
                       for p in alone if p["gpus"] > 1 and p["status"] in usable],
    }
    busy = [p["rate"] for p in loaded if p["parallel"] and not p["synthetic"] and p["status"] in usable]
    by_itself = [p["rate"] for p in loaded if p["alone"] and p["status"] in usable]
    rows["loaded"] = {"rates": busy, "alone": by_itself,
                      "load_factor": statistics.median(busy) / statistics.median(by_itself) if busy and by_itself else None}
    for node in rows["whole_node"]:
        per = node["vcpus"] / node["gpus"]
        node["efficiency"] = node["per_gpu"] / rows["alone"][per] if per in rows["alone"] else None
    rec = _json(out / "recommend.json") or {}
    entry = next((r for r in rec.get("recommendations", []) if r.get("workload", "").startswith("resnet50-train")), {})
    chosen = entry.get("chosen") or {}
    p5en = [o for o in entry.get("considered", []) if o.get("instance_type") == "p5en.48xlarge"]
    rows["pick"] = {"instance": chosen.get("instance_type"), "disk": chosen.get("disk_class"), "reason": entry.get("reason"),
                    "p5en": [{k: o.get(k) for k in ("disk_class", "predicted", "meets", "basis", "load_basis", "reason")}
                             for o in p5en[:1]], "knee": entry.get("knee")}
    pc = _json(out / "pipeline_cost.json") or {}
    rows["pipeline_cost"] = [{"condition": e["condition"], "vcpus": e["vcpus"], "ratio": e["ratio"],
                              "sizer": e["sizer"]["throughput"], "loop": e["loop"]["throughput"]}
                             for e in pc.get("summary", [])]
    return rows


def _n(x: Any) -> str:
    return "–" if x is None else (f"{x:,.0f}" if isinstance(x, (int, float)) and abs(x) >= 100 else f"{x:.3g}")


def render(t: dict[str, Any]) -> None:
    print(f"host: {t['cpu']}, {t['threads']} threads; per vCPU {_n(t['one_busy_ips'])} images/s with one busy, "
          f"{_n(t['all_busy_ips'])} with every one busy; memory copy {_n(t['memory_gbps'])} GB/s")
    print("resnet50-train alone: " + ", ".join(f"{v} vCPUs {_n(r)}" for v, r in sorted(t["alone"].items()))
          + f"; GPU ceiling {_n(t['ceiling'])} images/s")
    for node in t["whole_node"]:
        print(f"whole node: {node['gpus']} GPUs x {node['vcpus'] // node['gpus']} vCPUs: {_n(node['rate'])} images/s, "
              f"{_n(node['per_gpu'])} per GPU, efficiency {_n(node['efficiency'])}")
    loaded = t["loaded"]
    if loaded["rates"]:
        print(f"every slot busy: {', '.join(_n(r) for r in loaded['rates'])}; alone {', '.join(_n(r) for r in loaded['alone'])}; "
              f"load factor {_n(loaded['load_factor'])}")
    pick = t["pick"]
    print(f"recommend --gpu H200: {pick['instance'] or 'none'} ({pick['disk'] or '-'}); knee {pick['knee']}")
    for o in pick["p5en"]:
        print(f"  p5en.48xlarge ({o['disk_class']}): {_n(o['predicted'])} per GPU, meets {o['meets']}, basis {o['basis']}, "
              f"loaded: {o['load_basis']}")
    for e in t["pipeline_cost"]:
        print(f"pipeline cost {e['condition']} {e['vcpus']} vCPUs: sizer {_n(e['sizer'])}, loop {_n(e['loop'])}, "
              f"ratio {_n(e['ratio'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    t = table(args.out)
    if args.json:
        print(json.dumps(t, indent=2, default=str))
    else:
        render(t)


if __name__ == "__main__":
    main()
