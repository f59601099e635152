"""BERT's input embedding: a token, a segment and a position vector added, then a LayerNorm. Chapter 8.

``h_0[b, t] = LN(E_tok[ids[b, t]] + E_seg[segments[b, t]] + E_pos[t])`` (Devlin et al.,
2019). The three tables are learned; positions are absolute, so a BERT reads at most as
many tokens as ``E_pos`` has rows (512 for the pretrained models). See
:doc:`/chapters/ch08_bert`. Tested against ``transformers.BertModel``'s embeddings with
the same weights.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.transformer.layer_norm import LayerNorm, layer_norm


def check_embedding_args(ids, segments, token_weight, segment_weight, position_weight):
    """Raise unless ids and segments are ``(B, T)`` int64 within their tables and ``T`` fits the positions. Chapter 8."""
    checks.token_batch(ids, "ids")
    checks.expect_tensor(segments, "segments", tuple(ids.shape), "(B, T)")
    if segments.dtype != torch.int64:
        raise ValueError(f"segments must be int64 like ids, got {segments.dtype}")
    width = checks.expect_tensor(token_weight, "token_weight", (None, None), "(V, D)").shape[1]
    checks.expect_tensor(segment_weight, "segment_weight", (None, width), "(2, D)")
    checks.expect_tensor(position_weight, "position_weight", (None, width), "(T, D)")
    for name, values, table in (("ids", ids, token_weight), ("segments", segments, segment_weight)):
        if values.numel() and (values.min() < 0 or values.max() >= table.shape[0]):
            raise ValueError(f"{name} must lie in [0, {table.shape[0]}), got {values.min().item()}..{values.max().item()}")
    if ids.shape[1] > position_weight.shape[0]:
        raise ValueError(f"{ids.shape[1]} tokens exceed the {position_weight.shape[0]} positions the model has; "
                         f"truncate the input (max_length)")


def bert_embeddings(ids, segments, token_weight, segment_weight, position_weight, norm_weight, norm_bias,
                    eps: float = 1e-12):
    """BERT's input vectors: ``LN(E_tok[ids] + E_seg[segments] + E_pos[t])`` for every position ``t``.

    Position ``t`` of every sequence in the batch gets row ``t`` of ``position_weight``
    (``t = 0`` is the ``[CLS]`` token). The sum is normalised with chapter 6's
    :func:`~course_lib.transformer.layer_norm.layer_norm` and ``eps``. Written with
    torch operations; the arguments are not modified. Chapter 8, exercise of ps08.

    Args:
        ids: ``(B, T)`` int64 token ids.
        segments: ``(B, T)`` int64 segment ids, 0 or 1.
        token_weight: ``(V, D)``; segment_weight: ``(2, D)``; position_weight: ``(T, D)`` or more rows.
        norm_weight, norm_bias: ``(D,)`` the LayerNorm's ``gamma`` and ``beta``.
        eps: the LayerNorm's epsilon (BERT uses ``1e-12``).

    Returns:
        ``(B, T, D)`` tensor of the dtype of ``token_weight``.
    """
    check_embedding_args(ids, segments, token_weight, segment_weight, position_weight)
    ### BEGIN SOLUTION
    positions = torch.arange(ids.shape[1])
    summed = token_weight[ids] + segment_weight[segments] + position_weight[positions]  # (B, T, D)
    return layer_norm(summed, norm_weight, norm_bias, eps)
    ### END SOLUTION


class BertEmbeddings(nn.Module):
    """The embedding layer: three tables, a LayerNorm and dropout. Chapter 8.

    Args:
        vocab_size: ``V``. width: ``D``. context: the number of positions. segments: 2 for BERT.
        dropout: on the normalised sum. eps: the LayerNorm's epsilon.
        embed_fn: the function that embeds (default :func:`bert_embeddings`).
    """

    def __init__(self, vocab_size: int, width: int, context: int, segments: int = 2, dropout: float = 0.1,
                 eps: float = 1e-12, embed_fn: Callable | None = None):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.segment_embedding = nn.Embedding(segments, width)
        self.position_embedding = nn.Embedding(context, width)
        self.norm = LayerNorm(width, eps)
        self.dropout = nn.Dropout(dropout)
        self.embed_fn = embed_fn or bert_embeddings

    def forward(self, ids, segments=None):
        """``(B, T)`` ids and segment ids (``None``: all 0) ``-> (B, T, D)``."""
        if segments is None:
            segments = torch.zeros_like(ids)
        return self.dropout(self.embed_fn(ids, segments, self.token_embedding.weight, self.segment_embedding.weight,
                                          self.position_embedding.weight, self.norm.weight, self.norm.bias,
                                          self.norm.eps))
