"""Multi-head attention: project, split into heads, attend, merge, project. Chapter 6.

``MultiHead = Concat(head_1, ..., head_nh) W_O^T + b_O`` with
``head_h = Attention(Q W_Q,h^T, K W_K,h^T, V W_V,h^T)`` (Vaswani et al., 2017). The
``nh`` heads of size ``hs = D / nh`` are slices of three ``(D, D)`` projections,
stacked as one ``(3D, D)`` matrix in the order queries, keys, values exactly as
``torch.nn.MultiheadAttention`` stores them, so weights copy both ways. See
:doc:`/chapters/ch06_transformer`. Tested against ``torch.nn.MultiheadAttention``:
outputs, averaged and per-head weights, and the gradients of the inputs and of
every weight, with padding and causal masks.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.transformer.scaled_attention import causal_mask, scaled_dot_product_attention


def split_heads(x, num_heads: int):
    """``(B, T, D) -> (B, nh, T, hs)``: the ``nh`` slices of width ``hs = D / nh``, one per head. Chapter 6."""
    batch, steps, width = x.shape
    return x.reshape(batch, steps, num_heads, width // num_heads).transpose(1, 2)


def merge_heads(x):
    """``(B, nh, T, hs) -> (B, T, D)``: the heads' outputs side by side, ``D = nh * hs``. Chapter 6."""
    batch, heads, steps, size = x.shape
    return x.transpose(1, 2).reshape(batch, steps, heads * size)


def check_multi_head_args(query, key, value, in_weight, in_bias, out_weight, out_bias, num_heads) -> int:
    """Raise unless the inputs are ``(B, Tq, D)``, ``(B, Tk, D)`` twice and the weights fit ``D``; return ``D``. Chapter 6."""
    checks.sequence_batch(query, "query")
    batch, _, width = query.shape
    checks.expect_tensor(key, "key", (batch, None, width), "(B, Tk, D)")
    checks.expect_tensor(value, "value", (batch, key.shape[1], width), "(B, Tk, D)")
    num_heads = checks.positive_int(num_heads, "num_heads")
    if width % num_heads:
        raise ValueError(f"the width D = {width} must be a multiple of num_heads = {num_heads}")
    checks.expect_tensor(in_weight, "in_weight", (3 * width, width), "(3D, D)")
    checks.expect_tensor(in_bias, "in_bias", (3 * width,), "(3D,)")
    checks.expect_tensor(out_weight, "out_weight", (width, width), "(D, D)")
    checks.expect_tensor(out_bias, "out_bias", (width,), "(D,)")
    return width


def multi_head_attention(query, key, value, in_weight, in_bias, out_weight, out_bias, num_heads, mask=None,
                         attention_fn: Callable = scaled_dot_product_attention):
    """Multi-head attention: the output ``Concat(head_1..head_nh) W_O^T + b_O`` and every head's weights.

    ``[W_Q; W_K; W_V] = in_weight`` and ``[b_Q; b_K; b_V] = in_bias`` (three ``(D, D)``
    and ``(D,)`` blocks, in that order); ``Q = query W_Q^T + b_Q``, and so on. Each of
    ``Q, K, V`` is split into ``nh`` heads of size ``hs = D / nh`` (head ``h`` takes
    columns ``h*hs`` to ``(h+1)*hs``), ``attention_fn`` attends in every head at once,
    the heads' outputs are merged back side by side, and ``out_weight``, ``out_bias``
    project the result. Written with torch operations; the arguments are not
    modified. Chapter 6, exercise of ps06.

    Args:
        query: ``(B, Tq, D)`` the sequence that asks.
        key: ``(B, Tk, D)`` the sequence that is looked up (``query`` itself in self-attention).
        value: ``(B, Tk, D)`` what is averaged (usually ``key``).
        in_weight: ``(3D, D)``; in_bias: ``(3D,)``; out_weight: ``(D, D)``; out_bias: ``(D,)``.
        num_heads: ``nh``, dividing ``D``.
        mask: ``None`` or a bool or float tensor broadcastable to ``(B, nh, Tq, Tk)``
            (see :func:`~course_lib.transformer.scaled_attention.scaled_dot_product_attention`).
        attention_fn: ``(q (B, nh, Tq, hs), k (B, nh, Tk, hs), v (B, nh, Tk, hs), mask) ->
            (output (B, nh, Tq, hs), weights (B, nh, Tq, Tk))``.

    Returns:
        ``(output (B, Tq, D), weights (B, nh, Tq, Tk))``, two tensors of the dtype of ``query``.
    """
    width = check_multi_head_args(query, key, value, in_weight, in_bias, out_weight, out_bias, num_heads)
    ### BEGIN SOLUTION
    w_q, w_k, w_v = in_weight.split(width)
    b_q, b_k, b_v = in_bias.split(width)
    q = split_heads(query @ w_q.T + b_q, num_heads)  # (B, nh, Tq, hs)
    k = split_heads(key @ w_k.T + b_k, num_heads)  # (B, nh, Tk, hs)
    v = split_heads(value @ w_v.T + b_v, num_heads)
    heads, weights = attention_fn(q, k, v, mask)  # (B, nh, Tq, hs), (B, nh, Tq, Tk)
    return merge_heads(heads) @ out_weight.T + out_bias, weights
    ### END SOLUTION


def attention_mask(padding=None, causal: bool = False, steps: int | None = None, bias=None):
    """One mask for :func:`multi_head_attention` from a padding mask, causality and a score bias. Chapter 6.

    Args:
        padding: ``None`` or ``(B, Tk)`` bool, True on real keys.
        causal: forbid query ``i`` to see keys ``j > i`` (``Tq = Tk = steps``).
        steps: ``Tq``, needed when ``causal``.
        bias: ``None`` or a float tensor broadcastable to ``(B, nh, Tq, Tk)`` added to the
            scores (ALiBi).

    Returns:
        ``None``, a bool tensor ``(B or 1, 1, Tq or 1, Tk)`` (True to attend), or, with ``bias``,
        a float tensor: ``bias`` where attending is allowed and ``-inf`` elsewhere.
    """
    if causal and not isinstance(steps, int):
        raise ValueError("a causal mask needs steps, the number of positions")
    allowed = None
    if padding is not None:
        allowed = padding[:, None, None, :]  # (B, 1, 1, Tk)
    if causal:
        future = causal_mask(steps)[None, None]  # (1, 1, T, T)
        allowed = future if allowed is None else allowed & future
    if bias is None:
        return allowed
    return bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))


class MultiHeadAttention(nn.Module):
    """Multi-head attention with its projections, laid out like ``torch.nn.MultiheadAttention``. Chapter 6.

    Parameters ``in_proj_weight`` ``(3D, D)``, ``in_proj_bias`` ``(3D,)`` and
    ``out_proj`` (an ``nn.Linear(D, D)``) carry PyTorch's names, so
    ``load_state_dict`` copies weights between the two. ``rotary`` rotates queries
    and keys after the projection (RoPE, applied per head).

    Args:
        width: ``D``. num_heads: ``nh``.
        attention_fn: passed on to :attr:`multi_head_fn`.
        multi_head_fn: the function that computes the attention (default: :func:`multi_head_attention`).
        rotary: ``None`` or a function ``(x (B, nh, T, hs)) -> (B, nh, T, hs)`` applied to queries and keys.
    """

    def __init__(self, width: int, num_heads: int, attention_fn: Callable = scaled_dot_product_attention,
                 multi_head_fn: Callable | None = None, rotary: Callable | None = None):
        super().__init__()
        self.width, self.num_heads = checks.positive_int(width, "width"), checks.positive_int(num_heads, "num_heads")
        if width % num_heads:
            raise ValueError(f"width = {width} must be a multiple of num_heads = {num_heads}")
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)
        self.attention_fn = attention_fn
        self.multi_head_fn = multi_head_fn or multi_head_attention
        self.rotary = rotary

    def _rotating(self, q, k, v, mask):
        return self.attention_fn(self.rotary(q), self.rotary(k), v, mask)

    def forward(self, query, key, value, mask=None):
        """``(output (B, Tq, D), weights (B, nh, Tq, Tk))``; ``mask`` as in :func:`multi_head_attention`."""
        attend = self.attention_fn if self.rotary is None else self._rotating
        return self.multi_head_fn(query, key, value, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight,
                                  self.out_proj.bias, self.num_heads, mask, attention_fn=attend)



def parameter_count(width: int, num_heads: int) -> int:
    """The parameters of one multi-head attention layer: ``4 D^2 + 4 D``, whatever ``nh``. Chapter 6."""
    del num_heads  # the heads share out the same D columns
    return 4 * width * width + 4 * width
