"""`sizer sweep --strategy adaptive --parallel 2` on this host's real cgroups: two workload entries'
searches fed to two slots of one CPU each, their points side by side; each entry's choices are those
a serial adaptive sweep makes over the same stored points; a sweep killed (SIGKILL) with two points
in flight and resumed measures nothing twice; and the feed's rule, on constructed searches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_parallel_sweep import ROOT, SIZER, groups_of, processes_of, start_and_wait_for_two_in_flight
from test_sweep import stored

from sizer.diskclasses import load_disk_classes
from sizer.facts import with_facts
from sizer.shapes import shape_key
from sizer.store import Store
from sizer.sweep.adaptive import AdaptiveChooser
from sizer.sweep.adaptive_run import AdaptiveFeed, Search, adaptive_terms
from sizer.sweep.plan import SweepOptions, plan_sweep
from sizer.sweep.strategy import plan_entries

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two slots need two CPUs")
ENTRIES = "cpu-spin,cpu-spin:processes=1"
GRID = ("--vcpus", "1", "--ram", "256M,512M,768M", "--disks", "local-nvme")


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def sweep_args(tmp_path: Path, *more: str) -> list[str]:
    return ["sweep", "--workloads", ENTRIES, *GRID, "--budget", "1", "--no-calibrate", "--profile", "cpu-small",
            "--strategy", "adaptive", "--max-points", "4", "--parallel", "2", "--interference", "0",
            "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"),
            "--json", *more]


def serial_choices(tmp_path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Per entry: the keys the parallel sweep stored, and the keys a serial adaptive sweep chooses
    when each point it asks for reads the stored measurement of that key."""
    opts = SweepOptions(workloads=ENTRIES.split(","), vcpus=[1], ram_bytes=[256 << 20, 512 << 20, 768 << 20],
                        disks=["local-nvme"], profile="cpu-small", data_dir=tmp_path / "data", store=tmp_path / "s.sqlite",
                        calibrate=False, time_budget_s=1.0, strategy="adaptive", max_points=4)
    plan = plan_sweep(opts)
    out = {}
    with Store(tmp_path / "s.sqlite", create=False) as store:
        sweep_id = store.sweeps()[-1].id
        terms = adaptive_terms(store, sweep_id, opts, load_disk_classes())
        rows = list(store.point_rows(sweep_id))
        pairs = list(zip([r["key"] for r in rows], with_facts(store.points(sweep_id))))
    for entry in plan_entries(plan.points):
        bases = {c.key for c in entry.candidates}
        mine = [(k, p) for k, p in pairs if shape_key(k) in bases]
        by_key = dict(mine)
        chooser, measured = AdaptiveChooser(entry.candidates, terms), []
        while (step := chooser.step(measured)).point is not None:
            assert step.point.key in by_key, f"{entry.label}: a serial sweep asks for {step.point.key}, never measured"
            measured.append((step.point.key, by_key[step.point.key]))
        out[entry.label] = ([k for k, _ in mine], [k for k, _ in measured])
    return out


@pytest.mark.cgroup
@pytest.mark.slow
def test_two_entries_searches_run_side_by_side_with_a_serial_sweeps_choices(cli, tmp_path):
    code, out, err = cli(*sweep_args(tmp_path))
    assert code in (0, 3), err
    summary = json.loads(out)
    rows = stored(tmp_path / "s.sqlite")
    assert len({r["key"] for r in rows}) == len(rows) == 8  # each entry's --max-points 4, nothing twice
    assert {r["status"] for r in rows} <= {"ok", "noisy"}
    slots = {json.loads(r["result"])["extra"]["parallel"]["slot"] for r in rows}
    assert slots == {0, 1}
    spans = {entry: [(r["started"], r["finished"]) for r in rows
                     if ("processes=1" in r["key"]) == (entry == "one")] for entry in ("one", "two")}
    assert any(a0 < b1 and b0 < a1 for a0, a1 in spans["one"] for b0, b1 in spans["two"]), \
        "no point of one entry ran beside a point of the other"
    for label, (stored_keys, serial) in serial_choices(tmp_path).items():
        assert sorted(stored_keys) == sorted(serial), label  # the same shapes, each as often
    records = summary["adaptive"]
    assert set(records) == {"cpu-spin", "cpu-spin[processes=1]"}
    assert all(r["stopped"] == "max points" and r["points"] == 4 for r in records.values())
    assert summary["parallel"]["slots"] and groups_of(os.getpid()) == set()


@pytest.mark.cgroup
@pytest.mark.slow
def test_a_killed_parallel_adaptive_sweep_resumes_without_measuring_anything_twice(tmp_path):
    store = tmp_path / "s.sqlite"
    args = sweep_args(tmp_path)
    first = start_and_wait_for_two_in_flight(args, store, 1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    first.communicate()
    before = stored(store)
    deadline = time.monotonic() + 15
    while (groups_of(first.pid) or processes_of(first.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert groups_of(first.pid) == set() and processes_of(first.pid) == []

    done = subprocess.run([*SIZER, *args, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode in (0, 3), done.stderr
    assert json.loads(done.stdout)["resumed"]
    after = stored(store)
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 8  # none lost, none twice
    assert after[: len(before)] == before  # what was committed before the kill was not measured again
    for label, (stored_keys, serial) in serial_choices(tmp_path).items():
        assert sorted(stored_keys) == sorted(serial), label


def _search(label: str, points: int, step: SimpleNamespace) -> Search:
    """A search whose stored measurements are `points` and whose chooser answers `step`."""
    entry = SimpleNamespace(label=label, candidates=[SimpleNamespace(key=f"{label}/k{i}") for i in range(9)])
    search = Search(SimpleNamespace(), entry, SimpleNamespace(step=lambda stored, in_flight: step, answer=lambda stored: None))
    search.stored = lambda: [(f"{label}/k{i}", None) for i in range(points)]  # type: ignore[method-assign]
    return search


def test_a_free_slot_takes_the_point_of_the_search_with_the_fewest_measurements(monkeypatch):
    monkeypatch.setattr("sizer.sweep.adaptive_run.keep_record", lambda sweep, record: None)
    monkeypatch.setattr("sizer.sweep.adaptive_run.entry_record", lambda entry, measured, step: {})
    sweep = SimpleNamespace(left=0, bar=SimpleNamespace(note=lambda text: None))

    def point(key: str) -> SimpleNamespace:
        return SimpleNamespace(key=key, label=lambda: key)

    wait = SimpleNamespace(point=None, waiting=True, stopped="", why="waits")
    a = _search("a", 3, SimpleNamespace(point=point("a/k3"), waiting=False, why="next"))
    b = _search("b", 2, SimpleNamespace(point=point("b/k2"), waiting=False, why="next"))
    c = _search("c", 0, wait)  # the fewest, but its next choice waits for its point in flight
    feed = AdaptiveFeed(sweep, [a, b, c])
    assert feed.next([point("c/k1")]).key == "b/k2"  # c: 1 stored + 1 in flight, waiting; b: 2
    assert feed.next([point("c/k1"), point("b/k2"), point("b/k3")]).key == "a/k3"  # b has 4 now, a 3
    sweep.left = 1  # the slice's time is up: no more points, and the searches with none in flight stop
    assert feed.next([point("c/k1")]) is None
    assert a.last is not None and a.last.stopped == "time limit" and b.last is not None and c.last is None


def test_the_dry_run_spreads_the_searches_over_the_slots(cli, tmp_path):
    code, out, err = cli(*sweep_args(tmp_path, "--dry-run"))
    assert code == 0, err
    planned = json.loads(out)
    outline = planned["adaptive"]
    assert outline["slots"] == 2 and [e["workload"] for e in outline["entries"]] == ["cpu-spin", "cpu-spin[processes=1]"]
    assert planned["parallel"]["interference_checks"] == []  # the first points started are checked, not planned ones
    code, out, _ = cli(*[a for a in sweep_args(tmp_path, "--dry-run") if a != "--json"])
    assert code == 0 and "cpu-spin[processes=1]: at most 4 measurements" in " ".join(out.split())
    assert not (tmp_path / "s.sqlite").exists()
