"""Attention as a soft lookup: scores, masked softmax, a weighted sum of the source states. Chapter 5.

Each query ``q`` (a decoder state) scores every key ``k_i`` (an encoder state),
the masked softmax turns the scores into weights ``a_i``, and the context is
``c = sum_i a_i k_i``: the keys are also the values. Three scores:

- additive (Bahdanau et al., 2015): ``e_i = v^T tanh(W_q q + W_k k_i)``;
- general (Luong et al., 2015): ``e_i = q^T W k_i``;
- dot (Luong et al., 2015): ``e_i = q^T k_i``.

See :doc:`/chapters/ch05_attention`. The dot score is tested against
``torch.nn.functional.scaled_dot_product_attention`` with scale 1, all three
against autograd in float64 and finite differences.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.attention.masking import masked_softmax

KINDS = ("additive", "general", "dot")
"""The attention scores of :class:`Attention`."""


def check_attention_args(query, keys, mask) -> tuple[int, int, int]:
    """Raise unless ``query`` is ``(B, Tq, H)``, ``keys`` ``(B, Tk, H)`` and ``mask`` ``(B, Tk)``. Chapter 5.

    Returns:
        the sizes ``(B, Tk, H)``.
    """
    if not isinstance(query, torch.Tensor) or query.dim() != 3:
        raise ValueError(f"query must be a (B, Tq, H) tensor, got {getattr(query, 'shape', type(query).__name__)}")
    batch, _, hidden = query.shape
    checks.expect_tensor(keys, "keys", (batch, None, hidden), "(B, Tk, H)")
    checks.expect_tensor(mask, "mask", (batch, keys.shape[1]), "(B, Tk)")
    return batch, keys.shape[1], hidden


def dot_attention(query, keys, mask):
    """Dot-product attention: context and weights with scores ``e_i = q^T k_i``. Chapter 5.

    ``a = masked_softmax(q K^T)``, ``c = a K``: the scaled dot-product attention of
    chapter 6 with scale 1, the keys serving as values.

    Args:
        query: ``(B, Tq, H)`` queries ``q``.
        keys: ``(B, Tk, H)`` keys ``k_i``, also the values.
        mask: ``(B, Tk)`` bool, True on real tokens.

    Returns:
        ``(context (B, Tq, H), weights (B, Tq, Tk))``.
    """
    check_attention_args(query, keys, mask)
    weights = masked_softmax(query @ keys.transpose(1, 2), mask)  # (B, Tq, Tk)
    return weights @ keys, weights


def general_attention(query, keys, mask, weight):
    """Luong's general attention: context and weights with scores ``e_i = q^T W k_i``.

    ``E = q (K W^T)^T``, i.e. ``e_{b,q,i} = sum_{h,h'} q_{b,q,h} W_{h,h'} k_{b,i,h'}``;
    ``a = masked_softmax(E, mask)`` and ``c = a K``. Written with torch operations,
    so that autograd gives every gradient; the arguments are not modified.
    Chapter 5, exercise of ps05.

    Args:
        query: ``(B, Tq, H)`` queries (decoder states).
        keys: ``(B, Tk, H)`` keys (encoder states), also the values.
        mask: ``(B, Tk)`` bool, True on real source tokens.
        weight: ``(H, H)`` the matrix ``W``.

    Returns:
        ``(context (B, Tq, H), weights (B, Tq, Tk))``, two tensors of the dtype of ``query``.
    """
    _, _, hidden = check_attention_args(query, keys, mask)
    checks.expect_tensor(weight, "weight", (hidden, hidden), "(H, H)")
    ### BEGIN SOLUTION
    scores = query @ (keys @ weight.T).transpose(1, 2)  # (B, Tq, Tk)
    weights = masked_softmax(scores, mask)
    context = weights @ keys  # (B, Tq, H)
    return context, weights
    ### END SOLUTION


def additive_attention(query, keys, mask, weight_query, weight_key, v):
    """Bahdanau's additive attention: context and weights with scores ``e_i = v^T tanh(W_q q + W_k k_i)``.

    For every query and key, ``e_{b,q,i} = sum_a v_a tanh((W_q q_{b,q})_a + (W_k k_{b,i})_a)``;
    ``a = masked_softmax(E, mask)`` and ``c = a K``. Broadcasting ``(B, Tq, 1, A)`` against
    ``(B, 1, Tk, A)`` computes all ``Tq * Tk`` sums at once. Written with torch
    operations; the arguments are not modified. Chapter 5, exercise of ps05.

    Args:
        query: ``(B, Tq, H)`` queries (decoder states).
        keys: ``(B, Tk, H)`` keys (encoder states), also the values.
        mask: ``(B, Tk)`` bool, True on real source tokens.
        weight_query: ``(A, H)`` the matrix ``W_q``.
        weight_key: ``(A, H)`` the matrix ``W_k``.
        v: ``(A,)`` the vector ``v``.

    Returns:
        ``(context (B, Tq, H), weights (B, Tq, Tk))``, two tensors of the dtype of ``query``.
    """
    _, _, hidden = check_attention_args(query, keys, mask)
    checks.expect_tensor(weight_query, "weight_query", (None, hidden), "(A, H)")
    size = weight_query.shape[0]
    checks.expect_tensor(weight_key, "weight_key", (size, hidden), "(A, H)")
    checks.expect_tensor(v, "v", (size,), "(A,)")
    ### BEGIN SOLUTION
    projected_query = (query @ weight_query.T)[:, :, None, :]  # (B, Tq, 1, A)
    projected_keys = (keys @ weight_key.T)[:, None, :, :]  # (B, 1, Tk, A)
    scores = torch.tanh(projected_query + projected_keys) @ v  # (B, Tq, Tk)
    weights = masked_softmax(scores, mask)
    context = weights @ keys  # (B, Tq, H)
    return context, weights
    ### END SOLUTION


class Attention(nn.Module):
    """An attention score with its parameters: ``forward(query, keys, mask) -> (context, weights)``. Chapter 5.

    Args:
        kind: ``"additive"`` (parameters ``weight_query`` and ``weight_key`` ``(A, H)``, ``v`` ``(A,)``),
            ``"general"`` (``weight`` ``(H, H)``) or ``"dot"`` (none).
        hidden_size: ``H``, the size of queries and keys.
        attention_size: ``A``, the inner size of the additive score (default ``H``).
        attention_fn: the function that computes it (default: :func:`additive_attention`,
            :func:`general_attention` or :func:`dot_attention`), called with the tensors
            and then the parameters in the order above.
    """

    def __init__(self, kind: str, hidden_size: int, attention_size: int | None = None,
                 attention_fn: Callable | None = None):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        hidden = checks.positive_int(hidden_size, "hidden_size")
        size = checks.positive_int(attention_size or hidden, "attention_size")
        self.kind = kind
        scale = hidden ** -0.5
        if kind == "additive":
            self.weight_query = nn.Parameter(torch.randn(size, hidden) * scale)
            self.weight_key = nn.Parameter(torch.randn(size, hidden) * scale)
            self.v = nn.Parameter(torch.randn(size) * size ** -0.5)
        elif kind == "general":
            self.weight = nn.Parameter(torch.randn(hidden, hidden) * scale)
        defaults = {"additive": additive_attention, "general": general_attention, "dot": dot_attention}
        self.attention_fn = attention_fn or defaults[kind]

    def parameters_in_order(self) -> list:
        """The parameter tensors, in the order :attr:`attention_fn` takes them: ``(A, H)``, ``(A, H)``, ``(A,)`` (additive), ``(H, H)`` (general) or none."""
        return {"additive": lambda: [self.weight_query, self.weight_key, self.v],
                "general": lambda: [self.weight], "dot": list}[self.kind]()

    def forward(self, query, keys, mask):
        """``(B, Tq, H)`` queries, ``(B, Tk, H)`` keys and a ``(B, Tk)`` mask give ``(context (B, Tq, H), weights (B, Tq, Tk))``."""
        return self.attention_fn(query, keys, mask, *self.parameters_in_order())
