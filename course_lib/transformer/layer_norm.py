"""Layer normalisation: each vector standardised over its own features, then scaled and shifted. Chapter 6.

``LN(x) = (x - mu) / sqrt(sigma^2 + eps) * gamma + beta`` with ``mu`` and ``sigma^2`` the mean
and the (biased) variance of the ``D`` features of one position (Ba et al., 2016). Unlike
batch normalisation it needs no statistics across a batch, so it works the same in
training and at test time and for any batch size. See :doc:`/chapters/ch06_transformer`.
Tested against ``torch.nn.LayerNorm`` and autograd.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks


def layer_norm(x, weight, bias, eps=1e-5):
    """Layer normalisation of the last axis: ``(x - mu) / sqrt(sigma^2 + eps) * gamma + beta``.

    ``mu = (1/D) sum_d x_d`` and ``sigma^2 = (1/D) sum_d (x_d - mu)^2`` (the biased
    variance, as PyTorch) over the ``D`` features of each position; ``gamma = weight``
    and ``beta = bias`` scale and shift every feature. Written with torch operations so
    that autograd gives every gradient; the arguments are not modified.
    Chapter 6, exercise of ps06.

    Args:
        x: ``(..., D)`` float tensor.
        weight: ``(D,)`` ``gamma``. bias: ``(D,)`` ``beta``.
        eps: added to the variance, so that a constant vector gives no division by zero.

    Returns:
        ``(..., D)`` tensor of the dtype of ``x``.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or not x.is_floating_point():
        raise ValueError(f"x must be a float tensor of shape (..., D), got {getattr(x, 'shape', type(x).__name__)}")
    checks.expect_tensor(weight, "weight", (x.shape[-1],), "(D,)")
    checks.expect_tensor(bias, "bias", (x.shape[-1],), "(D,)")
    ### BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias
    ### END SOLUTION


class LayerNorm(nn.Module):
    """A LayerNorm layer with ``weight`` and ``bias`` named as in ``torch.nn.LayerNorm``. Chapter 6.

    Args:
        width: ``D``. eps: as in :func:`layer_norm`.
        norm_fn: the function that normalises (default: :func:`layer_norm`).
    """

    def __init__(self, width: int, eps: float = 1e-5, norm_fn: Callable | None = None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(checks.positive_int(width, "width")))
        self.bias = nn.Parameter(torch.zeros(width))
        self.eps = eps
        self.norm_fn = norm_fn or layer_norm

    def forward(self, x):
        """``(..., D) -> (..., D)``."""
        return self.norm_fn(x, self.weight, self.bias, self.eps)
