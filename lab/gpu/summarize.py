"""Print one line per result JSON in a folder: rate, spread, window, bytes per second read.

Usage: python3 lab/gpu/summarize.py DIR
"""

import json
import sys
from pathlib import Path


def figures(raw: dict) -> dict:
    result = raw.get("result", raw)
    counters = result.get("counters", {})
    secs = counters.get("measured_seconds") or 0
    samples = counters.get("measured_samples") or 0
    read = counters.get("read_bytes") or 0
    return {
        "rate": result.get("throughput"),
        "spread": result.get("spread"),
        "status": result.get("status"),
        "window_s": secs,
        "window_rate": samples / secs if secs else None,
        "read_MBps": read / 1e6 / secs if secs else None,
        "cpus": (result.get("limits_seen") or {}).get("cpus_allowed"),
        "gpu_util": counters.get("gpu_util_pct"),
    }


for path in sorted(Path(sys.argv[1]).glob("*.json")):
    try:
        raw = json.loads(path.read_text())
    except ValueError:
        continue
    if isinstance(raw, dict) and ("result" in raw or "throughput" in raw):
        f = figures(raw)
        print(f"{path.stem:28s} " + " ".join(
            f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in f.items() if k != "cpus"
        ) + f" cpus={str(f['cpus'])[:20]}")
