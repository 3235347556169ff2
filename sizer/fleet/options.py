"""What a fleet sweep is given: the Ray cluster's address, the node types its points go to, how long
it waits for a node of a type, and whether each node also measures its whole shape."""

from __future__ import annotations

from dataclasses import dataclass

from sizer.errors import SizerError

# The resource every fleet node offers once: a point asks for all of it, so a node measures one point
# at a time (co-located measurements disturb each other, as on one host).
SLOT_RESOURCE = "sizer-slot"
# The resources that name a node type: a real instance type, or a host of an emulating fleet.
TARGET_KINDS = ("instance:", "host:")
# The share of its target resource a point asks for: the slot, not this, bounds the points of a node.
TARGET_SHARE = 0.01
DEFAULT_NODE_WAIT_S = 600.0


@dataclass(frozen=True)
class FleetOptions:
    """`sizer sweep --ray`: `targets` empty means every instance:/host: resource the cluster's nodes offer."""

    address: str
    targets: tuple[str, ...] = ()
    node_wait_s: float = DEFAULT_NODE_WAIT_S  # how long a target may have no node before its points fail
    whole_node: bool = False  # each target also measures each workload at its whole node (a real instance)


def parse_targets(text: str) -> tuple[str, ...]:
    """'instance:g5.2xlarge,host:gpu-a' -> ('instance:g5.2xlarge', 'host:gpu-a'); each names a node type."""
    targets = tuple(dict.fromkeys(t.strip() for t in str(text).split(",") if t.strip()))
    if not targets:
        raise SizerError("--fleet-targets: empty list")
    for target in targets:
        kind = next((k for k in TARGET_KINDS if target.startswith(k)), None)
        if kind is None or not target[len(kind):]:
            raise SizerError(f"--fleet-targets: {target!r} is not instance:<type> or host:<name>")
    return targets


def fleet_options(address: str | None, targets: str | None, node_wait_s: float | None,
                  whole_node: bool) -> FleetOptions | None:
    """The fleet of `sizer sweep`'s options, None without --ray; the fleet's options need --ray."""
    if address is None:
        given = [flag for flag, value in (("--fleet-targets", targets), ("--fleet-node-wait", node_wait_s),
                                          ("--fleet-whole-node", whole_node or None)) if value is not None]
        if given:
            raise SizerError(f"{given[0]} needs --ray ADDRESS (a fleet sweep)")
        return None
    if not address.strip():
        raise SizerError("--ray: empty address (give host:port of the cluster's head, or auto)")
    wait = DEFAULT_NODE_WAIT_S if node_wait_s is None else float(node_wait_s)
    if wait < 0:
        raise SizerError(f"--fleet-node-wait wants 0 or more seconds, got {wait:g}")
    return FleetOptions(address=address.strip(), targets=parse_targets(targets) if targets else (),
                        node_wait_s=wait, whole_node=whole_node)
