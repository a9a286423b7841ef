"""placer: fast device placements for neural-network training graphs."""

__version__ = "0.1.0"


def apply(model, device_map):
    """Place a PyTorch ``model`` by a module -> device map (``placer export --format device-map``):
    modules on their devices, activations moved at module boundaries (Hugging Face accelerate's
    hooks), so that an ordinary training loop runs across the devices. Build the optimizer after.
    See :mod:`placer.dispatch`."""
    from placer.dispatch import apply as _apply

    return _apply(model, device_map)
