"""A command job's progress, read without measuring: the stdlib helper in a bare interpreter, the
stream and the regex into steps, and the command-line checks made before any work."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.command import HELPER_DIR, command_problem, placeholder_problem, placeholder_values
from workloads.progress_stream import BadReport, MetricRegex, ProgressFile, Report, StepFeed, regex_problem
from workloads.protocol import Spec

HELPER = HELPER_DIR / "sizer_progress.py"


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def oldest_python() -> str:
    """The oldest interpreter here of those the helper promises (3.8 up), else this one."""
    for version in ("3.8", "3.9", "3.10"):
        found = shutil.which(f"python{version}")
        if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
            return found
    return sys.executable


# ---------------------------------------------------------------- the helper
def test_the_helper_is_alone_in_its_folder_and_parses_as_python_38():
    assert sorted(p.name for p in HELPER_DIR.iterdir() if p.name != "__pycache__") == ["sizer_progress.py"]
    ast.parse(HELPER.read_text(), feature_version=(3, 8))
    imports = {alias.name for node in ast.walk(ast.parse(HELPER.read_text()))
               if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert imports <= {"os", "time"}


def test_the_helper_writes_what_the_reader_parses_from_an_isolated_empty_venv(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([oldest_python(), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    stream = tmp_path / "progress.txt"
    job = (f"import sys; sys.path.insert(0, {str(HELPER_DIR)!r}); import sizer_progress, time\n"
           "t0 = time.monotonic()\n"
           "for n in (3, 5, 7): sizer_progress.step(n)\n"
           "sizer_progress.done()\n"
           "print(t0, time.monotonic(), sys.version_info[:2], sys.prefix)")
    env = {"PATH": os.environ["PATH"], "SIZER_PROGRESS": str(stream)}
    out = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", job], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    assert Path(out[-1]) == venv  # it ran inside the empty venv
    reports = ProgressFile(stream).read()
    assert [(r.kind, r.value) for r in reports] == [("samples", 3.0), ("samples", 5.0), ("samples", 7.0), ("done", 0.0)]
    started, ended = float(out[0]), float(out[1])
    assert all(started <= r.t <= ended for r in reports)  # the job's monotonic clock, as the reader's

    # Outside sizer every call does nothing.
    silent = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", job], env={"PATH": os.environ["PATH"]},
                            capture_output=True, text=True, timeout=60)
    assert silent.returncode == 0, silent.stderr


def test_a_step_of_the_helper_is_one_line_written_to_one_file_opened_once(tmp_path):
    # What a step costs: one small write to a file opened once (a few microseconds on an idle host,
    # measured by lab/benchmarks/speed_comparisons.py helper-cost).
    code = (f"import sys; sys.path.insert(0, {str(HELPER_DIR)!r}); import sizer_progress\n"
            "sizer_progress.step(1); fd = sizer_progress._fd\n"
            "for _ in range(20000): sizer_progress.step(32)\n"
            "print(fd == sizer_progress._fd)")
    env = {**os.environ, "SIZER_PROGRESS": str(tmp_path / "p.txt")}
    same_fd = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
    assert same_fd == "True"  # opened once, kept open
    lines = (tmp_path / "p.txt").read_text().splitlines()
    assert len(lines) == 20001 and lines[-1].split()[1] == "32.0"


# ---------------------------------------------------------------- reading the stream
def test_the_progress_file_waits_for_a_whole_line_and_names_a_bad_one(tmp_path):
    path = tmp_path / "p.txt"
    reader = ProgressFile(path)
    assert reader.read() == []  # not there yet
    path.write_text("10.5 4.0\n11.0 4")
    assert reader.read() == [Report(10.5, "samples", 4.0)]
    with path.open("a") as fh:
        fh.write(".0\n11.2 done\n")
    assert reader.read() == [Report(11.0, "samples", 4.0), Report(11.2, "done")]
    with path.open("a") as fh:
        fh.write("12.0 lots\n")
    with pytest.raises(BadReport, match="'lots'"):
        reader.read()


@pytest.mark.parametrize("pattern, line, kind, value", [
    (r"(?P<rate>[\d.]+) samples/s", "epoch 1 step 40: 812.5 samples/s loss 2.1", "rate", 812.5),
    (r"(?P<count>\d+)/\d+ \[", " 45%|####5     | 450/1000 [00:12<00:15, 36.1it/s]", "count", 450.0),
    (r"([\d.]+)it/s", " 45%|####5     | 450/1000 [00:12<00:15, 36.1it/s]", "rate", 36.1),
    (r"\| (?P<rate>[\d,.]+) tokens/s", "step 120 | 98,765.5 tokens/s | loss 6.21", "rate", 98765.5),
])
def test_the_regex_reads_a_rate_or_a_count(pattern, line, kind, value):
    assert MetricRegex(pattern).report(5.0, line) == Report(5.0, kind, value)
    assert MetricRegex(pattern).report(5.0, "nothing here") is None


@pytest.mark.parametrize("text", ["1.2.3", "nan", "inf", "-5", "12abc", "1,23", "12,345,6"])
def test_a_matched_value_that_is_no_number_names_the_line(text):
    with pytest.raises(BadReport, match=f"'{text}'.*in the line 'rate {text}'"):
        MetricRegex(r"rate (\S+)").report(1.0, f"rate {text}")


def test_invalid_regexes_say_why():
    assert "not a valid regular expression" in regex_problem("rate ([0-9")
    assert "has no group" in regex_problem(r"\d+ samples/s")
    assert regex_problem(r"(\d+) samples/s") is None


def test_steps_from_each_kind_of_report():
    helper = StepFeed(started=100.0)
    assert helper.steps([Report(101.0, "samples", 8), Report(101.5, "samples", 8), Report(101.6, "done")]) == [
        (1.0, 8), (0.5, 8)]
    assert helper.ended
    rate = StepFeed(started=100.0)
    assert rate.steps([Report(102.0, "rate", 50.0), Report(102.5, "rate", 40.0)]) == [(2.0, 0.0), (0.5, 20.0)]
    count = StepFeed(started=100.0)
    steps = count.steps([Report(101.0, "count", 100), Report(102.0, "count", 160), Report(103.0, "count", 30)])
    assert steps == [(1.0, 0.0), (1.0, 60.0), (1.0, 30.0)]  # the count went down: it started again


def test_a_meter_warms_up_for_the_seconds_of_its_steps():
    from workloads.measure import Meter

    meter = Meter(warmup_steps=1, time_budget_s=10, gpu=False, warmup_s=1.0)
    for _ in range(4):
        meter.step(0.25, 1)
    assert not meter.measuring  # the first step holds the start; then 0.75 s
    meter.step(0.25, 1)
    assert meter.measuring


def test_a_command_jobs_own_unit_reads_back_from_a_points_file(tmp_path):
    from sizer.points import read_points_csv

    path = tmp_path / "points.csv"
    path.write_text("workload,vcpus,ram_gib,disk_class,throughput,unit,status\njob,1,4,ssd,10,sequences/s,ok\n")
    assert read_points_csv(path)[0].unit == "sequences/s"


# ---------------------------------------------------------------- placeholders and settings
def test_placeholders_and_their_values():
    assert placeholder_problem("train.py --workers {workers} --data {data} {{literal}}") is None
    assert "unknown placeholder {HOME}" in placeholder_problem("ls ${HOME}")
    assert "unknown placeholder {}" in placeholder_problem("echo {}")
    assert "takes no format" in placeholder_problem("run {ram_gib:.0f}")
    assert "unknown placeholder {print $1}" in placeholder_problem("awk '{print $1}'")  # {{print $1}} in shell code
    assert "literal brace" in placeholder_problem("echo }")
    spec = Spec(workload="job", vcpus=3, ram_bytes=3 * 1024**3 // 2, gpus=2, data_dir="/d")
    assert placeholder_values(spec, {"data": "/d"}) == {"vcpus": "3", "workers": "3", "ram_gib": "1.5", "data": "/d",
                                                        "gpus": "2"}
    assert placeholder_values(Spec(workload="job"), {"data": ""})["ram_gib"] == "0"


def test_settings_checked_together():
    good = {"command": "true", "metric_regex": "", "unit": "samples/s", "start_timeout_s": 60.0, "warmup_s": None}
    assert command_problem(good) is None
    assert "needs a command" in command_problem({**good, "command": "  "})
    assert "start_timeout_s" in command_problem({**good, "start_timeout_s": 500})
    assert "warmup_s" in command_problem({**good, "warmup_s": -1})
    assert "--unit" in command_problem({**good, "unit": ""})
    assert command_problem({**good, "unit": "sequences/s"}) is None


# ---------------------------------------------------------------- bad input on the command line
def one_line_refusal(result: tuple[int, str, str], message: str) -> None:
    code, out, err = result
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sizer: error: ") and message in lines[0], err


SHAPE = ["--vcpus", "1", "--ram", "1G", "--disk", "local-nvme", "--profile", "cpu-small"]


@pytest.mark.parametrize("args, message", [
    (["--command", "train --data {dataset}"], "unknown placeholder {dataset}"),
    (["--command", "train }"], "literal brace"),
    (["--command", "train", "--metric-regex", "rate ([0-9"], "not a valid regular expression"),
    (["--command", "train", "--metric-regex", r"\d+ samples/s"], "has no group"),
    (["--command", "train", "--data", "/no/such/folder"], "no such folder"),
    (["--command", "train", "--name", "a:b"], "--name 'a:b'"),
    (["--command", "train", "--name", "cpu-spin"], "the built-in workload cpu-spin has this name"),
    (["--command", "train", "--set", "start_timeout_s=900"], "start_timeout_s"),
    (["--command", "train", "--unit", "parsecs"], "--unit 'parsecs'"),
    (["cpu-spin", "--command", "train"], "not both"),
    ([], "give a WORKLOAD"),
    (["cpu-spin", "--metric-regex", "(x)"], "--metric-regex goes with --command"),
])
def test_sizer_run_refuses_a_bad_command_job_in_one_line(cli, args, message):
    one_line_refusal(cli("run", *args, *SHAPE), message)


@pytest.mark.parametrize("args, message", [
    (["--command", "train", "--workloads", "cpu-spin"], "either --workloads or --command"),
    (["--command", "train"], "needs --name"),
    (["--command", "train {vcpu}", "--name", "job"], "unknown placeholder {vcpu}"),
    (["--name", "job"], "--name goes with --command"),
])
def test_sizer_sweep_refuses_a_bad_command_job_in_one_line(cli, tmp_path, args, message):
    one_line_refusal(cli("sweep", *args, "--vcpus", "1", "--ram", "1G", "--disks", "local-nvme",
                         "--profile", "cpu-small", "--out", str(tmp_path / "out")), message)
    assert not (tmp_path / "out").exists()


def test_a_command_sweep_plans_like_any_workload(cli, tmp_path):
    code, out, err = cli("sweep", "--command", "python train.py --workers {workers}", "--name", "my-train",
                         "--unit", "tokens/s", "--vcpus", "1,2", "--ram", "1G", "--disks", "local-nvme",
                         "--profile", "cpu-small", "--out", str(tmp_path / "out"), "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert [p["workload"] for p in plan["points"]] == ["my-train", "my-train"]
    assert not any(p["ceiling"] for p in plan["points"])  # no GPU-ceiling point for a command
