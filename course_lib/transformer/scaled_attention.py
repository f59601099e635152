"""Scaled dot-product attention with boolean or additive masks, and the causal mask. Chapter 6.

``Attention = softmax(Q K^T / sqrt(hs) + M) V`` (Vaswani et al., 2017): every
query scores every key, the scores are divided by ``sqrt(hs)`` so that their variance
does not grow with the head size, and the weights average the values. A mask either
says which keys a query may see (bool, True to attend) or is added to the scores
(float, e.g. ALiBi's distance penalties, ``-inf`` to forbid). See
:doc:`/chapters/ch06_transformer`. Tested against
``torch.nn.functional.scaled_dot_product_attention`` and autograd.
"""

from __future__ import annotations

import math

import torch


def causal_mask(steps: int, device=None) -> torch.Tensor:
    """The ``(T, T)`` bool mask that lets position ``i`` see positions ``j <= i`` only. Chapter 6.

    ``mask[i, j] = j <= i``: a lower-triangular matrix of True, so that a decoder
    cannot read the words it is asked to predict.

    Args:
        steps: ``T``.

    Returns:
        ``(T, T)`` bool tensor.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    return torch.ones(steps, steps, dtype=torch.bool, device=device).tril()


def check_attention_inputs(query, key, value, mask) -> None:
    """Raise unless ``query``, ``key``, ``value`` are ``(..., Tq, hs)``, ``(..., Tk, hs)``, ``(..., Tk, hs)``. Chapter 6.

    ``mask``, if given, must broadcast to ``(..., Tq, Tk)``; a bool mask must let every
    query see at least one key.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or not x.is_floating_point():
            raise ValueError(f"{name} must be a float tensor of shape (..., T, hs), "
                             f"got {getattr(x, 'shape', type(x).__name__)}")
    if query.shape[-1] != key.shape[-1] or key.shape[:-1] != value.shape[:-1] or key.shape[:-2] != query.shape[:-2]:
        raise ValueError(f"query (..., Tq, hs), key (..., Tk, hs) and value (..., Tk, hs) must agree, "
                         f"got {tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
    if mask is None:
        return
    scores_shape = (*query.shape[:-1], key.shape[-2])
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a tensor broadcastable to (..., Tq, Tk) = {scores_shape}, "
                        f"got {type(mask).__name__}")
    try:
        full = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        full = None
    if full != torch.Size(scores_shape):
        raise ValueError(f"mask must broadcast to (..., Tq, Tk) = {scores_shape}, got {tuple(mask.shape)}")
    if mask.dtype == torch.bool and not bool(mask.any(dim=-1).all()):
        raise ValueError("mask lets some query see no key at all: every row needs at least one True")


def scaled_dot_product_attention(query, key, value, mask=None):
    """Scaled dot-product attention: ``softmax(Q K^T / sqrt(hs) + M) V`` and the weights.

    ``S = Q K^T / sqrt(hs)``, ``hs`` the size of a query; a bool ``mask`` sets the scores
    where it is False to ``-inf`` (weight exactly 0), a float mask is added to the scores;
    ``A = softmax(S)`` over the keys and ``output = A V``. Any leading axes (batch,
    heads) are carried along. Written with torch operations so that autograd gives
    every gradient; the arguments are not modified. Chapter 6, exercise of ps06.

    Args:
        query: ``(..., Tq, hs)`` queries ``Q``.
        key: ``(..., Tk, hs)`` keys ``K``.
        value: ``(..., Tk, hs)`` values ``V``.
        mask: ``None``, or a tensor broadcastable to ``(..., Tq, Tk)``: bool (True where a
            query may attend to a key) or float (added to the scores).

    Returns:
        ``(output (..., Tq, hs), weights (..., Tq, Tk))``, two tensors of the dtype of ``query``.
    """
    check_attention_inputs(query, key, value, mask)
    ### BEGIN SOLUTION
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., Tq, Tk)
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights
    ### END SOLUTION
