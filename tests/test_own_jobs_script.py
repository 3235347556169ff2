"""The own-jobs campaign (lab/gpu/own_jobs.sh): a part it does not know stops it before any set-up;
the rate line a job prints with thousands commas reads as its number through --metric-regex."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workloads.progress_stream import RATE, BadReport, MetricRegex

ROOT = Path(__file__).resolve().parent.parent
# The pattern docs and the campaign give for a job printing "step N | 98,765 tokens/s | loss L".
TOKENS_REGEX = r"(?P<rate>[0-9][0-9,]*(?:\.[0-9]+)?) tokens/s"


def test_an_unknown_part_exits_2_with_one_line_before_any_set_up(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "RUNS": str(tmp_path / "runs"), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "lab/gpu/own_jobs.sh", "data", "tabel"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["own_jobs.sh: unknown part 'tabel' (data, builtin, stock, text, table)"]
    assert not (tmp_path / "runs" / "own_jobs.log").exists()  # nothing ran, not even the data part


@pytest.mark.parametrize("line, rate", [
    ("step 120 | 98,765 tokens/s | loss 6.21", 98_765.0),
    ("step 9 | 1,234,567.5 tokens/s | loss 7.00", 1_234_567.5),
    ("step 3 | 732 tokens/s | loss 9.10", 732.0),
])
def test_a_rate_printed_with_thousands_commas_reads_as_its_number(line, rate):
    report = MetricRegex(TOKENS_REGEX).report(1.0, line)
    assert report is not None and report.kind == RATE and report.value == rate


@pytest.mark.parametrize("line", ["step 1 | 1,2 tokens/s", "step 1 | 12,34,567 tokens/s", "step 1 | 1,234, tokens/s"])
def test_commas_that_are_not_thousands_separators_are_an_error_naming_the_line(line):
    with pytest.raises(BadReport, match="is not a number"):
        MetricRegex(TOKENS_REGEX).report(1.0, line)


def test_the_own_jobs_table_gives_each_jobs_share_of_its_plateau_and_its_knee(repo_root):
    import importlib.util

    spec = importlib.util.spec_from_file_location("own_jobs_table", repo_root / "lab" / "gpu" / "own_jobs_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    by_vcpus = [{"vcpus": 2, "throughput": 500.0}, {"vcpus": 4, "throughput": 1000.0}]
    knee = {"by_decode": [{"decode": "cpu", "ceiling": 1000.0, "ceiling_source": "the GPU ceiling", "by_vcpus": by_vcpus,
                           "knee_vcpus": None, "measured_vcpus": [2, 4]}],
            "predicted_vcpus": 5, "tolerance": 0.05,
            "range": {"low": 4, "high": 6, "beyond_measured": True, "measured_up_to": 4, "confidence": 0.9}}
    results = {"workloads": [{"workload": "job", "unit": "images/s", "statuses": {"ok": 2}, "knee": knee},
                             {"workload": "idle", "statuses": {"error": 1}, "knee": None}]}
    assert module.table(results).splitlines() == [
        "job (images/s): plateau 1,000 (the GPU ceiling), statuses {'ok': 2}",
        "  vCPUs         rate of plateau",
        "      2        500.0        50%",
        "      4      1,000.0       100%",
        "  knee (within 5% of the plateau): measured beyond 4 vCPUs, predicted 5 (4 to more than 4 at 90%)",
        "",
        "idle: no usable point ({'error': 1})",
        "",
    ]
