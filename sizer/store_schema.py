"""The store's tables, the compact form of a point's raw steps, the migrations between schemas, and
a stored row read back as a Result and as the Point the model sees.

Schema 2 keeps each point's raw steps once, as one row of the `steps` table: the step count and a
zlib-compressed blob of float32 seconds, float32 samples and one warm-up byte per step. A point's
result JSON holds everything else but its steps and its method, which has a column of its own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import sys
import zlib
from array import array
from typing import Any, Callable, Sequence

from sizer.method import SweepSettings, bring_to_current, current_marks, current_status, stored_method
from sizer.points import ParallelMark, Point
from workloads.protocol import Result

SCHEMA_VERSION = 2

_V1_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    info TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE sweeps (
    id INTEGER PRIMARY KEY,
    host_id INTEGER NOT NULL REFERENCES hosts(id),
    plan_hash TEXT NOT NULL,
    command TEXT NOT NULL,
    config TEXT NOT NULL,
    calibration TEXT NOT NULL DEFAULT '{}',
    started REAL NOT NULL,
    finished REAL
);
CREATE TABLE points (
    id INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    key TEXT NOT NULL,
    workload TEXT NOT NULL,
    profile TEXT NOT NULL,
    vcpus INTEGER NOT NULL,
    ram_gib REAL NOT NULL,
    disk_class TEXT NOT NULL,
    status TEXT NOT NULL,
    throughput REAL NOT NULL,
    unit TEXT NOT NULL,
    spread REAL NOT NULL,
    bottleneck TEXT NOT NULL,
    enforced TEXT NOT NULL,
    result TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL NOT NULL,
    UNIQUE (sweep_id, key)
);
CREATE TABLE samples (
    point_id INTEGER NOT NULL REFERENCES points(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    seconds REAL NOT NULL,
    samples REAL NOT NULL,
    warmup INTEGER NOT NULL,
    PRIMARY KEY (point_id, idx)
);
CREATE INDEX points_workload ON points(workload);
"""

_STEPS_TABLE = """
CREATE TABLE steps (
    point_id INTEGER PRIMARY KEY REFERENCES points(id) ON DELETE CASCADE,
    count INTEGER NOT NULL,
    data BLOB NOT NULL
)
"""


# ---------------------------------------------------------------- a point's steps and result
def pack_steps(steps: Sequence[Sequence[float]]) -> bytes:
    """Rows [seconds, samples, warmup] as one compressed blob (little-endian float32 columns)."""
    seconds = array("f", (float(row[0]) for row in steps))
    samples = array("f", (float(row[1]) for row in steps))
    warmup = bytes(1 if len(row) > 2 and row[2] else 0 for row in steps)
    if sys.byteorder == "big":
        seconds.byteswap()
        samples.byteswap()
    return zlib.compress(seconds.tobytes() + samples.tobytes() + warmup, 9)


def unpack_steps(blob: bytes | None, count: int) -> list[list[float]]:
    """The rows `pack_steps` packed. Seconds come back at float32's 7 significant digits, so a
    step written as 0.1 reads 0.1; samples (whole counts below 2**24) come back exact."""
    if not blob or not count:
        return []
    raw = zlib.decompress(blob)
    seconds, samples = array("f"), array("f")
    seconds.frombytes(raw[: 4 * count])
    samples.frombytes(raw[4 * count : 8 * count])
    if sys.byteorder == "big":
        seconds.byteswap()
        samples.byteswap()
    warmup = raw[8 * count :]
    return [[float(f"{s:.7g}"), float(n), float(w)] for s, n, w in zip(seconds, samples, warmup)]


def result_json(result: Result) -> str:
    """A result as the points table keeps it: without its steps and method (stored apart)."""
    fields = dataclasses.asdict(result)
    del fields["steps"], fields["method"]
    return json.dumps(fields, sort_keys=True)


def insert_steps(conn: sqlite3.Connection, point_id: int, steps: Sequence[Sequence[float]]) -> None:
    conn.execute("INSERT INTO steps(point_id, count, data) VALUES(?,?,?)", (point_id, len(steps), pack_steps(steps)))


# ---------------------------------------------------------------- migrations
def _create_v1(conn: sqlite3.Connection) -> None:
    for statement in _split_sql(_V1_TABLES):
        conn.execute(statement)


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Each point gets its method (`sizer.method.stored_method`), its figure re-derived from its
    steps as far toward the current method as they allow, and its steps moved to the `steps` table;
    the per-step `samples` table goes. The steps in a point's result are the ones its figure was
    derived from (a re-derivation could re-mark their warm-up), so they win over the table's."""
    conn.execute("ALTER TABLE points ADD COLUMN method INTEGER NOT NULL DEFAULT 0")
    conn.execute(_STEPS_TABLE)
    settings = {
        sweep_id: SweepSettings(time_budget_s=json.loads(config).get("time_budget_s"))
        for sweep_id, config in conn.execute("SELECT id, config FROM sweeps")
    }
    for point_id, sweep_id, raw in conn.execute("SELECT id, sweep_id, result FROM points ORDER BY id").fetchall():
        result = Result.from_json(raw)
        if not result.steps:
            result.steps = [list(row) for row in conn.execute(
                "SELECT seconds, samples, warmup FROM samples WHERE point_id=? ORDER BY idx", (point_id,))]
        result, method = bring_to_current(result, stored_method(result), settings.get(sweep_id, SweepSettings()))
        result.method = method
        conn.execute(
            "UPDATE points SET throughput=?, spread=?, status=?, method=?, result=? WHERE id=?",
            (result.throughput, result.spread, result.status, result.method, result_json(result), point_id),
        )
        insert_steps(conn, point_id, result.steps)
    conn.execute("DROP TABLE samples")


# MIGRATIONS[v] brings a store from schema v to v + 1, inside the caller's transaction. Version 0
# is an empty file.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _create_v1, 1: _v1_to_v2}


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


# ---------------------------------------------------------------- rows as values
# Keys a worker may leave in its result for the unthrottled device's own read bandwidth (MB/s).
DEVICE_MBPS_KEYS = ("device_read_mbps", "disk_read_mbps", "fio_read_mbps")


def stored_result(row: sqlite3.Row) -> Result:
    """A point row (joined with its steps) as its Result, whole again: its steps and its method put back."""
    result = Result.from_json(row["result"])
    result.steps = unpack_steps(row["step_data"], row["step_count"])
    result.method = int(row["method"])
    return result


def _positive(value: Any) -> float | None:
    """A finite number above zero as a float, else None (a missing, boolean or odd value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def epochs_of(extra: dict[str, Any]) -> float | None:
    """Passes over the data when the window closed: recorded as such, or for a one-pass job that
    records its images, its share of the pass."""
    epochs = extra.get("epochs")
    if isinstance(epochs, (int, float)) and not isinstance(epochs, bool):
        return float(epochs)
    total = _positive(extra.get("images_total"))
    return None if total is None else float(extra.get("images_done") or 0) / total


def _host_probe(extra: dict[str, Any]) -> float | None:
    """The mean of the worker's speed probe before and after the point (MB/s), where it ran one."""
    probe = extra.get("host_speed")
    values = [v for v in (_positive(probe.get(k)) for k in ("before_mbps", "after_mbps"))
              if v is not None] if isinstance(probe, dict) else []
    return sum(values) / len(values) if values else None


def _finite_or_zero(value: Any) -> float:
    """A stored spread as a point carries it: an infinite one (a window that counted nothing, stored
    by an older sizer) says nothing, and 0 is what a failed point carries."""
    number = float(value)
    return number if math.isfinite(number) else 0.0


def _parallel_mark(extra: dict[str, Any]) -> ParallelMark | None:
    mark = extra.get("parallel")
    if not isinstance(mark, dict):
        return None
    gpu = mark.get("gpu")
    return ParallelMark(int(mark.get("slots") or 0), int(mark.get("slot") or 0), None if gpu is None else int(gpu))


def point_from_result(row: Any, result: Result) -> Point:
    """A stored point (its row and Result) as a Point, without what its sweep adds (`Store.points`
    adds its calibration and host) and with reads_once unknown (`sizer.facts` adds it)."""
    counters = result.counters or {}
    extra = result.extra or {}
    samples = counters.get("measured_samples") or 0
    read_mb = None
    cold_bytes = extra.get("cold_read_bytes", counters.get("read_bytes"))
    if samples and cold_bytes is not None:
        read_mb = float(cold_bytes) / 1e6 / float(extra.get("cold_samples", samples))
    peak = _positive(counters.get("gpu_mem_peak_bytes"))
    device = next((v for v in (_positive(extra.get(k)) for k in DEVICE_MBPS_KEYS) if v is not None), None)
    return Point(
        workload=row["workload"],
        vcpus=int(row["vcpus"]),
        ram_gib=float(row["ram_gib"]),
        disk_class=row["disk_class"],
        throughput=float(row["throughput"]),
        unit=row["unit"],
        status=current_status(row["status"], float(row["spread"]), result),
        profile=row["profile"],
        spread=_finite_or_zero(row["spread"]),
        bottleneck=row["bottleneck"],
        gpu_model=str(counters.get("gpu_name", "")),
        gpu_util_pct=counters.get("gpu_util_pct"),
        cpu_util_per_vcpu=counters.get("cpu_util_per_vcpu"),
        read_mb_per_sample=read_mb,
        dataset_gib=extra.get("dataset_gib"),
        footprint_gib=(counters.get("peak_rss_bytes") or 0) / 2**30 or None,
        input=str(result.config.get("input", "")),
        decode=str(result.config.get("decode", "")),
        method=result.method,
        gpus=stored_gpus(extra),
        key=str(row["key"]),
        pass_no=int(extra.get("pass", 1)),
        epochs=epochs_of(extra),
        cpu_ms_per_sample=_positive(counters.get("cpu_ms_per_sample")),
        gpu_mem_peak_gib=None if peak is None else peak / 2**30,
        device_read_mbps=device,
        host_probe_mbps=_host_probe(extra),
        kernel_split=counters.get("gpu_kernel_split") if isinstance(counters.get("gpu_kernel_split"), dict) else None,
        parallel=_parallel_mark(extra),
        interference_check=str(extra.get("interference_check") or ""),
        real_instance=bool(extra.get("real_instance")),
        gpu_mem_util_pct=_percent(counters.get("gpu_mem_util_pct")),
        pcie_rx_mbps=_positive(counters.get("pcie_rx_mbps")),
        job=_colocation(extra, "job"),
        partner=_colocation(extra, "partner"),
        share_of=_colocation(extra, "share_of"),
        marks=current_marks(result),
    )


def _percent(value: Any) -> float | None:
    """A share in percent (0 to 100) as a float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0 <= value <= 100 else None


def _colocation(extra: dict[str, Any], field: str) -> str:
    """Of a pair's point (`sizer colocate`, `extra["colocated"]`), the job as run, its partner
    (empty: alone on its half) or the instance it had half of; empty for any other point."""
    mark = extra.get("colocated")
    if not isinstance(mark, dict) or not mark.get("share_of"):
        return ""
    return str(mark.get(field) or "")


def stored_gpus(extra: dict[str, Any]) -> int:
    """A stored point's GPU count: its shape's (`InstanceShape.as_dict` keeps it only above one)."""
    shape = extra.get("shape")
    gpus = shape.get("gpus", 1) if isinstance(shape, dict) else 1
    return int(gpus) if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1 else 1
