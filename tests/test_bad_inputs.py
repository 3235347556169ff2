"""Every bad input is refused in one line with exit code 2 before any work, each failure of the
hostile run of issue 49 a row of one table; names print as written; a dry run changes nothing on
the host; a disk that is full or read-only when sizer writes gives one line, keeps every committed
point and leaves no temporary file.

The host lock is held by the test while each command runs: a command that got past its checks would
be refused by the lock (and a different line), so a refusal seen here came before the lock and the
host probe that follows it. Every file is made here, in tmp_path.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from sizer.errors import SizerError
from sizer.lock import HostLock
from sizer.store import Store
from workloads import protocol
from workloads.protocol import AT_LEAST_ONE, Result, Workload

HEADER = "workload,vcpus,ram_gib,disk_class,throughput,unit,status\n"
POINTS = HEADER + "".join(f"{name},{v},4,local-nvme,{rate},images/s,ok\n"
                          for name in ("alpha", "beta") for v, rate in ((1, 100), (2, 190), (4, 300), (8, 310)))
CATALOG = "cloud,instance_type,vcpus,memory_gib,gpu,gpu_count,gpu_memory_gib,price_per_hour_usd,region,price_date\n"
BASELINE = {"suite": "s", "checks": [{"name": "ceiling", "workload": "alpha", "metric": "gpu_ceiling", "min": 1}]}
IS_ROOT = os.geteuid() == 0


# ---------------------------------------------------------------- the test's own files
@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False) -> Iterator[bool]:
    """A tmpfs of `size` mounted at `path` where this test may mount one (root); whether it is."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = IS_ROOT and subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                                         capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _sqlite(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.fixture
def files(tmp_path, monkeypatch) -> Iterator[dict[str, str]]:
    """Good and bad inputs of every kind, and the host lock held (see the module's docstring)."""
    made = {name: tmp_path / name for name in (
        "points.csv", "latin1.csv", "baseline.json", "latin1.json", "latin1-catalog.csv", "latin1-disks.csv",
        "no-date.csv", "bad-day.csv", "afile", "text.sqlite", "newer.sqlite", "other.sqlite", "a-folder",
        "sizer.sqlite", "data", "short.csv", "huge.csv")}
    made["points.csv"].write_text(POINTS)
    made["latin1.csv"].write_bytes((HEADER + "résumé,1,4,local-nvme,10,images/s,ok\n").encode("latin-1"))
    made["short.csv"].write_text(HEADER + "alpha,1,4,local-nvme,10,images/s,ok\nalpha,2\n")
    made["huge.csv"].write_text(HEADER + "alpha,1000000,4,local-nvme,10,images/s,ok\n")
    made["baseline.json"].write_text(json.dumps(BASELINE))
    made["latin1.json"].write_bytes(json.dumps({**BASELINE, "suite": "é"}, ensure_ascii=False).encode("latin-1"))
    made["latin1-catalog.csv"].write_bytes((CATALOG + "lab,café-1,16,128,H100,1,80,1.0,here,2024-01-01\n").encode("latin-1"))
    made["latin1-disks.csv"].write_bytes("name,read_mbps,read_iops,description\nslow,50,1000,très lent\n".encode("latin-1"))
    made["no-date.csv"].write_text(CATALOG + "lab,box-1,16,128,H100,1,80,1.0,here,not-a-date\n")
    made["bad-day.csv"].write_text(CATALOG + "lab,box-1,16,128,H100,1,80,1.0,here,2024-02-30\n")
    made["afile"].write_text("a file, not a folder\n")
    made["text.sqlite"].write_text("not a database\n")
    _sqlite(made["newer.sqlite"], "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
            "INSERT INTO meta VALUES('schema_version', '999')")
    _sqlite(made["other.sqlite"], "CREATE TABLE t(x)")
    made["a-folder"].mkdir()
    made["data"].mkdir()
    with Store(made["sizer.sqlite"]):
        pass
    paths = {name.replace("-", "_").replace(".", "_"): str(path) for name, path in made.items()}
    paths["out"] = str(tmp_path / "out")
    lock = tmp_path / "held.lock"
    monkeypatch.setenv("SIZER_LOCK_FILE", str(lock))
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as mounted_ro, tmpfs(tmp_path / "tiny", "1m") as mounted_tiny:
        if not mounted_ro:  # not root: a folder without write permission is read-only to this user
            (tmp_path / "ro").chmod(0o555)
        if not mounted_tiny:  # a simulation of a disk with 1 MiB free: the folder's disk reports it
            import shutil

            real = shutil.disk_usage
            monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=2**20)
                                if str(p).startswith(str(tmp_path / "tiny")) else real(p))
        paths.update(ro=str(tmp_path / "ro"), tiny=str(tmp_path / "tiny"),
                     ro_why="is on a read-only file system" if mounted_ro else "is not writable")
        with HostLock(lock):
            yield paths


def one_line_refusal(code: int, out: str, err: str, fragment: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sizer: error: ") and fragment in lines[0], err
    assert "Traceback" not in err and out == ""


# ---------------------------------------------------------------- the table
SWEEP = ["sweep", "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M", "--disks", "local-nvme",
         "--no-calibrate", "--data", "{data}", "--profile", "cpu-small"]


def sweep(*more: str, out: str = "{out}") -> list[str]:
    return [*SWEEP, "--out", out, *more]


def settings(workload: str, *more: str) -> list[str]:
    return ["sweep", "--workloads", workload, "--vcpus", "1", "--ram", "1G", "--disks", "local-nvme", "--no-calibrate",
            "--data", "{data}", "--profile", "cpu-small", "--out", "{out}", *more]


REFUSALS = [
    # files that are not UTF-8
    ("report, points not UTF-8", ["report", "--input", "{latin1_csv}", "--out", "{out}"],
     "points file {latin1_csv} is not UTF-8 text"),
    ("fit, points not UTF-8", ["fit", "--input", "{latin1_csv}"], "points file {latin1_csv} is not UTF-8 text"),
    ("recommend, points not UTF-8", ["recommend", "--input", "{latin1_csv}", "--gpu", "H100"],
     "points file {latin1_csv} is not UTF-8 text"),
    ("qualify, points not UTF-8", ["qualify", "--baseline", "{baseline_json}", "--input", "{latin1_csv}"],
     "points file {latin1_csv} is not UTF-8 text"),
    ("qualify, baseline not UTF-8", ["qualify", "--baseline", "{latin1_json}", "--input", "{points_csv}"],
     "baseline {latin1_json} is not UTF-8 text"),
    ("catalog list, catalog not UTF-8", ["catalog", "list", "--catalog", "{latin1_catalog_csv}"],
     "catalog {latin1_catalog_csv} is not UTF-8 text"),
    ("recommend, catalog not UTF-8", ["recommend", "--input", "{points_csv}", "--gpu", "H100", "--catalog",
                                      "{latin1_catalog_csv}"], "catalog {latin1_catalog_csv} is not UTF-8 text"),
    ("sweep, catalog not UTF-8", sweep("--catalog", "{latin1_catalog_csv}"), "catalog {latin1_catalog_csv} is not UTF-8"),
    ("fit, a points row cut short", ["fit", "--input", "{short_csv}"],
     "{short_csv}: row 3: 2 cell(s), fewer than the header's 7 columns"),
    ("report, a points row of a million vCPUs", ["report", "--input", "{huge_csv}", "--out", "{out}"],
     "{huge_csv}: row 2, column 'vcpus': must be from 1 to 4096, got 1000000"),
    ("fit, disk classes not UTF-8", ["fit", "--input", "{points_csv}", "--disk-classes", "{latin1_disks_csv}"],
     "disk-class file {latin1_disks_csv} is not UTF-8 text"),
    ("sweep, disk classes not UTF-8", sweep("--disk-classes", "{latin1_disks_csv}"),
     "disk-class file {latin1_disks_csv} is not UTF-8 text"),
    # --out and --store, checked before the lock and the host probe
    ("sweep, --out is a file", sweep(out="{afile}"), "--out {afile} is a file, not a folder"),
    ("sweep, --out under a file", sweep(out="{afile}/out"), "{afile} is a file, so no folder can be made there"),
    ("sweep, --out read-only", sweep(out="{ro}/out"), "--out {ro}/out: {ro} {ro_why}"),
    ("sweep, --out without room", sweep(out="{tiny}/out"), "free on its disk, the outputs want"),
    ("sweep, --store not SQLite", sweep("--store", "{text_sqlite}"),
     "--store {text_sqlite} is not a sizer store (not an SQLite file)"),
    ("sweep, --store newer schema", sweep("--store", "{newer_sqlite}"),
     "--store {newer_sqlite} was written by a newer sizer (store schema 999"),
    ("sweep, --store another database", sweep("--store", "{other_sqlite}"),
     "--store {other_sqlite} is an SQLite file but not a sizer store"),
    ("sweep, --store a folder", sweep("--store", "{a_folder}"), "--store {a_folder} is a folder, not a store file"),
    ("sweep, --store read-only", sweep("--store", "{ro}/s.sqlite"), "--store {ro}/s.sqlite: {ro} {ro_why}"),
    ("report, --out is a file", ["report", "--input", "{points_csv}", "--out", "{afile}"],
     "--out {afile} is a file, not a folder"),
    ("report, --out read-only", ["report", "--input", "{points_csv}", "--out", "{ro}/out"], "{ro} {ro_why}"),
    ("merge, --store not SQLite", ["merge", "{sizer_sqlite}", "--store", "{text_sqlite}"],
     "--store {text_sqlite} is not a sizer store"),
    ("merge, a newer source", ["merge", "{newer_sqlite}", "--store", "{out}.sqlite"],
     "was written by a newer sizer (store schema 999"),
    # workload settings out of their declared range
    ("processes=-3", settings("cpu-spin", "--set", "processes=-3"),
     "--set: workload cpu-spin: processes=-3 is out of range: it must be at least 1"),
    ("step_s=-1", settings("cpu-spin", "--set", "step_s=-1"), "step_s=-1 is out of range: it must be above 0"),
    ("workers=-4", settings("resnet50-train", "--set", "workers=-4"), "workers=-4 is out of range: it must be at least 0"),
    ("batch_size=0", settings("resnet50-train", "--set", "batch_size=0"),
     "batch_size=0 is out of range: it must be at least 1"),
    ("image_size=0", settings("resnet50-train:image_size=0"),
     "workload resnet50-train: image_size=0 is out of range: it must be at least 32"),
    ("layers=0", settings("ptb-lstm-train", "--set", "layers=0"), "layers=0 is out of range: it must be at least 1"),
    ("mib=-64", settings("mem-hog", "--set", "mib=-64"), "mib=-64 is out of range: it must be above 0"),
    ("run, processes=-3", ["run", "cpu-spin", "--set", "processes=-3", "--data", "{data}", "--profile", "cpu-small"],
     "processes=-3 is out of range: it must be at least 1"),
    ("command job, round_steps=0", ["run", "--command", "true", "--set", "round_steps=0", "--profile", "cpu-small"],
     "round_steps=0 is out of range: it must be at least 1"),
    ("plugin, count=0", settings("demo-counter", "--set", "count=0"),
     "workload demo-counter: count=0 is out of range: it must be at least 1"),
    # --gpus against the host's GPUs, with the profile the host chose
    ("sweep, --gpus 2", ["sweep", "--workloads", "resnet50-train", "--gpus", "2", "--vcpus", "2", "--ram", "4G",
                         "--disks", "local-nvme", "--no-calibrate", "--data", "{data}", "--out", "{out}"],
     "--gpus 2: this host has no GPU"),
    ("run, --gpus 2", ["run", "resnet50-train", "--gpus", "2", "--vcpus", "2", "--data", "{data}"],
     "--gpus 2: this host has no GPU"),
    # catalog dates
    ("catalog list, price_date not a date", ["catalog", "list", "--catalog", "{no_date_csv}"],
     "{no_date_csv}: row 2, column 'price_date': 'not-a-date' is not a calendar date (YYYY-MM-DD)"),
    ("catalog list, price_date no such day", ["catalog", "list", "--catalog", "{bad_day_csv}"],
     "{bad_day_csv}: row 2, column 'price_date': '2024-02-30' is not a calendar date"),
    ("sweep, price_date not a date", sweep("--catalog", "{no_date_csv}"), "column 'price_date': 'not-a-date'"),
    ("report, price_date not a date", ["report", "--input", "{points_csv}", "--out", "{out}", "--catalog",
                                       "{no_date_csv}"], "column 'price_date': 'not-a-date'"),
]


class DemoCounter(Workload):
    """A plugin's workload (as an installed package declares one): its settings' ranges are checked
    as a built-in workload's are."""

    name = "demo-counter"
    framework = "python"
    origin = "plugin demo"
    defaults = {"cpu-small": {"count": 2}, "gpu": {"count": 2}}
    ranges = {"count": AT_LEAST_ONE}

    def run(self, spec):  # pragma: no cover - never run: refused at plan time
        raise AssertionError("a plan-time refusal runs nothing")


@pytest.mark.parametrize("args, fragment", [row[1:] for row in REFUSALS], ids=[row[0] for row in REFUSALS])
def test_a_bad_input_is_refused_in_one_line_before_any_work(cli, files, monkeypatch, args, fragment):
    if "--gpus" in args:
        from sizer.sweep.plan import gpu_present

        if gpu_present():
            pytest.skip("this host has a GPU: --gpus 2 may fit it")
    monkeypatch.setitem(protocol._REGISTRY, DemoCounter.name, DemoCounter)
    code, out, err = cli(*[arg.format(**files) for arg in args])
    one_line_refusal(code, out, err, fragment.format(**files))
    assert not Path(files["out"]).exists() and not Path(files["out"] + ".sqlite").exists()  # nothing made


# ---------------------------------------------------------------- names print as written
MARKUP = ("[/]", "[bold red]FAKE[/bold red]")


@pytest.mark.parametrize("command", [["fit"], ["recommend", "--gpu", "H100"], ["report", "--gpu", "H100"]])
def test_names_holding_markup_print_as_written(cli, tmp_path, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "250")  # no name folded across lines
    points = tmp_path / "markup.csv"
    points.write_text(HEADER + "".join(f'"{name}",{v},4,local-nvme,{rate},images/s,ok\n'
                                       for name in MARKUP for v, rate in ((1, 100), (2, 190), (4, 300))))
    out = ["--out", str(tmp_path / "out")] if command[0] == "report" else []
    code, printed, err = cli(*command, "--input", str(points), *out)
    assert code == 0, err
    assert all(name in printed for name in MARKUP), printed


def test_catalog_strings_holding_markup_print_as_written(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    catalog = tmp_path / "markup-catalog.csv"
    catalog.write_text(CATALOG + "lab,[/],16,128,H100,1,80,1.0,[bold red]FAKE[/bold red],2024-01-01\n")
    code, printed, err = cli("catalog", "list", "--catalog", str(catalog), "--cloud", "lab")
    assert code == 0, err
    assert all(name in printed for name in MARKUP), printed


# ---------------------------------------------------------------- nothing changed, nothing left
def test_merge_refusing_a_newer_store_leaves_no_store_behind(cli, files):
    target = Path(files["out"]).with_suffix(".sqlite")
    one_line_refusal(*cli("merge", files["newer_sqlite"], "--store", str(target)), "store schema 999")
    assert not list(target.parent.glob(target.name + "*"))


def test_a_dry_run_changes_nothing_on_the_host(cli, tmp_path, monkeypatch):
    """Every file-system change Python makes during the dry run (an audit hook sees each open for
    writing, mkdir, rmdir, remove and rename) is recorded: there is none, no probe cgroup either."""
    import sizer.limits

    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))
    monkeypatch.setattr(sizer.limits, "_cache", {})  # no backend an earlier command of this process probed
    changes: list[str] = []
    watching = [False]

    def audit(event: str, args: tuple) -> None:
        if not watching[0]:
            return
        writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        if event == "open" and len(args) > 2 and (
                (isinstance(args[1], str) and any(c in args[1] for c in "wax+"))
                or (isinstance(args[2], int) and args[2] & writing)):
            changes.append(f"open {args[0]} {args[1]}")
        elif event in ("os.mkdir", "os.rmdir", "os.remove", "os.rename", "os.truncate"):
            changes.append(f"{event} {args[0]}")

    sys.addaudithook(audit)  # a hook stays for the process's life: `watching` turns it off after
    watching[0] = True
    try:
        code, out, err = cli(*[arg.format(data=tmp_path / "data") for arg in SWEEP], "--out", str(tmp_path / "out"),
                             "--dry-run")
    finally:
        watching[0] = False
    assert code == 0, err
    assert [c for c in changes if "__pycache__" not in c] == []
    assert not (tmp_path / "out").exists() and not (tmp_path / "data").exists()


# ---------------------------------------------------------------- full and read-only disks at write time
def test_a_report_on_a_disk_that_fills_up_says_so_in_one_line_and_leaves_no_temporary_file(cli, tmp_path,
                                                                                             monkeypatch):
    """A real 64 KiB tmpfs where this test may mount one (root); elsewhere a simulation: the report's
    writes raise ENOSPC. The check before the work is skipped so the write itself meets the full disk."""
    points = tmp_path / "points.csv"
    points.write_text(POINTS)
    monkeypatch.setattr("sizer.commands.report.check_out_folder", lambda *a, **k: None)
    with tmpfs(tmp_path / "full", "64k") as mounted:
        if not mounted:
            def no_space(self, *args, **kwargs):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(Path, "write_text", no_space)
        out = tmp_path / "full" / "out"
        code, printed, err = cli("report", "--input", str(points), "--out", str(out))
        one_line_refusal(code, printed, err, "the disk is full")
        assert "cannot write " + str(out) in err
        assert not list(out.glob("*.tmp"))


@pytest.mark.skipif(not IS_ROOT, reason="remounting a tmpfs read-only needs root")
def test_a_report_on_a_disk_gone_read_only_keeps_the_report_before_it(cli, tmp_path, monkeypatch):
    points = tmp_path / "points.csv"
    points.write_text(POINTS)
    with tmpfs(tmp_path / "disk", "32m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here")
        out = tmp_path / "disk" / "out"
        code, _, err = cli("report", "--input", str(points), "--out", str(out))
        assert code == 0, err
        before = (out / "report.html").read_bytes()
        subprocess.run(["mount", "-o", "remount,ro", str(tmp_path / "disk")], check=True)
        monkeypatch.setattr("sizer.commands.report.check_out_folder", lambda *a, **k: None)  # the write meets it
        one_line_refusal(*cli("report", "--input", str(points), "--out", str(out)), "the file system is read-only")
        assert (out / "report.html").read_bytes() == before and not list(out.glob("*.tmp"))


def _stored_sweep(path: Path) -> tuple[Store, int]:
    store = Store(path)
    host = store.upsert_host({"hostname": "full-disk", "cpu_model": "test", "threads": 2, "gpus": []})
    sweep = store.start_sweep(host, "sizer sweep", {"test": "full disk"})
    for vcpus in (1, 2):
        result = Result(workload="alpha", framework="test", unit="images/s", profile="cpu-small", throughput=10.0 * vcpus,
                        steps=[[0.1, 1.0 * vcpus, 0]] * 20)
        store.add_point(sweep, f"alpha-{vcpus}", {"vcpus": vcpus, "ram_gib": 4, "disk_class": "local-nvme"}, result, {}, 0)
    return store, sweep


def test_a_store_on_a_full_disk_keeps_its_points_and_says_so_in_one_line(tmp_path, monkeypatch):
    """A real 2 MiB tmpfs filled up after two points were committed, where this test may mount one
    (root); elsewhere a simulation: the store's connection answers as SQLite does on a full disk."""
    with tmpfs(tmp_path / "disk", "2m") as mounted:
        path = tmp_path / "disk" / "sizer.sqlite"
        store, sweep = _stored_sweep(path)
        filler = tmp_path / "disk" / "filler"
        if mounted:
            with open(filler, "wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
        else:
            class FullDisk:
                def __init__(self, conn):
                    self._conn = conn

                def __enter__(self):
                    raise sqlite3.OperationalError("database or disk is full")

                def __exit__(self, *exc):
                    return False

                def __getattr__(self, name):
                    return getattr(self._conn, name)

            monkeypatch.setattr(store, "conn", FullDisk(store.conn))
        with pytest.raises(SizerError, match="cannot write the store .*full.*the points stored before are kept"):
            store.finish_sweep(sweep)
        monkeypatch.undo()
        store.close()
        filler.unlink(missing_ok=True)
        with Store(path, create=False) as again:
            assert sorted(p.vcpus for p in again.points(sweep)) == [1, 2]


# ---------------------------------------------------------------- large inputs
def test_a_points_file_of_a_million_repeated_rows_is_read_in_bounded_memory_and_merged_with_a_warning(tmp_path):
    import tracemalloc

    from sizer.points import read_points_csv

    path = tmp_path / "points.csv"
    row = "alpha,1,4,local-nvme,100,images/s,ok\n"
    with open(path, "w") as fh:
        fh.write(HEADER + "alpha,2,4,local-nvme,190,images/s,ok\n")
        for _ in range(10):
            fh.write(row * 100_000)
    warnings: list[str] = []
    tracemalloc.start()
    try:
        points = read_points_csv(path, warn=warnings.append)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(p.vcpus, p.throughput) for p in points] == [(2, 190.0), (1, 100.0)]
    assert warnings == [f"{path}: 999999 repeated row(s) merged: each distinct row counts once"]
    assert peak < path.stat().st_size / 10  # the file (38 MB) is never held whole, nor its rows
