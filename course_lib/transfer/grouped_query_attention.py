"""Grouped-query attention: ``nh`` query heads sharing ``n_kv`` key-value heads; the size of a KV cache. Chapter 9.

When a decoder generates, every layer keeps the keys and values of every position seen
(chapter 7's KV cache): ``2 L B P nh hs`` numbers, which for long texts and large batches
can outgrow the weights themselves, and reading them all at every step bounds the speed
of generation. *Multi-query attention* (Shazeer, 2019) keeps one key-value head
shared by all query heads; *grouped-query attention* (Ainslie et al., 2023) keeps
``n_kv`` of them, each shared by a group of ``g = nh / n_kv`` consecutive query heads:
query head ``h`` reads key-value head ``h // g``. The cache shrinks by ``nh / n_kv``;
``n_kv = nh`` is chapter 7's multi-head attention, ``n_kv = 1`` multi-query attention.
Llama 2 70B, Mistral and most open models since use it. See
:doc:`/chapters/ch09_after_bert`. Tested: ``n_kv = nh`` equals chapter 7's
:func:`~course_lib.gpt.causal_attention.causal_self_attention`; any ``n_kv`` equals
``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``, the keys and
values repeated per group (``transformers``' ``repeat_kv``) and ``transformers``' Llama
attention; with a cache, a prompt then one position at a time equals the full pass.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.gpt.causal_attention import causal_mask_after, check_cache
from course_lib.transformer.multi_head import merge_heads, split_heads
from course_lib.transformer.scaled_attention import scaled_dot_product_attention


def check_grouped_query_args(x, in_weight, in_bias, out_weight, out_bias, num_heads, num_kv_heads, cache) -> int:
    """Raise unless the arguments of :func:`grouped_query_attention` fit together; return ``P``. Chapter 9.

    ``x`` ``(B, T, D)``; ``nh`` divides ``D`` and ``n_kv`` divides ``nh``; ``in_weight``
    ``(D + 2 n_kv hs, D)``, ``in_bias`` ``(D + 2 n_kv hs,)``, ``out_weight`` ``(D, D)``,
    ``out_bias`` ``(D,)``; ``cache`` ``None`` or a pair of ``(B, n_kv, P, hs)`` tensors.
    """
    checks.sequence_batch(x, "x")
    batch, _, width = x.shape
    num_heads = checks.positive_int(num_heads, "num_heads")
    num_kv_heads = checks.positive_int(num_kv_heads, "num_kv_heads")
    if width % num_heads:
        raise ValueError(f"the width D = {width} must be a multiple of num_heads = {num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads = {num_heads} must be a multiple of num_kv_heads = {num_kv_heads}: "
                         f"each key-value head serves a group of the same number of query heads")
    size = width // num_heads
    rows = width + 2 * num_kv_heads * size
    checks.expect_tensor(in_weight, "in_weight", (rows, width), "(D + 2 n_kv hs, D)")
    checks.expect_tensor(in_bias, "in_bias", (rows,), "(D + 2 n_kv hs,)")
    checks.expect_tensor(out_weight, "out_weight", (width, width), "(D, D)")
    checks.expect_tensor(out_bias, "out_bias", (width,), "(D,)")
    return check_cache(cache, batch, num_kv_heads, size, heads="n_kv")


def grouped_query_attention(x, in_weight, in_bias, out_weight, out_bias, num_heads, num_kv_heads, cache=None,
                            attention_fn: Callable = scaled_dot_product_attention):
    """Causal self-attention of ``T`` new positions with ``nh`` query heads and ``n_kv`` key-value heads. Chapter 9.

    ``[W_Q; W_K; W_V] = in_weight`` with ``W_Q`` ``(D, D)`` and ``W_K``, ``W_V`` ``(n_kv hs, D)``,
    ``hs = D / nh`` (and ``in_bias`` likewise): ``Q = x W_Q^T + b_Q`` split into ``nh`` heads,
    ``K_new = x W_K^T + b_K`` and ``V_new = x W_V^T + b_V`` into ``n_kv`` heads; the cached keys
    and values come first, ``K = [K_cache; K_new]``, ``V = [V_cache; V_new]``. Query head ``h``
    attends with key-value head ``h // g``, ``g = nh / n_kv``:
    ``head_h = softmax(Q_h K_{h//g}^T / sqrt(hs) + M) V_{h//g}``, with the causal mask ``M`` of
    :func:`~course_lib.gpt.causal_attention.causal_mask_after` (new position ``i`` sees keys
    ``j <= P + i``); ``output = Concat(heads) W_O^T + b_O``. The keys and values are never
    copied per group: the ``g`` query heads of a group are stacked as ``g T`` queries of their
    key-value head. With ``num_kv_heads = num_heads`` this is chapter 7's
    :func:`~course_lib.gpt.causal_attention.causal_self_attention`. The arguments, the cache
    included, are not modified.

    Args:
        x: ``(B, T, D)`` the new positions.
        in_weight: ``(D + 2 n_kv hs, D)``; in_bias: ``(D + 2 n_kv hs,)``; out_weight: ``(D, D)``;
            out_bias: ``(D,)``.
        num_heads: ``nh``, dividing ``D``. num_kv_heads: ``n_kv``, dividing ``nh``.
        cache: ``None`` or ``(keys, values)``, each ``(B, n_kv, P, hs)``: the earlier positions.
        attention_fn: chapter 6's ``(q, k, v, mask) -> (output, weights)``, called with ``n_kv``
            heads, each with the ``g T`` queries of its group (``g = nh / n_kv``), and the causal
            mask repeated ``g`` times along the queries.

    Returns:
        ``(output (B, T, D), (keys, values))``, the new cache: each ``(B, n_kv, P + T, hs)``.
    """
    past = check_grouped_query_args(x, in_weight, in_bias, out_weight, out_bias, num_heads, num_kv_heads, cache)
    batch, steps, width = x.shape
    size, group = width // num_heads, num_heads // num_kv_heads
    q, k, v = (x @ in_weight.T + in_bias).split([width, num_kv_heads * size, num_kv_heads * size], dim=-1)
    q = split_heads(q, num_heads)  # (B, nh, T, hs)
    k, v = split_heads(k, num_kv_heads), split_heads(v, num_kv_heads)  # (B, n_kv, T, hs)
    if past:  # the cached positions come first
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, n_kv, P + T, hs)
    # Query heads h = j*g .. j*g + g - 1 share key-value head j: stack them as g*T queries of head j.
    q = q.reshape(batch, num_kv_heads, group * steps, size)  # (B, n_kv, g*T, hs)
    mask = causal_mask_after(past, steps).repeat(group, 1)  # (g*T, P + T)
    heads, _ = attention_fn(q, k, v, mask)  # (B, n_kv, g*T, hs)
    heads = heads.reshape(batch, num_heads, steps, size)  # (B, nh, T, hs)
    output = merge_heads(heads) @ out_weight.T + out_bias  # (B, T, D)
    return output, (k, v)


def kv_cache_bytes(layers: int, n_kv: int, head_size: int, positions: int, batch: int = 1,
                   bytes_per_number: int = 2) -> int:
    """The bytes a KV cache holds: ``2 L B P n_kv hs`` numbers of ``bytes_per_number`` bytes. Chapter 9.

    Every layer keeps a key and a value of ``hs`` numbers per key-value head, position and
    sequence. For Llama 2 70B (80 layers, 8 key-value heads of 128, 16-bit numbers), 4096
    positions of one sequence take ``2 * 80 * 1 * 4096 * 8 * 128 * 2`` bytes = 1.34 GB; with 64
    key-value heads, as many as its query heads, it would take eight times more. Takes and
    returns numbers, no array.

    Args:
        layers: ``L``. n_kv: key-value heads per layer. head_size: ``hs``.
        positions: ``P``. batch: ``B``. bytes_per_number: 4 for float32, 2 for float16 and bfloat16.

    Returns:
        an int.
    """
    sizes = dict(layers=layers, n_kv=n_kv, head_size=head_size, bytes_per_number=bytes_per_number)
    layers, n_kv, head_size, bytes_per_number = (checks.positive_int(v, k) for k, v in sizes.items())
    positions, batch = checks.nonnegative_int(positions, "positions"), checks.nonnegative_int(batch, "batch")
    return 2 * layers * batch * positions * n_kv * head_size * bytes_per_number


class GroupedQueryAttention(nn.Module):
    """Grouped-query causal self-attention with a KV cache, as a module. Chapter 9.

    ``in_proj_weight`` ``(D + 2 n_kv hs, D)`` (queries, keys, values), ``in_proj_bias`` and
    ``out_proj`` (``nn.Linear(D, D)``), as chapter 7's
    :class:`~course_lib.gpt.causal_attention.CausalSelfAttention`, which it equals for
    ``num_kv_heads = num_heads``. Weights start as GPT-2's, normal with standard deviation 0.02.

    Args:
        width: ``D``. num_heads: ``nh``, dividing ``D``. num_kv_heads: ``n_kv``, dividing ``nh``.
        attention_fn: passed on to :func:`grouped_query_attention`.
    """

    def __init__(self, width: int, num_heads: int, num_kv_heads: int,
                 attention_fn: Callable = scaled_dot_product_attention):
        super().__init__()
        self.width, self.num_heads = checks.positive_int(width, "width"), checks.positive_int(num_heads, "num_heads")
        self.num_kv_heads = checks.positive_int(num_kv_heads, "num_kv_heads")
        if width % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"width = {width} must be a multiple of num_heads = {num_heads}, "
                             f"and num_heads a multiple of num_kv_heads = {num_kv_heads}")
        rows = width + 2 * num_kv_heads * (width // num_heads)
        self.in_proj_weight = nn.Parameter(torch.randn(rows, width) * 0.02)
        self.in_proj_bias = nn.Parameter(torch.zeros(rows))
        self.out_proj = nn.Linear(width, width)
        nn.init.normal_(self.out_proj.weight, std=0.02)
        nn.init.zeros_(self.out_proj.bias)
        self.attention_fn = attention_fn

    def forward(self, x, cache=None):
        """``(B, T, D)`` and an optional cache ``->`` ``(output (B, T, D), new cache)``, as the function."""
        return grouped_query_attention(x, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight,
                                       self.out_proj.bias, self.num_heads, self.num_kv_heads, cache,
                                       attention_fn=self.attention_fn)


def mean_pooled_heads(in_weight, in_bias, num_heads: int, num_kv_heads: int):
    """A multi-head layer's ``(3D, D)`` projection made grouped-query's by averaging key-value heads. Chapter 9.

    Ainslie et al. (2023, section 2.1) convert a trained multi-head checkpoint by
    mean-pooling the key and value projections of the ``g = nh / n_kv`` heads of each group:
    ``W_K,j = (1/g) sum_{h = jg}^{jg + g - 1} W_K,h`` (and the biases, and ``W_V``), then
    train a little more (*uptraining*). The queries are kept. When the heads of each group
    have equal keys and values, the result computes exactly the same layer.

    Args:
        in_weight: ``(3D, D)``; in_bias: ``(3D,)``, as chapter 7's
            :class:`~course_lib.gpt.causal_attention.CausalSelfAttention`.
        num_heads: ``nh``. num_kv_heads: ``n_kv``, dividing ``nh``.

    Returns:
        ``(in_weight (D + 2 n_kv hs, D), in_bias (D + 2 n_kv hs,))`` for :func:`grouped_query_attention`.
    """
    checks.expect_tensor(in_weight, "in_weight", (None, None), "(3D, D)")
    width = in_weight.shape[1]
    checks.expect_tensor(in_weight, "in_weight", (3 * width, width), "(3D, D)")
    checks.expect_tensor(in_bias, "in_bias", (3 * width,), "(3D,)")
    num_heads = checks.positive_int(num_heads, "num_heads")
    num_kv_heads = checks.positive_int(num_kv_heads, "num_kv_heads")
    if width % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"the width D = {width} must be a multiple of num_heads = {num_heads}, "
                         f"and num_heads a multiple of num_kv_heads = {num_kv_heads}")
    size, group = width // num_heads, num_heads // num_kv_heads

    def pooled(block):  # (D, ...) rows of nh heads -> (n_kv hs, ...), each group's heads averaged
        return block.reshape(num_kv_heads, group, size, *block.shape[1:]).mean(dim=1).flatten(0, 1)

    (w_q, w_k, w_v), (b_q, b_k, b_v) = in_weight.split(width), in_bias.split(width)
    return (torch.cat([w_q, pooled(w_k), pooled(w_v)]), torch.cat([b_q, pooled(b_k), pooled(b_v)]))
