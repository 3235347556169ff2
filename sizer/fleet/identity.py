"""Who a fleet node is: the node types (Ray custom resources) it offers, and the node a task runs on."""

from __future__ import annotations

from typing import Any

from sizer.fleet.options import TARGET_KINDS


def target_resources(resources: dict[str, Any]) -> list[str]:
    """The node types a node's resources name (instance:<type>, host:<name>)."""
    return sorted(name for name in resources if name.startswith(TARGET_KINDS))


def this_node() -> tuple[str, str]:
    """(Ray node id, the node types it offers, comma-separated), from inside a task."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return node_id, ",".join(target_resources(node.get("Resources") or {}))
    return node_id, ""
