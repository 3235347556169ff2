"""The GPU count of a shape: keys and labels (one-GPU shapes exactly as before, so stores resume),
the plan's GPU axis, points.csv's `gpus` column, a stored point's count, and the refusals of
`sizer run --gpus` and `sizer sweep --gpus` before any work."""

from __future__ import annotations

import pytest

from sizer.errors import SizerError
from sizer.points import Point, combine_passes, parse_points_csv, repeat_key, write_points_csv
from sizer.shapes import InstanceShape, PlannedPoint, build_plan, grid_shapes, host_gpu_ids
from sizer.store_schema import stored_gpus
from sizer.sweep.plan import _check_gpus
from workloads import load_all


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_LOCK_FILE", str(tmp_path / "sizer.lock"))


def test_a_one_gpu_shape_keeps_its_key_label_and_stored_form():
    one = InstanceShape(2, 4.0, "standard")
    assert one == InstanceShape(2, 4.0, "standard", 1)
    assert one.key == "2vcpu-4gib-standard"
    assert one.label() == "2 vCPU / 4 GiB / standard"
    assert one.as_dict() == {"vcpus": 2, "ram_gib": 4.0, "disk_class": "standard"}
    point = PlannedPoint("resnet50-train", "gpu", one, {"decode": "gpu"}, pass_no=2)
    assert point.key == "resnet50-train/gpu/2vcpu-4gib-standard/decode=gpu#p2"


def test_a_multi_gpu_shape_has_a_key_and_label_of_its_own():
    two = InstanceShape(16, 64, "local-nvme", gpus=2)
    assert two.key == "16vcpu-64gib-local-nvme-g2" != InstanceShape(16, 64, "local-nvme").key
    assert two.label() == "16 vCPU / 64 GiB / local-nvme / 2 GPUs"
    assert two.as_dict() == {"vcpus": 16, "ram_gib": 64, "disk_class": "local-nvme", "gpus": 2}
    assert PlannedPoint("resnet50-train", "gpu", two).key == "resnet50-train/gpu/16vcpu-64gib-local-nvme-g2"


def test_a_shape_needs_a_gpu_and_a_vcpu_for_each():
    with pytest.raises(SizerError, match="at least 1 GPU"):
        InstanceShape(2, 4, "ssd", gpus=0)
    with pytest.raises(SizerError, match="a shape of 4 GPUs needs at least 4 vCPUs"):
        InstanceShape(2, 4, "ssd", gpus=4)


def test_the_plan_adds_gpu_counts_and_reads_vcpus_per_gpu():
    entries = [("resnet50-train", "imagenet")]
    plain = build_plan(entries, [1, 2], [4], ["local-nvme"], "cpu-small")
    same = build_plan(entries, [1, 2], [4], ["local-nvme"], "cpu-small", gpus=[1])
    assert [p.key for p in plain] == [p.key for p in same]  # no axis: the plan (and its order) as before
    per_gpu = build_plan(entries, [1, 2], [4], ["local-nvme"], "cpu-small", gpus=[2, 1], vcpus_per_gpu=True)
    shapes = sorted((p.shape.gpus, p.shape.vcpus) for p in per_gpu if not p.ceiling)
    assert shapes == [(1, 1), (1, 2), (2, 2), (2, 4)]
    ceiling = [p for p in per_gpu if p.ceiling]
    assert len(ceiling) == 1 and ceiling[0].shape.gpus == 1 and ceiling[0].shape.vcpus == 2
    total = grid_shapes([2, 8], [4], ["ssd"], [1, 2])
    assert [(s.gpus, s.vcpus) for s in total] == [(1, 2), (1, 8), (2, 2), (2, 8)]
    with pytest.raises(SizerError, match="4 GPUs needs at least 4 vCPUs"):
        build_plan(entries, [2], [4], ["ssd"], "cpu-small", gpus=[4])


def test_points_csv_carries_the_gpu_count_and_passes_stay_apart_by_it(tmp_path):
    one = Point("w", 16, 64, "local-nvme", 1000.0, "images/s")
    two = Point("w", 16, 64, "local-nvme", 1900.0, "images/s", gpus=2)
    assert one.shape_label() == "16 vCPU / 64 GiB / local-nvme" and two.shape_label().endswith("/ 2 GPUs")
    assert repeat_key(one) != repeat_key(two)
    assert sorted(p.throughput for p in combine_passes([one, two])) == [1000.0, 1900.0]
    path = tmp_path / "points.csv"
    write_points_csv([one, two], path)
    back = parse_points_csv(path.read_text(), disk_classes=["local-nvme"])
    assert [p.gpus for p in back] == [1, 2]
    # The column is optional (files from before it, or from elsewhere), and a count below 1 is refused.
    header = "workload,vcpus,ram_gib,disk_class,throughput,unit,status"
    assert parse_points_csv(f"{header}\nw,2,4,local-nvme,10,images/s,ok\n", disk_classes=["local-nvme"])[0].gpus == 1
    with pytest.raises(SizerError, match="row 2, column 'gpus': must be >= 1"):
        parse_points_csv(f"{header},gpus\nw,2,4,local-nvme,10,images/s,ok,0\n", disk_classes=["local-nvme"])


def test_a_stored_point_takes_its_gpu_count_from_its_shape():
    assert stored_gpus({"shape": InstanceShape(4, 8, "ssd").as_dict()}) == 1
    assert stored_gpus({"shape": InstanceShape(4, 8, "ssd", gpus=4).as_dict()}) == 4
    assert stored_gpus({}) == 1 and stored_gpus({"shape": {"gpus": "x"}}) == 1


def test_gpu_counts_are_checked_against_the_host_and_the_workloads(monkeypatch):
    classes = load_all()
    train, lstm = {"resnet50-train": classes["resnet50-train"]}, {"ptb-lstm-train": classes["ptb-lstm-train"]}
    assert _check_gpus([1], "gpu", lstm) == []
    with pytest.raises(SizerError, match="ptb-lstm-train runs on one GPU only: it cannot take --gpus 2"):
        _check_gpus([1, 2], "cpu-small", lstm)
    # The host's own list of GPUs decides on the gpu profile.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert host_gpu_ids() == ["3", "5"]
    assert _check_gpus([1, 2], "gpu", train) == []
    with pytest.raises(SizerError, match="--gpus 4: this host has 2 GPU"):
        _check_gpus([1, 4], "gpu", train)
    # On cpu-small each GPU is a CPU process: allowed anywhere, and said to be a test mode.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert host_gpu_ids() == []
    assert "test mode" in _check_gpus([2], "cpu-small", train)[0]
    with pytest.raises(SizerError, match="GPU counts of 1 or more"):
        _check_gpus([0], "cpu-small", train)


def one_line_refusal(code: int, out: str, err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("sizer: error: ") and message in lines[0], err
    assert out == ""


def test_the_cli_refuses_bad_gpu_counts_in_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    data = ["--data", str(tmp_path / "data"), "--profile", "cpu-small"]
    one_line_refusal(*cli("run", "ptb-lstm-train", "--gpus", "2", "--vcpus", "2", *data), "runs on one GPU only")
    one_line_refusal(*cli("run", "resnet50-train", "--gpus", "2", "--vcpus", "1", *data),
                     "a shape of 2 GPUs needs at least 2 vCPUs")
    one_line_refusal(*cli("sweep", "--workloads", "resnet50-train", "--gpus", "1,x", "--vcpus", "1", *data,
                          "--out", str(tmp_path / "out")), "--gpus: 'x' is not a positive integer")
    one_line_refusal(*cli("sweep", "--workloads", "resnet50-train", "--vcpus", "1", "--vcpus-per-gpu", "1", *data,
                          "--out", str(tmp_path / "out")), "give --vcpus or --vcpus-per-gpu, not both")
    one_line_refusal(*cli("sweep", "--workloads", "resnet50-train", "--gpus", "1,64", "--vcpus-per-gpu", "1", *data,
                          "--out", str(tmp_path / "out")), "larger than this host")
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()  # refused before any work


def test_the_dry_run_lists_multi_gpu_points(cli, tmp_path):
    import json

    code, out, err = cli("sweep", "--dry-run", "--json", "--profile", "cpu-small", "--workloads", "resnet50-train",
                         "--gpus", "1,2", "--vcpus-per-gpu", "1", "--ram", "4G", "--disks", "local-nvme",
                         "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out"))
    assert code == 0, err
    dry = json.loads(out)
    assert dry["plan"]["gpus"] == [1, 2] and dry["plan"]["vcpus_per_gpu"] is True
    assert sorted((p["gpus"], p["vcpus"]) for p in dry["points"] if not p["ceiling"]) == [(1, 1), (2, 2)]
    assert any("test mode" in note for note in dry["notes"])
