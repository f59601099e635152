"""Hidden cases of ps05_attention: attention scores, the attention decoder and beam search (chapter 5).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np

from .common import key_mask


def masked_softmax(rng):
    for b, q, k in [(1, 1, 1), (2, 1, 5), (3, 4, 6), (4, 2, 7)]:
        yield (rng.normal(size=(b, q, k)) * rng.uniform(0.5, 3), key_mask(rng, b, k)), {}
    mask = np.zeros((5, 6), dtype=bool)
    mask[:, 0] = True  # heavy padding: one real token per source...
    mask[0] = True  # ...but for the first
    yield (rng.normal(size=(5, 3, 6)), mask), {}
    yield (rng.normal(size=(3, 2, 8)), key_mask(rng, 3, 8, contiguous=False)), {}  # padding anywhere
    # Scores where exp overflows (above 709.8) or underflows to 0 (below -745) in float64
    scores = rng.normal(size=(3, 2, 5)) * 1e4
    mask = key_mask(rng, 3, 5)
    scores[:, :, -1] = 3e4  # padding with the largest score of its row: subtracting it underflows every real weight
    mask[:, -1] = False
    mask[0, 0] = True
    yield (scores, mask), {}
    scores, mask = rng.normal(size=(3, 3, 4)) - 3e4, key_mask(rng, 3, 4)
    mask[1:, -1] = False
    scores[~mask[:, None, :].repeat(3, axis=1)] = 0.0  # real scores near -3e4, padding 0: a fill of -1e4 is too big
    yield (scores, mask), {}
    yield (rng.normal(size=(2, 2, 5)).astype(np.float32) * 2, key_mask(rng, 2, 5)), {}  # float32 in, float32 out
    scores, mask = rng.normal(size=(2, 2, 6)) * 100 - 2e4, key_mask(rng, 2, 6)
    mask[:, -2:] = False
    scores[:, :, -2:] = 5e3  # float32 scores far below -1e4, padding far above them
    yield (scores.astype(np.float32), mask), {}
    yield (rng.normal(size=(2, 3, 4)), np.ones((2, 4), dtype=bool)), {}  # no padding: a plain softmax


def general_attention(rng):
    # (B, Tq, Tk, H): one source token, one query, several queries, heavy padding
    for b, q, k, h in [(1, 1, 1, 1), (2, 1, 5, 3), (3, 4, 6, 4), (2, 3, 1, 2), (4, 2, 7, 5)]:
        yield (rng.normal(size=(b, q, h)), rng.normal(size=(b, k, h)), key_mask(rng, b, k, contiguous=b != 4),
               rng.normal(size=(h, h)) / np.sqrt(h)), {}
    # float32 in, float32 out; scores of order 1 (a softmax near one-hot rounds its float32 gradient to noise)
    for b, q, k, h in [(2, 3, 4, 3), (3, 1, 6, 4)]:
        query, keys = rng.normal(size=(b, q, h)).astype(np.float32), rng.normal(size=(b, k, h)).astype(np.float32)
        yield (query, keys, key_mask(rng, b, k), (rng.normal(size=(h, h)) * 0.5 / np.sqrt(h)).astype(np.float32)), {}


def additive_attention(rng):
    # (B, Tq, Tk, H, A): A below, equal to and above H
    for b, q, k, h, a in [(1, 1, 1, 1, 1), (2, 1, 5, 3, 4), (3, 4, 6, 4, 2), (2, 3, 1, 2, 3), (4, 2, 7, 5, 5)]:
        yield (rng.normal(size=(b, q, h)), rng.normal(size=(b, k, h)), key_mask(rng, b, k, contiguous=b != 4),
               rng.normal(size=(a, h)), rng.normal(size=(a, h)), rng.normal(size=a) * 2), {}
    for b, q, k, h, a in [(2, 3, 4, 3, 4), (3, 2, 5, 4, 3)]:  # float32 in, float32 out
        query, keys = rng.normal(size=(b, q, h)).astype(np.float32), rng.normal(size=(b, k, h)).astype(np.float32)
        weights = (rng.normal(size=size).astype(np.float32) for size in ((a, h), (a, h), a))
        yield (query, keys, key_mask(rng, b, k), *weights), {}


def attention_decoder_step(rng):
    import torch

    from course_lib.attention.seq2seq import Decoder
    from course_lib.testing import TorchDotAttention
    from course_lib.training import torch_seed

    # (B, Tk, V, E, H, dtype): one sentence, one source token, E = H, E < H and E > H; a float32 decoder and states
    for b, k, v, e, h, dtype in [(1, 1, 3, 2, 2, np.float64), (2, 5, 7, 3, 4, np.float64), (4, 6, 10, 5, 3, np.float64),
                                 (3, 3, 6, 4, 4, np.float64), (5, 8, 9, 2, 6, np.float64), (2, 4, 6, 3, 4, np.float32),
                                 (3, 5, 7, 4, 3, np.float32)]:
        with torch_seed(0):
            decoder = Decoder(v, e, h, attention=TorchDotAttention()).to(getattr(torch, np.dtype(dtype).name))
        with torch.no_grad():  # weights from rng, not from torch's generator
            for parameter in decoder.parameters():
                parameter.copy_(torch.from_numpy(rng.normal(size=tuple(parameter.shape)) * 0.6))
        yield (decoder, rng.integers(1, v, size=b), np.tanh(rng.normal(size=(b, h))).astype(dtype),
               rng.normal(size=(b, k, h)).astype(dtype), key_mask(rng, b, k)), {}


def _table(rng, steps, vocab, eos, sharpness, eos_start, eos_slope):
    from course_lib.attention.decoding import TableModel

    z = rng.normal(size=(steps, vocab, vocab)) * sharpness
    z[:, :, eos] += eos_start + eos_slope * np.arange(steps)[:, None]  # <eos> unlikely at first, likelier later
    return TableModel(z - np.logaddexp.reduce(z, axis=-1, keepdims=True))


def _random_gru_decoder(rng, vocab: int):
    """``(step_fn, state)`` of a plain GRU seq2seq with random weights drawn from ``rng`` (its step function holds
    no exercise of this assignment), on a random four-token source."""
    import torch

    from course_lib.attention.decoding import translation_step_fn
    from course_lib.attention.seq2seq import Seq2Seq
    from course_lib.training import torch_seed

    with torch_seed(0):
        model = Seq2Seq(5, vocab, embed_dim=4, hidden_size=5, attention=None).double()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.from_numpy(rng.normal(size=tuple(parameter.shape)) * 1.5))
    return translation_step_fn(model, rng.integers(1, 5, size=4))


def beam_search(rng):
    # (steps, V, beam_width, max_len, alpha, sharpness, <eos> logit at step 0, its growth per step)
    for steps, vocab, width, max_len, alpha, sharpness, start, slope in [
            (3, 4, 1, 3, 0.0, 2.0, 0.0, 0.0), (6, 5, 2, 6, 0.6, 1.5, -1.0, 1.0), (6, 6, 3, 6, 1.0, 1.0, -1.0, 0.8),
            (4, 4, 60, 4, 0.0, 1.5, 0.0, 0.5), (8, 8, 4, 10, 0.6, 1.0, -2.0, 0.8), (1, 6, 3, 1, 1.0, 2.0, 0.0, 0.0),
            (7, 10, 5, 7, 0.0, 1.0, -1.0, 1.0), (5, 3, 300, 5, 1.0, 1.0, 0.0, 0.3), (6, 6, 2, 8, 1.0, 0.7, -0.5, 0.5),
            (6, 5, 8, 6, 0.6, 1.0, -0.5, 1.0), (6, 6, 4, 7, 1.0, 1.2, -1.5, 1.2), (5, 6, 3, 5, 0.0, 1.0, -0.5, 0.6),
            (6, 8, 4, 8, 1.0, 1.0, -2.0, 1.0), (6, 5, 2, 8, 1.0, 0.7, -0.5, 0.5)]:
        bos, eos = (int(i) for i in rng.choice(vocab, size=2, replace=False))
        model = _table(rng, steps, vocab, eos, sharpness, start, slope)
        yield (model, np.zeros(1), bos, eos, width, max_len), {"alpha": alpha}
    # A decoder whose state remembers the whole output: a hypothesis must keep its parent's state.
    # (plain GRU seq2seq, random weights; its step function holds no exercise of this assignment)
    for vocab, width, max_len, alpha in [(6, 3, 6, 0.0), (8, 4, 7, 1.0)]:
        yield (*_random_gru_decoder(rng, vocab), 1, 2, width, max_len), {"alpha": alpha}
    # Three such decoders (25 of 3000 seeds searched) where handing the live hypotheses the wrong states when a
    # finished one ranks above a live one (the parents of the first len(live) of the top beam_width, finished ones
    # included, instead of the live ones' own) changes the output
    for seed in (250, 334, 481):
        draw = np.random.default_rng(seed)
        vocab, width, max_len = int(draw.integers(5, 9)), int(draw.integers(2, 5)), int(draw.integers(4, 8))
        alpha = [0.0, 0.6, 1.0][int(draw.integers(3))]
        yield (*_random_gru_decoder(draw, vocab), 1, 2, width, max_len), {"alpha": alpha}


GENERATORS = {
    "attention.masking.masked_softmax": masked_softmax,
    "attention.scores.general_attention": general_attention,
    "attention.scores.additive_attention": additive_attention,
    "attention.seq2seq.attention_decoder_step": attention_decoder_step,
    "attention.decoding.beam_search": beam_search,
}

GRADIENTS = {
    "attention.masking.masked_softmax": (0,),
    "attention.scores.general_attention": (0, 1, 3),  # query, keys and W
    "attention.scores.additive_attention": (0, 1, 3, 4, 5),  # query, keys, W_q, W_k and v
    "attention.seq2seq.attention_decoder_step": (2, 3),  # s_prev and memory
}

HINTS: dict[str, str] = {
    "attention.masking.masked_softmax":
        "Give the padded positions a score of -inf (the (B, Tk) mask broadcast over the queries as "
        "mask[:, None, :]) before one softmax over the last axis: exp of the raw scores overflows, "
        "and a finite fill value such as -1e4 still leaves padding a weight.",
    "attention.scores.general_attention":
        "The score is q^T W k_i, so transform the keys by keys @ W.T (keys @ W gives q^T W^T k_i), then "
        "take your masked_softmax over the keys axis and the context as weights @ keys.",
    "attention.scores.additive_attention":
        "Project queries and keys separately (query @ W_q.T, keys @ W_k.T), add them broadcast as "
        "(B, Tq, 1, A) + (B, 1, Tk, A), and apply tanh before the product with v.",
    "attention.seq2seq.attention_decoder_step":
        "Attend with the previous state s_prev as a (B, 1, H) query, feed [embedding; context] to the cell "
        "and [new state; context] to the readout, in these orders, and return the weights as (B, Tk).",
    "attention.decoding.beam_search":
        "Keep the beam_width best of all K x V extensions by total log-probability (finished ones take a "
        "place too), reorder the states with the parents' indices, and divide by len(words) ** alpha "
        "(<eos> counted) only to choose among finished hypotheses.",
}

TORCH = {'attention.masking.masked_softmax',
         'attention.scores.general_attention',
         'attention.scores.additive_attention',
         'attention.seq2seq.attention_decoder_step',
         'attention.decoding.beam_search'}
