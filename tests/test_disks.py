"""sizer.disks: the fio JSON parser on captured output, and real fio runs on scratch files."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sizer import disks
from sizer.disks import (
    FIO_INSTALL_HINT,
    MIB,
    fio_available,
    lay_out,
    parse_fio_json,
    probe_disk,
    remove_stale_scratch,
    run_fio_job,
    scratch_file,
)
from sizer.errors import SizerError

FIO_DATA = Path(__file__).parent / "data" / "fio"
REPO = Path(__file__).resolve().parents[1]

needs_fio = pytest.mark.skipif(not fio_available(), reason="fio is not installed (apt-get install -y fio)")


def _ctrl_c_reaches_it() -> None:
    """In the child: SIGINT at its default, as a foreground process in a terminal has it. A test run
    started in the background (`make test &`) hands its children SIGINT ignored, and Python then
    raises no KeyboardInterrupt: the probe runs on to its end, as it should under nohup."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def captured(name: str) -> str:
    return (FIO_DATA / name).read_text()


# --- parser, on captured fio output -------------------------------------------------------------


def test_parse_sequential_read_1m():
    [job] = parse_fio_json(captured("fio-3.33_read_1M_qd16.json"))
    assert job["name"] == "seqread"
    assert job["rw"] == "read"
    assert job["bs"] == 1024 * 1024
    # fio's bw_bytes 1945811134 B/s -> MB/s in 10^6 bytes
    assert job["read_mbps"] == pytest.approx(1945.811134)
    assert job["read_iops"] == pytest.approx(1855.670103)
    assert job["write_mbps"] == 0.0 and job["write_iops"] == 0.0
    # clat_ns percentiles 50% = 8290304 ns, 99% = 12386304 ns
    assert job["lat_p50_us"] == pytest.approx(8290.304)
    assert job["lat_p99_us"] == pytest.approx(12386.304)
    assert job["error"] == 0
    assert job["fio_version"] == "fio-3.33"
    assert job["runtime_s"] == pytest.approx(3.007)


def test_parse_random_read_4k():
    [job] = parse_fio_json(captured("fio-3.33_randread_4k_qd32.json"))
    assert (job["rw"], job["bs"]) == ("randread", 4096)
    assert job["read_iops"] == pytest.approx(27076.521739)
    # MB/s and IOPS agree through the block size
    assert job["read_mbps"] == pytest.approx(job["read_iops"] * 4096 / 1e6, rel=0.01)
    assert 0 < job["lat_p50_us"] < job["lat_p99_us"]


def test_parse_skips_fio_notes_before_the_json():
    text = captured("fio-3.33_randread_4k_psync_note_preamble.json")
    assert text.startswith("note: ")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    [job] = parse_fio_json(text)
    assert job["name"] == "psync-note"
    assert job["read_iops"] == pytest.approx(2020.979021)


def test_parse_failed_job_reports_its_error():
    text = captured("fio-3.33_error_einval_unaligned_direct.json")
    assert text.startswith("fio: pid=")
    [job] = parse_fio_json(text)
    assert job["error"] == 22
    assert job["bs"] == 1000
    assert job["read_iops"] == 0.0
    assert job["lat_p50_us"] is None and job["lat_p99_us"] is None


def test_parse_job_file_with_global_options_and_writes():
    mixed, write = parse_fio_json(captured("fio-3.33_jobfile_randrw70_then_write_1M.json"))
    # randrw70 names no bs of its own: it comes from the [global] section
    assert (mixed["name"], mixed["rw"], mixed["bs"]) == ("randrw70", "randrw", 4096)
    assert mixed["read_iops"] == pytest.approx(1286.549708)
    assert mixed["write_iops"] == pytest.approx(561.403509)
    # a write-only job's latency is its write completion latency
    assert (write["rw"], write["bs"]) == ("write", 1024 * 1024)
    assert write["read_iops"] == 0.0
    assert write["write_mbps"] == pytest.approx(217.433622)
    assert write["lat_p99_us"] == pytest.approx(270532.608)


def test_parse_json_plus_two_jobs_custom_percentiles():
    jobs = parse_fio_json(captured("fio-3.33_jsonplus_randread_4k_numjobs2_percentile_list.json"))
    assert len(jobs) == 2
    assert {j["name"] for j in jobs} == {"randread-jsonplus"}
    assert all(j["lat_p99_us"] >= j["lat_p50_us"] > 0 for j in jobs)
    assert jobs[0]["read_iops"] != jobs[1]["read_iops"]


def test_parse_fio2_units_give_the_same_figures():
    """fio 2.x wrote bandwidth in KiB/s without bw_bytes and latency as `clat` in microseconds."""
    report = json.loads(captured("fio-3.33_read_1M_qd16.json"))
    old = copy.deepcopy(report)
    old["fio version"] = "fio-2.2.10"
    for direction in ("read", "write", "trim"):
        stats = old["jobs"][0][direction]
        stats.pop("bw_bytes")
        clat = stats.pop("clat_ns")
        stats["clat"] = {
            "min": clat["min"] / 1000,
            "max": clat["max"] / 1000,
            "mean": clat["mean"] / 1000,
            "percentile": {k: v // 1000 for k, v in clat.get("percentile", {}).items()},
        }
    [new_job] = parse_fio_json(json.dumps(report))
    [old_job] = parse_fio_json(json.dumps(old))
    assert old_job["read_mbps"] == pytest.approx(new_job["read_mbps"], rel=0.001)  # KiB rounding
    assert old_job["lat_p99_us"] == pytest.approx(new_job["lat_p99_us"], abs=1)
    assert old_job["fio_version"] == "fio-2.2.10"


@pytest.mark.parametrize("text", ["", "fio: engine libaio not loadable\n", '{"not": "fio"}', "{ broken"])
def test_parse_rejects_text_without_a_report(text):
    with pytest.raises(ValueError):
        parse_fio_json(text)


@pytest.mark.parametrize(
    "text,expected",
    [("4k", 4096), ("1M", 1048576), ("1m", 1048576), ("4096", 4096), ("4KiB", 4096), ("4k,8k", 4096), ("x", None)],
)
def test_block_size_text(text, expected):
    assert disks._parse_bs(text) == expected


# --- bad input ---------------------------------------------------------------------------------


def test_missing_directory_is_one_line_error(tmp_path):
    with pytest.raises(SizerError, match="no such directory"):
        probe_disk(tmp_path / "absent", seconds=1, size=16 * MIB)


def test_file_instead_of_directory(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    with pytest.raises(SizerError, match="not a directory"):
        run_fio_job(target, "read", 4096, 16 * MIB, 1)


def test_pseudo_filesystem_is_refused():
    with pytest.raises(SizerError, match="/proc"):
        probe_disk("/proc", seconds=1, size=16 * MIB)


def test_size_larger_than_free_space(tmp_path):
    with pytest.raises(SizerError, match="free"):
        probe_disk(tmp_path, seconds=1, size=1024**5)
    assert list(tmp_path.iterdir()) == []


def test_unknown_access_pattern(tmp_path):
    with pytest.raises(SizerError, match="access pattern"):
        run_fio_job(tmp_path, "sideways", 4096, 16 * MIB, 1)


def test_without_fio_the_error_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not fio_available()
    with pytest.raises(SizerError) as err:
        probe_disk(tmp_path, seconds=1, size=16 * MIB)
    assert "apt-get install -y fio" in str(err.value)
    assert str(err.value) == FIO_INSTALL_HINT and "\n" not in FIO_INSTALL_HINT


def test_stale_scratch_of_dead_process_is_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".sizer-fio-{dead.pid}-0123abcd.tmp"
    live = tmp_path / f".sizer-fio-{os.getpid()}-0123abcd.tmp"
    other = tmp_path / "data.bin"
    for f in (stale, live, other):
        f.write_bytes(b"x")
    assert remove_stale_scratch(tmp_path) == [str(stale)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])


# --- real fio ------------------------------------------------------------------------------------


@needs_fio
def test_layout_writes_real_blocks_and_is_removed(tmp_path):
    size = 16 * MIB
    with scratch_file(tmp_path) as file:
        assert file.parent == tmp_path.resolve() and file.name.startswith(".sizer-fio-")
        lay_out(file, size)
        st = os.stat(file)
        assert st.st_size == size
        assert st.st_blocks * 512 >= size  # allocated, not a sparse file
        with open(file, "rb") as fh:
            fh.seek(size // 2)
            assert fh.read(4096).strip(b"\0")  # fio's data, not zeroes
    assert list(tmp_path.iterdir()) == []


@needs_fio
def test_run_fio_job_random_read(tmp_path):
    marker = tmp_path.parent / f"{tmp_path.name}-preexec"
    marker_path = str(marker)

    def preexec() -> None:  # runs in the child before exec, as a cgroup join does
        with open(marker_path, "a") as fh:
            fh.write(f"{os.getpid()}\n")

    job = run_fio_job(tmp_path, "randread", 4096, 16 * MIB, 1, iodepth=4, preexec_fn=preexec)
    try:
        assert (job["rw"], job["bs"], job["iodepth"], job["error"]) == ("randread", 4096, 4, 0)
        assert job["read_iops"] > 0
        assert job["read_mbps"] == pytest.approx(job["read_iops"] * 4096 / 1e6, rel=0.05)
        assert 0 < job["lat_p50_us"] <= job["lat_p99_us"]
        assert "--direct=1" in job["command"]
        # only the measured job went through preexec_fn, not the layout
        assert len(marker.read_text().splitlines()) == 1
    finally:
        marker.unlink(missing_ok=True)
    assert list(tmp_path.iterdir()) == []


@needs_fio
def test_run_fio_job_failure_is_a_sizer_error_and_cleans_up(tmp_path):
    # A direct job of 1000-byte blocks is refused by the kernel (EINVAL), as in the captured report.
    with pytest.raises(SizerError, match="fio failed .*Invalid argument"):
        with scratch_file(tmp_path) as file:
            lay_out(file, 16 * MIB)
            disks._measure(file, "read", 1000, 16 * MIB, 1, True, 1, 1, None, None, phase="unaligned")
    assert list(tmp_path.iterdir()) == []


@needs_fio
def test_probe_disk_measures_both_patterns(tmp_path):
    result = probe_disk(tmp_path, seconds=1, size=16 * MIB)
    seq, rand = result["sequential_read"], result["random_read"]
    assert (seq["rw"], seq["bs"]) == ("read", 1024 * 1024)
    assert (rand["rw"], rand["bs"]) == ("randread", 4096)
    assert seq["read_mbps"] > 0 and rand["read_iops"] > 0
    assert seq["lat_p99_us"] >= seq["lat_p50_us"] > 0
    assert result["size_bytes"] == 16 * MIB
    assert result["fio_version"].startswith("fio-")
    assert result["path"] == str(tmp_path.resolve())
    assert list(tmp_path.iterdir()) == []


_PROBE_SCRIPT = "import sys; from sizer.disks import probe_disk; probe_disk(sys.argv[1], seconds=60, size=64 * 1024 * 1024)"


def _measuring_fio(proc: subprocess.Popen) -> list[psutil.Process]:
    """fio processes under `proc` running a measured read job (after the layout), zombies aside."""
    found = []
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return found
    for child in children:
        try:
            if child.name() == "fio" and "--rw=read" in child.cmdline():
                found.append(child)
        except psutil.Error:  # exited or a zombie between listing and reading
            continue
    return found


@needs_fio
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_probe_leaves_no_file_and_no_fio(tmp_path, signum):
    proc = subprocess.Popen([sys.executable, "-c", _PROBE_SCRIPT, str(tmp_path)], cwd=REPO, stderr=subprocess.PIPE,
                            preexec_fn=_ctrl_c_reaches_it)
    try:
        deadline = time.monotonic() + 60
        measuring: list[psutil.Process] = []
        while time.monotonic() < deadline and not measuring:
            # wait for the measured job (after the layout), so the file is there and fio runs
            measuring = _measuring_fio(proc)
            time.sleep(0.1)
        assert measuring, "fio's measured job never started"
        assert any(p.name.startswith(".sizer-fio-") for p in tmp_path.iterdir())
        proc.send_signal(signum)  # to sizer alone, not its process group
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp_path.iterdir()) == []
    gone, alive = psutil.wait_procs(measuring, timeout=10)
    assert not alive
    assert proc.returncode != 0


# --- the command line ------------------------------------------------------------------------------


def _one_line_error(err: str) -> bool:
    return err.startswith("sizer: error:") and err.strip().count("\n") == 0


@needs_fio
def test_cli_disks_probe_json(cli, tmp_path):
    code, out, err = cli("disks", "probe", tmp_path, "--json", "--seconds", "1", "--size", "16M")
    assert code == 0, err
    data = json.loads(out)
    assert data["sequential_read"]["read_mbps"] > 0 and data["random_read"]["read_iops"] > 0
    assert data["seconds"] == 1 and data["size_bytes"] == 16 * MIB
    assert list(tmp_path.iterdir()) == []


@needs_fio
def test_cli_disks_probe_human_table(cli, tmp_path):
    code, out, err = cli("disks", "probe", tmp_path, "--seconds", "1", "--size", "16M")
    assert code == 0, err
    assert "sequential read" in out and "random read" in out and "IOPS" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["{tmp}/absent"], "no such directory"),
        (["{tmp}", "--size", "banana"], "not a size"),
        (["{tmp}", "--size", "1M"], "at least"),
        (["{tmp}", "--seconds", "0"], "--seconds"),
        (["{tmp}", "--seconds", "soon"], "--seconds"),
        (["{tmp}", "--speed", "fast"], "--speed"),
    ],
)
def test_cli_disks_probe_bad_input_is_one_line_exit_2(cli, tmp_path, args, needle):
    code, out, err = cli("disks", "probe", *[a.format(tmp=tmp_path) for a in args])
    assert code == 2
    assert _one_line_error(err), err
    assert needle in err
    assert out == ""
    assert list(tmp_path.iterdir()) == []


def test_cli_disks_probe_without_fio(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli("disks", "probe", tmp_path, "--json")
    assert code == 2 and out == ""
    assert _one_line_error(err) and "apt-get install -y fio" in err


@needs_fio
def test_cli_ctrl_c_leaves_nothing_behind(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sizer.cli", "disks", "probe", str(tmp_path), "--seconds", "60", "--size", "64M"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_reaches_it,
    )
    try:
        deadline = time.monotonic() + 60
        fio: list[psutil.Process] = []
        while time.monotonic() < deadline and not fio:
            fio = _measuring_fio(proc)
            time.sleep(0.1)
        assert fio, "fio's measured job never started"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    assert not psutil.wait_procs(fio, timeout=10)[1]
