"""Causal self-attention with a key-value cache, the attention layer of a GPT. Chapter 7.

A decoder-only model attends from each position to itself and to the positions
before it. When it generates, the keys and values of the positions already seen do
not change (a position never sees what comes after it), so they are kept in a
*KV cache* and only the new positions are projected: a step costs ``O(P)`` instead
of recomputing all ``P`` earlier positions through every layer. See
:doc:`/chapters/ch07_gpt`. Tested: with and without a cache the outputs agree,
and the layer equals GPT-2's attention in ``transformers``.

:func:`causal_self_attention` returns a new cache ``[K_cache; K_new]`` at every call,
built by ``torch.cat``: a step copies all ``P`` earlier positions, so ``N`` steps copy
``O(N^2)`` numbers. Generation uses :class:`KVCache` instead, tensors allocated once
and written in place (``O(N)``), through ``_attend_with_kv_cache``, the same
equations without the per-call argument checks (the internal path of generation,
whose arguments are checked once per call); it is tested equal to
:func:`causal_self_attention`.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.transformer.multi_head import check_multi_head_args, merge_heads, split_heads
from course_lib.transformer.scaled_attention import scaled_dot_product_attention


def causal_mask_after(past: int, steps: int) -> torch.Tensor:
    """The ``(T, P + T)`` bool mask of ``T`` new positions after ``P`` cached ones. Chapter 7.

    ``mask[i, j] = j <= P + i``: new position ``i`` (absolute position ``P + i``) sees
    every cached key and the new keys up to itself. ``past = 0`` gives
    :func:`~course_lib.transformer.scaled_attention.causal_mask`.
    """
    past, steps = checks.nonnegative_int(past, "past"), checks.positive_int(steps, "steps")
    return torch.ones(steps, past + steps, dtype=torch.bool).tril(diagonal=past)


def check_cache(cache, batch: int, num_heads: int, head_size: int, heads: str = "nh") -> int:
    """Raise unless ``cache`` is ``None`` or a pair of ``(B, nh, P, hs)`` tensors; return ``P``. Chapter 7.

    ``heads`` names the head count in the messages (chapter 9's grouped-query cache has ``n_kv``).
    """
    if cache is None:
        return 0
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        raise TypeError(f"cache must be None or a pair (keys, values), got {type(cache).__name__}")
    keys, values = cache
    shape = f"(B, {heads}, P, hs)"
    checks.expect_tensor(keys, "cache keys", (batch, num_heads, None, head_size), shape)
    checks.expect_tensor(values, "cache values", tuple(keys.shape), shape)
    return keys.shape[2]


def causal_self_attention(x, in_weight, in_bias, out_weight, out_bias, num_heads, cache=None,
                          attention_fn: Callable = scaled_dot_product_attention):
    """Causal multi-head self-attention of ``T`` new positions, reading and extending a KV cache.

    ``[W_Q; W_K; W_V] = in_weight``, ``[b_Q; b_K; b_V] = in_bias`` as in
    :func:`~course_lib.transformer.multi_head.multi_head_attention`: ``Q = x W_Q^T + b_Q``,
    ``K_new = x W_K^T + b_K``, ``V_new = x W_V^T + b_V``, each split into ``nh`` heads
    (:func:`~course_lib.transformer.multi_head.split_heads`). The cached keys and values come
    first: ``K = [K_cache; K_new]``, ``V = [V_cache; V_new]`` along the positions.
    ``attention_fn`` attends, queries ``Q`` to keys ``K`` and values ``V``, with the mask of :func:`causal_mask_after`
    (new position ``i`` sees keys ``j <= P + i``); the heads are merged and projected,
    ``output = Concat(heads) W_O^T + b_O``. With ``cache=None``, ``P = 0``. Written with
    torch operations; the arguments, the cache included, are not modified. Chapter 7,
    exercise of ps07.

    Args:
        x: ``(B, T, D)`` the new positions.
        in_weight: ``(3D, D)``; in_bias: ``(3D,)``; out_weight: ``(D, D)``; out_bias: ``(D,)``.
        num_heads: ``nh``, dividing ``D``.
        cache: ``None`` or ``(keys, values)``, each ``(B, nh, P, hs)``: the earlier positions.
        attention_fn: ``(q (B, nh, T, hs), k (B, nh, P + T, hs), v, mask (T, P + T)) ->
            (output (B, nh, T, hs), weights (B, nh, T, P + T))``.

    Returns:
        ``(output (B, T, D), (keys, values))``, the new cache: each ``(B, nh, P + T, hs)``; tensors
        of the dtype of ``x``.
    """
    checks.sequence_batch(x, "x")
    batch, steps, width = x.shape
    check_multi_head_args(x, x, x, in_weight, in_bias, out_weight, out_bias, num_heads)  # chapter 6's checks
    past = check_cache(cache, batch, num_heads, width // num_heads)
    ### BEGIN SOLUTION
    q, k, v = (split_heads(part, num_heads) for part in (x @ in_weight.T + in_bias).split(width, dim=-1))
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, nh, P + T, hs)
    heads, _ = attention_fn(q, k, v, causal_mask_after(past, steps))  # (B, nh, T, hs)
    return merge_heads(heads) @ out_weight.T + out_bias, (k, v)
    ### END SOLUTION


class CausalSelfAttention(nn.Module):
    """Causal self-attention with a KV cache, with the parameters of ``torch.nn.MultiheadAttention``. Chapter 7.

    ``in_proj_weight`` ``(3D, D)``, ``in_proj_bias`` ``(3D,)`` and ``out_proj``
    (``nn.Linear(D, D)``), as :class:`~course_lib.transformer.multi_head.MultiHeadAttention`.

    Args:
        width: ``D``. num_heads: ``nh``.
        attention_fn: passed on to ``causal_attention_fn``.
        causal_attention_fn: the function that computes the layer (default: :func:`causal_self_attention`).
    """

    def __init__(self, width: int, num_heads: int, attention_fn: Callable = scaled_dot_product_attention,
                 causal_attention_fn: Callable | None = None):
        super().__init__()
        self.width, self.num_heads = checks.positive_int(width, "width"), checks.positive_int(num_heads, "num_heads")
        if width % num_heads:
            raise ValueError(f"width = {width} must be a multiple of num_heads = {num_heads}")
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)
        self.attention_fn = attention_fn
        self.causal_attention_fn = causal_attention_fn or causal_self_attention

    def forward(self, x, cache=None):
        """``(B, T, D)`` and an optional cache ``->`` ``(output (B, T, D), new cache)``."""
        return self.causal_attention_fn(x, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight,
                                        self.out_proj.bias, self.num_heads, cache, attention_fn=self.attention_fn)


class KVCache:
    """The keys and values of ``L`` layers in tensors allocated once and filled in place. Chapter 7.

    Layer ``l`` keeps ``keys[l]`` and ``values[l]``, each ``(B, nh, capacity, hs)``, of which
    the first ``P = length`` positions are filled. A forward pass of ``T`` new positions
    first claims them, ``P = cache.extend(T)``; then every layer writes its ``T`` new keys
    and values at positions ``P .. P + T - 1`` (:meth:`write`) and attends over the first
    ``P + T``. Nothing is copied but the new positions, where ``torch.cat([K_cache, K_new])``
    copies the whole cache at every step.

    Args:
        layers: ``L``. batch: ``B``. num_heads: ``nh``. head_size: ``hs``.
        capacity: the most positions the cache holds (for a GPT, at most its context).
        dtype: the dtype of the keys and values.
    """

    def __init__(self, layers: int, batch: int, num_heads: int, head_size: int, capacity: int,
                 dtype: torch.dtype = torch.float32):
        sizes = dict(layers=layers, num_heads=num_heads, head_size=head_size, capacity=capacity)
        layers, num_heads, head_size, capacity = (checks.positive_int(v, k) for k, v in sizes.items())
        batch = checks.nonnegative_int(batch, "batch")
        self.keys = [torch.zeros(batch, num_heads, capacity, head_size, dtype=dtype) for _ in range(layers)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.capacity, self.length = capacity, 0

    def extend(self, steps: int) -> int:
        """Claim ``T = steps`` new positions and return ``P``, the positions filled before them.

        Raises a ``ValueError`` unless ``P + T <= capacity``. Every layer must then write its
        ``(B, nh, T, hs)`` new keys and values at ``P`` with :meth:`write`.
        """
        if self.length + steps > self.capacity:
            raise ValueError(f"{self.length} cached and {steps} new positions exceed the cache's capacity of "
                             f"{self.capacity} positions")
        past, self.length = self.length, self.length + steps
        return past

    def write(self, layer: int, past: int, keys, values):
        """Write ``keys`` and ``values`` ``(B, nh, T, hs)`` at positions ``P .. P + T - 1`` of ``layer``.

        Returns:
            views of all the keys and values of the layer, ``(B, nh, P + T, hs)`` each.
        """
        end = past + keys.shape[2]
        self.keys[layer][:, :, past:end] = keys
        self.values[layer][:, :, past:end] = values
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def pairs(self) -> list:
        """The cache as ``GPT.forward`` takes it: ``L`` pairs ``(keys, values)``, each ``(B, nh, P, hs)`` (views)."""
        return [(k[:, :, :self.length], v[:, :, :self.length]) for k, v in zip(self.keys, self.values)]


def _attend_with_kv_cache(x, in_weight, in_bias, out_weight, out_bias, num_heads: int, cache: KVCache,
                          layer: int, past: int):
    """:func:`causal_self_attention` writing its keys and values into a :class:`KVCache`, without checks. Chapter 7.

    The same equations: ``[Q; K_new; V_new] = x [W_Q; W_K; W_V]^T + [b_Q; b_K; b_V]`` split into
    ``nh`` heads, ``K = [K_cache; K_new]``, ``V = [V_cache; V_new]`` (here: written into the
    cache in place), ``softmax(Q K^T / sqrt(hs) + M) V`` with the causal mask of
    :func:`causal_mask_after` (not needed for ``T = 1``: the one new position sees every
    key), heads merged, ``output = Concat(heads) W_O^T + b_O``. The fast path of
    generation: its caller checks the arguments once per forward pass (``GPT`` once per
    :func:`~course_lib.gpt.generation.generate`), so nothing here is checked.

    Args:
        x: ``(B, T, D)`` the new positions.
        in_weight: ``(3D, D)``; in_bias: ``(3D,)``; out_weight: ``(D, D)``; out_bias: ``(D,)``.
        num_heads: ``nh``.
        cache: a :class:`KVCache` with room for ``P + T`` positions.
        layer: the cache's layer to read and write. past: ``P``, its positions already filled.

    Returns:
        ``(B, T, D)`` the output; the cache now holds the ``P + T`` keys and values of ``layer``.
    """
    batch, steps, width = x.shape
    qkv = F.linear(x, in_weight, in_bias).view(batch, steps, 3 * num_heads, width // num_heads)
    q, k, v = qkv.transpose(1, 2).split(num_heads, dim=1)  # (B, nh, T, hs) each
    keys, values = cache.write(layer, past, k, v)  # (B, nh, P + T, hs)
    scores = q @ keys.transpose(-2, -1) / math.sqrt(width // num_heads)  # (B, nh, T, P + T)
    if steps > 1:
        scores = scores.masked_fill(~causal_mask_after(past, steps), float("-inf"))
    heads = torch.softmax(scores, dim=-1) @ values  # (B, nh, T, hs)
    return F.linear(heads.transpose(1, 2).reshape(batch, steps, width), out_weight, out_bias)
