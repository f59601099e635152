"""Chapter 3, recurrent neural networks: gradient clipping by the global norm.

Backpropagation through time multiplies by the recurrent matrix once per step,
so now and then a gradient comes out hundreds of times larger than usual (the
exploding gradients of Bengio et al., 1994) and one update throws the
parameters far away. Pascanu et al. (2013) rescale the whole gradient when its
norm exceeds a threshold: the direction is kept, only the step is shortened.

Exercise of assignment ps03 here: ``clip_gradients``. See :doc:`/chapters/ch03_rnn`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def global_norm(grads: Sequence) -> float:
    """The Euclidean norm of all gradients taken together, as if concatenated into one vector.

    ``||g|| = sqrt(sum_i ||g_i||^2)``, where ``||g_i||^2`` is the sum of the
    squared entries of the array ``g_i``. Chapter 3.

    Args:
        grads: a sequence of arrays of any shapes (one per parameter).

    Returns:
        the norm, a float.
    """
    return math.sqrt(sum(float(np.sum(np.square(g))) for g in grads))


def clip_gradients(grads, max_norm):
    """Rescale a list of gradients so that their global norm is at most ``max_norm``.

    With ``n = sqrt(sum_i ||g_i||^2)`` the global norm before clipping, every
    gradient is multiplied by the same factor

    ``s = min(1, max_norm / (n + 1e-6))``,

    the rule of ``torch.nn.utils.clip_grad_norm_`` (the ``1e-6`` keeps an all-zero
    gradient from dividing by zero). Below the threshold nothing changes. The
    inputs are not modified: the result is a list of new arrays. Chapter 3,
    exercise of ps03.

    Args:
        grads: a non-empty list or tuple of numeric arrays, any shapes, e.g.
            ``[dW (H, I), dU (H, H), db (H,)]``.
        max_norm: the largest global norm allowed, a positive number.

    Returns:
        ``(clipped, total_norm)``: a list of new numpy arrays of the shapes of ``grads`` (float64
        for float64 gradients), and ``n``, the global norm before clipping, a float.
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float, np.integer, np.floating)) \
            or not max_norm > 0 or not math.isfinite(max_norm):
        raise ValueError(f"max_norm must be a positive number, got {max_norm!r}")
    if isinstance(grads, np.ndarray) or not isinstance(grads, (list, tuple)):
        raise TypeError(f"grads must be a list or tuple of arrays (one per parameter), got a "
                        f"{type(grads).__name__}; wrap a single array as [g]")
    if len(grads) == 0:
        raise ValueError("grads must hold at least one array, got an empty sequence")
    grads = [np.asarray(g) for g in grads]
    for i, g in enumerate(grads):
        if not np.issubdtype(g.dtype, np.number):
            raise TypeError(f"grads[{i}] must be a numeric array, got dtype {g.dtype}")
    ### BEGIN SOLUTION
    total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
    scale = min(1.0, max_norm / (total_norm + 1e-6))
    return [g * scale for g in grads], total_norm
    ### END SOLUTION
