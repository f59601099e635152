"""Token embeddings with position information of one of the kinds of :mod:`~course_lib.transformer.positions`. Chapter 6.

``sinusoidal`` and ``learned`` add a vector per position to ``sqrt(D) * embedding``;
``rope`` rotates the queries and keys inside self-attention; ``alibi`` adds distance
penalties to its scores; ``none`` gives no position at all, and the model is then
permutation-equivariant. See :doc:`/chapters/ch06_transformer`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from course_lib import checks
from course_lib.transformer.multi_head import attention_mask
from course_lib.transformer.positions import KINDS, alibi_bias, rope, sinusoidal_encoding


class TokenEmbedding(nn.Module):
    """``(B, T)`` ids ``-> (B, T, D)``: ``sqrt(D) * E[ids]`` plus position vectors for ``sinusoidal`` or ``learned``. Chapter 6.

    Args:
        vocab_size: ``V`` (id 0 is padding). width: ``D``.
        positions: one of :data:`~course_lib.transformer.positions.KINDS`.
        max_len: the longest sequence (``learned`` has that many vectors; ``sinusoidal`` precomputes them).
        sinusoidal_fn: ``(steps, width) -> (T, D)`` (default: the reference).
    """

    def __init__(self, vocab_size: int, width: int, positions: str = "sinusoidal", max_len: int = 64,
                 sinusoidal_fn=None):
        super().__init__()
        if positions not in KINDS:
            raise ValueError(f"positions must be one of {KINDS}, got {positions!r}")
        self.kind, self.width, self.max_len = positions, width, checks.positive_int(max_len, "max_len")
        self.embedding = nn.Embedding(checks.positive_int(vocab_size, "vocab_size"), width, padding_idx=0)
        with torch.no_grad():  # std D^(-1/2), so that sqrt(D) * E[ids] has unit scale, as the positions have
            nn.init.normal_(self.embedding.weight, std=checks.positive_int(width, "width") ** -0.5)
            self.embedding.weight[0] = 0.0
        self.learned = nn.Embedding(max_len, width) if positions == "learned" else None
        table = (sinusoidal_fn or sinusoidal_encoding)(max_len, width) if positions == "sinusoidal" else None
        self.register_buffer("table", table, persistent=False)

    def forward(self, ids, start: int = 0):
        """``(B, T)`` int64 ids ``-> (B, T, D)``; ``start`` is the position of the first column."""
        checks.token_batch(ids, "ids")
        if start + ids.shape[1] > self.max_len and self.kind in ("sinusoidal", "learned"):
            raise ValueError(f"a sequence of {start + ids.shape[1]} positions is longer than max_len = {self.max_len}")
        x = self.embedding(ids) * math.sqrt(self.width)
        if self.kind == "sinusoidal":
            x = x + self.table[start:start + ids.shape[1]].to(x.dtype)
        elif self.kind == "learned":
            x = x + self.learned(torch.arange(start, start + ids.shape[1]))
        return x


def rotary_for(positions: str, rope_fn=None):
    """The ``rotary`` argument of attention for a kind of positions: RoPE's rotation, or ``None``. Chapter 6."""
    return (rope_fn or rope) if positions == "rope" else None


def self_attention_mask(positions: str, num_heads: int, padding=None, causal: bool = False, steps: int = 1):
    """The self-attention mask of a ``(B, T)`` batch: padding, causality and, for ``alibi``, the distance penalties. Chapter 6.

    Returns:
        ``None``, or a bool or float mask broadcastable to ``(B, nh, T, T)``.
    """
    bias = alibi_bias(num_heads, steps)[None] if positions == "alibi" else None  # (1, nh, T, T)
    return attention_mask(padding, causal=causal, steps=steps, bias=bias)
