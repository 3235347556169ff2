"""Fleet sweeps on Ray (`sizer sweep --ray ADDRESS`): one sweep measured on many machines at once.

Each node of a Ray cluster offers a node type as a custom resource, `instance:<type>` (a real
instance type) or `host:<name>` (a host of an emulating fleet), and one `sizer-slot`. Every point
becomes a Ray task that asks for the slot and a share of its target's resource: it runs on a node
of that type, one measurement per node at a time. On the node it rebuilds the plan from the
sweep's options and measures the point as a local sweep does (`sizer.fleet.node`); the driver
stores each result in the one local store as it comes back, in a sweep per target and host
(`sizer.fleet.record`, `sizer.fleet.run`). Ray is an optional dependency (`sizer[ray]`): only
`sizer.fleet.cluster` and the tasks import it.
"""

from sizer.fleet.options import SLOT_RESOURCE, TARGET_KINDS, FleetOptions, fleet_options, parse_targets
from sizer.fleet.run import run_fleet

__all__ = ["SLOT_RESOURCE", "TARGET_KINDS", "FleetOptions", "fleet_options", "parse_targets", "run_fleet"]
