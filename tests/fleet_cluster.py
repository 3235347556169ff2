"""A real local Ray cluster for the fleet tests: a head and worker nodes started with `ray start`
on loopback, each node in a session of its own, stopped by killing exactly those sessions (not
`ray stop`, which would stop every Ray process of the user on this machine).

Every node here shares this machine's CPUs and cgroup tree. A node gets its own CPUs (its `ray
start` runs under a CPU affinity, which its workers and so its points' shapes inherit), and all
nodes take this machine's one host lock (a file of the cluster's own): they measure one point at a
time, so a point never shares a CPU with another, and a node waits for the lock instead of failing.
On a real fleet each node is a machine of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 60.0
# Node deaths noticed in about 2 s instead of Ray's default of about 30 s.
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
                      "RAY_health_check_failure_threshold": "4"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ports() -> list[str]:
    """Each node's own ports: two nodes of one machine starting together otherwise pick the same."""
    flags = ("--node-manager-port", "--object-manager-port", "--runtime-env-agent-port",
             "--dashboard-agent-grpc-port", "--dashboard-agent-listen-port", "--metrics-export-port")
    return [item for flag in flags for item in (flag, str(free_port()))]


@dataclass
class LocalCluster:
    """A head and named worker nodes; `address` is the head's host:port."""

    root: Path
    address: str = ""
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start_node(self, name: str, resources: dict[str, float], cpus: str, head: bool = False) -> None:
        """`ray start --block` of one node, in a session of its own, on the CPUs `cpus` (taskset's list)."""
        args = ["--head", "--port", self.address.rsplit(":", 1)[1], "--temp-dir", str(self.root / "ray"),
                "--include-dashboard", "false"] if head else ["--address", self.address]
        env = dict(os.environ, SIZER_LOCK_FILE=str(self.root / "host.lock"), **FAST_HEALTH_CHECKS)
        (self.root / f"{name}.log").unlink(missing_ok=True)
        with open(self.root / f"{name}.log", "w") as log:
            self.nodes[name] = subprocess.Popen(
                ["taskset", "-c", cpus, RAY, "start", *args, "--block", "--node-ip-address", "127.0.0.1",
                 "--num-cpus", "1", "--object-store-memory", str(80 * 2**20), "--disable-usage-stats",
                 "--include-log-monitor", "false", "--resources", json.dumps(resources), *_ports()],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_started(self, names: list[str]) -> None:
        """Until each node's `ray start` says its runtime started (it has joined the cluster)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for name in names:
            log = self.root / f"{name}.log"
            while "Ray runtime started" not in log.read_text():
                if self.nodes[name].poll() is not None:
                    raise RuntimeError(f"ray node {name} exited: {log.read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ray node {name} did not start in {START_TIMEOUT_S:.0f} s")
                time.sleep(0.2)

    def kill_node(self, name: str) -> None:
        """SIGKILL every process of the node's session: its raylet, its workers, their children."""
        proc = self.nodes.pop(name)
        for pid in _session_pids(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Kill every node's session (workers first, the head last) and remove the cluster's folder."""
        for name in list(self.nodes)[::-1]:
            self.kill_node(name)
        shutil.rmtree(self.root, ignore_errors=True)


def _session_pids(session: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return pids


def start_cluster(nodes: dict[str, tuple[dict[str, float], str]]) -> LocalCluster:
    """A head ("head" in `nodes`) and the other nodes, each (resources, CPU list)."""
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="sf", dir="/tmp")))  # short: Ray's socket paths
    cluster.address = f"127.0.0.1:{free_port()}"
    try:
        cluster.start_node("head", *nodes["head"], head=True)
        cluster.wait_started(["head"])
        for name, (resources, cpus) in nodes.items():
            if name != "head":  # one by one: nodes of one machine starting together may bind one port
                cluster.start_node(name, resources, cpus)
                cluster.wait_started([name])
    except BaseException:
        cluster.stop()
        raise
    return cluster


def drive(address: str, store: str, data: str, targets: str, node_wait_s: float, resume: bool,
          kill_session: int = 0, kill_on: str = "") -> None:
    """A fleet sweep through the library (its cpu-spin grid at 0.5 GiB and the whole node), printing
    its summary as JSON. With `kill_session`, that node's session is killed as soon as a point it
    measured is committed, where its node types contain `kill_on`."""
    from sizer.fleet import FleetOptions, run_fleet
    from sizer.sweep import SweepOptions

    killed: list[int] = []

    def on_point(row: dict) -> None:
        if kill_session and not killed and kill_on in (row.get("node") or ""):
            for pid in _session_pids(kill_session):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
            killed.append(kill_session)

    opts = SweepOptions(workloads=["cpu-spin"], ram_bytes=[512 * 2**20], disks=["local-nvme"], time_budget_s=1.0,
                        calibrate=False, store=Path(store), out_dir=None, data_dir=Path(data), resume=resume,
                        fleet=FleetOptions(address, tuple(targets.split(",")), node_wait_s, whole_node=True))
    summary = run_fleet(opts, progress=False, on_point=on_point)
    print(json.dumps({**summary, "killed": bool(killed)}))
