"""placer: fast device placements for neural-network training graphs."""

__version__ = "0.1.0"


def apply(model, device_map, *, dry_run=False):
    """Place a PyTorch ``model`` by a module -> device map (``placer export --format device-map``):
    modules on their devices, activations moved at module boundaries (Hugging Face accelerate's
    hooks), so that an ordinary training loop runs across the devices. Build the optimizer after.
    The model and every device are checked first (placer.errors.InputError, nothing touched);
    ``dry_run=True`` rehearses the split on the CPU. See :mod:`placer.apply_map`."""
    from placer.apply_map import apply as _apply

    return _apply(model, device_map, dry_run=dry_run)
