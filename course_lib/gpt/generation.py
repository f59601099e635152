"""Generating from a GPT: greedy search and sampling with every filter, with or without the KV cache. Chapter 7.

One step reads the logits of the last position, applies the penalties and filters of
:mod:`course_lib.gpt.filters` and picks the next token: the most probable one
(greedy) or a draw from ``softmax`` of the filtered logits. Without a cache every step
runs the whole sequence (its last ``context`` tokens) through the model again; with the
cache the prompt is read once and every later step runs one position, reusing the keys
and values of all earlier ones (for a GPT of the reference layers, kept in a
:class:`~course_lib.gpt.causal_attention.KVCache` written in place). Also here: two
measures of generated text, the share of distinct n-grams and the model's own
perplexity of it. See
:doc:`/chapters/ch07_gpt`. Tested: the cache changes no token, greedy search equals
``transformers``' ``generate``, and a seed fixes a sample.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch.nn import functional as F

from course_lib import checks
from course_lib.gpt.filters import repetition_penalty as penalise, temperature_top_k, top_p_filter
from course_lib.gpt.model import GPT
from course_lib.training import eval_mode


def next_token_logits(logits, ids, sample: bool, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, repetition_penalty: float = 1.0,
                      top_k_fn: Callable = temperature_top_k, top_p_fn: Callable = top_p_filter):
    """The logits a step draws from, ``(B, V)``: penalty, then (when sampling) temperature, top-k and top-p. Chapter 7.

    Args:
        logits: ``(B, V)`` the model's scores for the next token.
        ids: ``(B, T)`` the sequences so far (for the repetition penalty).
        sample, temperature, top_k, top_p, repetition_penalty, top_k_fn, top_p_fn: as in :func:`generate`.
    """
    if repetition_penalty != 1.0:
        logits = penalise(logits, ids, repetition_penalty)
    if sample:
        logits = top_k_fn(logits, temperature, top_k)
        if top_p is not None and top_p < 1.0:
            logits = top_p_fn(logits, top_p)
    return logits


@torch.no_grad()
def generate(model, prompt, max_new_tokens: int, sample: bool = False, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, repetition_penalty: float = 1.0,
             use_cache: bool = True, seed: int = 0, eos: int | None = None,
             top_k_fn: Callable = temperature_top_k, top_p_fn: Callable = top_p_filter):
    """Continue every prompt by ``max_new_tokens`` tokens, greedily or by sampling. Chapter 7.

    Greedy: ``y_t = argmax_v z'_v``; sampling: ``y_t ~ softmax(z')``, with ``z'`` the
    logits after :func:`next_token_logits`. Draws come from a ``torch.Generator``
    seeded with ``seed``, so the same call gives the same tokens. With ``use_cache``
    the whole sequence must fit the model's context; without it, a sequence longer than
    the context is read through its last ``context`` tokens. A row that has produced
    ``eos`` repeats it, and generation stops early when every row has. The arguments
    are checked once per call: with the cache, a GPT of the reference layers
    (:meth:`~course_lib.gpt.model.GPT.uses_reference_layers`) then decodes through a
    preallocated :class:`~course_lib.gpt.causal_attention.KVCache` without checking again
    at every step; a model with a plugged-in function runs its own ``forward``.

    Args:
        model: a :class:`~course_lib.gpt.model.GPT` (``forward(ids, cache) -> (logits, cache)``).
        prompt: ``(B, T)`` int64 ids (all rows the same length).
        max_new_tokens: the tokens to add, ``>= 0``.
        sample: draw (True) or take the most probable token (False).
        temperature, top_k, top_p: see :mod:`course_lib.gpt.filters` (used when sampling).
        repetition_penalty: ``theta`` of :func:`~course_lib.gpt.filters.repetition_penalty` (1: none).
        use_cache: reuse keys and values (True) or recompute everything at every step.
        seed: seeds the draws.
        eos: the id that ends a sequence, or ``None``.
        top_k_fn, top_p_fn: the filters (default: the reference ones).

    Returns:
        ``(B, T + max_new_tokens)`` int64, the prompts and their continuations (fewer
        columns if every row ended with ``eos`` earlier).
    """
    ids = checks.token_batch(prompt, "prompt")
    max_new_tokens = checks.nonnegative_int(max_new_tokens, "max_new_tokens")
    context = model.config.context
    if use_cache and ids.shape[1] + max_new_tokens - 1 > context:
        raise ValueError(f"{ids.shape[1]} prompt tokens and {max_new_tokens} new ones do not fit the context of "
                         f"{context} with use_cache=True; use use_cache=False to read a sliding window")
    if max_new_tokens and not ids.shape[1]:
        raise ValueError("prompt must hold at least one token to continue, got shape (B, 0)")
    generator = torch.Generator().manual_seed(int(seed))
    batch, start = ids.shape
    out = torch.empty(batch, start + max_new_tokens, dtype=torch.int64)  # (B, T + max_new_tokens)
    out[:, :start] = ids
    done = torch.zeros(batch, dtype=torch.bool)
    with eval_mode(model):
        last_logits = _last_logits_reader(model, ids, max_new_tokens, use_cache)
        fresh = ids
        for t in range(start, start + max_new_tokens):
            logits = next_token_logits(last_logits(out[:, :t], fresh).float(), out[:, :t], sample, temperature,
                                       top_k, top_p, repetition_penalty, top_k_fn, top_p_fn)  # (B, V)
            if sample:
                token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]
            else:
                token = logits.argmax(dim=-1)
            if eos is not None:
                token = torch.where(done, torch.tensor(eos), token)
                done |= token == eos
            out[:, t] = token
            fresh = out[:, t:t + 1]  # (B, 1) what the cache has not seen
            if eos is not None and bool(done.all()):
                return out[:, :t + 1].clone()
    return out


def _last_logits_reader(model, prompt, max_new_tokens: int, use_cache: bool) -> Callable:
    """The step of :func:`generate`: a function of the ids so far, ``(B, T)``, and the fresh ones among them.

    It returns the logits of the last position, ``(B, V)``. Without a cache it reads the
    last ``context`` ids. With the cache it reads only the fresh ids, those the model has
    not read yet (the prompt, then one token per step): through ``GPT._decode`` and a
    preallocated :class:`~course_lib.gpt.causal_attention.KVCache` when the model is made
    of the reference layers (the prompt's ids are checked here, once per call), else
    through ``model.forward`` and the cache it returns (checked at every step).
    """
    context = model.config.context
    if not use_cache:
        return lambda ids, fresh: model(ids[:, -context:])[0][:, -1]
    if max_new_tokens and isinstance(model, GPT) and model.uses_reference_layers():
        model.check_ids(prompt)
        cache = model.new_cache(len(prompt), prompt.shape[1] + max_new_tokens - 1)  # the last token is not read
        return lambda ids, fresh: model._decode(fresh, cache)
    cache = None

    def read(ids, fresh):
        nonlocal cache
        logits, cache = model(fresh, cache)
        return logits[:, -1]
    return read


@torch.no_grad()
def continuation_perplexity(model, ids, prompt_length: int) -> float:
    """The model's perplexity of the tokens after the prompt: ``exp(-(1/N) sum log p(y_t | y_<t))``. Chapter 7.

    Args:
        model: a GPT.
        ids: ``(B, T)`` int64, prompts followed by continuations, ``T <= context``.
        prompt_length: the prompt's tokens, ``1 <= prompt_length < T``; the other ``T - prompt_length``
            tokens of each row are scored.

    Returns:
        a float ``>= 1``.
    """
    ids = checks.token_batch(ids, "ids")
    prompt_length = checks.positive_int(prompt_length, "prompt_length")
    if prompt_length >= ids.shape[1]:
        raise ValueError(f"prompt_length = {prompt_length} leaves nothing to score in {ids.shape[1]} tokens")
    with eval_mode(model):
        logits, _ = model(ids[:, :-1])  # (B, T - 1, V)
    nll = F.cross_entropy(logits[:, prompt_length - 1:].transpose(1, 2), ids[:, prompt_length:])
    return math.exp(float(nll))


def distinct_n(sequences: Sequence[Sequence], n: int) -> float:
    """The share of distinct n-grams among all n-grams of the sequences (Li et al., 2016). Chapter 7.

    ``distinct-n = |{n-grams}| / (number of n-grams)``, counted over all sequences
    together; 1 means no n-gram repeats, values near 0 mean the text loops.

    Args:
        sequences: token sequences (lists of ids or of strings, or strings of characters).
        n: the n-gram length.

    Returns:
        a float in ``[0, 1]``.
    """
    n = checks.positive_int(n, "n")
    grams = [tuple(s[i:i + n]) for s in sequences for i in range(len(s) - n + 1)]
    if not grams:
        raise ValueError(f"the sequences hold no {n}-gram")
    return len(set(grams)) / len(grams)
