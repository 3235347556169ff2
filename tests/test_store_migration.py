"""Store schema 1 -> 2: each point's method, its figure re-derived from its steps where they allow,
its steps stored once and compactly; and the method rules (sizer/method.py) on their own."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from sizer.errors import SizerError
from sizer.facts import with_facts
from sizer.method import (
    SweepSettings,
    bring_to_current,
    method_notes,
    method_summary,
    stored_method,
    to_capped_drain,
    to_drained,
    to_whole_window,
)
from sizer.points import Point
from sizer.store import Store
from sizer.store_schema import pack_steps, unpack_steps
from workloads import stats
from workloads.protocol import METHOD_VERSION, Result

# Schema 1 as sizer wrote it: the figures in `points`, every step twice (in the result's JSON and
# one `samples` row each).
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE hosts (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, info TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE sweeps (id INTEGER PRIMARY KEY, host_id INTEGER NOT NULL REFERENCES hosts(id), plan_hash TEXT NOT NULL,
    command TEXT NOT NULL, config TEXT NOT NULL, calibration TEXT NOT NULL DEFAULT '{}', started REAL NOT NULL,
    finished REAL);
CREATE TABLE points (id INTEGER PRIMARY KEY, sweep_id INTEGER NOT NULL REFERENCES sweeps(id), key TEXT NOT NULL,
    workload TEXT NOT NULL, profile TEXT NOT NULL, vcpus INTEGER NOT NULL, ram_gib REAL NOT NULL,
    disk_class TEXT NOT NULL, status TEXT NOT NULL, throughput REAL NOT NULL, unit TEXT NOT NULL,
    spread REAL NOT NULL, bottleneck TEXT NOT NULL, enforced TEXT NOT NULL, result TEXT NOT NULL,
    started REAL NOT NULL, finished REAL NOT NULL, UNIQUE (sweep_id, key));
CREATE TABLE samples (point_id INTEGER NOT NULL REFERENCES points(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
    seconds REAL NOT NULL, samples REAL NOT NULL, warmup INTEGER NOT NULL, PRIMARY KEY (point_id, idx));
CREATE INDEX points_workload ON points(workload);
INSERT INTO meta VALUES ('schema_version', '1');
"""
BUDGET_S = 12.0  # the sweep's time budget: the drained rule looks at most a third of it past the warm-up

# A 4-worker loader as an H200 ran it: start and warm-up, 20 steps at the GPU's own pace on batches
# read before the window, then the loader's steady state in rounds of four, the first one waiting.
BACKLOG = [5.0] + [0.054] * 34 + [0.054] * 20
STEADY = [0.14, 0.054, 0.054, 0.052] * 12


def _steps(intervals, warmup, samples=256.0):
    return [[dt, samples, 1.0 if i < warmup else 0.0] for i, dt in enumerate(intervals)]


def _result(workload="resnet50-train", steps=(), throughput=None, workers=None, **kw) -> dict:
    """A stored result's JSON as schema 1 held it; its figure the whole window unless given."""
    steps = [list(s) for s in steps]
    extra = dict(kw.pop("extra", {}))
    if workers is not None:
        extra["loader_workers"] = workers
    rounds = workers if workers and workers >= 2 else 1
    rate, spread, rates = stats.summarize(steps, 5, rounds) if steps else (0.0, 0.0, [])
    return {"workload": workload, "framework": "pytorch", "unit": "images/s", "profile": "gpu",
            "status": kw.pop("status", "ok"), "throughput": rate if throughput is None else throughput,
            "spread": spread, "window_rates": rates, "steps": steps, "counters": kw.pop("counters", {}),
            "limits_seen": {}, "config": {"input": "files", **kw.pop("config", {})}, "extra": extra,
            "bottleneck": "", "error": "", "wall_s": 1.0, "schema_version": 1}


def _v1_store(path, results: dict[str, dict], table_only: tuple[str, ...] = ()) -> None:
    """A schema-1 store of one sweep holding `results` by key; the points in `table_only` keep their
    steps in the `samples` table alone (an empty list in their JSON)."""
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.execute("INSERT INTO hosts VALUES (1, 'fp', ?, 0)", (json.dumps({"hostname": "h"}),))
    conn.execute("INSERT INTO sweeps VALUES (1, 1, 'plan', 'sizer sweep', ?, ?, 0, 1)",
                 (json.dumps({"time_budget_s": BUDGET_S}), json.dumps({"ips_per_vcpu": 250.0})))
    for i, (key, r) in enumerate(results.items(), start=1):
        conn.execute(
            "INSERT INTO points VALUES (?,1,?,?,'gpu',?,32,'ssd',?,?,'images/s',?,'',?,?,0,1)",
            (i, key, r["workload"], i, r["status"], r["throughput"], r["spread"], "{}",
             json.dumps(dict(r, steps=[] if key in table_only else r["steps"]))),
        )
        conn.executemany("INSERT INTO samples VALUES (?,?,?,?,?)",
                         [(i, k, s[0], s[1], int(s[2])) for k, s in enumerate(r["steps"])])
    conn.commit()
    conn.close()


def _median_figure_point() -> dict:
    """Method 1: a job without a loader whose figure is the median of its sub-window rates."""
    steps = _steps([1.0] + [0.01] * 40 + [0.03] * 10, warmup=1, samples=10.0)
    median = stats.median(stats.window_rates(steps, 5))
    assert not stats.window_rate(steps) == pytest.approx(median, rel=0.01)
    return _result("ptb-lstm-train", steps, throughput=median, extra={"big": "x" * 100})


def _backlog_point() -> dict:
    """Method 2: a loader-fed whole window that took the loader's backlog in."""
    return _result(steps=_steps(BACKLOG + STEADY, warmup=35), workers=4)


def _short_undrained_point() -> dict:
    """Method 2, cannot be brought further: the loop never waits within the stored steps, and the
    drained rule would have measured on past them."""
    return _result(steps=_steps([5.0] + [0.054] * 46, warmup=35), workers=4)


def _overrun_point() -> dict:
    """Method 3: a drain that went on at the loader's pace (20 batches in 10.9 s) and left a short window."""
    steps = _steps([3.0, 0.5, 0.5] + [0.5] * 6, warmup=3)
    counters = {"drained_batches": 20, "drained_samples": 20 * 256.0, "drain_seconds": 10.9, "cpu_ms_per_sample": 9.0}
    return _result(steps=steps, workers=2, counters=counters, extra={"window_short": "6 of 10 steps measured"})


def _big_point(n=4000) -> dict:
    """Of the current method already (drained), with many steps: what compaction shrinks."""
    return _result(steps=_steps([0.0123 + (i % 7) * 1e-4 for i in range(n)], warmup=5), workers=1,
                   counters={"drained_batches": 0, "drained_samples": 0.0, "drain_seconds": 0.01})


def _old_store(path) -> dict[str, dict]:
    results = {
        "median": _median_figure_point(),
        "backlog": _backlog_point(),
        "short": _short_undrained_point(),
        "overrun": _overrun_point(),
        "marked": _result(steps=_steps([0.1] * 20, warmup=2), workers=4, throughput=123.0,
                          extra={"drained": {"drain_steps": 0, "as_measured": True}}),
        "failed": _result(steps=_steps([0.2] * 3, warmup=3), status="oom", throughput=0.0),
        "big": _big_point(),
        "table-only": _result("ptb-lstm-train", _steps([0.5, 0.1, 0.1], warmup=1)),
    }
    _v1_store(path, results, table_only=("table-only",))
    return results


def _flat(steps) -> list[float]:
    return [float(x) for row in steps for x in row]


def _stored(store: Store) -> dict[str, tuple[sqlite3.Row, Result]]:
    return {row["key"]: (row, result) for row, result in store.results()}


# ---------------------------------------------------------------- the migration
def test_a_version_1_store_is_migrated_in_place_to_the_current_method(tmp_path):
    path = tmp_path / "old.sqlite"
    old = _old_store(path)
    with Store(path) as store:
        assert store.schema_version() == 2
        got = _stored(store)
        methods = {key: row["method"] for key, (row, _) in got.items()}
        assert methods == {"median": METHOD_VERSION, "backlog": METHOD_VERSION, "short": 2, "overrun": METHOD_VERSION,
                           "marked": 2, "failed": METHOD_VERSION, "big": METHOD_VERSION, "table-only": METHOD_VERSION}
        # Method 1 -> the whole window's rate; the median it held is kept.
        row, median = got["median"]
        assert row["throughput"] == median.throughput == pytest.approx(stats.window_rate(old["median"]["steps"]))
        assert median.extra["rederived"] == [{"method": 1, "throughput": old["median"]["throughput"],
                                              "spread": old["median"]["spread"], "status": "ok"}]
        # Method 2 -> the window opens where the loop caught up with the backlog (step 55).
        row, backlog = got["backlog"]
        opened = _steps(BACKLOG + STEADY, warmup=55)
        assert backlog.throughput == pytest.approx(stats.summarize(opened, 5, 4)[0])
        assert backlog.throughput < 0.95 * old["backlog"]["throughput"]  # the backlog ran at the GPU's pace
        assert backlog.counters["drain_steps"] == 20 and backlog.counters["warmup_steps"] == 55
        assert [s[2] for s in backlog.steps] == [s[2] for s in opened]
        assert backlog.extra["rederived"][0]["method"] == 2
        # Steps that cannot show the catch-up: the figure stays, marked with its method.
        assert got["short"][0]["throughput"] == old["short"]["throughput"]
        assert got["marked"][0]["throughput"] == 123.0
        # Method 3 -> the drain's batches join the short window.
        overrun = got["overrun"][1]
        assert overrun.throughput == pytest.approx((20 * 256 + 6 * 256) / (10.9 + 3.0))
        assert "cpu_ms_per_sample" not in overrun.counters
        assert overrun.extra["rederived"][0]["cpu_ms_per_sample"] == 9.0
        # Nothing to re-derive: the figure and the JSON stay as they were.
        assert got["big"][1].throughput == old["big"]["throughput"] and "rederived" not in got["big"][1].extra
        assert got["failed"][0]["status"] == "oom"


def test_migrated_steps_live_once_and_compactly(tmp_path):
    path = tmp_path / "old.sqlite"
    old = _old_store(path)
    size_before = path.stat().st_size
    with Store(path) as store:
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "samples" not in tables and "steps" in tables
        assert all(json.loads(raw)["extra"] is not None and "steps" not in json.loads(raw)
                   for (raw,) in store.conn.execute("SELECT result FROM points"))
        got = _stored(store)
        for key in ("big", "table-only", "short", "failed"):
            assert _flat(got[key][1].steps) == pytest.approx(_flat(old[key]["steps"]), rel=1e-6)
            assert _flat(store.samples(got[key][0]["id"])) == pytest.approx(_flat(old[key]["steps"]), rel=1e-6)
        assert store.conn.execute("SELECT count(*) FROM steps").fetchone()[0] == len(old)
    assert path.stat().st_size < size_before / 2
    assert not (tmp_path / "old.sqlite-wal").exists() or (tmp_path / "old.sqlite-wal").stat().st_size == 0


def test_opening_a_migrated_store_again_changes_nothing(tmp_path):
    path = tmp_path / "old.sqlite"
    _old_store(path)
    with Store(path) as store:
        first = {key: (row["throughput"], row["method"], result.extra) for key, (row, result) in _stored(store).items()}
    with Store(path) as store:
        again = {key: (row["throughput"], row["method"], result.extra) for key, (row, result) in _stored(store).items()}
    assert again == first


def test_a_migration_that_fails_leaves_the_version_1_store_as_it_was(tmp_path, monkeypatch):
    import sizer.store_schema as schema

    path = tmp_path / "old.sqlite"
    _old_store(path)
    calls = []

    def failing(result, method, settings):
        calls.append(method)
        if len(calls) > 2:
            raise RuntimeError("interrupted")
        return bring_to_current(result, method, settings)

    monkeypatch.setattr(schema, "bring_to_current", failing)
    with pytest.raises(RuntimeError):
        Store(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] > 4000
    assert "method" not in [r[1] for r in conn.execute("PRAGMA table_info(points)")]
    conn.close()
    monkeypatch.undo()
    with Store(path) as store:
        assert store.schema_version() == 2


OPENER = textwrap.dedent(
    """
    import sys
    from sizer.store import Store
    with Store(sys.argv[1]) as store:
        print(store.conn.execute("SELECT count(*) FROM points").fetchone()[0])
    """
)


def test_two_processes_opening_one_old_store_migrate_it_once(tmp_path):
    path = tmp_path / "old.sqlite"
    _old_store(path)
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(path)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    assert [p.communicate(timeout=60)[0].strip() for p in procs] == ["8", "8"]
    assert all(p.returncode == 0 for p in procs)
    with Store(path) as store:
        assert len(_stored(store)["median"][1].extra["rederived"]) == 1


def test_a_store_newer_than_this_sizer_is_refused_in_one_line(tmp_path):
    path = tmp_path / "new.sqlite"
    _v1_store(path, {})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(SizerError, match="newer sizer") as err:
        Store(path)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- the loader
def test_loaded_points_carry_their_method_calibration_and_what_their_workload_reads(tmp_path):
    path = tmp_path / "old.sqlite"
    _old_store(path)
    with Store(path) as store:
        points = {p.vcpus: p for p in with_facts(store.points())}
    assert points[1].method == METHOD_VERSION and points[3].method == 2
    assert all(p.calibration_ips == 250.0 for p in points.values())  # the sweep's calibration, attached once
    assert points[1].reads_once is False  # ptb-lstm-train reads its corpus every pass, as it declares
    notes = method_notes(points.values())
    assert len(notes) == 1 and notes[0].startswith("2 points were measured by method 2")
    assert "resnet50-train 3 vCPU / 32 GiB / ssd" in notes[0]
    assert method_summary(points.values()) == {"current": METHOD_VERSION, "points": {"2": 2, str(METHOD_VERSION): 6}}


def test_a_new_point_records_the_current_method(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        host = store.upsert_host({"hostname": "h"})
        sweep = store.start_sweep(host, "sizer sweep", {})
        result = Result(workload="w", framework="f", unit="u/s", profile="gpu", throughput=5.0, steps=[[0.1, 1, 0]])
        store.add_point(sweep, "k", {"vcpus": 1, "ram_gib": 1, "disk_class": "ssd"}, result, {}, 0.0)
        (row, loaded), = store.results()
    assert row["method"] == loaded.method == METHOD_VERSION and loaded.steps == [[0.1, 1.0, 0.0]]


def test_a_point_is_a_plain_value_that_loads_no_workload():
    code = ("import sys; from sizer.points import Point; p = Point('resnet50-infer', 2, 8.0, 'ssd', 1.0, 'images/s'); "
            "assert p.reads_once is None and p.method is None; "
            "assert not [m for m in sys.modules if m.startswith(('workloads.imagenet', 'torch'))], sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- the rules one by one
def _loaded(raw: dict) -> Result:
    return Result.from_json(json.dumps(raw))


def test_the_stored_method_comes_from_the_marks_the_drain_or_the_figure():
    assert stored_method(_loaded(_median_figure_point())) == 1
    assert stored_method(_loaded(_backlog_point())) == 2
    assert stored_method(_loaded(_overrun_point())) == 3
    marked = _backlog_point()
    marked["extra"]["drain_overrun"] = {"throughput": 1.0}
    assert stored_method(_loaded(marked)) == 4
    marked["extra"] = {"drained": {"drain_steps": 20, "throughput": 1.0}}
    assert stored_method(_loaded(marked)) == 3
    assert stored_method(_loaded(_result(status="error", throughput=0.0))) == METHOD_VERSION


def test_each_rule_brings_a_figure_one_method_on_and_leaves_a_current_one_alone():
    settings = SweepSettings(time_budget_s=BUDGET_S)
    # A job whose input ended holds the whole window already; one with no loader has no backlog.
    ended = _loaded(_result("imagenet-preprocess", _steps([0.1] * 9, warmup=1), throughput=77.0,
                            extra={"figure": "whole window: the input ended before a steady state"}))
    assert to_whole_window(ended, settings) is ended
    no_loader = _loaded(_result("ptb-lstm-train", _steps([0.1] * 30, warmup=2)))
    assert to_drained(no_loader, settings) is no_loader
    switched_off = _loaded(_result(steps=_steps(BACKLOG + STEADY, warmup=35), workers=4, config={"drain": False}))
    assert to_drained(switched_off, settings) is switched_off
    assert to_drained(_loaded(_backlog_point()), SweepSettings()) is None  # no budget: no rule
    assert to_capped_drain(no_loader, settings) is no_loader
    # Bringing a result twice gives the same figure: every rule is idempotent once applied.
    once, method = bring_to_current(_loaded(_median_figure_point()), 1, settings)
    again, method_again = bring_to_current(once, method, settings)
    assert method == method_again == METHOD_VERSION and again is once


def test_packed_steps_keep_seconds_to_seven_digits_and_counts_exactly():
    steps = [[0.1, 32, 1], [0.012345678, 16777216, 0], [2.5, 0.0, 0]]
    assert unpack_steps(pack_steps(steps), 3) == [[0.1, 32.0, 1.0], [0.01234568, 16777216.0, 0.0], [2.5, 0.0, 0.0]]
    assert unpack_steps(pack_steps([]), 0) == [] and unpack_steps(None, 0) == []


def test_points_csv_keeps_the_method(tmp_path):
    from sizer.points import read_points_csv, write_points_csv

    write_points_csv([Point("w", 2, 8.0, "ssd", 1.0, "images/s", method=2), Point("w", 4, 8.0, "ssd", 2.0, "images/s")],
                     tmp_path / "p.csv")
    assert [p.method for p in read_points_csv(tmp_path / "p.csv")] == [2, None]


def test_the_report_names_points_kept_at_an_older_method(tmp_path):
    from sizer.report import build_context, inputs_from_store

    path = tmp_path / "old.sqlite"
    _old_store(path)
    with Store(path) as store:
        context = build_context(**inputs_from_store(store))
    warnings = {w["workload"]: w["warnings"] for w in context["workloads"]}
    assert any("measured by method 2" in line for line in warnings["resnet50-train"])
    assert not any("measured by method" in line for line in warnings.get("ptb-lstm-train", []))
