"""Where the points of a parallel sweep run: the host's GPUs and CPUs split into slots.

A slot is one GPU (none on a host without one) and whole cores (SMT sibling pairs) that no other
slot has. Where the host has several NUMA nodes and every chosen GPU's node is known, a slot's cores
come from its GPU's node, so a point's loader workers never feed their GPU across the socket link.
The GPUs are chosen one per node in turn, so two slots on a two-socket host get a socket each. A
point in a slot gets its vCPUs from the slot's cores as a serial sweep gets them from the host's
(`select_cpus`: whole sibling pairs, from the end of the list).

Everything here is pure but `read_topology` and `nvml_gpus`, which read sysfs and NVML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sizer.errors import SizerError
from sizer.shapes import HostCpus, host_gpu_ids, parse_cpu_list, select_cpus
from sizer.sweep.data import Dataset

NODE_SYSFS = Path("/sys/devices/system/node")
PCI_SYSFS = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class Gpu:
    """One GPU: its index among the GPUs sizer may use (`sizer.shapes.host_gpu_ids`, what
    `sizer.runner.gpu_env` takes), its PCI address as sysfs writes it and its NUMA node (None: unknown)."""

    index: int
    pci_bus: str = ""
    numa_node: int | None = None


@dataclass(frozen=True)
class Topology:
    """The CPUs sizer may use, the NUMA node of each CPU (empty: no NUMA information) and the GPUs."""

    cpus: HostCpus
    nodes: tuple[tuple[int, frozenset[int]], ...] = ()
    gpus: tuple[Gpu, ...] = ()

    def node_of(self, core: tuple[int, ...]) -> int | None:
        return next((node for node, cpus in self.nodes if core[0] in cpus), None)

    def cores_of(self, node: int) -> list[tuple[int, ...]]:
        return [core for core in self.cpus.cores if self.node_of(core) == node]

    def nodes_with_cores(self) -> list[int]:
        return [node for node, _ in sorted(self.nodes) if self.cores_of(node)]


@dataclass(frozen=True)
class Slot:
    """One place a point of a parallel sweep runs in: its GPU, its cores and their NUMA node."""

    index: int
    cpus: HostCpus
    gpu: Gpu | None = None
    node: int | None = None

    def select(self, vcpus: int) -> tuple[int, ...]:
        """The hardware threads a shape of `vcpus` gets in this slot."""
        return select_cpus(vcpus, self.cpus)

    def mark(self, slots: int) -> dict[str, int | None]:
        """What a point measured in this slot records under `extra["parallel"]`."""
        return {"slots": slots, "slot": self.index, "gpu": None if self.gpu is None else self.gpu.index}

    def describe(self) -> str:
        gpu = "no GPU" if self.gpu is None else f"GPU {self.gpu.index}" + (f" ({self.gpu.pci_bus})" if self.gpu.pci_bus else "")
        node = "" if self.node is None else f", NUMA node {self.node}"
        return f"slot {self.index}: {gpu}, CPUs {cpu_ranges(self.cpus.all())}{node}"

    def as_dict(self) -> dict[str, object]:
        return {"slot": self.index, "gpu": None if self.gpu is None else self.gpu.index,
                "pci_bus": self.gpu.pci_bus if self.gpu else None, "cpus": list(self.cpus.all()), "numa_node": self.node}


def cpu_ranges(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0-2,5' (the kernel's list format)."""
    parts: list[str] = []
    for cpu in sorted(cpus):
        if parts and cpu == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


# ---------------------------------------------------------------- reading the host
def numa_nodes(sysfs: Path = NODE_SYSFS) -> dict[int, frozenset[int]]:
    """Each NUMA node's CPUs (node*/cpulist); empty where the kernel shows none."""
    nodes: dict[int, frozenset[int]] = {}
    for folder in sysfs.glob("node[0-9]*"):
        try:
            nodes[int(folder.name[4:])] = frozenset(parse_cpu_list((folder / "cpulist").read_text()))
        except (OSError, ValueError):
            continue
    return nodes


def sysfs_bus_id(nvml_bus_id: str) -> str:
    """NVML's '00000000:18:00.0' as sysfs names the device: '0000:18:00.0'."""
    text = nvml_bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep:
        return text
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text


def pci_numa_node(bus: str, sysfs: Path = PCI_SYSFS) -> int | None:
    """The NUMA node of a PCI device (its numa_node file; -1 or absent: unknown)."""
    try:
        node = int((sysfs / bus / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def nvml_gpus() -> dict[str, str]:
    """The PCI bus id of each GPU NVML sees, under its NVML index ('0') and its UUID ('GPU-...'),
    the two names CUDA_VISIBLE_DEVICES may give it; empty without NVML, a driver or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: no GPU here
        return {}
    try:
        out: dict[str, str] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            bus, uuid = pynvml.nvmlDeviceGetPciInfo(handle).busId, pynvml.nvmlDeviceGetUUID(handle)
            bus = bus.decode() if isinstance(bus, bytes) else str(bus)
            out[str(index)] = out[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = bus
        return out
    except Exception:
        return {}
    finally:
        pynvml.nvmlShutdown()


def read_topology(cpus: HostCpus, node_sysfs: Path = NODE_SYSFS, pci_sysfs: Path = PCI_SYSFS) -> Topology:
    """This host's CPUs (as given), NUMA nodes, and the GPUs sizer may use (`host_gpu_ids`), each
    with its PCI address from NVML and its node from sysfs."""
    buses = nvml_gpus()
    gpus = []
    for index, name in enumerate(host_gpu_ids()):
        bus = sysfs_bus_id(buses[name]) if name in buses else ""
        gpus.append(Gpu(index, bus, pci_numa_node(bus, pci_sysfs) if bus else None))
    allowed = set(cpus.all())
    nodes = tuple(sorted((n, frozenset(c & allowed)) for n, c in numa_nodes(node_sysfs).items() if c & allowed))
    return Topology(cpus=cpus, nodes=nodes, gpus=tuple(gpus))


# ---------------------------------------------------------------- the slots
def _spread_over_nodes(gpus: tuple[Gpu, ...]) -> list[Gpu]:
    """The GPUs one node at a time in turn (node order, then index), unknown nodes last."""
    by_node: dict[int, list[Gpu]] = {}
    for gpu in sorted(gpus, key=lambda g: g.index):
        by_node.setdefault(-1 if gpu.numa_node is None else gpu.numa_node, []).append(gpu)
    order = sorted(by_node, key=lambda n: (n < 0, n))
    out: list[Gpu] = []
    while any(by_node.values()):
        out.extend(by_node[n].pop(0) for n in order if by_node[n])
    return out


def _split(cores: list[tuple[int, ...]], parts: int, where: str, count: int) -> list[list[tuple[int, ...]]]:
    """`cores` in `parts` runs of the same number of cores; a remainder stays unused at the start of
    the list, where CPU 0 is (the system and sizer itself run there, as `select_cpus` knows)."""
    each = len(cores) // parts
    if each == 0:
        raise SizerError(f"--parallel {count}: {where} has {len(cores)} core(s) for {parts} slot(s); "
                         "each slot needs a core of its own")
    skip = len(cores) - each * parts
    return [cores[skip + i * each:skip + (i + 1) * each] for i in range(parts)]


def plan_slots(topology: Topology, count: int) -> list[Slot]:
    """`count` slots: the GPUs spread over the NUMA nodes (index order within the slots), each with
    an equal share of its node's cores where every chosen GPU's node is known; else (one node, no
    NUMA information, a GPU of unknown node) an equal share of all cores, in node order."""
    if count < 1:
        raise SizerError(f"--parallel wants 1 or more slots, got {count}")
    if topology.gpus and count > len(topology.gpus):
        raise SizerError(f"--parallel {count}: this host has {len(topology.gpus)} GPU(s), and each slot needs one")
    nodes = topology.nodes_with_cores()
    chosen = sorted(_spread_over_nodes(topology.gpus)[:count], key=lambda g: g.index)
    gpus: list[Gpu | None] = list(chosen) if chosen else [None] * count
    homes: list[int | None]
    if chosen:
        homes = [g.numa_node if g.numa_node in nodes else None for g in chosen]
    else:
        homes = [nodes[i % len(nodes)] for i in range(count)] if nodes else [None] * count
    known = [home for home in homes if home is not None]
    if len(nodes) > 1 and len(known) == count:
        shares = {node: _split(topology.cores_of(node), known.count(node), f"NUMA node {node}", count) for node in set(known)}
        return [Slot(i, HostCpus(tuple(shares[home].pop(0))), gpu, home)
                for i, (gpu, home) in enumerate(zip(gpus, known))]
    ordered = sorted(topology.cpus.cores, key=lambda core: (topology.node_of(core) or 0, core[0]))
    single = nodes[0] if len(nodes) == 1 else None
    return [Slot(i, HostCpus(tuple(c)), gpu, single)
            for i, (c, gpu) in enumerate(zip(_split(ordered, count, "this host", count), gpus))]


def check_slots_fit(slots: list[Slot], vcpus: int, host_threads: int) -> None:
    """Every one-GPU shape of the plan (the largest has `vcpus`) must fit the smallest slot."""
    smallest = min(slot.cpus.threads for slot in slots)
    if vcpus > smallest:
        numa = " and NUMA nodes" if any(slot.node is not None for slot in slots) and len({s.node for s in slots}) > 1 else ""
        raise SizerError(
            f"--parallel {len(slots)}: a shape of {vcpus} vCPUs does not fit a slot of {smallest} hardware threads "
            f"(this host's {host_threads} split among {len(slots)} slots{numa}): give a smaller --parallel "
            f"or vCPU counts up to {smallest}")


@dataclass(frozen=True)
class Place:
    """Where a point of a parallel sweep runs: its slot's CPUs and GPU, and the slot's datasets."""
    cpus: HostCpus
    gpus: tuple[int, ...] | None
    datasets: dict[str, Dataset]
