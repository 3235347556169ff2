"""The results store: SQLite in WAL mode, versioned, committed point by point.

Tables: hosts, sweeps, points (one per measured shape, with its figures, the method they follow
and the limits that were enforced) and steps (each point's raw steps, packed in one row; see
sizer/store_schema.py). A point is committed in one transaction as soon as it finishes, so a
crash, a kill or Ctrl-C loses at most the point in flight. A store written by a newer sizer is
refused; an older one is migrated in place, in one transaction, and compacted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from sizer.errors import SizerError
from sizer.points import Point
from sizer.store_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Result,
    insert_steps,
    point_from_result,
    result_json,
    stored_result,
    unpack_steps,
)

__all__ = ["SCHEMA_VERSION", "Store", "SweepRow", "host_fingerprint", "plan_hash", "point_from_result",
           "sweep_calibration_ips"]


def host_fingerprint(info: dict[str, Any]) -> str:
    """A machine's identity: host name, CPU model and threads, GPU models, and what tells two
    machines of one kind apart (their GPUs' UUIDs, /etc/machine-id): lent GPU machines all carry
    the host name 'vm' and the same CPU and GPU models. A fleet's node (sizer.fleet) adds the node
    types it offers: two nodes on one machine are two hosts of the fleet."""
    raw_gpu = info.get("gpu")
    gpu: dict[str, Any] = raw_gpu if isinstance(raw_gpu, dict) else {}
    uuids = sorted(str(d.get("uuid")) for d in gpu.get("devices", []) if isinstance(d, dict) and d.get("uuid"))
    identity = {k: info.get(k) for k in ("hostname", "cpu_model", "threads", "gpus")}
    if uuids:
        identity["gpu_uuids"] = uuids
    if info.get("machine_id"):
        identity["machine_id"] = info["machine_id"]
    if info.get("fleet_node"):
        identity["fleet_node"] = info["fleet_node"]
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _inserted_id(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just added (typeshed types lastrowid as optional; after an INSERT it is set)."""
    rowid = cur.lastrowid
    assert rowid is not None, "INSERT left no lastrowid"
    return int(rowid)


def plan_hash(config: dict[str, Any]) -> str:
    """Identity of a sweep's plan, so `--resume` continues the sweep with the same plan."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class SweepRow:
    id: int
    host_id: int
    plan_hash: str
    command: str
    config: dict[str, Any]
    calibration: dict[str, Any]
    started: float
    finished: float | None
    host: dict[str, Any]


class Store:
    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise SizerError(f"no store at {self.path} (run `sizer sweep --store {self.path}` first)")
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SizerError(f"cannot create store folder {self.path.parent}: {exc.strerror}") from None
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30)
            self.conn.row_factory = sqlite3.Row
            self._open_retrying_while_locked()
        except sqlite3.DatabaseError as exc:
            raise SizerError(f"{self.path} is not a sizer store: {exc}") from None

    def _open_retrying_while_locked(self, patience_s: float = 30.0) -> None:
        """Set the connection up and migrate. SQLite answers "locked" at once, without waiting, where
        two processes open one old store together (switching it to WAL, upgrading a read lock), so
        the opening is tried again until `patience_s` has passed."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.execute("PRAGMA foreign_keys=ON")
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One transaction. A disk that is full or read-only ends it in one line; what earlier
        transactions committed (every point stored so far) stays."""
        try:
            with self.conn:
                yield self.conn
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if not any(word in text for word in ("full", "readonly", "read-only", "disk I/O")):
                raise
            raise SizerError(f"cannot write the store {self.path}: {text}; the points stored before are kept "
                             "(free the disk, then the same command with --resume goes on)") from None

    # ------------------------------------------------------------------ schema
    def schema_version(self) -> int:
        has_meta = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has_meta:
            tables = self.conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
            if tables:
                raise SizerError(f"{self.path} is an SQLite file but not a sizer store")
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        """Bring the store to SCHEMA_VERSION, each step in one transaction that re-reads the version
        first (two processes opening one old store migrate it once); compact it where it held points."""
        if self._readable_version() == SCHEMA_VERSION:
            return
        migrated_points = False
        while True:
            with self.conn:
                self.conn.execute("BEGIN IMMEDIATE")
                version = self._readable_version()
                if version == SCHEMA_VERSION:
                    break
                migrated_points = migrated_points or (version > 0 and self._count("points") > 0)
                MIGRATIONS[version](self.conn)
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (str(version + 1),),
                )
        if migrated_points:
            self.compact()

    def _readable_version(self) -> int:
        """The store's schema version, refused where a newer sizer wrote it."""
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise SizerError(
                f"{self.path} was written by a newer sizer (store schema {version}; this one reads up "
                f"to {SCHEMA_VERSION}): upgrade sizer"
            )
        return version

    def _count(self, table: str) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def compact(self) -> None:
        """Rewrite the file without the space that deleted rows left (VACUUM) and empty the WAL."""
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ hosts and sweeps
    def upsert_host(self, info: dict[str, Any]) -> int:
        fingerprint = host_fingerprint(info)
        with self._writing():
            row = self.conn.execute("SELECT id FROM hosts WHERE fingerprint=?", (fingerprint,)).fetchone()
            if row:
                self.conn.execute("UPDATE hosts SET info=? WHERE id=?", (json.dumps(info), row[0]))
                return int(row[0])
            cur = self.conn.execute(
                "INSERT INTO hosts(fingerprint, info, created) VALUES(?,?,?)",
                (fingerprint, json.dumps(info), time.time()),
            )
            return _inserted_id(cur)

    def start_sweep(self, host_id: int, command: str, config: dict[str, Any]) -> int:
        with self._writing():
            cur = self.conn.execute(
                "INSERT INTO sweeps(host_id, plan_hash, command, config, started) VALUES(?,?,?,?,?)",
                (host_id, plan_hash(config), command, json.dumps(config, sort_keys=True), time.time()),
            )
            return _inserted_id(cur)

    def set_calibration(self, sweep_id: int, calibration: dict[str, Any]) -> None:
        with self._writing():
            self.conn.execute("UPDATE sweeps SET calibration=? WHERE id=?", (json.dumps(calibration), sweep_id))

    def finish_sweep(self, sweep_id: int) -> None:
        with self._writing():
            self.conn.execute("UPDATE sweeps SET finished=? WHERE id=?", (time.time(), sweep_id))

    def resumable_sweep(self, config: dict[str, Any]) -> int | None:
        """The newest sweep with this plan, finished or not (a resumed run measures what is missing)."""
        row = self.conn.execute(
            "SELECT id FROM sweeps WHERE plan_hash=? ORDER BY id DESC LIMIT 1", (plan_hash(config),)
        ).fetchone()
        return int(row[0]) if row else None

    def sweep_host(self, sweep_id: int) -> tuple[int, dict[str, Any]] | None:
        """(host id, host info) of a sweep."""
        row = self.conn.execute(
            "SELECT h.id, h.info FROM sweeps s JOIN hosts h ON h.id = s.host_id WHERE s.id=?", (sweep_id,)
        ).fetchone()
        return (int(row[0]), json.loads(row[1])) if row else None

    def sweeps(self) -> list[SweepRow]:
        rows = self.conn.execute(
            "SELECT s.*, h.info AS host FROM sweeps s JOIN hosts h ON h.id = s.host_id ORDER BY s.id"
        ).fetchall()
        return [
            SweepRow(
                id=r["id"],
                host_id=r["host_id"],
                plan_hash=r["plan_hash"],
                command=r["command"],
                config=json.loads(r["config"]),
                calibration=json.loads(r["calibration"]),
                started=r["started"],
                finished=r["finished"],
                host=json.loads(r["host"]),
            )
            for r in rows
        ]

    def latest_sweep(self) -> SweepRow | None:
        all_sweeps = self.sweeps()
        return all_sweeps[-1] if all_sweeps else None

    def merge_from(self, other: "Store") -> dict[str, int]:
        """Copy every host, sweep, point and raw sample of `other` into this store (new ids; a
        host already here by fingerprint is reused). A sweep already copied (same host, plan and
        start time) is skipped, so merging twice adds nothing. One transaction: all or nothing."""
        copied = {"sweeps": 0, "points": 0, "skipped_sweeps": 0}
        with self._writing():
            host_ids: dict[int, int] = {}
            for row in other.conn.execute("SELECT * FROM hosts ORDER BY id"):
                # Recomputed, not copied: stores written before GPU UUIDs were part of a host's
                # identity gave machines of one kind the same fingerprint.
                fingerprint = host_fingerprint(json.loads(row["info"]))
                found = self.conn.execute("SELECT id FROM hosts WHERE fingerprint=?", (fingerprint,)).fetchone()
                if found is None:
                    found = (self.conn.execute(
                        "INSERT INTO hosts(fingerprint, info, created) VALUES(?,?,?)",
                        (fingerprint, row["info"], row["created"]),
                    ).lastrowid,)
                host_ids[int(row["id"])] = int(found[0])
            for sweep in other.conn.execute("SELECT * FROM sweeps ORDER BY id"):
                host_id = host_ids[int(sweep["host_id"])]
                if self.conn.execute(
                    "SELECT 1 FROM sweeps WHERE host_id=? AND plan_hash=? AND started=?",
                    (host_id, sweep["plan_hash"], sweep["started"]),
                ).fetchone():
                    copied["skipped_sweeps"] += 1
                    continue
                sweep_id = _inserted_id(self.conn.execute(
                    "INSERT INTO sweeps(host_id, plan_hash, command, config, calibration, started, finished)"
                    " VALUES(?,?,?,?,?,?,?)",
                    (host_id, sweep["plan_hash"], sweep["command"], sweep["config"], sweep["calibration"],
                     sweep["started"], sweep["finished"]),
                ))
                copied["sweeps"] += 1
                copied["points"] += self._copy_points(other, int(sweep["id"]), sweep_id)
        return copied

    _POINT_COLUMNS = ("key", "workload", "profile", "vcpus", "ram_gib", "disk_class", "status", "throughput", "unit",
                      "spread", "bottleneck", "enforced", "result", "started", "finished", "method")

    def _copy_points(self, other: "Store", from_sweep: int, to_sweep: int) -> int:
        """Copy one sweep's points of `other`, with their steps, into sweep `to_sweep` here."""
        columns = self._POINT_COLUMNS
        rows = other.conn.execute(
            f"SELECT {', '.join('p.' + c for c in columns)}, s.count, s.data"
            " FROM points p LEFT JOIN steps s ON s.point_id = p.id WHERE p.sweep_id=? ORDER BY p.id",
            (from_sweep,),
        ).fetchall()
        for row in rows:
            *point, count, data = tuple(row)
            point_id = self.conn.execute(
                f"INSERT INTO points(sweep_id, {', '.join(columns)}) VALUES(?{', ?' * len(columns)})", (to_sweep, *point)
            ).lastrowid
            if data is not None:
                self.conn.execute("INSERT INTO steps(point_id, count, data) VALUES(?,?,?)", (point_id, count, data))
        return len(rows)

    # ------------------------------------------------------------------ points
    def add_point(
        self,
        sweep_id: int,
        key: str,
        shape: dict[str, Any],
        result: Result,
        enforced: dict[str, Any],
        started: float,
    ) -> int:
        """Store one finished point and its raw steps in one transaction (committed on return)."""
        with self._writing():
            return self._insert_point(sweep_id, key, shape, result, enforced, started)

    def add_points(self, sweep_id: int, points: list[tuple[str, dict[str, Any], Result, dict[str, Any], float]]) -> list[int]:
        """Store several finished points, each (key, shape, result, enforced, started), in one
        transaction: all of them or none (a pair's two jobs, measured together)."""
        with self._writing():
            return [self._insert_point(sweep_id, *point) for point in points]

    def _insert_point(self, sweep_id: int, key: str, shape: dict[str, Any], result: Result, enforced: dict[str, Any],
                      started: float) -> int:
        """Insert one point and its steps inside the caller's transaction."""
        cur = self.conn.execute(
            "INSERT INTO points(sweep_id, key, workload, profile, vcpus, ram_gib, disk_class, status,"
            " throughput, unit, spread, bottleneck, enforced, result, started, finished, method)"
            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(sweep_id, key) DO NOTHING",
            (
                sweep_id,
                key,
                result.workload,
                result.profile,
                int(shape["vcpus"]),
                float(shape["ram_gib"]),
                str(shape["disk_class"]),
                result.status,
                float(result.throughput),
                result.unit,
                float(result.spread),
                result.bottleneck,
                json.dumps(enforced, sort_keys=True),
                result_json(result),
                started,
                time.time(),
                int(result.method),
            ),
        )
        if not cur.rowcount:
            raise SizerError(f"point {key} is already stored in sweep {sweep_id}")
        point_id = _inserted_id(cur)
        insert_steps(self.conn, point_id, result.steps)
        return point_id

    def remove_point(self, sweep_id: int, key: str) -> None:
        """Delete one point and its steps (a fleet's mark of a lost point, once it is measured)."""
        with self._writing():
            self.conn.execute("DELETE FROM points WHERE sweep_id=? AND key=?", (sweep_id, key))

    def point_keys(self, sweep_id: int) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT key FROM points WHERE sweep_id=?", (sweep_id,))}

    def point_rows(self, sweep_id: int | None = None) -> Iterator[sqlite3.Row]:
        if sweep_id is None:
            yield from self.conn.execute("SELECT * FROM points ORDER BY id")
        else:
            yield from self.conn.execute("SELECT * FROM points WHERE sweep_id=? ORDER BY id", (sweep_id,))

    def results(self, sweep_id: int | None = None) -> list[tuple[sqlite3.Row, Result]]:
        """Each point's row and its Result, whole again: its steps and its method put back."""
        query = "SELECT p.*, s.count AS step_count, s.data AS step_data FROM points p LEFT JOIN steps s ON s.point_id = p.id"
        if sweep_id is None:
            rows = self.conn.execute(query + " ORDER BY p.id")
        else:
            rows = self.conn.execute(query + " WHERE p.sweep_id=? ORDER BY p.id", (sweep_id,))
        return [(row, stored_result(row)) for row in rows]

    def samples(self, point_id: int) -> list[tuple[float, float, int]]:
        """A point's raw steps as (seconds, samples, warm-up 0/1)."""
        row = self.conn.execute("SELECT count, data FROM steps WHERE point_id=?", (point_id,)).fetchone()
        steps = unpack_steps(row[1], row[0]) if row else []
        return [(seconds, samples, int(warmup)) for seconds, samples, warmup in steps]

    def points(self, sweep_id: int | None = None) -> list[Point]:
        """The store's points (of one sweep, or all), in the form the model, the recommender and the
        report use, each with its sweep's CPU calibration and host. What its workload declares of
        itself (`Point.reads_once`) is not the store's to know: `sizer.facts` adds it."""
        sweeps = self.sweeps()
        calibration = {s.id: sweep_calibration_ips(s.calibration) for s in sweeps}
        host_of = {s.id: s.host_id for s in sweeps}
        out = []
        for row, result in self.results(sweep_id):
            out.append(dataclasses.replace(point_from_result(row, result), calibration_ips=calibration.get(row["sweep_id"]),
                                           host_id=host_of.get(row["sweep_id"])))
        return out


def sweep_calibration_ips(calibration: dict[str, Any] | None) -> float | None:
    """The per-vCPU decode-and-augment rate (images/s) recorded with a sweep (`sizer sweep`'s calibration)."""
    for key in ("ips_per_vcpu", "calibration_ips"):
        value = (calibration or {}).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None
