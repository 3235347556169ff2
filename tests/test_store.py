import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from sizer.errors import SizerError
from sizer.store import SCHEMA_VERSION, Store
from workloads.protocol import Result


def _result(workload="resnet50-train", rate=100.0):
    return Result(
        workload=workload,
        framework="pytorch",
        unit="images/s",
        profile="cpu-small",
        throughput=rate,
        spread=0.01,
        steps=[[0.5, 32, 1], [0.1, 32, 0], [0.1, 32, 0]],
        counters={"measured_samples": 64, "read_bytes": 6.4e6, "cpu_util_per_vcpu": 0.9},
        config={"input": "files"},
    )


def test_store_round_trip(tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        host = store.upsert_host({"hostname": "h", "cpu_model": "c", "threads": 2, "gpus": []})
        assert store.upsert_host({"hostname": "h", "cpu_model": "c", "threads": 2, "gpus": []}) == host
        sweep = store.start_sweep(host, "sizer sweep", {"vcpus": [1, 2]})
        pid = store.add_point(sweep, "k1", {"vcpus": 1, "ram_gib": 4, "disk_class": "ssd"}, _result(), {"backend": "x"}, 0.0)
        assert store.point_keys(sweep) == {"k1"}
        assert store.samples(pid) == [(0.5, 32.0, 1), (0.1, 32.0, 0), (0.1, 32.0, 0)]
        pts = store.points()
        assert len(pts) == 1 and pts[0].throughput == 100.0 and pts[0].disk_class == "ssd"
        assert pts[0].read_mb_per_sample == pytest.approx(0.1)
        assert store.resumable_sweep({"vcpus": [1, 2]}) == sweep
        assert store.resumable_sweep({"vcpus": [1, 4]}) is None
        with pytest.raises(SizerError, match="already stored"):
            store.add_point(sweep, "k1", {"vcpus": 1, "ram_gib": 4, "disk_class": "ssd"}, _result(), {}, 0.0)
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_newer_store_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(SizerError, match="newer sizer"):
        Store(path)


def test_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(SizerError, match="not a sizer store"):
        Store(junk)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(SizerError, match="not a sizer store"):
        Store(other)
    with pytest.raises(SizerError, match="no store"):
        Store(tmp_path / "missing.sqlite", create=False)


WRITER = textwrap.dedent(
    """
    import sys, time
    from sizer.store import Store
    from workloads.protocol import Result
    store = Store(sys.argv[1])
    host = store.upsert_host({"hostname": "h"})
    sweep = store.start_sweep(host, "test", {})
    for i in range(1000):
        r = Result(workload="w", framework="f", unit="u/s", profile="cpu-small", throughput=float(i + 1),
                   steps=[[0.01, 1, 0]] * 200)
        store.add_point(sweep, f"p{i}", {"vcpus": 1, "ram_gib": 1, "disk_class": "ssd"}, r, {}, 0.0)
        print(i + 1, flush=True)
        time.sleep(0.02)
    """
)


def test_sigkill_between_points_loses_no_committed_point(tmp_path):
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    committed = 0
    for line in proc.stdout:
        committed = int(line)
        if committed >= 5:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Store(path) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = store.conn.execute("SELECT count(*) FROM points").fetchone()[0]
        assert rows >= committed
        # every stored point has all of its steps: a point is committed whole or not at all
        counts = store.conn.execute("SELECT count FROM steps").fetchall()
        assert len(counts) == rows and all(c[0] == 200 for c in counts)
        assert all(len(store.samples(point_id)) == 200 for (point_id,) in store.conn.execute("SELECT id FROM points"))


def test_loaded_points_carry_the_window_counters_the_accuracy_script_reads(tmp_path):
    from sizer.commands.model import load_points

    result = _result()
    result.counters.update(cpu_ms_per_sample=3.25, gpu_mem_peak_bytes=2 * 2**30)
    bare = _result(rate=90.0)  # a point stored before the counters were recorded
    with Store(tmp_path / "s.sqlite") as store:
        host = store.upsert_host({"hostname": "h", "cpu_model": "c", "threads": 2, "gpus": []})
        sweep = store.start_sweep(host, "sizer sweep", {"vcpus": [1]})
        store.add_point(sweep, "k1", {"vcpus": 1, "ram_gib": 4, "disk_class": "ssd"}, result, {}, 0.0)
        store.add_point(sweep, "k2", {"vcpus": 2, "ram_gib": 4, "disk_class": "ssd"}, bare, {}, 0.0)
    with_counters, without = sorted(load_points(tmp_path / "s.sqlite", None), key=lambda p: p.vcpus)
    assert with_counters.cpu_ms_per_sample == 3.25
    assert with_counters.gpu_mem_peak_gib == pytest.approx(2.0)
    assert without.cpu_ms_per_sample is None and without.gpu_mem_peak_gib is None
