"""Parallel sweeps, the pure parts: slots on constructed hosts (disjoint cores, whole sibling pairs,
one GPU each, NUMA-local), the refusals, the dataset copies and the interference figures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sizer.diskclasses import load_disk_classes
from sizer.errors import SizerError
from sizer.interference import parallel_context
from sizer.points import ParallelMark, Point
from sizer.shapes import HostCpus, InstanceShape, PlannedPoint
from sizer.sweep.data import Dataset, dataset_dir
from sizer.sweep.parallel import alone_key, choose_checks, default_parallel
from sizer.sweep.placement import (
    Gpu,
    Topology,
    check_slots_fit,
    cpu_ranges,
    pci_numa_node,
    plan_slots,
    read_topology,
    sysfs_bus_id,
)
from sizer.sweep.slot_copies import (
    copy_is_current,
    copy_space_problem,
    copy_target,
    copy_to_many,
    ensure_copy,
    make_copies,
    slot_kinds,
)


def smt_host(cores: int, first: int = 0) -> HostCpus:
    """`cores` cores of two threads each, Linux-style numbering: core c holds c and c + cores."""
    return HostCpus(tuple((first + c, first + c + cores) for c in range(cores)))


def two_socket(gpus_per_node: int = 4) -> Topology:
    """16 cores (32 threads) in two NUMA nodes of 8 cores; GPUs 0..n-1 on node 0, the rest on node 1."""
    cpus = HostCpus(tuple((c, c + 16) for c in range(16)))
    nodes = ((0, frozenset(list(range(0, 8)) + list(range(16, 24)))), (1, frozenset(list(range(8, 16)) + list(range(24, 32)))))
    gpus = tuple(Gpu(i, f"0000:{0x18 + i:02x}:00.0", 0 if i < gpus_per_node else 1) for i in range(2 * gpus_per_node))
    return Topology(cpus, nodes, gpus)


def threads(slot) -> set[int]:
    return set(slot.cpus.all())


def assert_disjoint_whole_cores(slots, host: HostCpus) -> None:
    seen: set[int] = set()
    for slot in slots:
        assert not threads(slot) & seen, "slots share a CPU"
        seen |= threads(slot)
        assert all(core in host.cores for core in slot.cpus.cores), "a slot split a sibling pair"


def test_two_slots_on_one_node_split_the_cores_in_halves_one_gpu_each():
    host = smt_host(8)
    slots = plan_slots(Topology(host, ((0, frozenset(host.all())),), (Gpu(0), Gpu(1), Gpu(2))), 2)
    assert [s.gpu.index for s in slots] == [0, 1]
    assert [s.cpus.threads for s in slots] == [8, 8]
    assert_disjoint_whole_cores(slots, host)
    assert [s.node for s in slots] == [0, 0]


def test_a_point_in_a_slot_gets_whole_sibling_pairs_from_the_slot_alone():
    host = smt_host(8)
    slot = plan_slots(Topology(host, (), (Gpu(0), Gpu(1))), 2)[1]
    four = slot.select(4)
    assert set(four) <= threads(slot)
    assert sorted(four) == sorted(c for core in slot.cpus.cores[-2:] for c in core)  # two whole cores
    assert set(slot.select(3)) <= threads(slot) and len(slot.select(3)) == 3


def test_two_slots_on_a_two_socket_host_take_one_gpu_and_one_socket_each():
    topo = two_socket()
    slots = plan_slots(topo, 2)
    assert [s.gpu.index for s in slots] == [0, 4]  # one GPU of each node, not GPUs 0 and 1 of node 0
    assert [s.node for s in slots] == [0, 1]
    for slot in slots:
        assert threads(slot) <= dict(topo.nodes)[slot.node]  # NUMA-local to its GPU
        assert slot.cpus.threads == 16
    assert_disjoint_whole_cores(slots, topo.cpus)


def test_four_slots_on_two_sockets_split_each_node_between_its_two_gpus():
    topo = two_socket()
    slots = plan_slots(topo, 4)
    assert [s.gpu.index for s in slots] == [0, 1, 4, 5]
    assert [s.node for s in slots] == [0, 0, 1, 1]
    for slot in slots:
        assert threads(slot) <= dict(topo.nodes)[slot.gpu.numa_node] and slot.cpus.threads == 8
    assert_disjoint_whole_cores(slots, topo.cpus)


def test_all_gpus_on_one_node_keep_their_slots_on_that_node():
    topo = two_socket(gpus_per_node=4)
    topo = Topology(topo.cpus, topo.nodes, tuple(Gpu(g.index, g.pci_bus, 0) for g in topo.gpus))
    slots = plan_slots(topo, 2)
    assert all(threads(s) <= dict(topo.nodes)[0] for s in slots) and [s.cpus.threads for s in slots] == [8, 8]


def test_a_gpu_of_unknown_node_splits_the_whole_host_in_node_order():
    topo = two_socket()
    topo = Topology(topo.cpus, topo.nodes, (Gpu(0, "", None), Gpu(1, "", 1)))
    slots = plan_slots(topo, 2)
    assert [s.node for s in slots] == [None, None]
    assert threads(slots[0]) == dict(topo.nodes)[0] and threads(slots[1]) == dict(topo.nodes)[1]


def test_cores_left_over_are_those_at_cpu_0():
    slots = plan_slots(Topology(HostCpus(((0,), (1,), (2,), (3,), (4,))), (), (Gpu(0), Gpu(1))), 2)
    assert [threads(s) for s in slots] == [{1, 2}, {3, 4}]


def test_a_host_without_gpus_gets_cpu_slots_one_core_each_on_two_cores():
    slots = plan_slots(Topology(HostCpus(((0,), (1,))), ((0, frozenset({0, 1})),), ()), 2)
    assert [s.gpu for s in slots] == [None, None]
    assert [threads(s) for s in slots] == [{0}, {1}]
    assert slots[1].mark(2) == {"slots": 2, "slot": 1, "gpu": None}


@pytest.mark.parametrize("count,vcpus,message", [
    (2, 16, "a shape of 16 vCPUs does not fit a slot of 8 hardware threads (this host's 16 split among 2 slots)"),
    (3, 2, "this host has 2 GPU(s), and each slot needs one"),
])
def test_refusals_name_the_problem(count, vcpus, message):
    host = smt_host(8)
    topo = Topology(host, ((0, frozenset(host.all())),), (Gpu(0), Gpu(1)))
    with pytest.raises(SizerError) as err:
        check_slots_fit(plan_slots(topo, count), vcpus, host.threads)
    assert message in str(err.value)


def test_more_slots_than_cores_is_refused():
    with pytest.raises(SizerError, match="2 core.s. for 3 slot"):
        plan_slots(Topology(HostCpus(((0,), (1,))), (), ()), 3)


def test_the_default_is_one_point_at_a_time():
    assert [default_parallel(g) for g in (0, 1, 2, 8)] == [1, 1, 1, 1]


def test_topology_from_sysfs_nodes_and_pci_addresses(tmp_path, monkeypatch):
    nodes = tmp_path / "node"
    for node, cpulist in ((0, "0-1,4-5"), (1, "2-3,6-7")):
        (nodes / f"node{node}").mkdir(parents=True)
        (nodes / f"node{node}" / "cpulist").write_text(cpulist + "\n")
    pci = tmp_path / "pci"
    (pci / "0000:18:00.0").mkdir(parents=True)
    (pci / "0000:18:00.0" / "numa_node").write_text("1\n")
    (pci / "0000:19:00.0").mkdir()
    (pci / "0000:19:00.0" / "numa_node").write_text("-1\n")
    assert sysfs_bus_id("00000000:18:00.0") == "0000:18:00.0"
    assert pci_numa_node("0000:18:00.0", pci) == 1
    assert pci_numa_node("0000:19:00.0", pci) is None  # -1: the firmware does not say
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU for sizer, whatever this host has
    topo = read_topology(HostCpus(((0, 4), (1, 5), (2, 6))), nodes, pci)  # CPU 3 and 7 not allowed
    assert topo.nodes == ((0, frozenset({0, 1, 4, 5})), (1, frozenset({2, 6})))
    assert topo.gpus == ()
    assert cpu_ranges((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"


# ---------------------------------------------------------------- dataset copies
def test_each_extra_slot_reads_a_copy_of_its_own_and_slot_zero_the_dataset(tmp_path):
    data = tmp_path / "data"
    source = dataset_dir(data, "imagenet")
    (source / "train").mkdir(parents=True)
    (source / "train" / "a.jpg").write_bytes(b"x" * 5000)
    (source / "manifest.json").write_text("{}")
    notes: list[str] = []
    datasets = {"imagenet": Dataset("imagenet", source, {"path": str(source)})}
    places, cost = make_copies(datasets, {0: ("imagenet",), 1: ("imagenet",)}, data, notes.append)
    assert places[0]["imagenet"].path == source
    copy = places[1]["imagenet"]
    assert copy.path == tmp_path / "data.slot-1" / "imagenet" == copy_target(data, "imagenet", 1)
    assert not copy.path.is_relative_to(data)  # the data folder is the `files` dataset: no copy in it
    original, copied = source / "train" / "a.jpg", copy.path / "train" / "a.jpg"
    assert copied.read_bytes() == original.read_bytes()
    assert os.stat(copied).st_ino != os.stat(original).st_ino  # a file of its own: pages of its own
    assert cost.bytes == 5002 and cost.copies == (("imagenet", 1),) and cost.seconds >= 0
    assert "copying" in notes[0] and notes[1].startswith("dataset copies: imagenet to slot 1: ")  # and its cost
    assert not ensure_copy(source, copy.path)  # current: made once, then reused
    assert make_copies(datasets, {0: ("imagenet",), 1: ("imagenet",)}, data, notes.append)[1].bytes == 0
    (source / "train" / "b.jpg").write_bytes(b"y" * 10)
    assert not copy_is_current(source, copy.path)
    assert ensure_copy(source, copy.path) and (copy.path / "train" / "b.jpg").exists()


def test_one_read_of_the_source_makes_every_slots_copy_whole(tmp_path):
    source = tmp_path / "src"
    (source / "a" / "b").mkdir(parents=True)
    (source / "a" / "b" / "big.mdb").write_bytes(os.urandom(3 * (8 << 20) + 5))  # more than one chunk
    (source / "small").write_bytes(b"s")
    targets = [tmp_path / "copies" / str(i) for i in (1, 2, 3)]
    assert copy_to_many(source, targets) == targets
    for target in targets:
        assert (target / "a" / "b" / "big.mdb").read_bytes() == (source / "a" / "b" / "big.mdb").read_bytes()
        assert (target / "small").read_bytes() == b"s" and not target.with_name(target.name + ".partial").exists()
    assert copy_to_many(source, targets) == []  # all current


def test_a_slot_gets_a_copy_only_of_what_its_points_will_read():
    from types import SimpleNamespace

    classes = {"train": SimpleNamespace(dataset="imagenet"), "lstm": SimpleNamespace(dataset="ptb"),
               "spin": SimpleNamespace(dataset="")}
    plan = SimpleNamespace(classes=classes)
    slots = [SimpleNamespace(index=i) for i in range(4)]

    def point(workload: str, v: int, **kw) -> PlannedPoint:
        return PlannedPoint(workload, "gpu", InstanceShape(v, 4, "ssd"), **kw)

    points = [point("train", v) for v in (2, 4, 8, 16)] + [point("lstm", 2), point("train", 16, ceiling=True),
                                                         point("spin", 2), point("spin", 4)]
    wanted = slot_kinds(plan, points, slots)
    # Four points read the images: every slot; one reads the corpus: slot 0, in place; none copies
    # anything for the ceiling (its input is on the device) or the spinner (it reads nothing).
    assert wanted == {0: ("imagenet", "ptb"), 1: ("imagenet",), 2: ("imagenet",), 3: ("imagenet",)}
    assert slot_kinds(plan, points[4:], slots) == {0: ("ptb",), 1: (), 2: (), 3: ()}


def test_the_copy_of_files_read_from_the_data_folder_lies_beside_it():
    assert copy_target(Path("/d/mine"), "files", 2) == Path("/d/mine.slot-2/files")
    for kind in ("files", "imagenet", "ptb"):  # no copy inside the data folder, which `files` reads whole
        assert not copy_target(Path("/d/mine"), kind, 2).is_relative_to(Path("/d/mine"))


def test_copies_that_do_not_fit_the_disk_are_refused():
    assert copy_space_problem(0, 0, 2, Path("/d")) is None
    assert copy_space_problem(10 * 2**30, 100 * 2**30, 2, Path("/d")) is None
    problem = copy_space_problem(10 * 2**30, 2 * 2**30, 2, Path("/d"))
    assert problem and "need 10.0 GiB" in problem and "2.0 GiB free" in problem


# ---------------------------------------------------------------- the interference check
def test_checks_are_the_largest_one_gpu_shapes_of_the_first_pass():
    def point(v: int, **kw) -> PlannedPoint:
        return PlannedPoint("w", "gpu", InstanceShape(v, 4, "ssd", kw.pop("gpus", 1)), **kw)

    points = [point(8, ceiling=True), point(2, gpus=2), point(4), point(2, pass_no=2), point(6), point(8)]
    table = load_disk_classes()
    assert choose_checks(points, 2, table) == [points[5].key, points[4].key]
    assert choose_checks(points, 0, table) == []
    assert alone_key(points[2].key) == points[2].key + "#alone"


def test_parallel_against_alone_per_shape_with_median_and_largest():
    def point(v: int, rate: float, check: str | None = None, slot: int | None = None) -> Point:
        mark = None if slot is None else ParallelMark(slots=2, slot=slot, gpu=slot)
        return Point("w", v, 4.0, "ssd", rate, "images/s", interference_check=check or "", parallel=mark)

    points = [point(2, 90, "a", 0), point(2, 100, "a"), point(4, 210, "b", 1), point(4, 200, "b"),
              point(8, 300, None, 0), point(6, 50, "c", 1)]  # c: never measured alone
    ctx = parallel_context(points)
    assert ctx["points"] == 4 and ctx["slots"] == 2 and ctx["gpus"] == [0, 1]
    assert [(c["key"], c["difference"]) for c in ctx["checks"]] == [("a", -0.1), ("b", 0.05)]
    assert ctx["median_difference"] == pytest.approx(-0.025) and ctx["max_difference"] == -0.1
    assert parallel_context([point(2, 100)]) is None
