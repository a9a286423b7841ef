"""Device specifications and cost models (roofline estimates, measured profiles)."""

from placer.cost.specs import DEVICE_SPECS, LINK_SPECS, DeviceSpec, LinkSpec, device_spec, link_spec
from placer.cost.roofline import roofline_us

__all__ = ["DEVICE_SPECS", "LINK_SPECS", "DeviceSpec", "LinkSpec", "device_spec", "link_spec", "roofline_us"]
