"""Bad input is refused before any work, and no workload is recommended for without a usable
measurement with real input (exit code 3 when none could be sized)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from test_report_fixtures import make_points

from sizer.errors import SizerError
from sizer.points import write_points_csv
from workloads import load_all
from workloads.protocol import Workload


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    """A host lock of the test's own, so that a refusal can be seen to come before the lock."""
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def one_line_refusal(code: int, out: str, err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sizer: error: ") and message in lines[0], err
    assert out == ""


# ---------------------------------------------------------------- workload settings
class _Declared(Workload):
    name = "declared"
    defaults = {"cpu-small": {"decode": "cpu", "flag": True, "count": 2, "rate": 0.5, "text": "a", "workers": None,
                              "anything": None, "mode": "auto"}}
    choices = {"decode": ("cpu", "gpu"), "mode": ("auto", True, False)}
    setting_types = {"workers": (int, type(None))}

    def run(self, spec):  # pragma: no cover - never run
        raise AssertionError("a declaration only: never run")


@pytest.mark.parametrize("key, value, problem", [
    ("decode", "banana", "decode=banana is not one of cpu, gpu"),
    ("mode", 1, "mode=1 is not one of auto, true, false"),  # 1 is no true
    ("flag", 1, "flag=1 is not true or false"),
    ("count", True, "count=true is not a whole number"),
    ("count", 2.5, "count=2.5 is not a whole number"),
    ("rate", "fast", "rate=fast is not a finite number"),
    ("rate", float("nan"), "rate=NaN is not a finite number"),
    ("text", 3, "text=3 is not text"),
    ("workers", "all", "workers=all is not a whole number or null"),
    ("nosuch", 1, "has no setting 'nosuch'"),
])
def test_a_setting_value_is_checked_against_what_the_workload_declares(key, value, problem):
    assert problem in (_Declared.setting_problem("cpu-small", key, value) or "")


@pytest.mark.parametrize("key, value", [
    ("decode", "gpu"), ("mode", True), ("mode", "auto"), ("flag", False), ("count", 8), ("rate", 1), ("rate", 0.25),
    ("text", "b"), ("workers", 4), ("workers", None), ("anything", [1, "x"]),
])
def test_a_setting_value_the_workload_allows_passes(key, value):
    assert _Declared.setting_problem("cpu-small", key, value) is None


def test_every_workload_allows_its_own_defaults_and_declares_only_settings_it_has():
    for name, cls in load_all().items():
        for profile, defaults in cls.defaults.items():
            assert [cls.setting_problem(profile, k, v) for k, v in defaults.items()] == [None] * len(defaults), name
        declared = set(cls.choices) | set(cls.setting_types) | set(cls.ranges)
        assert declared <= {k for d in cls.defaults.values() for k in d}, name


# ---------------------------------------------------------------- the sweep's plan
def sweep_args(tmp_path: Path, *more: str) -> list[str]:
    return ["sweep", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
            "--data", str(tmp_path / "data"), "--no-calibrate", *more]


PLAN_REFUSALS = [
    (["--workloads", "resnet50-train:decode=banana", "--vcpus", "1", "--disks", "local-nvme"],
     "workload resnet50-train: decode=banana is not one of cpu, gpu"),
    (["--workloads", "resnet50-train:batch_size=8.5", "--vcpus", "1"], "batch_size=8.5 is not a whole number"),
    (["--workloads", "resnet50-train", "--set", "input=banana"], "--set: workload resnet50-train: input=banana"),
    (["--workloads", "cpu-spin", "--set", "nosuchkey=1"],
     "--set: workload cpu-spin has no setting 'nosuchkey' (has: processes, step_s, warmup_steps)"),
    (["--workloads", "resnet50-train,ptb-lstm-train", "--set", "decode=gpu"],
     "--set: workload ptb-lstm-train has no setting 'decode'"),
    (["--workloads", "resnet50-train:decode=gpu", "--profile", "cpu-small"],
     "workload resnet50-train: decode=gpu needs device=cuda, not device=cpu (profile cpu-small)"),
    (["--workloads", "cpu-spin", "--set", "step_s=NaN"], "--set: step_s=NaN is not a finite number"),
    (["--workloads", "cpu-spin", "--set", "step_s=1e999"], "--set: step_s=1e999 is not a finite number"),
]


@pytest.mark.parametrize("args, message", PLAN_REFUSALS, ids=[m[:40] for _, m in PLAN_REFUSALS])
def test_a_setting_the_workload_does_not_allow_is_refused_before_any_work(cli, tmp_path, args, message):
    code, out, err = cli(*sweep_args(tmp_path, *args, "--dry-run"))
    one_line_refusal(code, out, err, message)


OPTION_REFUSALS = [
    (["--budget", "nan"], "Invalid value for '--budget': must be a finite number, got nan"),
    (["--budget", "inf"], "Invalid value for '--budget': must be a finite number, got inf"),
    (["--repeat-noisy", "nan"], "Invalid value for '--repeat-noisy': must be a finite number"),
    (["--gpu", "banana"], "--gpu 'banana': no catalog row has this GPU (known: "),
    (["--max-time", "0s"], "--max-time: a duration must be positive, got '0s'"),
    (["--ram", "1K"], "--ram: 1K is 1.0 KiB, below the minimum of 64.0 MiB for a shape"),
]


@pytest.mark.parametrize("args, message", OPTION_REFUSALS, ids=[" ".join(a) for a, _ in OPTION_REFUSALS])
def test_a_bad_option_is_refused_before_the_store_or_the_lock_exists(cli, tmp_path, args, message):
    base = ["--workloads", "cpu-spin", "--vcpus", "1", "--disks", "local-nvme"]
    code, out, err = cli(*sweep_args(tmp_path, *base, *(["--ram", "256M"] if "--ram" not in args else []), *args))
    one_line_refusal(code, out, err, message)
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "out").exists()
    assert not (tmp_path / "data").exists() and not Path(os.environ["SIZER_LOCK_FILE"]).exists()


def test_a_gpu_of_the_users_own_catalog_is_accepted(cli, tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text("cloud,instance_type,vcpus,memory_gib,gpu,gpu_count,gpu_memory_gib,price_per_hour,region\n"
                    "lab,box-1,16,128,RTX9090,1,48,1.0,here\n")
    code, _, err = cli(*sweep_args(tmp_path, "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M",
                                   "--gpu", "RTX9090", "--dry-run"))
    assert code == 2 and "no catalog row has this GPU" in err
    code, _, err = cli(*sweep_args(tmp_path, "--workloads", "cpu-spin", "--vcpus", "1", "--ram", "256M",
                                   "--gpu", "RTX9090", "--catalog", str(mine), "--dry-run"))
    assert code == 0, err


def test_run_refuses_ram_below_a_shapes_minimum_in_a_unit_that_shows_it(cli, tmp_path):
    code, out, err = cli("run", "cpu-spin", "--ram", "1K", "--data", str(tmp_path / "d"))
    one_line_refusal(code, out, err, "--ram: 1K is 1.0 KiB, below the minimum of 64.0 MiB")


@pytest.mark.parametrize("args, message", [
    (["recommend", "--gpu", "H100", "--job-samples", "inf"], "'--job-samples': must be a finite number"),
    (["recommend", "--gpu", "H100", "--target-calibration", "nan"], "must be a fingerprint file or a rate > 0, got 'nan'"),
    (["report", "--out", "OUT", "--dataset-gib", "nan"], "'--dataset-gib': must be a finite number"),
    (["report", "--out", "OUT", "--tolerance", "nan"], "'--tolerance': must be a finite number"),
])
def test_non_finite_numbers_are_refused_by_every_command(cli, tmp_path, args, message):
    csv_path = tmp_path / "points.csv"
    write_points_csv(make_points(), csv_path)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    code, out, err = cli(*args, "--input", str(csv_path))
    one_line_refusal(code, out, err, message)
    assert not (tmp_path / "out").exists()


def test_non_finite_numbers_in_disk_class_and_skypilot_files_are_refused(tmp_path):
    from sizer.catalog import import_skypilot
    from sizer.diskclasses import load_disk_classes

    disks = tmp_path / "disks.csv"
    disks.write_text("name,read_mbps,read_iops\nfloppy,nan,100\n")
    with pytest.raises(SizerError, match=f"{disks}: row 2, column 'read_mbps': must be a finite number"):
        load_disk_classes(disks)
    disks.write_text("name,read_mbps,read_iops\nfloppy,10,inf\n")
    with pytest.raises(SizerError, match="column 'read_iops'"):
        load_disk_classes(disks)
    vms = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region\n"
           "p5.48xlarge,H100,8,nan,2048,98.3,us-east-1\n")
    with pytest.raises(SizerError, match="vms.csv: row 2, column 'vCPUs': not a finite number"):
        import_skypilot(vms, "aws/vms.csv")
    with pytest.raises(SizerError, match="column 'AcceleratorCount': not a finite number"):
        import_skypilot(vms.replace(",8,nan,", ",inf,192,"), "aws/vms.csv")


# ---------------------------------------------------------------- points files
def test_report_takes_a_points_file_disk_class_only_from_the_table_in_force(cli, tmp_path):
    points = [dataclasses.replace(p, disk_class="floppy") if p.disk_class == "standard" else p for p in make_points()]
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    for command in (["report", "--out", str(tmp_path / "out")], ["recommend", "--gpu", "H100"], ["fit"]):
        code, out, err = cli(*command, "--input", str(csv_path))
        one_line_refusal(code, out, err, f"{csv_path}: row ")
        assert "column 'disk_class': 'floppy' is not a known disk class" in err
    floppy = tmp_path / "floppy.csv"
    floppy.write_text("name,read_mbps,read_iops\nfloppy,140,5000\n")
    code, out, err = cli("report", "--out", str(tmp_path / "out"), "--input", str(csv_path),
                         "--disk-classes", str(floppy), "--json")
    assert code == 0, err
    assert "floppy" in json.loads(out)["workloads"][0]["disk_classes"]


# ---------------------------------------------------------------- nothing to size
def failed_real_points_and_a_ceiling(workload: str = "resnet50-train"):
    """A workload whose every real-input point failed, beside its one usable synthetic-input point."""
    points = make_points(workload, vcpus=(1, 2), rams=(8.0,), disks=("local-nvme",))
    return [p if p.input == "synthetic" else dataclasses.replace(p, status="error", throughput=0.0) for p in points]


def test_a_synthetic_ceiling_alone_gives_no_recommendation_and_exit_3(cli, tmp_path):
    csv_path = tmp_path / "points.csv"
    write_points_csv(failed_real_points_and_a_ceiling(), csv_path)
    out = tmp_path / "out"
    code, stdout, err = cli("report", "--input", str(csv_path), "--out", str(out), "--gpu", "H100")
    assert code == 3, err
    assert err.strip().splitlines() == [err.strip()] and "no workload could be sized" in err
    assert "resnet50-train: no usable measurement with real input" in err
    results = json.loads((out / "results.json").read_text())
    wl = results["workloads"][0]
    assert not wl["sized"] and wl["recommendation"] is None and wl["catalog_rows"] == []
    assert wl["no_recommendation"].startswith("no usable measurement with real input: its 2 real-input point(s)")
    assert wl["needs"]["disk_class"] is None and wl["knee"]["predicted_vcpus"] is None
    html = (out / "report.html").read_text()
    assert f"No recommendation: {wl['no_recommendation']}" in html  # the table
    assert f"No instance is recommended for resnet50-train: {wl['no_recommendation']}." in html  # the card
    assert "(100%)" not in stdout
    code, stdout, err = cli("recommend", "--input", str(csv_path), "--gpu", "H100", "--json")
    assert code == 3 and "no workload could be sized" in err
    (rec,) = json.loads(stdout)["recommendations"]
    assert rec["chosen"] is None and not rec["sized"] and rec["reason"] == wl["no_recommendation"]


def test_a_workload_without_usable_points_goes_unrecommended_beside_one_that_is_sized(cli, tmp_path):
    csv_path = tmp_path / "points.csv"
    write_points_csv(make_points("resnet50-train") + failed_real_points_and_a_ceiling("resnet50-infer"), csv_path)
    code, stdout, err = cli("report", "--input", str(csv_path), "--out", str(tmp_path / "out"), "--gpu", "H100",
                            "--json")
    assert code == 0, err
    by_name = {wl["workload"]: wl for wl in json.loads(stdout)["workloads"]}
    assert by_name["resnet50-train"]["sized"] and by_name["resnet50-train"]["recommendation"]["chosen"]
    assert not by_name["resnet50-infer"]["sized"] and by_name["resnet50-infer"]["recommendation"] is None
    code, stdout, err = cli("recommend", "--input", str(csv_path), "--gpu", "H100", "--json")
    assert code == 0, err
    recs = {r["workload"]: r for r in json.loads(stdout)["recommendations"]}
    assert recs["resnet50-train"]["chosen"] and recs["resnet50-infer"]["chosen"] is None


def test_fit_without_any_usable_point_exits_3(cli, tmp_path):
    csv_path = tmp_path / "points.csv"
    points = [dataclasses.replace(p, status="timeout", throughput=0.0) for p in failed_real_points_and_a_ceiling()]
    write_points_csv(points, csv_path)
    code, out, err = cli("fit", "--input", str(csv_path))
    assert code == 3 and out == "" and "no workload could be fitted" in err and "timeout: 2" in err


@pytest.mark.cgroup
def test_a_sweep_whose_every_point_fails_writes_the_report_and_exits_3(cli, tmp_path):
    # A command that exits at once: every point ends in status error.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "input.bin").write_bytes(b"x")  # a command job reads a dataset of its own
    code, out, err = cli(*sweep_args(tmp_path, "--command", "exit 3", "--name", "fails", "--vcpus", "1", "--ram",
                                     "256M", "--disks", "local-nvme", "--budget", "1", "--json"))
    assert code == 3, err
    assert [p["status"] for p in json.loads(out)["points"]] == ["error"]
    assert err.strip().endswith("fails: no usable measurement with real input: its 1 real-input point(s) failed "
                                "(error: 1))")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [wl["sized"] for wl in results["workloads"]] == [False]
