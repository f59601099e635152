"""BERT's self-attention: separate query, key and value projections and a padding mask over the keys. Chapter 8.

``Q = X W_Q^T + b_Q``, ``K = X W_K^T + b_K``, ``V = X W_V^T + b_V``, each split into
``nh`` heads of size ``hs``; in every head ``A = softmax(Q K^T / sqrt(hs) + M)`` with
``M[b, j] = -inf`` where key ``j`` of sequence ``b`` is padding and 0 elsewhere, and
the head's output ``A V``. The heads are merged side by side and the block's output
projection follows (Vaswani et al., 2017; Devlin et al., 2019). Unlike GPT, nothing is
causal: every token sees the tokens on both sides. Unlike chapter 6's
:class:`~course_lib.transformer.multi_head.MultiHeadAttention`, whose three projections are one
``(3D, D)`` matrix, BERT stores them as three ``(D, D)`` layers, and its mask is a
padding mask ``(B, T)``. See :doc:`/chapters/ch08_bert`. Tested against
``transformers.BertModel``'s eager attention (outputs and attention probabilities).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.transformer.multi_head import merge_heads, split_heads


def check_self_attention_args(x, padding, w_q, b_q, w_k, b_k, w_v, b_v, num_heads) -> int:
    """Raise unless ``x`` is ``(B, T, D)``, ``padding`` ``(B, T)`` bool or ``None`` and the weights fit; return ``D``. Chapter 8."""
    checks.sequence_batch(x, "x")
    batch, steps, width = x.shape
    if padding is not None:
        checks.expect_tensor(padding, "padding", (batch, steps), "(B, T)")
        if padding.dtype != torch.bool:
            raise ValueError(f"padding must be a bool tensor (True on real tokens), got {padding.dtype}")
    num_heads = checks.positive_int(num_heads, "num_heads")
    if width % num_heads:
        raise ValueError(f"the width D = {width} must be a multiple of num_heads = {num_heads}")
    for name, weight, bias in (("w_q", w_q, b_q), ("w_k", w_k, b_k), ("w_v", w_v, b_v)):
        checks.expect_tensor(weight, name, (width, width), "(D, D)")
        checks.expect_tensor(bias, "b_" + name[2:], (width,), "(D,)")
    return width


def bert_self_attention(x, padding, w_q, b_q, w_k, b_k, w_v, b_v, num_heads: int, dropout: Callable | None = None):
    """Bidirectional multi-head self-attention that never attends to padding: the heads' outputs and weights.

    ``Q = x w_q^T + b_q`` (and so for ``K`` and ``V``), split into ``nh`` heads of size
    ``hs = D / nh`` with chapter 6's :func:`~course_lib.transformer.multi_head.split_heads`;
    the scores ``Q K^T / sqrt(hs)`` get ``-inf`` at every key ``j`` where
    ``padding[b, j]`` is False, so its weight is exactly 0; the weights are the softmax
    over keys; ``dropout`` (if given) acts on the weights before they average ``V``; the
    heads are merged back with :func:`~course_lib.transformer.multi_head.merge_heads`.
    The output projection is not part of this function. Written with torch operations;
    the arguments are not modified. Chapter 8, exercise of ps08.

    Args:
        x: ``(B, T, D)`` the sequence.
        padding: ``(B, T)`` bool, True on real tokens, or ``None`` (no padding).
        w_q, w_k, w_v: ``(D, D)``; b_q, b_k, b_v: ``(D,)``.
        num_heads: ``nh``, dividing ``D``.
        dropout: ``None`` or a function ``(B, nh, T, T) -> (B, nh, T, T)`` applied to the weights.

    Returns:
        ``(output (B, T, D), weights (B, nh, T, T))``, tensors of the dtype of ``x``; the weights
        returned are those before dropout.
    """
    check_self_attention_args(x, padding, w_q, b_q, w_k, b_k, w_v, b_v, num_heads)
    ### BEGIN SOLUTION
    q = split_heads(F.linear(x, w_q, b_q), num_heads)  # (B, nh, T, hs); F.linear(x, w, b) = x w^T + b
    k = split_heads(F.linear(x, w_k, b_k), num_heads)
    v = split_heads(F.linear(x, w_v, b_v), num_heads)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (B, nh, T, T); scaling q is cheaper
    if padding is not None and not padding.all():  # -inf on padded keys: their weights are exactly 0
        scores = scores.masked_fill(~padding[:, None, None, :], float("-inf"))
    weights = scores.softmax(dim=-1)
    used = weights if dropout is None else dropout(weights)
    return merge_heads(used @ v), weights
    ### END SOLUTION


class BertSelfAttention(nn.Module):
    """Self-attention with BERT's layers ``query``, ``key``, ``value`` and ``out_proj``. Chapter 8.

    Called as chapter 6's attention layers, ``(query, key, value, mask)``, so that
    :class:`~course_lib.transformer.blocks.EncoderBlock` can use it; it is
    self-attention only (``key`` and ``value`` must be ``query``), and ``mask`` is the
    ``(B, T)`` padding mask. Dropout acts on the attention weights and on the output.

    Args:
        width: ``D``. num_heads: ``nh``.
        dropout: on the output (BERT's ``hidden_dropout_prob``).
        attention_dropout: on the weights (``attention_probs_dropout_prob``).
        attention_fn: the function that attends (default :func:`bert_self_attention`).
    """

    def __init__(self, width: int, num_heads: int, dropout: float = 0.1, attention_dropout: float = 0.1,
                 attention_fn: Callable | None = None):
        super().__init__()
        self.num_heads = checks.positive_int(num_heads, "num_heads")
        self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))
        self.out_proj = nn.Linear(width, width)
        self.attention_dropout = nn.Dropout(attention_dropout)
        self.dropout = nn.Dropout(dropout)
        self.attention_fn = attention_fn or bert_self_attention

    def forward(self, query, key=None, value=None, mask=None):
        """``(B, T, D)`` and the ``(B, T)`` padding mask ``-> (output (B, T, D), weights (B, nh, T, T))``."""
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("BERT's attention is self-attention: key and value must be the query itself")
        drop = self.attention_dropout if self.training and self.attention_dropout.p > 0 else None
        output, weights = self.attention_fn(query, mask, self.query.weight, self.query.bias, self.key.weight,
                                            self.key.bias, self.value.weight, self.value.bias, self.num_heads, drop)
        return self.dropout(self.out_proj(output)), weights
