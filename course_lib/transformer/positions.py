"""Position information for attention, which by itself ignores order: sinusoidal, learned, RoPE, ALiBi. Chapter 6.

- **Sinusoidal** (Vaswani et al., 2017): ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)``,
  ``w_i = base^(-2i/D)``, added to the token embeddings.
- **Learned** (as in BERT and GPT-2): one trained vector per position, added the same way.
- **Rotary, RoPE** (Su et al., 2021): each pair ``(x_{2i}, x_{2i+1})`` of a query or key at
  position ``t`` is rotated by the angle ``t theta_i``, ``theta_i = base^(-2i/hs)``; the
  score of ``q`` at ``t`` and ``k`` at ``s`` then depends on ``t - s`` only.
- **ALiBi** (Press et al., 2022): no position vectors at all; head ``h`` adds
  ``-m_h |t - s|`` to its scores, with slopes ``m_h`` a geometric sequence.

See :doc:`/chapters/ch06_transformer`. RoPE is tested against a rotation of complex
numbers written independently in the tests; the ALiBi slopes against the paper's
values for 8 and 12 heads.
"""

from __future__ import annotations

import math

import torch

from course_lib import checks

KINDS = ("none", "sinusoidal", "learned", "rope", "alibi")
"""The position encodings a :class:`~course_lib.transformer.translator.Transformer` can use."""


def sinusoidal_encoding(steps, width, base=10000.0):
    """The sinusoidal position encodings ``PE[t, 2i] = sin(t w_i)``, ``PE[t, 2i+1] = cos(t w_i)``.

    ``w_i = base^(-2i/D)`` for ``i = 0 .. D/2 - 1``: each pair of columns is a clock
    turning at its own speed, from one radian per position (``i = 0``) down to
    ``1/base`` radians per position. Computed in float64 and returned as float32.
    Chapter 6, exercise of ps06.

    Args:
        steps: ``T``, the number of positions ``t = 0 .. T-1``.
        width: ``D``, even.
        base: the longest wavelength is ``2 pi base``.

    Returns:
        ``(T, D)`` float32 tensor.
    """
    steps, width = checks.positive_int(steps, "steps"), checks.even_int(width, "width")
    ### BEGIN SOLUTION
    t = torch.arange(steps, dtype=torch.float64)[:, None]  # (T, 1)
    speeds = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)  # (D/2,)
    encoding = torch.empty(steps, width, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(t * speeds)
    encoding[:, 1::2] = torch.cos(t * speeds)
    return encoding.float()
    ### END SOLUTION


def rope(x, base=10000.0, start=0):
    """Rotary position embedding: each pair ``(x_{2i}, x_{2i+1})`` at position ``t`` rotated by ``t theta_i``.

    ``theta_i = base^(-2i/hs)``; the position of row ``j`` is ``t = start + j``, and
    ``out_{2i} = x_{2i} cos(t theta_i) - x_{2i+1} sin(t theta_i)``,
    ``out_{2i+1} = x_{2i} sin(t theta_i) + x_{2i+1} cos(t theta_i)``.
    Rotations keep lengths, and the dot product of a query rotated to ``t`` with a key
    rotated to ``s`` depends on ``t - s`` only. The angles ``t theta_i`` are computed in
    float64 (in float32 they are off by up to 3e-5 radians near position 1000) and their
    cosines and sines cast to the dtype of ``x``, in which the rotation is written with
    torch operations; ``x`` is not modified. Chapter 6, exercise of ps06.

    Args:
        x: ``(..., T, hs)`` queries or keys, ``hs`` even.
        base: as in :func:`sinusoidal_encoding`.
        start: the position of the first row (a cache of earlier positions, chapter 7).

    Returns:
        ``(..., T, hs)`` tensor of the dtype of ``x``, the rotated vectors.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not x.is_floating_point():
        raise ValueError(f"x must be a float tensor of shape (..., T, hs), got {getattr(x, 'shape', type(x).__name__)}")
    size = checks.even_int(x.shape[-1], "the head size hs")
    start = checks.nonnegative_int(start, "start")
    ### BEGIN SOLUTION
    t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]  # (T, 1)
    theta = base ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)  # (hs/2,)
    cos, sin = torch.cos(t * theta).to(x.dtype), torch.sin(t * theta).to(x.dtype)  # (T, hs/2)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    ### END SOLUTION


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's slopes ``m_h``: ``2^(-8h/nh)`` for ``h = 1 .. nh`` when ``nh`` is a power of 2. Chapter 6.

    For 8 heads: ``1/2, 1/4, ..., 1/256``. For other ``nh``, Press et al. (2022) take the
    slopes of the power of two ``n`` just below ``nh`` and then every other slope of
    ``2n`` heads until ``nh`` are found.

    Returns:
        ``(nh,)`` float32 tensor.
    """
    num_heads = checks.positive_int(num_heads, "num_heads")

    def powers(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    below = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = powers(below) + powers(2 * below)[0::2][:num_heads - below]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(num_heads: int, query_steps: int, key_steps: int | None = None) -> torch.Tensor:
    """ALiBi's score penalties ``-m_h |t - s|`` for query position ``t`` and key position ``s``. Chapter 6.

    Add it to the attention scores (a float mask); a causal mask removes ``s > t`` on top.

    Args:
        num_heads: ``nh``. query_steps: ``Tq``. key_steps: ``Tk`` (default ``Tq``).

    Returns:
        ``(nh, Tq, Tk)`` float32 tensor.
    """
    key_steps = query_steps if key_steps is None else key_steps
    distance = (torch.arange(query_steps)[:, None] - torch.arange(key_steps)[None, :]).abs()  # (Tq, Tk)
    return -alibi_slopes(num_heads)[:, None, None] * distance
