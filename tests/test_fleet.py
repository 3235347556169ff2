"""Fleet sweeps (`sizer sweep --ray`) on a real local Ray cluster: a head and two worker nodes started
with `ray start` on loopback (tests/fleet_cluster.py), each offering its own `host:<name>` resource,
the workers also a shared `instance:cpu-node`; real cpu-spin points under real cgroups, one store.

The nodes share this machine: each runs on its own CPUs (the head on both, w1 on the first, w2 on the
second) and all take one host lock, so they measure one point at a time (docs/fleet.md).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

from fleet_cluster import LocalCluster, start_cluster  # noqa: E402  (after the skip: it needs no Ray, its users do)

pytestmark = [pytest.mark.cgroup, pytest.mark.slow]

TESTS = Path(__file__).resolve().parent
SIZER = [sys.executable, "-c", "import sys; from sizer.cli import main; sys.exit(main())"]
CPUS = sorted(os.sched_getaffinity(0))
SPIN = ["--workloads", "cpu-spin", "--ram", "512M", "--disks", "local-nvme", "--budget", "1", "--no-calibrate"]
W1 = {"host:w1": 1, "instance:cpu-node": 1, "sizer-slot": 1}
W2 = {"host:w2": 1, "instance:cpu-node": 1, "sizer-slot": 1}


def node_cpus(name: str) -> list[int]:
    return {"head": CPUS[:2], "w1": CPUS[:1], "w2": CPUS[1:2]}[name]


@pytest.fixture(scope="module")
def cluster():
    if len(CPUS) < 2:
        pytest.skip("the fleet tests give two nodes a CPU each")
    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux) is missing: it gives each node its CPUs")

    def cpu_list(name: str) -> str:
        return ",".join(map(str, node_cpus(name)))

    started = start_cluster({"head": ({"host:head": 1, "sizer-slot": 1}, cpu_list("head")),
                             "w1": (W1, cpu_list("w1")), "w2": (W2, cpu_list("w2"))})
    yield started
    started.stop()


def sizer(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*SIZER, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def stored_points(store: Path) -> list[dict]:
    """Every stored point with its sweep's fleet record and its host's record."""
    conn = sqlite3.connect(store)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT p.id, p.key, p.status, p.throughput, p.result, s.config, s.finished, h.info, h.id AS host_id"
                        " FROM points p JOIN sweeps s ON s.id = p.sweep_id JOIN hosts h ON h.id = s.host_id ORDER BY p.id")
    out = [{**dict(r), "result": json.loads(r["result"]), "config": json.loads(r["config"]), "host": json.loads(r["info"])}
           for r in rows]
    conn.close()
    return out


# ---------------------------------------------------------------- one fleet sweep over every node
@pytest.fixture(scope="module")
def fleet_run(cluster: LocalCluster, tmp_path_factory):
    """One fleet sweep on host:head, host:w1 and host:w2: each node's default grid (1 and 2 vCPUs on
    the head, 1 on each worker) at 0.5 GiB, into one store, with its report."""
    root = tmp_path_factory.mktemp("fleet")
    done = sizer("sweep", "--ray", cluster.address, "--fleet-targets", "host:head,host:w1,host:w2", *SPIN,
                 "--store", root / "fleet.sqlite", "--out", root / "out", "--data", root / "data", "--json")
    assert done.returncode == 0, done.stderr
    return root, json.loads(done.stdout)


def test_points_land_on_the_nodes_they_asked_for_into_one_store(fleet_run):
    root, summary = fleet_run
    points = stored_points(root / "fleet.sqlite")
    assert sorted((p["config"]["fleet"]["target"], p["key"]) for p in points) == [
        ("host:head", "cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme"), ("host:head", "cpu-spin/cpu-small/2vcpu-0.5gib-local-nvme"),
        ("host:w1", "cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme"), ("host:w2", "cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme")]
    for p in points:
        target = p["config"]["fleet"]["target"]
        name = target.removeprefix("host:")
        assert p["status"] in ("ok", "noisy") and p["throughput"] > 0
        assert target in p["host"]["fleet_node"].split(",")  # the host row is the node's own probe
        assert p["host"]["cpu_model"] and p["host"]["threads"] == len(node_cpus(name))
        assert p["result"]["extra"]["fleet"]["target"] == target
        assert set(p["result"]["extra"]["cpus"]) <= set(node_cpus(name))  # measured within the node's CPUs
        assert p["result"]["extra"]["real_instance"] is False  # 0.5 GiB of the machine's RAM: emulated
        assert p["finished"] is not None
    assert len({p["host_id"] for p in points}) == 3
    assert {row["target"] for row in summary["points"]} == {"host:head", "host:w1", "host:w2"}
    assert summary["fleet"]["open"] == [] and summary["statuses"].keys() <= {"ok", "noisy"}


def test_the_report_sets_the_hosts_side_by_side(fleet_run):
    root, _ = fleet_run
    results = json.loads((root / "out" / "results.json").read_text())
    names = sorted(w["workload"] for w in results["workloads"])
    assert names == ["cpu-spin on host:head", "cpu-spin on host:w1,instance:cpu-node",
                     "cpu-spin on host:w2,instance:cpu-node"]
    by_name = {w["workload"]: w for w in results["workloads"]}
    assert [p["vcpus"] for p in by_name["cpu-spin on host:head"]["points"]] == [1, 2]  # each host fitted alone
    side = results["side_by_side"]
    assert side["hosts"] and len(side["hosts"]) == 3 and [r["workload"] for r in side["rows"]] == ["cpu-spin"]
    assert "Hosts side by side" in (root / "out" / "report.html").read_text()


def local_copy(fleet_store: Path, target: str, to: Path) -> None:
    """The fleet store's points of `target` as a local sweep on that node stores them: its host
    without the fleet's node record, its sweep's plan without the fleet's, each point's result
    without its fleet record; the same measurements otherwise."""
    from sizer.store import Store

    with Store(fleet_store) as fleet, Store(to) as local:
        (sweep,) = [s for s in fleet.sweeps() if s.config["fleet"]["target"] == target]
        host = {k: v for k, v in sweep.host.items() if k not in ("fleet_node", "ray_node_id")}
        sweep_id = local.start_sweep(local.upsert_host(host), sweep.command,
                                     {k: v for k, v in sweep.config.items() if k != "fleet"})
        local.set_calibration(sweep_id, sweep.calibration)
        for row, result in fleet.results(sweep.id):
            result.extra.pop("fleet")
            shape = {"vcpus": row["vcpus"], "ram_gib": row["ram_gib"], "disk_class": row["disk_class"]}
            local.add_point(sweep_id, row["key"], shape, result, json.loads(row["enforced"]), row["started"])
        local.finish_sweep(sweep_id)


def test_the_fleet_store_sizes_a_nodes_points_as_a_local_store_of_them_does(fleet_run, tmp_path, cli):
    """`sizer report` over the fleet's store sizes the head's points as it sizes the same
    measurements stored by a local sweep: the same points, the same fit, the same pick. (How a
    fleet node's rates compare with a local sweep's own, per CPU-second: speed_comparisons.py
    per-cpu-second FLEET_STORE LOCAL_STORE --target host:head.)"""
    root, _ = fleet_run
    local_copy(root / "fleet.sqlite", "host:head", tmp_path / "local.sqlite")
    for store, out in ((root / "fleet.sqlite", "fleet"), (tmp_path / "local.sqlite", "local")):
        code, _, err = cli("report", "--store", store, "--out", tmp_path / out)
        assert code == 0, err
    mine = {w["workload"]: w for w in json.loads((tmp_path / "fleet" / "results.json").read_text())["workloads"]}
    head = mine["cpu-spin on host:head"]
    (alone,) = json.loads((tmp_path / "local" / "results.json").read_text())["workloads"]
    assert alone["workload"] == "cpu-spin" and alone["sized"] and head["sized"]
    assert [p["vcpus"] for p in head["points"]] == [p["vcpus"] for p in alone["points"]] == [1, 2]
    for field in ("measured", "predicted", "predicted_low", "predicted_high", "bottleneck"):
        assert [p[field] for p in head["points"]] == [p[field] for p in alone["points"]], field
    assert head["model"]["params"] == alone["model"]["params"] and head["knee"] == alone["knee"]
    head_rec, alone_rec = head["recommendation"], alone["recommendation"]
    for end in ("chosen", "optimistic", "closest"):
        assert (head_rec[end] or {}).get("instance_type") == (alone_rec[end] or {}).get("instance_type"), end
    assert head_rec["model_trusted"] == alone_rec["model_trusted"]


# ---------------------------------------------------------------- a node lost mid-sweep
def drive(cluster: LocalCluster, root: Path, resume: bool, kill: str = "") -> dict:
    """A fleet sweep on host:w2 and instance:cpu-node through the library, in a process of its own
    (tests/fleet_cluster.py's `drive`); with `kill`, that node dies at its first committed point."""
    session = cluster.nodes[kill].pid if kill else 0
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import fleet_cluster; "
            f"fleet_cluster.drive({cluster.address!r}, {str(root / 'fleet.sqlite')!r}, {str(root / 'data')!r}, "
            f"'host:w2,instance:cpu-node', 3.0, {resume}, {session}, 'host:{kill}')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_lost_node_loses_no_committed_point_and_resume_completes_the_sweep(cluster: LocalCluster, tmp_path):
    planned = {"cpu-spin/cpu-small/1vcpu-0.5gib-local-nvme"}
    summary = drive(cluster, tmp_path, resume=False, kill="w2")
    cluster.kill_node("w2")  # reap what the driver killed
    assert summary["killed"]
    first = stored_points(tmp_path / "fleet.sqlite")
    by_target: dict[str, dict[str, dict]] = {}
    for p in first:
        by_target.setdefault(p["config"]["fleet"]["target"], {})[p["key"]] = p
    whole = {k for k in by_target["host:w2"] if k not in planned}  # the whole node's point: 1 vCPU, all its RAM
    assert len(whole) == 1 and set(by_target["instance:cpu-node"]) == planned | whole
    # The shared type's points all measured, on w1 where w2 died with one in hand.
    assert all(p["status"] in ("ok", "noisy") for p in by_target["instance:cpu-node"].values())
    assert all(p["result"]["extra"]["real_instance"] is (p["key"] in whole) for p in by_target["instance:cpu-node"].values())
    # host:w2 had no other node: each point it did not commit is stored as lost, with the reason.
    lost = [p for p in by_target["host:w2"].values() if p["result"]["extra"]["fleet"].get("lost")]
    assert lost and set(by_target["host:w2"]) == planned | whole
    for p in lost:
        assert p["status"] == "error" and p["result"]["error"].startswith("lost: ") and "host:w2" in p["result"]["error"]
    assert summary["fleet"]["open"] == ["host:w2"] and any("--resume" in n for n in summary["notes"])
    committed = {(p["id"], p["throughput"]) for p in first if not p["result"]["extra"]["fleet"].get("lost")}

    cluster.start_node("w2", W2, ",".join(map(str, node_cpus("w2"))))
    cluster.wait_started(["w2"])
    resumed = drive(cluster, tmp_path, resume=True)
    after = stored_points(tmp_path / "fleet.sqlite")
    assert committed <= {(p["id"], p["throughput"]) for p in after}  # nothing committed before is touched
    assert not [p for p in after if p["result"]["extra"]["fleet"].get("lost")]
    assert sorted((p["config"]["fleet"]["target"], p["key"]) for p in after) == sorted(
        (t, k) for t in ("host:w2", "instance:cpu-node") for k in planned | whole)
    assert all(p["status"] in ("ok", "noisy") and p["finished"] is not None for p in after)
    assert resumed["fleet"]["resumed"] and resumed["fleet"]["open"] == []
    assert sorted(row["key"] for row in resumed["points"] if not row.get("stored")) == sorted(p["key"] for p in lost)
