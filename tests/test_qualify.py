"""sizer qualify: baseline parsing, checks against points and fits, JUnit XML, exit codes."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_report_fixtures import make_points

from sizer.errors import SizerError
from sizer.points import write_points_csv
from sizer.qualify import evaluate, junit_xml, load_baseline, parse_baseline, write_junit

SHAPE_16 = {"vcpus": 16, "ram_gib": 32, "disk_class": "local-nvme"}
SHAPE_2 = {"vcpus": 2, "ram_gib": 32, "disk_class": "ssd"}


def baseline(*checks: dict, **top) -> dict:
    return {"schema_version": 1, "suite": "gate", "checks": list(checks), **top}


def check(metric: str = "throughput", **kw) -> dict:
    out = {"workload": "resnet50-train", "metric": metric, **kw}
    if metric == "throughput" and "shape" not in kw:
        out["shape"] = SHAPE_16
    return out


@pytest.fixture(scope="module")
def points():
    return make_points(noise=0.0)


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize(
    "data, words",
    [
        ([], "JSON object"),
        (baseline(), "non-empty"),
        ({"checks": [check(min=1)]}, "'suite'"),
        (baseline(check(min=1), schema_version=2), "newer"),
        (baseline({"metric": "throughput", "shape": SHAPE_16, "min": 1}), "'workload'"),
        (baseline(check()), "exactly one threshold"),
        (baseline(check(min=1, max=2)), "exactly one threshold"),
        (baseline(check(reference=100)), "max_shortfall"),
        (baseline(check(reference=100, max_shortfall=1.5)), "fraction"),
        (baseline(check(min=1, max_shortfall=0.1)), "goes with 'reference'"),
        (baseline(check(min="a lot")), "must be a number"),
        (baseline({"workload": "w", "metric": "throughput", "min": 1}), "needs a 'shape'"),
        (baseline(check(shape={"vcpus": 0, "ram_gib": 4, "disk_class": "ssd"}, min=1)), "positive integer"),
        (baseline(check(shape={"vcpus": 2, "disk_class": "ssd"}, min=1)), "ram_gib"),
        (baseline(check(shape={**SHAPE_2, "ramgib": 3}, min=1)), "unknown shape key"),
        (baseline(check("gpu_ceiling", shape=SHAPE_2, min=1)), "only a throughput check"),
        (baseline(check(min=1, treshold=3)), "unknown key(s) treshold"),
        (baseline(check(min=1, name="a"), check(min=2, name="a")), "two checks"),
        (baseline(check(min=1, scale_with_calibration=True)), "calibration_ips"),
        (baseline(check(min=1), run="yes"), "'run'"),
    ],
)
def test_bad_baselines_are_refused_with_one_line(data, words):
    with pytest.raises(SizerError) as err:
        parse_baseline(data, "b.json")
    message = str(err.value)
    assert words in message and "\n" not in message


def test_baseline_file_errors(tmp_path):
    with pytest.raises(SizerError, match="cannot read baseline"):
        load_baseline(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"suite": "x", ')
    with pytest.raises(SizerError, match="not valid JSON.*line 1"):
        load_baseline(broken)


def test_a_baseline_file_parses():
    parsed = load_baseline(Path(__file__).resolve().parent / "data" / "qualify-baseline.json")
    assert parsed.suite and parsed.checks
    metrics = {c.metric for c in parsed.checks}
    assert "throughput" in metrics and "gpu_ceiling" in metrics


# ------------------------------------------------------------------ evaluating
def test_throughput_min_passes_and_fails_at_the_measured_value(points):
    measured = next(p.throughput for p in points if p.vcpus == 2 and p.ram_gib == 32 and p.disk_class == "ssd")
    parsed = parse_baseline(baseline(
        check(shape=SHAPE_2, min=measured * 0.99, name="meets"),
        check(shape=SHAPE_2, min=measured * 1.01, name="misses"),
    ))
    meets, misses = evaluate(parsed, points)
    assert meets.passed and meets.measured == pytest.approx(measured)
    assert not misses.passed and misses.measured == pytest.approx(measured)
    assert "short by 1.0%" in misses.message and f"{measured:,.4g}" in misses.message


def test_reference_with_shortfall_and_max(points):
    measured = next(p.throughput for p in points if p.vcpus == 16 and p.ram_gib == 32 and p.disk_class == "local-nvme")
    parsed = parse_baseline(baseline(
        check(reference=measured * 1.04, max_shortfall=0.05, name="within 5%"),
        check(reference=measured * 1.10, max_shortfall=0.05, name="10% short"),
        check(max=measured * 1.1, name="at most"),
    ))
    within, short, at_most = evaluate(parsed, points)
    assert within.passed and within.threshold == pytest.approx(measured * 1.04 * 0.95)
    assert not short.passed
    assert at_most.passed and at_most.to_dict()["threshold_kind"] == "max"


def test_repeated_shape_uses_the_median_and_unmeasured_shapes_fail(points):
    extra = [dataclasses.replace(p, throughput=p.throughput * 1.5) for p in make_points(noise=0.0)[1:]]
    doubled = points + extra + [p for p in make_points(noise=0.0)[1:] if p.vcpus == 16]
    parsed = parse_baseline(baseline(
        check(shape=SHAPE_16, min=1, name="median"),
        check(shape={"vcpus": 3, "ram_gib": 32, "disk_class": "ssd"}, min=1, name="never measured"),
        check(shape=SHAPE_16, min=1, name="other workload", workload="nope"),
    ))
    median, missing, other = evaluate(parsed, doubled)
    base = next(p.throughput for p in points if p.vcpus == 16 and p.ram_gib == 32 and p.disk_class == "local-nvme")
    assert median.measured == pytest.approx(base) and median.source == "median of 3 point(s)"
    assert not missing.passed and missing.measured is None and "not measured" in missing.message
    assert not other.passed and "no measurement of workload 'nope'" in other.message


def test_a_shape_killed_by_the_memory_limit_fails(points):
    oom = [dataclasses.replace(p, status="oom", throughput=0.0) for p in make_points(noise=0.0)
           if p.vcpus == 2 and p.ram_gib == 8 and p.disk_class == "ssd"]
    rest = [p for p in points if not (p.vcpus == 2 and p.ram_gib == 8 and p.disk_class == "ssd")]
    parsed = parse_baseline(baseline(check(shape={**SHAPE_2, "ram_gib": 8}, min=1)))
    (outcome,) = evaluate(parsed, rest + oom)
    assert not outcome.passed and "status oom" in outcome.message


def test_model_parameters_are_checked_from_the_fit(points):
    parsed = parse_baseline(baseline(
        check("gpu_ceiling", min=1100, name="ceiling ok"),
        check("gpu_ceiling", min=1300, name="ceiling high"),
        check("per_vcpu", reference=150, max_shortfall=0.05, name="per vCPU"),
        check("loo_median_ape", max=0.05, name="model error"),
    ))
    ok, high, per_vcpu, error = evaluate(parsed, points)
    assert ok.passed and ok.measured == pytest.approx(1200, rel=0.01)
    assert not high.passed
    assert per_vcpu.passed and per_vcpu.measured == pytest.approx(150, rel=0.03)
    assert error.passed and error.measured <= 0.05


def test_unknown_model_parameter_is_bad_input(points):
    parsed = parse_baseline(baseline(check("gpu_celing", min=1)))
    with pytest.raises(SizerError, match="no model parameter 'gpu_celing'.*gpu_ceiling"):
        evaluate(parsed, points)


def test_calibration_scales_the_threshold(points):
    # The baseline was set on a host whose CPU decodes 300 images/s per vCPU; this one does 150.
    parsed = parse_baseline(baseline(
        check("per_vcpu", min=250, scale_with_calibration=True, name="scaled"),
        check("per_vcpu", min=250, name="unscaled"),
        check("calibration_ips", min=140, name="calibration"),
        calibration_ips=300,
    ))
    scaled, unscaled, calibration = evaluate(parsed, points)
    assert scaled.threshold == pytest.approx(125) and scaled.passed and scaled.scale == pytest.approx(0.5)
    assert not unscaled.passed
    assert calibration.passed and calibration.measured == pytest.approx(150)


# ------------------------------------------------------------------ JUnit
def _write_junit(tmp_path: Path, parsed, outcomes) -> ET.Element:
    path = write_junit(tmp_path / "out" / "junit.xml", junit_xml(parsed, outcomes, elapsed_s=0.5))
    return ET.parse(path).getroot()


def test_junit_has_one_testcase_per_check_and_a_failure_per_shortfall(tmp_path, points):
    parsed = parse_baseline(baseline(
        check(shape=SHAPE_2, min=1, name="meets <&>"),
        check(shape=SHAPE_2, min=1e9, name="misses"),
    ))
    root = _write_junit(tmp_path, parsed, evaluate(parsed, points))
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["meets <&>", "misses"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and "threshold 1e+09" in failure.get("message")
    assert json.loads(failure.text)["passed"] is False


# ------------------------------------------------------------------ the command
def _files(tmp_path: Path, points, data: dict) -> tuple[Path, Path]:
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    baseline_path = tmp_path / "baseline.json"
    baseline_path.write_text(json.dumps(data))
    return csv_path, baseline_path


def test_cli_exits_0_when_all_checks_meet_and_1_when_one_misses(tmp_path, points, cli):
    met = baseline(check(shape=SHAPE_16, min=1000), check("gpu_ceiling", reference=1200, max_shortfall=0.05))
    csv_path, met_path = _files(tmp_path, points, met)
    junit = tmp_path / "met.xml"
    code, out, err = cli("qualify", "--baseline", met_path, "--input", csv_path, "--junit", junit)
    assert code == 0, err
    root = ET.parse(junit).getroot()
    assert root.get("tests") == "2" and root.get("failures") == "0"
    assert "all checks met" in out

    missed_path = tmp_path / "missed.json"
    missed_path.write_text(json.dumps(baseline(check(shape=SHAPE_16, min=1000), check("gpu_ceiling", min=5000))))
    junit = tmp_path / "missed.xml"
    code, out, err = cli("qualify", "--baseline", missed_path, "--input", csv_path, "--junit", junit, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["passed"] is False and data["checks_failed"] == 1
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1"
    failed = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 1 and "gpu_ceiling" in failed[0].get("name")


def test_cli_bad_input_exits_2_with_one_line(tmp_path, points, cli):
    csv_path, bad = _files(tmp_path, points, baseline(check(shape=SHAPE_16)))
    code, out, err = cli("qualify", "--baseline", bad, "--input", csv_path)
    assert code == 2 and err.startswith("sizer: error:") and len(err.strip().splitlines()) == 1
    good = tmp_path / "good.json"
    good.write_text(json.dumps(baseline(check(shape=SHAPE_16, min=1))))
    code, _, err = cli("qualify", "--baseline", good)
    assert code == 2 and "--store" in err
    code, _, err = cli("qualify", "--baseline", good, "--input", tmp_path / "none.csv")
    assert code == 2 and "cannot read points file" in err


def test_cli_reads_a_store(tmp_path, points, cli):
    from test_report import store_with_points

    store_path = store_with_points(tmp_path / "s.db", points)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(baseline(check(shape=SHAPE_16, min=1000), check("calibration_ips", min=100))))
    code, out, err = cli("qualify", "--baseline", good, "--store", store_path, "--json")
    assert code == 0, err
    assert json.loads(out)["checks_total"] == 2


@pytest.mark.slow
def test_a_baseline_with_run_true_measures_its_suite(tmp_path):
    """A real sweep of one point (cpu-spin, 1 vCPU) under real limits, then the checks on its figures."""
    from sizer.commands.qualify import run_suite

    data = baseline(
        check(workload="cpu-spin", shape={"vcpus": 1, "ram_gib": 1, "disk_class": "local-nvme"}, min=1000,
              name="spins"),
        check(workload="cpu-spin", shape={"vcpus": 1, "ram_gib": 1, "disk_class": "local-nvme"}, min=1e15,
              name="spins impossibly fast"),
        run=True,
        sweep={"profile": "cpu-small", "time_budget_s": 1, "calibrate": False, "data_dir": str(tmp_path / "data")},
    )
    parsed = parse_baseline(data, "run.json")
    inputs = run_suite(parsed, store=tmp_path / "q.sqlite", progress=False, lock_path=tmp_path / "lock")
    assert [p.workload for p in inputs["points"]] == ["cpu-spin"] and inputs["points"][0].usable
    assert inputs["enforcement"][0]["workload"] == "cpu-spin" and "sweep" in inputs["source"]
    spins, too_fast = evaluate(parsed, inputs["points"], inputs["sweeps"])
    assert spins.passed and spins.measured == pytest.approx(inputs["points"][0].throughput)
    assert not too_fast.passed
