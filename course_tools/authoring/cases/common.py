"""What the hidden cases of several problem sets draw alike: a padding mask of keys."""

from __future__ import annotations

import numpy as np


def key_mask(rng, batch, keys, contiguous=True):
    """A (B, Tk) bool mask with at least one True per row: padding at the end, or any pattern."""
    if contiguous:
        lengths = rng.integers(1, keys + 1, size=batch)
        lengths[0] = keys  # one source fills the batch
        return np.arange(keys)[None, :] < lengths[:, None]
    chosen = rng.random((batch, keys)) < 0.5
    chosen[np.arange(batch), rng.integers(0, keys, size=batch)] = True
    return chosen
