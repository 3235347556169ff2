"""Fleet sweeps without a cluster: `--ray`'s bad input and a missing Ray (one line, exit code 2, nothing
written), the fleet's record in a real store (resume, lost points measured again), the report over
several hosts, and the cluster launcher file of docs/fleet-aws.yaml."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sizer.fleet.node import NodeOutcome
from sizer.fleet.record import FleetRecord, target_identity
from sizer.shapes import InstanceShape, PlannedPoint
from sizer.store import Store
from workloads.protocol import Result

ROOT = Path(__file__).resolve().parent.parent
WITHOUT_RAY = ("import sys; sys.modules['ray'] = None  # as if Ray were not installed\n"
               "from sizer.cli import main; sys.exit(main())")
SPIN = ["--workloads", "cpu-spin", "--vcpus", "1", "--ram", "512M", "--disks", "local-nvme"]


def test_ray_missing_is_one_line_and_exit_2_before_any_work(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", WITHOUT_RAY, "sweep", "--ray", "auto", *SPIN, "--out", str(out),
                           "--data", str(tmp_path / "data")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "sizer: error: --ray needs Ray, which is not installed: pip install 'sizer[ray]'"
    assert not out.exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize("args,message", [
    (["--fleet-targets", "host:a"], "--fleet-targets needs --ray ADDRESS (a fleet sweep)"),
    (["--fleet-whole-node"], "--fleet-whole-node needs --ray ADDRESS (a fleet sweep)"),
    (["--ray", "auto", "--fleet-targets", "gpu:a"], "--fleet-targets: 'gpu:a' is not instance:<type> or host:<name>"),
    (["--ray", "auto", "--fleet-targets", "instance:"], "--fleet-targets: 'instance:' is not instance:<type> or host:<name>"),
    (["--ray", "auto", "--fleet-node-wait", "soon"], "--fleet-node-wait: cannot read 'soon' as a duration"),
], ids=["targets-alone", "whole-node-alone", "bad-kind", "no-name", "bad-wait"])
def test_bad_fleet_options_exit_2(cli, tmp_path, args, message):
    code, out, err = cli("sweep", *SPIN, *args, "--out", tmp_path / "out")
    assert code == 2 and out == ""
    assert err.startswith(f"sizer: error: {message}") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_cluster_that_does_not_answer_or_options_a_fleet_lacks_exit_2(cli, tmp_path):
    pytest.importorskip("ray")
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, err = cli("sweep", *SPIN, "--ray", f"127.0.0.1:{port}", "--out", tmp_path / "out")
    assert code == 2 and err.startswith(f"sizer: error: --ray: no Ray cluster answers at 127.0.0.1:{port}")
    code, _, err = cli("sweep", *SPIN, "--ray", "auto", "--refine", "2", "--out", tmp_path / "out")
    assert code == 2 and "--refine is not available with --ray" in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the record in the store
POINT = PlannedPoint("cpu-spin", "cpu-small", InstanceShape(1, 0.5, "local-nvme"))
OTHER = PlannedPoint("cpu-spin", "cpu-small", InstanceShape(2, 0.5, "local-nvme"))


def host(name: str) -> dict:
    return {"hostname": "vm", "cpu_model": "Test CPU", "threads": 2, "gpus": [], "fleet_node": name}


def measured(target: str, node: str, rate: float) -> NodeOutcome:
    result = Result(workload="cpu-spin", framework="python", unit="iterations/s", profile="cpu-small", status="ok",
                    throughput=rate, extra={"fleet": {"target": target, "node": node}, "real_instance": False})
    return NodeOutcome(target, POINT.key, "node-id", host(node), result, {"backend": "test"}, time.time(), 1.0)


def test_a_lost_point_is_kept_with_its_reason_and_replaced_once_measured(tmp_path):
    identities = {"host:a": target_identity({"workloads": ["cpu-spin"]}, ["host:a"], "host:a", False)}
    with Store(tmp_path / "s.sqlite") as store:
        first = FleetRecord(store, "sizer sweep --ray auto", identities)
        assert first.open(resume=True) is False  # nothing to take up: a new run
        first.record_lost("host:a", POINT, "no node offers host:a any more", host("host:a"))
        assert first.finish({"host:a": [POINT]}) == ["host:a"]  # a lost point keeps the sweep open
        (row,) = list(store.point_rows())
        assert row["status"] == "error" and json.loads(row["result"])["error"] == "lost: no node offers host:a any more"

        again = FleetRecord(store, "sizer sweep --ray auto --resume", identities)
        assert again.open(resume=True) is True and again.run == first.run
        assert again.done["host:a"] == set() and POINT.key in again.lost["host:a"]
        again.commit(measured("host:a", "host:a", 12.0), POINT)
        assert again.finish({"host:a": [POINT]}) == []
        rows = list(store.point_rows())
        assert [(r["key"], r["status"], r["throughput"]) for r in rows] == [(POINT.key, "ok", 12.0)]
        assert all(s.finished is not None for s in store.sweeps())

        other = FleetRecord(store, "", {"host:a": target_identity({"workloads": ["cpu-spin"]}, ["host:a", "host:b"],
                                                                   "host:a", False)})
        assert other.open(resume=True) is False  # other targets: another plan, a new run


def test_each_host_of_a_target_has_its_own_sweep(tmp_path):
    identities = {"instance:t": target_identity({"workloads": ["cpu-spin"]}, ["instance:t"], "instance:t", True)}
    with Store(tmp_path / "s.sqlite") as store:
        record = FleetRecord(store, "", identities)
        record.open(resume=False)
        record.commit(measured("instance:t", "instance:t,host:one", 10.0), POINT)
        second = measured("instance:t", "instance:t,host:two", 11.0)
        second.key = OTHER.key
        record.commit(second, OTHER)
        sweeps = store.sweeps()
        assert len(sweeps) == 2 and len({s.host_id for s in sweeps}) == 2
        assert all(s.config["fleet"] == {"target": "instance:t", "targets": ["instance:t"], "whole_node": True,
                                         "run": record.run} for s in sweeps)
        assert {s.host["fleet_node"] for s in sweeps} == {"instance:t,host:one", "instance:t,host:two"}


def test_a_whole_node_point_of_a_multi_gpu_node_has_all_its_gpus_and_is_a_real_instance(monkeypatch):
    from types import SimpleNamespace

    from sizer.diskclasses import load_disk_classes
    from sizer.fleet import node
    from sizer.units import GIB

    monkeypatch.setattr(node, "host_gpu_ids", lambda: ["0", "1", "2", "3"])
    classes = {"train": SimpleNamespace(multi_gpu="data-parallel"), "one-gpu": SimpleNamespace(multi_gpu="")}
    grid = [PlannedPoint(name, "gpu", InstanceShape(4, 16.0, "local-nvme")) for name in classes]
    plan = SimpleNamespace(points=list(grid), profile="gpu", config={"disks": ["local-nvme"]}, notes=[],
                           disk_table=load_disk_classes(), classes=classes, cpus=SimpleNamespace(threads=32),
                           host_ram=128 * GIB)
    node.add_whole_node_points(plan)
    whole = {p.workload: p.shape for p in plan.points[len(grid):]}
    assert whole == {"train": InstanceShape(32, 128.0, "local-nvme", 4), "one-gpu": InstanceShape(32, 128.0, "local-nvme")}
    four_gpus = {**host("instance:p4"), "gpus": ["H100"] * 4}
    assert node.is_whole_node(plan, four_gpus, whole["train"])
    assert not node.is_whole_node(plan, four_gpus, whole["one-gpu"])


# ---------------------------------------------------------------- the report over several hosts
def test_a_report_over_two_hosts_fits_each_on_its_own_side_by_side(tmp_path):
    from test_report_fixtures import make_points

    from sizer.report import build_context, inputs_from_store

    slow, fast = make_points(c=100.0, seed=1), make_points(c=300.0, seed=2)
    only_slow = make_points("resnet50-infer", c=120.0, seed=3)  # measured on one host: one section, as before
    with Store(tmp_path / "s.sqlite") as store:
        for name, points in (("host:slow", slow + only_slow), ("host:fast", fast)):
            host_id = store.upsert_host({**host(name), "hostname": name.removeprefix("host:")})
            sweep_id = store.start_sweep(host_id, "sizer sweep", {"fleet": {"target": name}})
            for i, p in enumerate(points):
                result = Result(workload=p.workload, framework="pytorch", unit=p.unit, profile=p.profile, status="ok",
                                throughput=p.throughput, spread=p.spread, config={"input": p.input, "decode": p.decode},
                                counters={"measured_samples": 1000, "gpu_name": p.gpu_model,
                                          "read_bytes": (p.read_mb_per_sample or 0) * 1e9},
                                extra={"dataset_gib": p.dataset_gib, "real_instance": i == len(slow) - 1})
                store.add_point(sweep_id, f"p{i}", {"vcpus": p.vcpus, "ram_gib": p.ram_gib, "disk_class": p.disk_class},
                                result, {}, time.time())
        inputs = inputs_from_store(store)
    context = build_context(inputs["points"], sweeps=inputs["sweeps"], gpu="H100")
    by_name = {w["workload"]: w for w in context["workloads"]}
    assert sorted(by_name) == ["resnet50-infer", "resnet50-train on host:fast", "resnet50-train on host:slow"]
    assert "host" not in by_name["resnet50-infer"] and by_name["resnet50-infer"]["model"]["n_points"] == len(only_slow)
    knees = {name: w["knee"]["predicted_vcpus"] for name, w in by_name.items()}
    assert knees["resnet50-train on host:slow"] > knees["resnet50-train on host:fast"]  # 1200/100 vs 1200/300
    assert {by_name[f"resnet50-train on host:{h}"]["model"]["n_points"] for h in ("slow", "fast")} == {len(slow)}
    side = context["side_by_side"]
    assert side["hosts"] == ["host:slow", "host:fast"] and len(side["rows"]) == 1
    cells = side["rows"][0]["by_host"]
    assert cells["host:slow"]["knee_vcpus"] == knees["resnet50-train on host:slow"]
    assert cells["host:slow"]["n_real"] == 1 and cells["host:fast"]["n_emulated"] == len(fast) - 1
    rows = by_name["resnet50-train on host:fast"]["points"]
    assert sum(1 for r in rows if r["real_instance"]) == 1
    one_host = build_context(slow, gpu="H100")  # points of one host (a points file): as before
    assert [w["workload"] for w in one_host["workloads"]] == ["resnet50-train"] and one_host["side_by_side"] is None


# ---------------------------------------------------------------- the cluster launcher file
def test_the_aws_cluster_file_follows_the_launcher_schema_with_two_gpu_types():
    pytest.importorskip("ray")
    from importlib import resources

    import jsonschema
    import yaml

    config = yaml.safe_load((ROOT / "docs" / "fleet-aws.yaml").read_text())
    schema = json.loads(resources.files("ray.autoscaler").joinpath("ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    types = config["available_node_types"]
    workers = {name: t for name, t in types.items() if name != config["head_node_type"]}
    assert sorted(workers) == ["g5.2xlarge", "g6.2xlarge"]
    for name, node in workers.items():
        assert node["node_config"]["InstanceType"] == name
        assert node["resources"] == {f"instance:{name}": 1, "sizer-slot": 1} and node["min_workers"] >= 1
    assert "sizer-slot" not in types[config["head_node_type"]]["resources"]  # the driver measures nothing
    assert any("sizer[torch,ray]" in command for command in config["setup_commands"])
