"""Encoder and decoder blocks: attention and a feed-forward network, each with a residual and a LayerNorm. Chapter 6.

Post-LN, as in Vaswani et al. (2017): ``h = LN(x + SelfAttention(x))``, ``y = LN(h + FFN(h))``.
Pre-LN, as in GPT-2 and most models since (Xiong et al., 2020):
``h = x + SelfAttention(LN(x))``, ``y = h + FFN(LN(h))``, which keeps an untouched
path from the input to the output. ``FFN(x) = W_2 relu(W_1 x + b_1) + b_2`` acts on
each position alone. The decoder block adds cross-attention to the encoder's output
between the two. Parameters carry the names of ``torch.nn.TransformerEncoderLayer``
and ``TransformerDecoderLayer`` (``self_attn``, ``multihead_attn``, ``linear1``,
``linear2``, ``norm1`` to ``norm3``), so weights copy both ways. See
:doc:`/chapters/ch06_transformer`. Tested against those layers with ``norm_first``
both ways, ``batch_first=True`` and dropout off.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.transformer.layer_norm import LayerNorm
from course_lib.transformer.multi_head import MultiHeadAttention


def pre_ln_encoder_block(block, x, mask=None):
    """A pre-LN encoder block: ``h = x + SelfAttention(LN_1(x))``, ``y = h + FFN(LN_2(h))``.

    The block supplies the parts: ``block.norm1`` and ``block.norm2`` (``(..., D) -> (..., D)``),
    ``block.self_attention(x, mask)`` (``(B, T, D) -> (B, T, D)``, queries, keys and values
    all ``x``) and ``block.feed_forward(x)`` (``(B, T, D) -> (B, T, D)``). The input is
    not modified. Chapter 6, exercise of ps06.

    Args:
        block: an :class:`EncoderBlock`, or any object with those four parts.
        x: ``(B, T, D)`` the sequence.
        mask: ``None`` or a mask broadcastable to ``(B, nh, T, T)`` (see
            :func:`~course_lib.transformer.multi_head.attention_mask`).

    Returns:
        ``(B, T, D)`` tensor of the dtype of ``x``.
    """
    checks.sequence_batch(x, "x")
    ### BEGIN SOLUTION
    h = x + block.self_attention(block.norm1(x), mask)
    return h + block.feed_forward(block.norm2(h))
    ### END SOLUTION


def post_ln_encoder_block(block, x, mask=None):
    """A post-LN encoder block: ``h = LN_1(x + SelfAttention(x))``, ``y = LN_2(h + FFN(h))``. Chapter 6.

    Args:
        block: as in :func:`pre_ln_encoder_block`.
        x: ``(B, T, D)`` the sequence.
        mask: ``None`` or a mask broadcastable to ``(B, nh, T, T)``.

    Returns:
        ``(B, T, D)``.
    """
    checks.sequence_batch(x, "x")
    after_attention = block.norm1(x + block.self_attention(x, mask))
    return block.norm2(after_attention + block.feed_forward(after_attention))


class EncoderBlock(nn.Module):
    """A Transformer encoder block, pre-LN or post-LN. Chapter 6.

    Args:
        width: ``D``. num_heads: ``nh``. ff_size: ``F``, the feed-forward network's inner size.
        norm_first: pre-LN (True) or post-LN (False).
        block_fn: ``(block, x (B, T, D), mask) -> (B, T, D)``; default :func:`pre_ln_encoder_block`
            or :func:`post_ln_encoder_block`.
        attention_fn, multi_head_fn, rotary: passed to :class:`~course_lib.transformer.multi_head.MultiHeadAttention`.
        norm_fn: passed to :class:`~course_lib.transformer.layer_norm.LayerNorm`.

    After a forward pass, :attr:`attention_weights` holds the self-attention weights
    ``(B, nh, T, T)`` (detached), for figures.
    """

    def __init__(self, width: int, num_heads: int, ff_size: int, norm_first: bool = True,
                 block_fn: Callable | None = None, norm_fn: Callable | None = None, **attention):
        super().__init__()
        self.self_attn = MultiHeadAttention(width, num_heads, **attention)
        self.linear1 = nn.Linear(width, checks.positive_int(ff_size, "ff_size"))
        self.linear2 = nn.Linear(ff_size, width)
        self.norm1, self.norm2 = LayerNorm(width, norm_fn=norm_fn), LayerNorm(width, norm_fn=norm_fn)
        self.norm_first = bool(norm_first)
        self.block_fn = block_fn or (pre_ln_encoder_block if norm_first else post_ln_encoder_block)
        self.attention_weights = None

    def self_attention(self, x, mask=None):
        """``(B, T, D) -> (B, T, D)``: multi-head attention of ``x`` to itself."""
        output, weights = self.self_attn(x, x, x, mask)
        self.attention_weights = weights.detach()
        return output

    def feed_forward(self, x):
        """``FFN(x) = W_2 relu(W_1 x + b_1) + b_2``, ``(..., D) -> (..., D)`` through ``(..., F)``."""
        return self.linear2(torch.relu(self.linear1(x)))

    def forward(self, x, mask=None):
        """``(B, T, D) -> (B, T, D)``; ``mask`` broadcastable to ``(B, nh, T, T)``."""
        return self.block_fn(self, x, mask)


class DecoderBlock(nn.Module):
    """A Transformer decoder block: masked self-attention, cross-attention, feed-forward; pre- or post-LN. Chapter 6.

    Pre-LN: ``h = x + SelfAttention(LN_1(x))``, ``g = h + CrossAttention(LN_2(h), memory)``,
    ``y = g + FFN(LN_3(g))``; post-LN puts each LN after its residual sum instead.

    Args:
        width, num_heads, ff_size, norm_first, norm_fn, attention: as :class:`EncoderBlock`
            (``rotary`` applies to the self-attention only).

    After a forward pass, :attr:`attention_weights` ``(B, nh, T, T)`` and
    :attr:`cross_weights` ``(B, nh, T, Tk)`` hold the weights (detached).
    """

    def __init__(self, width: int, num_heads: int, ff_size: int, norm_first: bool = True,
                 norm_fn: Callable | None = None, **attention):
        super().__init__()
        self.self_attn = MultiHeadAttention(width, num_heads, **attention)
        attention.pop("rotary", None)
        self.multihead_attn = MultiHeadAttention(width, num_heads, **attention)
        self.linear1 = nn.Linear(width, checks.positive_int(ff_size, "ff_size"))
        self.linear2 = nn.Linear(ff_size, width)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(width, norm_fn=norm_fn) for _ in range(3))
        self.norm_first = bool(norm_first)
        self.attention_weights = self.cross_weights = None

    def feed_forward(self, x):
        """``FFN(x) = W_2 relu(W_1 x + b_1) + b_2``, ``(..., D) -> (..., D)``, as :meth:`EncoderBlock.feed_forward`."""
        return self.linear2(torch.relu(self.linear1(x)))

    def _self(self, x, mask):
        output, weights = self.self_attn(x, x, x, mask)
        self.attention_weights = weights.detach()
        return output

    def _cross(self, x, memory, memory_mask):
        output, weights = self.multihead_attn(x, memory, memory, memory_mask)
        self.cross_weights = weights.detach()
        return output

    def forward(self, x, memory, mask=None, memory_mask=None):
        """``(B, T, D)`` decoder inputs and ``(B, Tk, D)`` encoder outputs ``-> (B, T, D)``.

        Args:
            mask: for the self-attention, broadcastable to ``(B, nh, T, T)`` (causal, usually).
            memory_mask: for the cross-attention, broadcastable to ``(B, nh, T, Tk)`` (the source's padding).
        """
        if self.norm_first:
            x = x + self._self(self.norm1(x), mask)
            x = x + self._cross(self.norm2(x), memory, memory_mask)
            return x + self.feed_forward(self.norm3(x))
        x = self.norm1(x + self._self(x, mask))
        x = self.norm2(x + self._cross(x, memory, memory_mask))
        return self.norm3(x + self.feed_forward(x))


class Stack(nn.Module):
    """``L`` blocks one after the other, then a final LayerNorm, as ``torch.nn.TransformerEncoder`` / ``Decoder``. Chapter 6.

    Args:
        blocks: the ``L`` blocks (``layers``, as PyTorch names them).
        width: ``D``, for the final ``norm``; ``final_norm=False`` leaves it out.
    """

    def __init__(self, blocks, width: int, final_norm: bool = True, norm_fn: Callable | None = None):
        super().__init__()
        self.layers = nn.ModuleList(blocks)
        self.norm = LayerNorm(width, norm_fn=norm_fn) if final_norm else nn.Identity()

    def forward(self, x, *args, **kwargs):
        """Every block on ``x`` (``(B, T, D)``) in turn with the same extra arguments, then the final norm."""
        for block in self.layers:
            x = block(x, *args, **kwargs)
        return self.norm(x)
