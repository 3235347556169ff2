"""The Ray side of a fleet sweep, on the driver: connecting, the nodes that offer each target, and
the tasks that plan, measure and calibrate on a node (sizer.fleet.node runs them there).

Every task asks for the node's whole `sizer-slot` (one measurement per node at a time) and a small
share of its target resource (`instance:<type>` or `host:<name>`), which pins it to a node of that
type; no CPU, so the node's CPUs stay the measurement's. A task lost with its node is retried by
Ray on another node of the type; one that cannot be is reported by the driver (sizer.fleet.run).
"""

from __future__ import annotations

import functools
import socket
from typing import Any

from sizer.errors import SizerError
from sizer.fleet.identity import target_resources
from sizer.fleet.node import calibrate_on_node, measure_on_node, plan_on_node
from sizer.fleet.options import SLOT_RESOURCE, TARGET_SHARE, FleetOptions

# Retries of a task whose node or worker died (Ray's own, on another node of the type where one is left).
TASK_RETRIES = 3
CONNECT_TIMEOUT_S = 5.0


def require_ray() -> Any:
    """The ray module, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise SizerError("--ray needs Ray, which is not installed: pip install 'sizer[ray]'") from None
    return ray


def _check_reachable(address: str) -> None:
    """A host:port address must answer within seconds: Ray itself waits minutes for an absent head."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise SizerError(f"--ray: {address!r} is not auto, host:port or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SizerError(f"--ray: no Ray cluster answers at {address} ({exc.strerror or exc})") from None


def connect(address: str) -> Any:
    """Join the cluster at `address` as its driver; the ray module."""
    ray = require_ray()
    _check_reachable(address)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SizerError(f"--ray: cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    return ray


def disconnect() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


# ---------------------------------------------------------------- the nodes
def offered_targets() -> dict[str, int]:
    """Target -> how many alive nodes offer it with a measuring slot."""
    import ray

    counts: dict[str, int] = {}
    for node in ray.nodes():
        resources = node.get("Resources") or {}
        if not node.get("Alive") or resources.get(SLOT_RESOURCE, 0) < 1:
            continue
        for target in target_resources(resources):
            counts[target] = counts.get(target, 0) + 1
    return counts


def resolve_targets(fleet: FleetOptions) -> tuple[str, ...]:
    """The targets given, or every one the cluster's nodes offer now."""
    if fleet.targets:
        return fleet.targets
    offered = sorted(offered_targets())
    if not offered:
        raise SizerError(f"the Ray cluster at {fleet.address} has no node offering instance:<type> or host:<name> "
                         f"with a {SLOT_RESOURCE}: start nodes with --resources "
                         f"'{{\"instance:<type>\": 1, \"{SLOT_RESOURCE}\": 1}}' (docs/fleet.md)")
    return tuple(offered)


# ---------------------------------------------------------------- the tasks
def _task_options(target: str, node_id: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "num_cpus": 0,
        "resources": {SLOT_RESOURCE: 1, target: TARGET_SHARE},
        "max_retries": TASK_RETRIES,
        "retry_exceptions": False,
    }
    if node_id is not None:  # this very node (its host's calibration): never moved elsewhere
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        options["max_retries"] = 0
    return options


@functools.cache
def _remote(function: Any) -> Any:
    """The task of `function`, made once per driver (Ray exports a function once per task made)."""
    import ray

    return ray.remote(function)


def submit_plan(opts: Any, fleet: FleetOptions, target: str) -> Any:

    return _remote(plan_on_node).options(**_task_options(target)).remote(opts, fleet, target)


def submit_measure(opts: Any, fleet: FleetOptions, target: str, key: str) -> Any:

    return _remote(measure_on_node).options(**_task_options(target)).remote(opts, fleet, target, key)


def submit_calibration(opts: Any, fleet: FleetOptions, target: str, node_id: str) -> Any:

    return _remote(calibrate_on_node).options(**_task_options(target, node_id)).remote(opts, fleet, target)


def wait(refs: list[Any], timeout_s: float) -> list[Any]:
    """The refs of `refs` that are done within `timeout_s` (at least one where any is)."""
    import ray

    if not refs:
        return []
    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
    if ready:  # take every other one done meanwhile too
        more, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        ready = list(dict.fromkeys([*ready, *more]))
    return ready


def fetch(ref: Any) -> tuple[Any, str | None]:
    """(the task's value, None), or (None, why it has none): its node lost, its retries spent."""
    import ray
    from ray.exceptions import RayError

    try:
        return ray.get(ref), None
    except RayError as exc:
        return None, describe_error(exc)


def describe_error(exc: BaseException) -> str:
    """One line for a Ray task's failure; a SizerError raised on the node keeps its own words."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, SizerError):
        return str(cause)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no detail'}"


def cancel(refs: list[Any]) -> None:
    """Stop tasks: pending ones never start, running ones are killed (their point's watchdog then
    removes its processes and limit group)."""
    import ray

    for ref in refs:
        try:
            ray.cancel(ref, force=True)
        except Exception:  # already finished or already gone: nothing left to stop
            continue
