"""What sizer keeps of a command job's output is bounded: real jobs run by a fresh worker (as a
sweep runs them, without a limit group) write past the cap, with and without line breaks, and the
copy in the point's folder stays under it; a --metric-regex gets a time bound of its own per line,
and a pattern that backtracks without end ends the point with an error that names it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sizer.runner import run_point
from workloads.command import CommandWorkload
from workloads.progress_stream import (
    KEEP_BYTES,
    MAX_LINE_CHARS,
    MetricRegex,
    OutputTap,
    RegexTimeout,
    RotatingCopy,
)
from workloads.protocol import Spec

PY = sys.executable
CATASTROPHIC = r"((a+)+)x"  # nested repeats: on a line of a's without an x, exponential backtracking

# Lines as fast as the pipe takes them, with a rate line among them for the regex.
FAST_LINES = """
import sys
block = ("x" * 99 + "\\n") * 2000 + "rate=100\\n"
while True:
    sys.stdout.write(block)
"""
# One endless line: no line break ever.
NO_NEWLINES = """
import sys
block = "y" * 65536
while True:
    sys.stdout.write(block)
"""


def run_job(tmp_path: Path, code: str, budget_s: float = 2.0, **settings) -> tuple[dict, Path]:
    """A command job measured by a fresh worker; its result and the point's folder."""
    script = tmp_path / "job.py"
    script.write_text(code)
    config = CommandWorkload.spec_config("cpu-small", {"command": f"{PY} -u {script}", "cwd": str(tmp_path),
                                                       **settings})
    spec = Spec(workload="command", profile="cpu-small", vcpus=1, config=config, time_budget_s=budget_s)
    folder = tmp_path / "point"
    run = run_point(spec, None, work_dir=folder, timeout_s=60)
    return {"status": run.result.status, "error": run.result.error, **run.result.extra}, folder


def kept_bytes(folder: Path, stream: str) -> int:
    return sum(path.stat().st_size for path in folder.glob(f"job-{stream}*.txt"))


@pytest.mark.slow
def test_a_job_writing_lines_fast_keeps_a_copy_under_the_cap_and_is_measured(tmp_path):
    result, folder = run_job(tmp_path, FAST_LINES, metric_regex=r"rate=(?P<rate>\d+)")
    assert result["status"] in ("ok", "noisy"), result["error"]
    written = result["job_output"]["stdout_bytes"]
    assert written > KEEP_BYTES  # the job wrote past the cap ...
    assert KEEP_BYTES // 2 <= kept_bytes(folder, "stdout") <= KEEP_BYTES  # ... and the newest part of it is kept
    assert (folder / "job-stdout.txt").read_bytes().endswith(b"\n") or (folder / "job-stdout.1.txt").exists()


@pytest.mark.slow
def test_a_job_writing_no_line_break_keeps_a_copy_under_the_cap_and_one_cut_line(tmp_path):
    result, folder = run_job(tmp_path, NO_NEWLINES, metric_regex=r"rate=(\d+)", start_timeout_s=3)
    assert result["status"] == "timeout" and "no progress within 3 s" in result["error"]
    assert result["job_output"]["stdout_bytes"] > KEEP_BYTES
    assert kept_bytes(folder, "stdout") <= KEEP_BYTES
    assert result["job_output"]["lines_cut"] == 1


@pytest.mark.slow
def test_a_catastrophic_regex_ends_the_point_with_an_error_that_names_it(tmp_path):
    job = "import sys, time\nprint('a' * 64, flush=True)\ntime.sleep(120)\n"
    result, _ = run_job(tmp_path, job, budget_s=5.0, metric_regex=CATASTROPHIC)
    assert result["status"] == "error"
    assert f"--metric-regex {CATASTROPHIC!r} took over 1 s on one line" in result["error"]


def test_the_regex_bound_ends_one_line_s_matching_and_names_the_pattern():
    regex = MetricRegex(CATASTROPHIC, bound_s=0.2)
    assert regex.reports([(1.0, "no match here")]) == [None]  # a line it rejects quickly: no report
    with pytest.raises(RegexTimeout, match=r"--metric-regex '\(\(a\+\)\+\)x' took over 0.2 s on one line"):
        regex.reports([(1.0, "a" * 64)])
    assert MetricRegex(r"rate=(\d+)").reports([(2.0, "rate=7")])[0].value == 7.0  # the handler is put back


def test_a_tap_cuts_long_lines_and_keeps_line_breaks_split_over_two_reads(tmp_path):
    import os

    read_end, write_end = os.pipe()
    with open(read_end, "rb") as pipe:
        tap = OutputTap(pipe, tmp_path / "out.txt", keep_lines=True, keep_bytes=1024)
        with open(write_end, "wb", buffering=0) as out:
            out.write(b"first\r")
            out.write(b"\nsecond\n" + b"z" * (MAX_LINE_CHARS + 10) + b"\nlast")
        tap.join(5)
    lines = [line for _, line in tap.drain()]
    assert lines == ["first", "second", "z" * MAX_LINE_CHARS, "last"]
    assert tap.cut == 1
    assert tap.copy.written == len(b"first\r\nsecond\n") + MAX_LINE_CHARS + 10 + len(b"\nlast")
    assert sum(p.stat().st_size for p in tmp_path.glob("out*.txt")) <= 1024


def test_a_rotating_copy_keeps_the_newest_half_to_whole_of_its_cap(tmp_path):
    copy = RotatingCopy(tmp_path / "job-stderr.txt", keep_bytes=100)
    for i in range(30):
        copy.write(f"line {i:02d}\n".encode())
    copy.close()
    kept = (tmp_path / "job-stderr.1.txt").read_bytes() + (tmp_path / "job-stderr.txt").read_bytes()
    assert 50 <= len(kept) <= 100 and kept.endswith(b"line 29\n")
    assert copy.tail(16).endswith(b"line 29\n") and len(copy.tail(16)) == 16
    assert copy.written == 30 * 8
