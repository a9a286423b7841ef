"""Device specifications and cost models: datasheet specs per dtype and links (:mod:`.specs`), this
machine's measured CPU (:mod:`.host`), the per-class roofline estimate (:mod:`.roofline`), measured
per-op profiles (:mod:`.profile`) and the fit of roofline efficiencies to them (:mod:`.calibrate`)."""

from placer.cost.roofline import DEFAULT_COST_KEYS, roofline_costs, roofline_us, with_roofline_costs
from placer.cost.specs import DEVICE_SPECS, LINK_SPECS, DeviceSpec, LinkSpec, device_spec, link_spec

# The cost model's behaviour as a version (the bench cache keys on it): how a Problem turns a graph and
# a cluster into compute times, transfer costs and lower bounds (placer.problem, the roofline and the
# specs above). Bumped when that changes on purpose; graphs themselves are keyed by their content.
VERSION = 1

__all__ = ["VERSION", "DEFAULT_COST_KEYS", "DEVICE_SPECS", "LINK_SPECS", "DeviceSpec", "LinkSpec", "device_spec", "link_spec",
           "roofline_costs", "roofline_us", "with_roofline_costs"]
