"""Random tensors and perturbed modules, reproducible by seed, for the tests of the torch models (chapters 7 and 8)."""

from __future__ import annotations

import torch
from torch import nn


def randn(*shape, seed: int, dtype=torch.float64, grad: bool = False) -> torch.Tensor:
    """Standard normal values of ``shape`` drawn in float64 from a generator seeded with ``seed``, then cast."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x.to(dtype).requires_grad_(grad)


def perturb(module: nn.Module, seed: int, scale: float = 0.3) -> nn.Module:
    """Add ``N(0, scale^2)`` noise to every parameter (norms and biases too), in place."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) * scale)
    return module
