"""Torch's thread count pinned for the learned methods' work."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread, the count restored afterwards: results then do not depend on the
    machine's number of cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
