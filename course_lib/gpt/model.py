"""The GPT model: token and position embeddings, causal pre-LN blocks, a tied output layer. Chapter 7.

``h_0 = E[x_t] + P[t]``; ``L`` pre-LN blocks, each
``g = h + CausalSelfAttention(LN_1(h))``, ``h' = g + FFN(LN_2(g))`` with
``FFN(x) = W_2 GELU(W_1 x + b_1) + b_2``; a final LayerNorm; and the logits
``z_t = LN_f(h_L) E^T``, the output layer tied to the token embeddings
(Radford et al., 2018, 2019). GELU is GPT-2's tanh approximation. The blocks return
their keys and values, so generation can reuse them (the KV cache). See
:doc:`/chapters/ch07_gpt`. Tested against ``transformers.GPT2LMHeadModel`` with copied
weights (:mod:`course_lib.gpt.gpt2_weights`).

Generation takes a faster path through the same model (``GPT._decode``): the
keys and values written into a preallocated :class:`~course_lib.gpt.causal_attention.KVCache`,
the arguments checked once per call of :func:`~course_lib.gpt.generation.generate`
instead of in every layer at every step, LayerNorm as one fused torch kernel (as
chapter 8's ``fused_layer_norm``) and the logits of the last position only. It runs
only for a model of the reference layers (:meth:`GPT.uses_reference_layers`) and is
tested equal to ``forward``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.gpt.causal_attention import (CausalSelfAttention, KVCache, _attend_with_kv_cache,
                                             causal_self_attention)
from course_lib.transformer.layer_norm import LayerNorm, layer_norm
from course_lib.transformer.scaled_attention import scaled_dot_product_attention


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """The size of a GPT. Chapter 7.

    Attributes:
        vocab_size: ``V``.
        context: the most positions the model reads, the number of position vectors.
        width: ``D``. num_heads: ``nh``. layers: ``L``.
        ff_size: ``F``, the feed-forward inner size (``None``: ``4D``, as GPT-2).
        dropout: on the embeddings and on each block's two outputs (GPT-2's
            ``embd_pdrop`` and ``resid_pdrop``); attention weights get none.
        eps: the LayerNorms' epsilon.
    """

    vocab_size: int
    context: int = 128
    width: int = 128
    num_heads: int = 4
    layers: int = 4
    ff_size: int | None = None
    dropout: float = 0.0
    eps: float = 1e-5

    def __post_init__(self):
        checks.transformer_config(self, ("vocab_size", "context", "width", "num_heads", "layers"), ("dropout",))

    def gpt2_config_kwargs(self) -> dict:
        """The arguments of ``transformers.GPT2Config`` for the same model, dropout included."""
        return dict(vocab_size=self.vocab_size, n_positions=self.context, n_embd=self.width,
                    n_layer=self.layers, n_head=self.num_heads, n_inner=self.ff_size,
                    activation_function="gelu_new", resid_pdrop=self.dropout, embd_pdrop=self.dropout,
                    attn_pdrop=0.0, layer_norm_epsilon=self.eps, tie_word_embeddings=True,
                    bos_token_id=None, eos_token_id=None, pad_token_id=None)


class GPTBlock(nn.Module):
    """A causal pre-LN block: ``g = h + Attn(LN_1(h))``, ``h' = g + FFN(LN_2(g))``, with a KV cache. Chapter 7.

    Parameter names follow :class:`~course_lib.transformer.blocks.EncoderBlock`
    (``self_attn``, ``linear1``, ``linear2``, ``norm1``, ``norm2``).
    """

    def __init__(self, config: GPTConfig, attention_fn: Callable = scaled_dot_product_attention,
                 causal_attention_fn: Callable | None = None):
        super().__init__()
        self.self_attn = CausalSelfAttention(config.width, config.num_heads, attention_fn, causal_attention_fn)
        self.linear1 = nn.Linear(config.width, config.ff_size)
        self.linear2 = nn.Linear(config.ff_size, config.width)
        self.norm1, self.norm2 = LayerNorm(config.width, config.eps), LayerNorm(config.width, config.eps)
        self.dropout = nn.Dropout(config.dropout)

    def feed_forward(self, x):
        """``FFN(x) = W_2 GELU(W_1 x + b_1) + b_2``, ``(..., D) -> (..., D)`` through ``(..., F)``."""
        return self.linear2(F.gelu(self.linear1(x), approximate="tanh"))

    def forward(self, x, cache=None):
        """``(B, T, D)`` and this block's cache (or ``None``) ``->`` ``((B, T, D), new cache)``."""
        attended, cache = self.self_attn(self.norm1(x), cache)
        x = x + self.dropout(attended)
        return x + self.dropout(self.feed_forward(self.norm2(x))), cache

    def _decode(self, x, cache: KVCache, layer: int, past: int):
        """``forward`` of the reference layers in eval mode, unchecked, the keys and values written into ``cache``.

        ``(B, T, D) -> (B, T, D)``; ``past`` is ``P``, the positions of ``cache`` already filled.
        """
        attention = self.self_attn
        x = x + _attend_with_kv_cache(_fused_layer_norm(x, self.norm1), attention.in_proj_weight,
                                      attention.in_proj_bias, attention.out_proj.weight, attention.out_proj.bias,
                                      attention.num_heads, cache, layer, past)
        hidden = F.gelu(F.linear(_fused_layer_norm(x, self.norm2), self.linear1.weight, self.linear1.bias),
                        approximate="tanh")  # (B, T, F)
        return x + F.linear(hidden, self.linear2.weight, self.linear2.bias)


def _fused_layer_norm(x, norm: LayerNorm):
    """``norm(x)``, chapter 6's ``LN(x) = (x - mu) / sqrt(sigma^2 + eps) * gamma + beta``, as one torch kernel."""
    return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, norm.eps)


_REFERENCE_MODULES = (nn.Embedding, nn.Dropout, nn.Linear, nn.ModuleList, LayerNorm, CausalSelfAttention, GPTBlock)


class GPT(nn.Module):
    """A decoder-only Transformer language model with GPT-2's layout. Chapter 7.

    ``forward(ids, cache)`` gives logits ``(B, T, V)`` and the new cache, a list of
    ``L`` pairs ``(keys, values)``, each ``(B, nh, P + T, hs)``. Passing that cache back
    with the next ids continues the sequence at position ``P + T`` without
    recomputing the first ``P + T`` positions. The signature is that of the recurrent
    language models, so :func:`course_lib.recurrent.language_model.train_language_model`
    trains it (see :func:`course_lib.gpt.training.train_gpt`).

    Initialisation as GPT-2 (weights ``N(0, 0.02^2)``, the two projections that write into
    the residual stream ``N(0, (0.02 / sqrt(2L))^2)``, biases 0), except the token and
    position embeddings: ``N(0, 1/D)``, as chapter 6's
    :class:`~course_lib.transformer.embedding.TokenEmbedding`. At GPT-2's width,
    ``D = 768``, the two are close (0.02 against 0.036); at chapter 7's ``D = 48`` an
    embedding of std 0.02 is a seventh of ``D^-1/2``. On chapter 7's characters (``D = 48``,
    ``L = 2``, 600 steps of ``B = 16``, seeds 0 to 4 each) std 0.02 ended at a validation
    perplexity of 9.19 (95 % interval 6.90 to 11.49; one run at 12.48) and ``D^-1/2`` at
    7.73 (7.60 to 7.86): higher on every seed, but the intervals overlap.

    Args:
        config: a :class:`GPTConfig`.
        attention_fn: scaled dot-product attention, ``(q, k, v, mask) -> (output, weights)``.
        causal_attention_fn: the attention layer's function (default:
            :func:`~course_lib.gpt.causal_attention.causal_self_attention`).
    """

    def __init__(self, config: GPTConfig, attention_fn: Callable = scaled_dot_product_attention,
                 causal_attention_fn: Callable | None = None):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.width)
        self.position_embedding = nn.Embedding(config.context, config.width)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(GPTBlock(config, attention_fn, causal_attention_fn)
                                    for _ in range(config.layers))
        self.norm = LayerNorm(config.width, config.eps)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """GPT-2's initialisation, with embeddings of std ``D^-1/2`` (see the class)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "embedding" in name:
                    p.normal_(0.0, self.config.width ** -0.5)
                elif name.endswith("bias"):
                    p.zero_()
                elif "norm" in name:
                    p.fill_(1.0)
                else:
                    residual = name.endswith(("out_proj.weight", "linear2.weight"))
                    p.normal_(0.0, 0.02 / math.sqrt(2 * self.config.layers) if residual else 0.02)

    def forward(self, ids, cache=None):
        """``(B, T)`` int64 ids after ``P`` cached positions ``->`` ``(logits (B, T, V), new cache)``."""
        checks.token_batch(ids, "ids")
        if cache is not None and len(cache) != len(self.blocks):
            raise ValueError(f"cache must hold one (keys, values) pair per layer ({len(self.blocks)}), got {len(cache)}")
        past = 0 if cache is None else cache[0][0].shape[2]
        self.check_ids(ids, past)
        positions = torch.arange(past, past + ids.shape[1])
        x = self.dropout(self.token_embedding(ids) + self.position_embedding(positions))  # (B, T, D)
        new_cache = []
        for layer, block in enumerate(self.blocks):
            x, layer_cache = block(x, None if cache is None else cache[layer])
            new_cache.append(layer_cache)
        return self.norm(x) @ self.token_embedding.weight.T, new_cache  # (B, T, V)

    def check_ids(self, ids, past: int = 0):
        """Return ``ids``, raising unless they are ``(B, T)`` int64 in ``[0, V)`` and ``P + T`` positions fit.

        ``past`` is ``P``, the positions already cached; ``P + T`` may not exceed the context.
        """
        checks.token_batch(ids, "ids")
        if past + ids.shape[1] > self.config.context:
            raise ValueError(f"{past} cached and {ids.shape[1]} new positions exceed the context of "
                             f"{self.config.context}; crop the sequence to its last {self.config.context} tokens")
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.config.vocab_size):
            raise ValueError(f"ids must lie in [0, {self.config.vocab_size}), got {ids.min().item()}..{ids.max().item()}")
        return ids

    def uses_reference_layers(self) -> bool:
        """Whether the model computes with the library's own functions only, so that generation may decode fast.

        True when every part is one of the reference modules (no subclass, no other module put
        in), with the default ``layer_norm``, ``scaled_dot_product_attention`` and
        ``causal_self_attention``, and without forward hooks. A model with a plugged-in
        function (an exercise's answer) is generated from through ``forward``.
        """
        default_functions = all(block.self_attn.causal_attention_fn is causal_self_attention
                                and block.self_attn.attention_fn is scaled_dot_product_attention
                                and block.norm1.norm_fn is layer_norm and block.norm2.norm_fn is layer_norm
                                for block in self.blocks) and self.norm.norm_fn is layer_norm
        plain_modules = type(self).forward is GPT.forward and all(
            type(module) in _REFERENCE_MODULES and not (module._forward_hooks or module._forward_pre_hooks)
            for module in self.modules() if module is not self)
        return default_functions and plain_modules and not (self._forward_hooks or self._forward_pre_hooks)

    def new_cache(self, batch: int, capacity: int | None = None) -> KVCache:
        """An empty :class:`~course_lib.gpt.causal_attention.KVCache` for ``B = batch`` sequences, of the model's dtype.

        Each layer's keys and values are ``(B, nh, capacity, hs)``; ``capacity`` (default: the
        context) may not exceed the context, the positions the model has embeddings for.
        """
        capacity = self.config.context if capacity is None else checks.positive_int(capacity, "capacity")
        if capacity > self.config.context:
            raise ValueError(f"a cache of capacity {capacity} exceeds the context of {self.config.context}")
        return KVCache(self.config.layers, batch, self.config.num_heads, self.config.width // self.config.num_heads,
                       capacity, dtype=self.token_embedding.weight.dtype)

    def _decode(self, ids, cache: KVCache):
        """The logits of the last position, ``(B, V)``, for ``(B, T)`` ids after the ``P`` positions of ``cache``.

        ``forward``'s equations through :meth:`GPTBlock._decode`, for a model of the reference
        layers in eval mode; ``ids`` are not checked (:func:`~course_lib.gpt.generation.generate`
        checks the prompt once, and every later id is one the model chose). The ``T`` new keys
        and values of every layer are written into ``cache``.
        """
        steps = ids.shape[1]
        if cache.length + steps > self.config.context:
            raise ValueError(f"{cache.length} cached and {steps} new positions exceed the context of "
                             f"{self.config.context}")
        if self.training and self.config.dropout:
            raise RuntimeError("GPT._decode runs without dropout: put the model in eval mode")
        past = cache.extend(steps)
        x = F.embedding(ids, self.token_embedding.weight) + self.position_embedding.weight[past:past + steps]
        for layer, block in enumerate(self.blocks):
            x = block._decode(x, cache, layer, past)  # (B, T, D)
        return F.linear(_fused_layer_norm(x[:, -1], self.norm), self.token_embedding.weight)  # (B, V)

    def num_parameters(self) -> int:
        """The number of trained numbers (the tied output layer counted once)."""
        return sum(p.numel() for p in self.parameters())
