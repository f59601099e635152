"""Randomized inputs for the hidden tests, one generator per exercise function.

``python3 tasks.py sync`` calls each generator with a seeded
``numpy.random.Generator``, runs the reference function of course_lib on the
inputs, and embeds inputs and outputs in the hidden test cell. The generators
only make inputs; they contain no answers. Keys are ``"module.function"``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _counts(rng, rows, cols, rate, dense):
    m = rng.poisson(rate, size=(rows, cols)).astype(np.float64)
    return m if dense else sp.csr_matrix(m)


def one_hot(rng):
    for n, v in [(1, 2), (7, 3), (12, 25), (0, 4), (30, 9)]:
        yield (rng.integers(0, v, size=n), v), {}
    yield (np.array([5, 5, 5, 0]), 6), {}  # repeated ids


def tfidf(rng):
    for case in range(8):
        d, v = rng.integers(2, 9), rng.integers(3, 13)
        counts = rng.poisson(0.9, size=(d, v)).astype(np.float64)
        smooth = bool(case % 2 == 0)
        if smooth:
            counts[:, rng.integers(v)] = 0  # a word no document contains
            counts[rng.integers(d)] = 0  # a document with no words
        else:
            counts[rng.integers(d), :] += (counts.sum(axis=0) == 0)  # every word in some document
        dense = case % 3 == 0
        yield ((counts if dense else sp.csr_matrix(counts)),), {"smooth_idf": smooth,
                                                                  "normalize": case % 4 != 1}


def ppmi(rng):
    for case, alpha in enumerate([1.0, 0.75, 0.5, 1.0, 0.75, 0.3]):
        v, c = rng.integers(2, 11), rng.integers(2, 11)
        if case == 3:
            c = v  # square and symmetric, like a real co-occurrence matrix
            m = rng.poisson(1.5, size=(v, v)).astype(np.float64)
            cooc = m + m.T
        else:
            cooc = rng.poisson(1.5, size=(v, c)).astype(np.float64)
        cooc[0, 0] += 1  # at least one positive count
        yield ((cooc if case % 2 else sp.csr_matrix(cooc)),), {"alpha": alpha}


def cosine_similarity(rng):
    for case in range(7):
        n, m, d = rng.integers(1, 9), rng.integers(1, 9), rng.integers(1, 7)
        a = rng.normal(size=(n, d)) * rng.uniform(0.1, 10)
        b = rng.normal(size=(m, d))
        if case in (2, 5):
            a[rng.integers(n)] = 0.0  # a zero vector
        if case % 3 == 0:
            yield (a,), {}
        else:
            yield (a, b), {}
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    b[[1, 3]] = 0.0  # zero vectors in b
    yield (a, b), {}
    a = rng.normal(size=(3, 5)) * 1e3
    a[2] = 0.0
    yield (a,), {}  # b = a, with a zero vector


def skipgram_pairs(rng):
    # (0, 3) and (1, 4): documents with no pairs at all (the result is still two int64 arrays)
    for case, (length, window) in enumerate([(1, 2), (2, 1), (9, 3), (25, 5), (6, 10), (40, 2), (0, 3), (1, 4),
                                             (12, 1)]):
        ids = rng.integers(0, 30, size=length)
        if case % 2:  # dynamic windows, drawn as the docstring says
            yield (ids, window, np.random.default_rng(int(rng.integers(1000)))), {}
        else:
            yield (ids, window), {}


def sgns_loss_and_grads(rng):
    for b, k, d in [(1, 1, 1), (3, 2, 4), (8, 5, 10), (16, 3, 7)]:
        scale = rng.uniform(0.1, 3.0)
        yield (rng.normal(size=(b, d)) * scale, rng.normal(size=(b, d)), rng.normal(size=(b, k, d))), {}
    # Dot products beyond +-745, where exp overflows and sigma underflows in float64: the loss must stay finite.
    yield (np.full((2, 3), 20.0), np.full((2, 3), -20.0), np.full((2, 2, 3), 20.0)), {}  # u.v = -1200, u_k.v = 1200
    center, context, negatives = rng.normal(size=(4, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3, 5))
    center[0], context[0] = 15.0, -12.0  # u_o.v = -900 for pair 0
    center[2], negatives[2, 1] = 14.0, 12.0  # u_k.v = 840 for pair 2, noise word 1
    yield (center, context, negatives), {}
    center, context, negatives = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2, 4))
    context[1], negatives[1, 0] = center[1] * -1000 / np.sum(center[1] ** 2), center[1] * 800 / np.sum(center[1] ** 2)
    yield (center, context, negatives), {}  # u_o.v = -1000, u_k.v = 800 for pair 1


def numerical_gradient(rng):
    from course_lib.vectors.gradcheck import SmoothLoss

    # (shape, memory order, the loss reads x in place, eps): functions of their argument, as in the visible tests,
    # and losses that ignore it and read the array they hold, x itself (as a model's loss reads its parameters: the
    # docstring allows it), where a gradient taken on perturbed copies of x is 0; arrays in Fortran order (a
    # transposed weight), of which x.reshape(-1) or x.ravel() is a copy, not a view, so that perturbing it leaves x
    # as it was; a 0-d array; steps eps given by the caller, where the central difference of w ** 3 and w ** 4 differs
    # from the derivative. The loss holds the very array passed as x: pickling and copying a case keep them one.
    for shape, order, in_place, eps in [
            ((3,), "C", False, None), ((2, 3), "C", False, None), ((4, 1, 3), "C", False, None),
            ((2, 3), "C", True, None), ((3, 1, 2), "C", True, None), ((5,), "C", True, None),
            ((3, 4), "F", False, None), ((2, 3, 2), "F", True, None), ((4, 2), "F", False, 1e-2),
            ((3, 2), "C", False, 3e-2), ((2, 2), "C", True, 1e-1), ((), "C", True, None)]:
        x = np.asarray(rng.normal(size=shape), order=order)  # (shape) float64
        loss = SmoothLoss(rng.normal(size=shape), float(rng.normal()) * 0.5, weights=x if in_place else None)
        yield (loss, x), ({} if eps is None else {"eps": eps})


def procrustes(rng):
    for n, d in [(5, 2), (30, 4), (100, 8), (12, 12), (9, 3)]:
        source = rng.normal(size=(n, d))
        rotation, _ = np.linalg.qr(rng.normal(size=(d, d)))
        yield (source, source @ rotation.T + rng.normal(size=(n, d)) * rng.uniform(0, 0.5)), {}


def rnn_step(rng):
    for b, d, h in [(1, 1, 1), (3, 4, 5), (8, 2, 6), (2, 10, 3)]:
        scale = rng.uniform(0.3, 3.0)
        yield (rng.normal(size=(b, d)) * scale, np.tanh(rng.normal(size=(b, h))), rng.normal(size=(h, d)),
               rng.normal(size=(h, h)) * scale, rng.normal(size=h)), {}


def rnn_backward(rng):
    from course_lib.recurrent.elman import rnn_forward

    for b, t, d, h in [(1, 1, 1, 1), (2, 5, 3, 4), (4, 9, 2, 6), (3, 3, 5, 2)]:
        xs, h0 = rng.normal(size=(b, t, d)), np.tanh(rng.normal(size=(b, h)))
        w, u, bias = rng.normal(size=(h, d)) * 0.7, rng.normal(size=(h, h)) * 0.7, rng.normal(size=h)
        hs = rnn_forward(xs, h0, w, u, bias)  # the forward pass is given, not exercised
        yield (rng.normal(size=(b, t, h)), xs, hs, h0, w, u), {}


def clip_gradients(rng):
    for case, sizes in enumerate([[(3,)], [(2, 3), (4,)], [(5, 5), (5,), (2, 2, 2)], [(1,), (1,)]]):
        grads = [rng.normal(size=size) * rng.uniform(0.1, 5) for size in sizes]
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        max_norm = float(norm * [0.3, 2.0, 0.05, 1.5][case])  # above and below the threshold
        yield (grads, max_norm), {}
    yield ([np.zeros((2, 2)), np.zeros(3)], 1.0), {}  # all zero: nothing to clip
    # Small gradients clipped: the 1e-6 of the rule is not negligible next to norms of 1e-3
    for sizes, scale, ratio in [([(4,), (2, 3)], 1e-3, 0.5), ([(3, 3), (3,), (1,)], 1e-4, 0.2)]:
        grads = [rng.normal(size=size) * scale for size in sizes]
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        yield (grads, float(norm * ratio)), {}


def perplexity(rng):
    for shape, v, scale in [((1,), 1, 1.0), ((7,), 5, 1.0), ((3, 4), 9, 3.0), ((2, 3, 2), 4, 0.5)]:
        yield (rng.normal(size=(*shape, v)) * scale, rng.integers(0, v, size=shape)), {}
    # Scores where exp overflows or underflows in float64, but the perplexity itself stays finite
    for shape, v, shift in [((6,), 7, 1000.0), ((2, 5), 4, -1000.0), ((3,), 5, 800.0)]:
        yield (rng.normal(size=(*shape, v)) * 2 + shift, rng.integers(0, v, size=shape)), {}
    for n, v, gaps in [(10, 6, [900.0]), (12, 5, [800.0, 760.0])]:
        logits = rng.normal(size=(n, v)) * 1000  # (N, V)
        targets = logits.argmax(axis=1)  # (N,) confident and right...
        for row, gap in enumerate(gaps):  # ...except a few positions, whose target is `gap` below the best score
            targets[row] = (targets[row] + 1) % v
            logits[row, targets[row]] = logits[row].max() - gap
        yield (logits, targets), {}  # mean -log p of at most gaps/N + log V: far from overflowing exp
    # A mean -log p beyond log(max float64) = 709.78: the perplexity is inf (np.exp gives it, math.exp raises
    # OverflowError); and one just below, 1e304, finite although exp of each position's -log p overflows
    for shape, v, gaps in [((8,), 6, [1500.0] * 8), ((3, 4), 5, [9000.0] + [0.0] * 11), ((2, 3), 7, [720.0] * 6),
                           ((4,), 4, [700.0] * 4)]:
        logits = rng.normal(size=(*shape, v))  # (..., V)
        flat = logits.reshape(-1, v)
        targets = rng.integers(0, v, size=len(flat))
        for row, gap in enumerate(gaps):  # the target `gap` below the best score of its row (0: the best itself)
            flat[row, targets[row]] = np.delete(flat[row], targets[row]).max() - gap
        yield (logits, targets.reshape(shape)), {}


def _gate_weights(rng, gates, inputs, hidden):
    return (rng.normal(size=(gates * hidden, inputs)) * 0.6, rng.normal(size=(gates * hidden, hidden)) * 0.6,
            rng.normal(size=gates * hidden) * 0.3, rng.normal(size=gates * hidden) * 0.3)


def lstm_cell(rng):
    # (B, I, H, dtype): one unit, I below, above and equal to H; float32 in, float32 out
    for b, i, h, dtype in [(1, 1, 1, np.float64), (3, 4, 5, np.float64), (6, 2, 3, np.float64), (2, 7, 4, np.float64),
                           (3, 3, 4, np.float32), (2, 5, 2, np.float32)]:
        state = (np.tanh(rng.normal(size=(b, h))).astype(dtype), rng.normal(size=(b, h)).astype(dtype))
        x, weights = rng.normal(size=(b, i)).astype(dtype), (w.astype(dtype) for w in _gate_weights(rng, 4, i, h))
        yield (x, state, *weights), {}


def gru_cell(rng):
    # (B, I, H, dtype): one unit, I below, above and equal to H; float32 in, float32 out
    for b, i, h, dtype in [(1, 1, 1, np.float64), (3, 4, 5, np.float64), (6, 2, 3, np.float64), (2, 7, 4, np.float64),
                           (3, 3, 4, np.float32), (2, 5, 2, np.float32)]:
        yield tuple(a.astype(dtype) for a in (rng.normal(size=(b, i)), np.tanh(rng.normal(size=(b, h))),
                                              *_gate_weights(rng, 3, i, h))), {}


def bidirectional(rng):
    from course_lib.testing import CumulativeLayer

    # (B, T, extra axes, I, H, dtype): float32 x, which the layers keep in float32
    for b, t, extra, i, h, dtype in [(1, 1, (), 2, 3, np.float64), (3, 5, (), 2, 2, np.float64),
                                     (4, 6, (2,), 3, 2, np.float64), (2, 7, (), 1, 4, np.float64),
                                     (3, 5, (), 2, 3, np.float32), (2, 4, (2,), 3, 2, np.float32)]:
        lengths = rng.integers(1, t + 1, size=b)
        lengths[0] = t  # one sequence fills the batch
        x = rng.normal(size=(b, t, *extra, i)).astype(dtype)
        yield (x, lengths, CumulativeLayer(rng.normal(size=(i, h))), CumulativeLayer(rng.normal(size=(i, h)))), {}


def scalar_mix(rng):
    for layers, shape in [(1, (2,)), (3, (4, 5)), (2, (2, 3, 6)), (4, (1, 1, 3))]:
        yield (rng.normal(size=(layers, *shape)), rng.normal(size=layers) * 2, np.array(rng.uniform(0.2, 3))), {}
    # Weights where exp overflows (above 709.8) or underflows to 0 (below -745) in float64
    yield (rng.normal(size=(3, 2, 4)), np.array([1000.0, 0.0, -1000.0]), np.array([1.5])), {}
    yield (rng.normal(size=(2, 3, 2)), np.array([-1000.0, -1001.5]), np.array(0.7)), {}
    yield (rng.normal(size=(4, 5)), np.array([800.0, 803.0, 790.0, 801.0]), np.array(2.0)), {}
    for layers, shape in [(3, (2, 4)), (2, (3, 2, 2))]:  # float32 in, float32 out
        yield tuple(a.astype(np.float32) for a in (rng.normal(size=(layers, *shape)), rng.normal(size=layers),
                                                   np.array(rng.uniform(0.2, 3)))), {}


def _mask(rng, batch, keys, contiguous=True):
    """A (B, Tk) bool mask with at least one True per row: padding at the end, or any pattern."""
    if contiguous:
        lengths = rng.integers(1, keys + 1, size=batch)
        lengths[0] = keys  # one source fills the batch
        return np.arange(keys)[None, :] < lengths[:, None]
    mask = rng.random((batch, keys)) < 0.5
    mask[np.arange(batch), rng.integers(0, keys, size=batch)] = True
    return mask


def masked_softmax(rng):
    for b, q, k in [(1, 1, 1), (2, 1, 5), (3, 4, 6), (4, 2, 7)]:
        yield (rng.normal(size=(b, q, k)) * rng.uniform(0.5, 3), _mask(rng, b, k)), {}
    mask = np.zeros((5, 6), dtype=bool)
    mask[:, 0] = True  # heavy padding: one real token per source...
    mask[0] = True  # ...but for the first
    yield (rng.normal(size=(5, 3, 6)), mask), {}
    yield (rng.normal(size=(3, 2, 8)), _mask(rng, 3, 8, contiguous=False)), {}  # padding anywhere
    # Scores where exp overflows (above 709.8) or underflows to 0 (below -745) in float64
    scores = rng.normal(size=(3, 2, 5)) * 1e4
    mask = _mask(rng, 3, 5)
    scores[:, :, -1] = 3e4  # padding with the largest score of its row: subtracting it underflows every real weight
    mask[:, -1] = False
    mask[0, 0] = True
    yield (scores, mask), {}
    scores, mask = rng.normal(size=(3, 3, 4)) - 3e4, _mask(rng, 3, 4)
    mask[1:, -1] = False
    scores[~mask[:, None, :].repeat(3, axis=1)] = 0.0  # real scores near -3e4, padding 0: a fill of -1e4 is too big
    yield (scores, mask), {}
    yield (rng.normal(size=(2, 2, 5)).astype(np.float32) * 2, _mask(rng, 2, 5)), {}  # float32 in, float32 out
    scores, mask = rng.normal(size=(2, 2, 6)) * 100 - 2e4, _mask(rng, 2, 6)
    mask[:, -2:] = False
    scores[:, :, -2:] = 5e3  # float32 scores far below -1e4, padding far above them
    yield (scores.astype(np.float32), mask), {}
    yield (rng.normal(size=(2, 3, 4)), np.ones((2, 4), dtype=bool)), {}  # no padding: a plain softmax


def general_attention(rng):
    # (B, Tq, Tk, H): one source token, one query, several queries, heavy padding
    for b, q, k, h in [(1, 1, 1, 1), (2, 1, 5, 3), (3, 4, 6, 4), (2, 3, 1, 2), (4, 2, 7, 5)]:
        yield (rng.normal(size=(b, q, h)), rng.normal(size=(b, k, h)), _mask(rng, b, k, contiguous=b != 4),
               rng.normal(size=(h, h)) / np.sqrt(h)), {}
    # float32 in, float32 out; scores of order 1 (a softmax near one-hot rounds its float32 gradient to noise)
    for b, q, k, h in [(2, 3, 4, 3), (3, 1, 6, 4)]:
        query, keys = rng.normal(size=(b, q, h)).astype(np.float32), rng.normal(size=(b, k, h)).astype(np.float32)
        yield (query, keys, _mask(rng, b, k), (rng.normal(size=(h, h)) * 0.5 / np.sqrt(h)).astype(np.float32)), {}


def additive_attention(rng):
    # (B, Tq, Tk, H, A): A below, equal to and above H
    for b, q, k, h, a in [(1, 1, 1, 1, 1), (2, 1, 5, 3, 4), (3, 4, 6, 4, 2), (2, 3, 1, 2, 3), (4, 2, 7, 5, 5)]:
        yield (rng.normal(size=(b, q, h)), rng.normal(size=(b, k, h)), _mask(rng, b, k, contiguous=b != 4),
               rng.normal(size=(a, h)), rng.normal(size=(a, h)), rng.normal(size=a) * 2), {}
    for b, q, k, h, a in [(2, 3, 4, 3, 4), (3, 2, 5, 4, 3)]:  # float32 in, float32 out
        query, keys = rng.normal(size=(b, q, h)).astype(np.float32), rng.normal(size=(b, k, h)).astype(np.float32)
        weights = (rng.normal(size=size).astype(np.float32) for size in ((a, h), (a, h), a))
        yield (query, keys, _mask(rng, b, k), *weights), {}


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
               rng.normal(size=(b, k, h)).astype(dtype), _mask(rng, b, k)), {}


def _table(rng, steps, vocab, eos, sharpness, eos_start, eos_slope):
    from course_lib.attention.decoding import TableModel

    z = rng.normal(size=(steps, vocab, vocab)) * sharpness
    z[:, :, eos] += eos_start + eos_slope * np.arange(steps)[:, None]  # <eos> unlikely at first, likelier later
    return TableModel(z - np.logaddexp.reduce(z, axis=-1, keepdims=True))


def beam_search(rng):
    from course_lib.attention.decoding import translation_step_fn
    from course_lib.attention.seq2seq import Seq2Seq
    from course_lib.training import torch_seed

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
    import torch

    for vocab, width, max_len, alpha in [(6, 3, 6, 0.0), (8, 4, 7, 1.0)]:
        with torch_seed(0):
            model = Seq2Seq(5, vocab, embed_dim=4, hidden_size=5, attention=None).double()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.from_numpy(rng.normal(size=tuple(parameter.shape)) * 1.5))
        step_fn, state = translation_step_fn(model, rng.integers(1, 5, size=4))
        yield (step_fn, state, 1, 2, width, max_len), {"alpha": alpha}
    # Three such decoders (25 of 3000 seeds searched) where handing the live hypotheses the wrong states when a
    # finished one ranks above a live one (the parents of the first len(live) of the top beam_width, finished ones
    # included, instead of the live ones' own) changes the output
    for seed in (250, 334, 481):
        draw = np.random.default_rng(seed)
        vocab, width, max_len = int(draw.integers(5, 9)), int(draw.integers(2, 5)), int(draw.integers(4, 8))
        alpha = [0.0, 0.6, 1.0][int(draw.integers(3))]
        with torch_seed(0):
            model = Seq2Seq(5, vocab, embed_dim=4, hidden_size=5, attention=None).double()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.from_numpy(draw.normal(size=tuple(parameter.shape)) * 1.5))
        step_fn, state = translation_step_fn(model, draw.integers(1, 5, size=4))
        yield (step_fn, state, 1, 2, width, max_len), {"alpha": alpha}


def _rows_with_a_true(mask):
    """``mask`` (..., Tk) bool with one True (at random) put in each row that has none."""
    rows = mask.reshape(-1, mask.shape[-1])
    empty = ~rows.any(axis=1)
    rows[empty, 0] = True
    return rows.reshape(mask.shape)


def _attention_mask(rng, kind, lead, tq, tk, heads=1):
    """A mask for attention scores (*lead, Tq, Tk) of one kind, in a shape that broadcasts to them.

    ``lead`` is (B, nh, ...) or shorter; ``heads`` the size of the head axis for ALiBi-like biases.
    """
    if kind is None:
        return None
    if kind == "causal":  # (Tq, Tk), the last Tq keys are the queries' own positions
        return np.tril(np.ones((tq, tk), dtype=bool), k=tk - tq)
    if kind == "padding":  # (B, 1, ..., 1, Tk): each sequence's real keys, at least one
        lengths = rng.integers(1, tk + 1, size=lead[0])
        lengths[0] = tk
        padding = np.arange(tk)[None, :] < lengths[:, None]
        return padding.reshape(lead[0], *[1] * (len(lead) - 1), 1, tk)
    if kind == "any":  # every entry drawn, full shape
        return _rows_with_a_true(rng.random((*lead, tq, tk)) < 0.5)
    if kind == "float":  # added to the scores, full shape, a few -inf
        bias = rng.normal(size=(*lead, tq, tk)) * 2
        forbid = _rows_with_a_true(rng.random((*lead, tq, tk)) < 0.7)
        return np.where(forbid, bias, -np.inf)
    if kind == "alibi":  # (nh, Tq, Tk) distance penalties, -inf on the future
        slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
        distance = np.abs(np.arange(tq)[:, None] - np.arange(tk)[None, :])
        bias = -slopes[:, None, None] * distance
        return np.where(np.tril(np.ones((tq, tk), dtype=bool)), bias, -np.inf)
    raise ValueError(kind)


def scaled_dot_product_attention(rng):
    # (leading axes, Tq, Tk, hs, mask): self- and cross-attention (Tq != Tk), every kind of mask
    for lead, tq, tk, hs, kind in [((), 1, 1, 1, None), ((2,), 4, 4, 8, "causal"), ((2, 3), 3, 5, 4, "padding"),
                                   ((3,), 5, 2, 6, "any"), ((2, 2), 4, 6, 8, "float"), ((1, 2, 2), 2, 3, 2, None),
                                   ((2, 4), 5, 5, 16, "alibi"), ((4,), 1, 7, 3, "padding"), ((2, 2), 6, 3, 4, "any")]:
        scale = rng.uniform(0.5, 2.5)
        query, key = rng.normal(size=(*lead, tq, hs)) * scale, rng.normal(size=(*lead, tk, hs)) * scale
        value = rng.normal(size=(*lead, tk, hs))
        mask = _attention_mask(rng, kind, lead, tq, tk, heads=lead[-1] if lead else 1)
        yield (query, key, value) if mask is None else (query, key, value, mask), {}
    query, key, value = (rng.normal(size=(2, 3, n, 8)).astype(np.float32) for n in (4, 5, 5))
    yield (query, key, value, _attention_mask(rng, "padding", (2, 3), 4, 5)), {}  # float32 in, float32 out
    query, key, value = (rng.normal(size=(3, 6, 16)).astype(np.float32) * 1.5 for _ in range(3))
    yield (query, key, value, _attention_mask(rng, "causal", (3,), 6, 6)), {}


def multi_head_attention(rng):
    from course_lib.testing import PlainScaledAttention

    # (B, Tq, Tk, D, nh, mask, self-attention): one head, hs = 1, cross-attention with Tq != Tk
    for b, tq, tk, d, nh, kind, itself in [(1, 1, 1, 2, 1, None, True), (2, 4, 4, 8, 2, "causal", True),
                                          (2, 3, 5, 6, 3, "padding", False), (3, 5, 5, 8, 4, "both", True),
                                          (1, 4, 6, 12, 2, "float", False), (2, 2, 3, 4, 4, None, False),
                                          (2, 6, 6, 6, 2, "alibi", True)]:
        query = rng.normal(size=(b, tq, d))
        key, value = (query.copy(), query.copy()) if itself else (rng.normal(size=(b, tk, d)), rng.normal(size=(b, tk, d)))
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        if kind == "both":  # padding and causality, as a decoder with padded targets
            mask = _attention_mask(rng, "padding", (b, nh), tq, tk) & _attention_mask(rng, "causal", (), tq, tk)
        elif kind == "float":
            mask = _attention_mask(rng, "float", (b, nh), tq, tk)
        elif kind == "alibi":
            mask = _attention_mask(rng, "alibi", (), tq, tk, heads=nh)[None]  # (1, nh, T, T)
        else:
            mask = _attention_mask(rng, kind, (b, nh), tq, tk)
        yield (query, key, value, *weights, nh, mask), {"attention_fn": PlainScaledAttention()}
    for b, tq, tk, d, nh, kind in [(2, 4, 4, 8, 2, "causal"), (3, 3, 5, 12, 3, "padding")]:  # float32 in, float32 out
        query, key, value = (rng.normal(size=(b, n, d)).astype(np.float32) for n in (tq, tk, tk))
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        yield (query, key, value, *(w.astype(np.float32) for w in weights), nh,
               _attention_mask(rng, kind, (b, nh), tq, tk)), {"attention_fn": PlainScaledAttention()}


def sinusoidal_encoding(rng):
    del rng  # the inputs are sizes: no randomness needed
    # (T, D, base): one pair, D not a power of 2, long sequences, other bases; positions in the hundreds,
    # where angles computed in float32 are off by 1e-5
    for steps, width, base in [(1, 2, None), (6, 4, None), (50, 16, None), (9, 6, None), (64, 64, None),
                               (12, 10, 100.0), (30, 8, 1e3), (200, 4, None), (512, 32, None), (1000, 12, None)]:
        yield (steps, width), ({} if base is None else {"base": base})


def rope(rng):
    # (shape (..., T, hs), start, base, dtype): one pair, leading axes, a start, other bases, float32; float32 at
    # positions around 1000, where angles t * theta_i computed in float32 are off by up to 3e-5 radians (the ulp of
    # 1000 is 6e-5) and the result by as much, beyond float32's tolerance (the angles are computed in float64)
    for shape, start, base, dtype in [((1, 2), 0, None, np.float64), ((5, 4), 0, None, np.float64),
                                      ((2, 6, 8), 3, None, np.float64), ((2, 3, 4, 16), 0, None, np.float64),
                                      ((1, 2, 7, 6), 17, 100.0, np.float64), ((3, 10), 0, None, np.float64),
                                      ((2, 5, 8), 0, None, np.float32), ((4, 12), 40, 1e3, np.float64),
                                      ((2, 16, 32), 990, None, np.float32), ((3, 2, 12, 16), 1000, None, np.float32),
                                      ((40, 12), 1003, 1e3, np.float32)]:
        kwargs = {k: v for k, v in (("start", start), ("base", base)) if v}
        yield ((rng.normal(size=shape) * rng.uniform(0.5, 3)).astype(dtype),), kwargs


def layer_norm(rng):
    # (shape (..., D), offset, spread, eps): one vector, D = 1, rows far from 0, spreads near sqrt(eps), float32
    for shape, offset, spread, eps in [((3,), 0.0, 1.0, None), ((4, 5), 0.0, 2.0, None), ((2, 3, 8), 5.0, 1.0, None),
                                       ((2, 2, 2, 6), 0.0, 1.0, 1e-3), ((3, 1), 0.0, 1.0, None),
                                       ((5, 7), 0.0, 1e-3, None), ((4, 6), 1e6, 1.0, None), ((2, 4), -3.0, 0.003, 1e-6),
                                       ((2, 3, 5), -2e6, 0.5, None)]:
        x = offset + rng.normal(size=shape) * spread
        yield (x, rng.normal(size=shape[-1:]) + 1, rng.normal(size=shape[-1:])), ({} if eps is None else {"eps": eps})
    x = rng.normal(size=(3, 5))
    x[1] = 2.5  # a constant row: (x - mu) / sqrt(0 + eps) = 0, the output is the bias
    yield (x, rng.normal(size=5) + 1, rng.normal(size=5)), {}
    x = rng.normal(size=(2, 3, 4)).astype(np.float32) * 3  # float32 in, float32 out
    yield (x, (rng.normal(size=4) + 1).astype(np.float32), rng.normal(size=4).astype(np.float32)), {}
    x = (2.0 + rng.normal(size=(4, 10)) * 0.5).astype(np.float32)
    yield (x, (rng.normal(size=10) + 1).astype(np.float32), rng.normal(size=10).astype(np.float32)), {"eps": 1e-3}


def pre_ln_encoder_block(rng):
    from course_lib.testing import TorchEncoderParts

    # (B, T, D, nh, F, mask): one position, padding, causality, ALiBi-like biases (blocks of PyTorch's parts)
    for b, t, d, nh, ff, kind in [(1, 1, 4, 1, 8, None), (2, 5, 8, 2, 16, "padding"), (3, 4, 6, 3, 12, "causal"),
                                  (2, 6, 8, 4, 32, "alibi"), (4, 3, 4, 2, 4, None), (2, 4, 6, 2, 8, "float")]:
        parts = TorchEncoderParts.random(rng, d, nh, ff)
        x = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)
        if kind == "alibi":
            mask = _attention_mask(rng, "alibi", (), t, t, heads=nh)[None]  # (1, nh, T, T)
        else:
            mask = _attention_mask(rng, kind, (b, nh), t, t)
        yield (parts, x) if kind is None else (parts, x, mask), {}
    for b, t, d, nh, ff, kind in [(2, 5, 8, 2, 16, "padding"), (3, 4, 6, 3, 12, "causal")]:  # float32 in, float32 out
        parts = TorchEncoderParts.random(rng, d, nh, ff)
        parts.layer.float()  # PyTorch's layer in float32
        x = (rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)).astype(np.float32)
        yield (parts, x, _attention_mask(rng, kind, (b, nh), t, t)), {}


def causal_self_attention(rng):
    from course_lib.testing import PlainScaledAttention

    # (B, P cached positions or None, T new ones, D, nh, dtype, attention_fn): no cache, caches of several lengths
    # (an empty one too) before one or several new positions, heads of size 1, float32; course_lib's attention
    # (ps06's, revealed in the student edition) in the last case, PlainScaledAttention in the others.
    # The cache is an argument (not a keyword), so that the grader checks that it is left unmodified.
    for b, past, steps, d, nh, dtype, plain in [
            (1, None, 1, 2, 1, np.float64, True), (2, None, 5, 8, 2, np.float64, True), (2, 3, 1, 8, 2, np.float64, True),
            (3, 4, 3, 12, 3, np.float64, True), (1, 7, 2, 6, 6, np.float64, True), (2, 0, 4, 8, 4, np.float64, True),
            (2, 1, 6, 16, 4, np.float64, True), (2, 10, 1, 4, 2, np.float64, True), (2, 5, 3, 8, 2, np.float32, True),
            (1, None, 4, 8, 4, np.float32, True),
            (1, 2, 3, 6, 2, np.float64, False)]:
        scale = rng.uniform(0.5, 2.0)
        x = rng.normal(size=(b, steps, d)) * scale
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        cache = None if past is None else tuple(rng.normal(size=(b, nh, past, d // nh)) * scale for _ in range(2))
        args = tuple(a.astype(dtype) for a in (x, *weights)) + (nh,)
        if cache is not None:
            args += (tuple(c.astype(dtype) for c in cache),)
        yield args, ({"attention_fn": PlainScaledAttention()} if plain else {})


def temperature_top_k(rng):
    # (shape (..., V), temperature, k, kind): k None, 1, below V, equal to V and above it; ties with the k-th
    # largest and at the top; -inf already there (as after another filter); V = 1; an int temperature; float32
    for shape, temperature, k, kind in [
            ((6,), 1.0, 3, "normal"), ((3, 7), 0.5, 2, "normal"), ((2, 3, 10), 2.0, 4, "normal"),
            ((4, 5), 0.7, None, "normal"), ((2, 6), 1.3, 6, "normal"), ((3, 4), 1.0, 9, "normal"),
            ((5, 8), 1.0, 3, "ties"), ((4, 6), 0.8, 1, "top ties"), ((3, 9), 1.5, 2, "inf"), ((1, 1), 0.3, 1, "normal"),
            ((2, 12), 0.25, 5, "float32"), ((3, 5), 3, 2, "normal"), ((2, 8), 0.1, 3, "large"), ((6, 7), 1.0, 4, "ties"),
            ((2, 2, 3), 0.9, 4, "normal"), ((3, 9), 0.7, 3, "float32")]:
        logits = rng.normal(size=shape) * rng.uniform(0.5, 3)
        if kind == "ties":  # few distinct values: the k-th largest is tied with others in most rows
            logits = rng.integers(-2, 3, size=shape).astype(np.float64)
        elif kind == "top ties":  # two equal largest logits in every row
            rows = logits.reshape(-1, shape[-1])
            for row in rows:
                first, second = rng.choice(shape[-1], size=2, replace=False)
                row[second] = row[first] = row.max() + 1.0
        elif kind == "inf":  # tokens removed before: fewer than k finite logits in the first row
            logits[0, rng.choice(shape[-1], size=shape[-1] - 1, replace=False)] = -np.inf
            logits[1:, rng.choice(shape[-1], size=3, replace=False)] = -np.inf
        elif kind == "large":
            logits = logits * 100
        elif kind == "float32":
            logits = logits.astype(np.float32)
        yield (logits, temperature, k), {}


def _mass_edges(logits):
    """The cumulative masses of each row's tokens sorted from the most probable, ``(..., V)``: top-p's edges."""
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.cumsum(-np.sort(-probs, axis=-1), axis=-1)


def _clear_p(rng, logits, low=0.05, high=0.97):
    """A ``p`` in ``(low, high)`` at least 1e-4 away from every cumulative mass, so rounding cannot move an edge."""
    edges = _mass_edges(np.asarray(logits, dtype=np.float64))
    while True:
        p = float(rng.uniform(low, high))
        if np.all(np.abs(edges - p) > 1e-4):
            return p


def top_p_filter(rng):
    # Random logits (p kept clear of every row's cumulative masses); rows that are permutations of one set of
    # logits with ties, p inside the tied group (all of it is kept); two tied maxima and a tiny p; one token
    # holding all the mass, or nearly; p = 1; -inf already there; float32; large logits
    for shape, scale in [((8,), 2.0), ((3, 10), 1.5), ((2, 3, 12), 1.0), ((2, 6), 8.0)]:
        logits = rng.normal(size=shape) * scale
        yield (logits, _clear_p(rng, logits)), {}
    logits = rng.normal(size=(4, 6)) * 3
    yield (logits, _clear_p(rng, logits, 0.005, 0.03)), {}  # below the top token's mass: the top token alone
    for values, group in [([2.0, 1.0, 1.0, 1.0, 0.0, -1.0], 1.0), ([3.0, 2.5, 0.5, 0.5, 0.5, 0.5, -1.0, -2.0], 0.5),
                          ([1.0, 1.0, 0.0, 0.0, 0.0, -3.0], 0.0)]:
        values = np.array(values)
        probs = np.exp(values) / np.exp(values).sum()
        before = probs[values > group].sum()  # the mass of the tokens more probable than the tied group
        p = before + probs[values == group][0] * rng.uniform(0.2, 0.8)  # the edge falls inside the group
        logits = np.stack([rng.permutation(values) for _ in range(3)])  # (3, V): the same masses in every row
        yield (logits, float(p)), {}
    logits = rng.normal(size=(3, 7))
    for row in logits:
        row[rng.choice(7, size=2, replace=False)] = row.max() + 0.5  # two tied maxima
    yield (logits, 0.01), {}
    logits = np.full((4, 5), -1000.0)
    logits[np.arange(4), rng.integers(0, 5, size=4)] = 0.0  # one token holds all the mass (the others underflow to 0)
    yield (logits, 0.9), {}
    logits = np.zeros((2, 6), dtype=np.float32)
    logits[:, 0] = 20.0  # one token holds all but 2.5e-8 of the mass
    yield (logits, 0.5), {}
    logits = rng.normal(size=(3, 8))
    yield (logits, 1.0), {}  # every token kept
    logits = rng.normal(size=(3, 9)) * 2
    logits[np.arange(3)[:, None], np.stack([rng.choice(9, size=4, replace=False) for _ in range(3)])] = -np.inf
    yield (logits, _clear_p(rng, logits)), {}  # tokens removed before (-inf, probability 0)
    logits = (rng.normal(size=(2, 2, 7)) * 2).astype(np.float32)
    yield (logits, _clear_p(rng, logits)), {}
    logits = rng.normal(size=(4, 10)) * 40
    yield (logits, _clear_p(rng, logits, 0.5, 0.999)), {}


def _tiny_gpt(rng, vocab, context, width, heads, layers, prompt_length=None):
    """A float64 GPT with ``PlainCausalAttention`` (no exercise inside), every weight drawn from ``rng``."""
    import torch

    from course_lib.gpt.model import GPT, GPTConfig
    from course_lib.testing import PlainCausalAttention
    from course_lib.training import torch_seed

    with torch_seed(0):
        model = GPT(GPTConfig(vocab, context=context, width=width, num_heads=heads, layers=layers),
                    causal_attention_fn=PlainCausalAttention(prompt_length)).double()
    with torch.no_grad():  # spread weights: distinct, confident next-token distributions that depend on the
        for name, parameter in model.named_parameters():  # earlier positions (small embeddings, larger blocks)
            drawn = rng.normal(size=tuple(parameter.shape)) * (0.3 if "embedding" in name else 0.7)
            if "norm" in name and name.endswith("weight"):
                drawn = drawn + 1.0  # LayerNorm gains around 1
            parameter.copy_(torch.from_numpy(drawn))
    return model


def gpt_beam_search(rng):
    # (V, layers, prompt length T, beam_width, max_new_tokens, eos or None, alpha, cache enforced): beam width 1
    # (greedy); beams as wide as every output (V ** max_new_tokens), where beam search is exhaustive search; narrow
    # beams with and without <eos>; alpha 0, 0.6 and 1; one new token; a prompt that fills the context. "cache
    # enforced": the model refuses to read more than the prompt without its cache (PlainCausalAttention(T)).
    for vocab, layers, prompt, width, new, eos, alpha, enforced in [
            (4, 1, 2, 1, 5, None, 0.0, False), (5, 2, 3, 1, 6, 1, 0.0, True), (3, 1, 1, 27, 3, None, 0.0, False),
            (4, 2, 2, 64, 3, 1, 0.0, True), (4, 1, 2, 64, 3, 2, 1.0, False), (3, 2, 3, 81, 4, 0, 0.6, True),
            (6, 2, 4, 3, 6, 5, 0.0, True), (8, 1, 2, 4, 7, 3, 1.0, False), (7, 2, 5, 2, 5, None, 0.0, True),
            (10, 2, 3, 5, 6, 0, 0.6, False), (5, 1, 2, 8, 4, 4, 1.0, True), (6, 2, 3, 3, 1, 2, 0.0, False),
            (5, 2, 6, 3, 5, 0, 1.0, True), (6, 2, 2, 2, 6, 0, 0.0, False), (5, 2, 3, 4, 6, 3, 0.6, True),
            (8, 2, 3, 3, 6, None, 0.0, False), (6, 2, 2, 3, 5, 4, 1.0, True)]:
        context = prompt + new - 1 if prompt == 6 else prompt + new + 2  # the 6-token prompt: the whole context used
        model = _tiny_gpt(rng, vocab, context, 8, 2, layers, prompt if enforced else None)
        kwargs = {"alpha": alpha} if eos is None else {"eos": eos, "alpha": alpha}
        yield (model, rng.integers(0, vocab, size=prompt), width, new), kwargs
    # Three models (of 3000 seeds searched) where a finished hypothesis taking its place among the beam_width kept
    # changes the answer: a beam that keeps beam_width live ones besides the finished ones finds another output.
    # Three more (6 of the first 400 seeds do) where handing the live hypotheses the wrong cache rows when a finished
    # one ranks above a live one (the first len(live) parents of the top beam_width, not the live ones' own) changes
    # the output: the rows shift, and a live hypothesis continues from another's keys and values
    for seed in (209, 1442, 2639, 236, 337, 352):
        draw = np.random.default_rng(seed)
        vocab, width, new, prompt = (int(draw.integers(low, high)) for low, high in ((3, 7), (2, 5), (4, 8), (1, 4)))
        eos = int(draw.integers(vocab))
        model = _tiny_gpt(draw, vocab, prompt + new + 2, 8, 2, int(draw.integers(1, 3)), prompt_length=prompt)
        yield (model, draw.integers(0, vocab, size=prompt), width, new), {"eos": eos, "alpha": 1.0}


# ps08: BERT. wordpiece_word gets small vocabularies written for each case; mlm_mask draws at random and is judged
# by _mlm_mask_property (its cases hold torch tensors and a torch.Generator, never the reference's draws).
def _vocab(*tokens):
    """A vocabulary (token -> id) of the given tokens, in this order, after ``[UNK]``."""
    return {token: i for i, token in enumerate(("[UNK]", *tokens))}


def wordpiece_word(rng):
    pieces = _vocab("un", "##aff", "##able", "a", "##a", "b", "##b", "ab", "##ab", "##c")
    # (word, vocab, kwargs): continuations; whole word in the vocabulary; a piece missing at the start, in the middle
    # and at the end (the whole word is [UNK], never the pieces found so far); the longest match first
    # ("bank" + "##ing", not "b" + "##an" + ...), and no backtracking when the longest prefix leads nowhere
    # ("ab" then nothing, although "a" + "##bcd" would do); "##" only on continuations; max_chars: words of exactly
    # max_chars and max_chars + 1 characters (default 100 too); single characters; the empty word; unicode; another
    # unk_token
    longest = _vocab("b", "ba", "ban", "bank", "##a", "##an", "##k", "##i", "##in", "##ing", "##n", "##g", "##s")
    fixed = [
        ("unaffable", pieces, {}), ("unaffablec", pieces, {}), ("ab", pieces, {}), ("abab", pieces, {}),
        ("unaffablex", pieces, {}), ("xunaffable", pieces, {}), ("unxaffable", pieces, {}),
        ("banking", longest, {}), ("banks", longest, {}), ("bankings", longest, {}), ("bang", longest, {}),
        ("abcd", _vocab("ab", "a", "##bcd", "##b"), {}), ("abcd", _vocab("ab", "a", "##bc", "##d"), {}),
        ("abcd", _vocab("a", "##b", "##bcd", "##c", "##d"), {}),
        ("ab", _vocab("##ab", "a", "##b"), {}), ("ab", _vocab("##ab", "##a", "##b"), {}),
        ("aaaaa", pieces, {"max_chars": 5}), ("aaaaaa", pieces, {"max_chars": 5}),
        ("ab" * 50, pieces, {}), ("ab" * 50 + "a", pieces, {}), ("ab" * 50 + "c", pieces, {"max_chars": 101}),
        ("a", pieces, {"max_chars": 1}), ("ab", pieces, {"max_chars": 1}),
        ("a", pieces, {}), ("c", pieces, {}), ("z", pieces, {}), ("", pieces, {}), ("", pieces, {"max_chars": 0}),
        ("naïve", _vocab("na", "##ï", "##ve", "##i"), {}), ("café", _vocab("caf", "##é", "cafe"), {}),
        ("café", _vocab("caf", "##e", "cafe"), {}), ("日本語", _vocab("日", "##本", "##語", "本"), {}), ("🙂", pieces, {}),
        ("straße", _vocab("stra", "##ße", "##ss"), {}),
        ("unaffablex", pieces, {"unk_token": "<unk>"}), ("xyz", _vocab("x", "##y"), {"unk_token": "[UNK]"}),
    ]
    for word, vocab, kwargs in fixed:
        yield (word, dict(vocab)), kwargs
    # Random vocabularies of short pieces over a small alphabet, and random words: most cut, some [UNK]
    alphabet = np.array(list("abcde"))
    for size, length in [(12, 6), (20, 9), (30, 12), (16, 4), (40, 15), (25, 7)]:
        tokens = set()
        while len(tokens) < size:
            piece = "".join(rng.choice(alphabet, size=int(rng.integers(1, 4))))
            tokens.add(piece if rng.random() < 0.4 else "##" + piece)
        tokens |= {"a", "##a", "##b"}  # at least some words can be cut
        vocab = _vocab(*sorted(tokens))
        for _ in range(3):
            yield ("".join(rng.choice(alphabet, size=int(rng.integers(1, length + 1)))), vocab), {}


def bert_embeddings(rng):
    # (B, T, V, D, positions, segments, scale, eps, dtype): one token; T below the positions; pairs (segment 0 then 1)
    # and all segment 1; eps given; tiny vectors whose variance is far below 1e-5, where eps = 1e-12 (not torch's
    # default 1e-5) decides the result; float32
    for b, t, v, d, positions, segments, scale, eps, dtype in [
            (1, 1, 3, 2, 1, "zero", 1.0, None, np.float64), (2, 5, 11, 8, 9, "pair", 1.0, None, np.float64),
            (3, 4, 7, 6, 4, "one", 0.5, None, np.float64), (4, 6, 20, 12, 16, "pair", 2.0, 1e-3, np.float64),
            (2, 3, 5, 4, 8, "random", 1e-4, None, np.float64), (3, 7, 9, 8, 12, "pair", 3e-5, None, np.float64),
            (1, 8, 30, 16, 10, "pair", 1.0, None, np.float64), (2, 4, 6, 8, 6, "random", 1.0, None, np.float32),
            (3, 5, 9, 8, 7, "pair", 1.0, None, np.float32),
            (5, 2, 4, 3, 2, "one", 1.0, 1e-5, np.float64)]:
        ids = rng.integers(0, v, size=(b, t))
        if segments == "zero":
            segs = np.zeros((b, t), dtype=np.int64)
        elif segments == "one":
            segs = np.ones((b, t), dtype=np.int64)
        elif segments == "pair":  # [CLS] a [SEP] in segment 0, b [SEP] in segment 1
            segs = (np.arange(t)[None, :] >= rng.integers(1, t + 1, size=b)[:, None]).astype(np.int64)
        else:
            segs = rng.integers(0, 2, size=(b, t))
        weights = [rng.normal(size=(n, d)) * scale for n in (v, 2, positions)]
        args = (ids, segs, *[w.astype(dtype) for w in weights], (rng.normal(size=d) + 1).astype(dtype),
                rng.normal(size=d).astype(dtype))
        yield args, ({} if eps is None else {"eps": eps})


def bert_self_attention(rng):
    import functools

    import torch

    # (B, T, D, nh, padding, dropout, dtype): one token and one head; padding at the end of some rows (the first
    # row full), anywhere, or none (None); heads of size 1; a dropout callable that halves every weight or that
    # zeroes a fixed pattern and doubles the rest (the output must use it, the returned weights must not);
    # float32. Dropout stands for nn.Dropout: a function of the (B, nh, T, T) weights.
    for b, t, d, nh, kind, dropout, dtype in [
            (1, 1, 2, 1, None, None, np.float64), (2, 5, 8, 2, "padding", None, np.float64),
            (3, 4, 12, 3, "padding", None, np.float64), (2, 6, 8, 4, None, None, np.float64),
            (2, 5, 6, 6, "padding", None, np.float64), (4, 7, 16, 4, "any", None, np.float64),
            (3, 6, 8, 2, "padding", "half", np.float64), (2, 5, 8, 4, "padding", "pattern", np.float64),
            (2, 4, 8, 2, None, "pattern", np.float64), (1, 3, 4, 1, None, "half", np.float64),
            (2, 6, 8, 2, "padding", None, np.float32), (3, 5, 8, 4, "any", "pattern", np.float64),
            (3, 4, 8, 4, "padding", "pattern", np.float32)]:
        x = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 2.0)
        weights = []
        for _ in range(3):
            weights += [rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5]
        padding = None if kind is None else _mask(rng, b, t, contiguous=kind == "padding")
        kwargs = {}
        if dropout == "half":
            kwargs["dropout"] = functools.partial(torch.mul, other=0.5)
        elif dropout == "pattern":
            keep = torch.from_numpy((rng.random((b, nh, t, t)) < 0.6) * 2.0).to(getattr(torch, np.dtype(dtype).name))
            kwargs["dropout"] = functools.partial(torch.mul, other=keep)
        yield (x.astype(dtype), padding, *[w.astype(dtype) for w in weights], nh), kwargs
    # Scores of tens of thousands. Where padded keys score far above the real ones, adding -1e4 to their scores
    # (instead of -inf) leaves them most of the weight; where every real key scores far below -1e4, setting the
    # padded scores to -1e4 does. The weights of padded keys must be exactly 0.
    for b, t, d, nh, sign in [(2, 5, 4, 2, 1.0), (3, 4, 6, 1, 1.0), (2, 5, 6, 1, -1.0), (3, 4, 4, 2, -1.0)]:
        x = np.abs(rng.normal(size=(b, t, d))) + 0.5  # positive: the sign of every product is the sign of W_K
        if sign > 0:
            x[:, -1] = 200.0  # the padded last key: scores near 3e4 against ~200 for the real ones
        else:
            x *= 15.0  # every score below about -1e4
        padding = _mask(rng, b, t)
        padding[:, -1] = False  # the last key is padding in every row
        yield (x, padding, np.eye(d) * 10, np.zeros(d), np.eye(d) * 10 * sign, np.zeros(d), rng.normal(size=(d, d)),
               rng.normal(size=d), nh), {}


def mean_pool(rng):
    # (B, T, D, padding, garbage, dtype): one token; padding at the end of some rows (the first full); large values
    # in the padded positions, which must count for nothing; rows with a single real token; no padding; padding
    # anywhere; float32
    for b, t, d, kind, garbage, dtype in [
            (1, 1, 3, "none", False, np.float64), (2, 5, 4, "padding", False, np.float64),
            (3, 6, 8, "padding", True, np.float64), (4, 7, 5, "single", True, np.float64),
            (2, 4, 3, "none", False, np.float64), (3, 8, 6, "any", True, np.float64),
            (2, 5, 16, "padding", True, np.float32), (5, 3, 2, "single", False, np.float64),
            (3, 6, 4, "any", True, np.float32)]:
        hidden = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)
        if kind == "none":
            padding = np.ones((b, t), dtype=bool)
        elif kind == "single":  # the first row full, the others a single real token (at the start or anywhere)
            padding = np.zeros((b, t), dtype=bool)
            padding[0] = True
            padding[np.arange(1, b), rng.integers(0, t, size=b - 1)] = True
            padding[1, 1:] = False
            padding[1, 0] = True
        else:
            padding = _mask(rng, b, t, contiguous=kind == "padding")
        if garbage:
            hidden[~padding] = rng.normal(size=(int((~padding).sum()), d)) * 1e6
        yield (hidden.astype(dtype), padding), {}


def mlm_mask(rng):
    import torch

    # (B, T, V, special ids, mask id, probability, ids): the specials of a tiny vocabulary first, or scattered as in
    # BERT's ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); rows that start with [CLS], end with [SEP] and are
    # padded; words drawn uniformly or very unevenly (the random replacements must still be uniform over the
    # non-special ids); probability 0, 0.15, 0.5 and 1; a batch of specials only; one token; 3 and 2 non-special ids,
    # where a random token is often the original one (a draw from the other ids only is not uniform). Every case has
    # its own torch.Generator (a random function is judged by a property, never by the reference's draws).
    bert = (0, 100, 101, 102, 103)
    for b, t, v, specials, mask_id, p, words in [
            (64, 128, 30, (0, 1, 2, 3, 4), 4, 0.15, "uniform"), (48, 96, 12, (0, 5, 6, 7, 8), 8, 0.5, "uniform"),
            (32, 64, 130, bert, 103, 0.15, "uniform"), (40, 100, 20, (0, 1, 2, 3), 3, 1.0, "zipf"),
            (16, 32, 25, (0, 1, 2, 3, 4), 4, 0.0, "uniform"), (64, 64, 9, (2, 4, 6, 8), 4, 0.3, "zipf"),
            (50, 80, 30522, bert, 103, 0.15, "uniform"), (8, 12, 10, (0, 1, 2, 3, 4), 4, 0.15, "specials"),
            (1, 1, 6, (0, 1), 1, 0.15, "uniform"), (24, 40, 15, (14, 13, 12, 11), 13, 1.0, "uniform"),
            (100, 100, 7, (0, 1, 2, 3), 3, 1.0, "uniform"), (128, 96, 6, (5, 0, 2, 4), 0, 0.5, "uniform")]:
        pad, cls, sep = (specials[0], specials[2], specials[3]) if len(specials) >= 4 else (specials[0],) * 3
        candidates = np.array([i for i in range(v) if i not in specials])
        if words == "zipf":
            chance = 1.0 / np.arange(1, len(candidates) + 1) ** 1.5
            ids = rng.choice(candidates, size=(b, t), p=chance / chance.sum())
        elif words == "specials":
            ids = rng.choice(np.array(specials), size=(b, t))
        else:
            ids = rng.choice(candidates, size=(b, t))
        if t >= 4 and words != "specials":
            lengths = rng.integers(t // 2, t + 1, size=b)
            lengths[0] = t
            ids[:, 0] = cls
            ids[np.arange(b), lengths - 1] = sep
            ids[np.arange(t)[None, :] >= lengths[:, None]] = pad
        generator = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
        special_ids = list(specials) if b % 2 else tuple(specials)
        yield (torch.from_numpy(ids.astype(np.int64)), special_ids, mask_id, v), {"probability": p,
                                                                                  "generator": generator}


TORCH = {"recurrent.cells.lstm_cell", "recurrent.cells.gru_cell", "recurrent.layers.bidirectional", "recurrent.elmo.scalar_mix",
         "attention.masking.masked_softmax", "attention.scores.general_attention",
         "attention.scores.additive_attention", "attention.seq2seq.attention_decoder_step",
         "attention.decoding.beam_search", "transformer.scaled_attention.scaled_dot_product_attention",
         "transformer.multi_head.multi_head_attention", "transformer.positions.sinusoidal_encoding",
         "transformer.positions.rope", "transformer.layer_norm.layer_norm", "transformer.blocks.pre_ln_encoder_block",
         "gpt.causal_attention.causal_self_attention", "gpt.filters.temperature_top_k", "gpt.filters.top_p_filter",
         "gpt.beam.beam_search", "bert.embeddings.bert_embeddings", "bert.self_attention.bert_self_attention",
         "bert.pooling.mean_pool"}
"""Exercises that take torch tensors: their cases are stored as numpy arrays and converted for the call."""

GENERATORS = {
    "vectors.counts.one_hot": one_hot,
    "vectors.counts.tfidf": tfidf,
    "vectors.counts.ppmi": ppmi,
    "vectors.counts.cosine_similarity": cosine_similarity,
    "vectors.word2vec.skipgram_pairs": skipgram_pairs,
    "vectors.word2vec.sgns_loss_and_grads": sgns_loss_and_grads,
    "vectors.gradcheck.numerical_gradient": numerical_gradient,
    "vectors.alignment.procrustes": procrustes,
    "recurrent.elman.rnn_step": rnn_step,
    "recurrent.elman.rnn_backward": rnn_backward,
    "recurrent.clipping.clip_gradients": clip_gradients,
    "recurrent.perplexity.perplexity": perplexity,
    "recurrent.cells.lstm_cell": lstm_cell,
    "recurrent.cells.gru_cell": gru_cell,
    "recurrent.layers.bidirectional": bidirectional,
    "recurrent.elmo.scalar_mix": scalar_mix,
    "attention.masking.masked_softmax": masked_softmax,
    "attention.scores.general_attention": general_attention,
    "attention.scores.additive_attention": additive_attention,
    "attention.seq2seq.attention_decoder_step": attention_decoder_step,
    "attention.decoding.beam_search": beam_search,
    "transformer.scaled_attention.scaled_dot_product_attention": scaled_dot_product_attention,
    "transformer.multi_head.multi_head_attention": multi_head_attention,
    "transformer.positions.sinusoidal_encoding": sinusoidal_encoding,
    "transformer.positions.rope": rope,
    "transformer.layer_norm.layer_norm": layer_norm,
    "transformer.blocks.pre_ln_encoder_block": pre_ln_encoder_block,
    "gpt.causal_attention.causal_self_attention": causal_self_attention,
    "gpt.filters.temperature_top_k": temperature_top_k,
    "gpt.filters.top_p_filter": top_p_filter,
    "gpt.beam.beam_search": gpt_beam_search,
    "bert.wordpiece.wordpiece_word": wordpiece_word,
    "bert.embeddings.bert_embeddings": bert_embeddings,
    "bert.self_attention.bert_self_attention": bert_self_attention,
    "bert.pooling.mean_pool": mean_pool,
    "bert.masking.mlm_mask": mlm_mask,
}

GRADIENTS = {
    "recurrent.cells.lstm_cell": (0, 2, 3, 4, 5),  # x and the weights; the state (h, c) is a pair, not a tensor
    "recurrent.cells.gru_cell": (0, 1, 2, 3, 4, 5),
    "recurrent.layers.bidirectional": (0,),
    "recurrent.elmo.scalar_mix": (0, 1, 2),
    "attention.masking.masked_softmax": (0,),
    "attention.scores.general_attention": (0, 1, 3),  # query, keys and W
    "attention.scores.additive_attention": (0, 1, 3, 4, 5),  # query, keys, W_q, W_k and v
    "attention.seq2seq.attention_decoder_step": (2, 3),  # s_prev and memory
    "transformer.scaled_attention.scaled_dot_product_attention": (0, 1, 2),
    "transformer.multi_head.multi_head_attention": (0, 1, 2, 3, 4, 5, 6),  # the inputs and every weight
    "transformer.positions.rope": (0,),
    "transformer.layer_norm.layer_norm": (0, 1, 2),
    "transformer.blocks.pre_ln_encoder_block": (1,),  # x (the parts are PyTorch's)
    "gpt.causal_attention.causal_self_attention": (0, 1, 2, 3, 4),  # x and every weight; the cache is a pair
    "bert.embeddings.bert_embeddings": (2, 3, 4, 5, 6),  # the three tables and the LayerNorm's weight and bias
    # x and every weight but b_k: adding b_k adds q . b_k to every score of a row, which the softmax ignores, so its
    # gradient is 0 up to rounding, and comparing rounding errors would judge nothing
    "bert.self_attention.bert_self_attention": (0, 2, 3, 4, 6, 7),
    "bert.pooling.mean_pool": (0,),
}
"""Differentiable torch exercises: the arguments whose gradients the hidden cases check (a
function that computes the right values through numpy passes no gradient back)."""

HINTS: dict[str, str] = {
    "vectors.counts.one_hot":
        "Set one entry per row, vectors[np.arange(N), ids] = 1, in a float64 array of shape (N, V) "
        "(vectors[:, ids] = 1 sets whole columns).",
    "vectors.counts.tfidf":
        "df_w is the number of documents with a nonzero count of w, not the sum of its counts, "
        "and normalize divides each row (axis=1), not each column, by its L2 norm.",
    "vectors.counts.ppmi":
        "Only the context distribution is smoothed: raise the context counts n_c to the power alpha and "
        "renormalize them to sum to 1, and leave pairs with a zero count at 0.",
    "vectors.counts.cosine_similarity":
        "Divide by the norms of both rows (np.linalg.norm over axis=1), and give zero vectors "
        "similarity 0 instead of dividing by zero.",
    "vectors.word2vec.skipgram_pairs":
        "Pair each center only with positions inside the document at distance 1 to b_i, with all T "
        "dynamic windows drawn by one rng.integers(1, window + 1, size=T), and return int64 arrays even "
        "when there is no pair.",
    "vectors.word2vec.negative_samples":
        "Draw word w with probability noise[w] exactly as given (it is already smoothed: no second "
        "power 3/4), with rng only, and return integer ids.",
    "vectors.word2vec.sgns_loss_and_grads":
        "Compute -log sigma(x) as np.logaddexp(0, -x): np.log(sigmoid(x)) gives -inf once a dot product "
        "is below about -745, and both the loss and the gradients are averaged over the batch.",
    "vectors.gradcheck.numerical_gradient":
        "Change x itself one entry at a time (f may read x in place, so f of a perturbed copy can miss the change, "
        "and x.reshape(-1) of a transposed x is a copy), take (f(x) at x[i] + eps minus f(x) at x[i] - eps) / (2 eps), "
        "and put x[i] back to its value after probing it.",
    "vectors.alignment.procrustes":
        "Take the SVD of target.T @ source (the SVD of source.T @ target gives R transposed) and "
        "return U @ Vt without the singular values.",
    "recurrent.elman.rnn_step":
        "Multiply the rows by the transposed weights, x @ W.T and h_prev @ U.T, and add the bias "
        "inside the tanh.",
    "recurrent.elman.rnn_backward":
        "Add the gradient from the next step before the tanh derivative, dh_t = dhs[:, t] + dh_next, "
        "send it back with da_t @ U (not U.T), and do not write into dhs.",
    "recurrent.clipping.clip_gradients":
        "Scale every array by the same factor min(1, max_norm / (n + 1e-6)), n the norm of all of them "
        "together, into new arrays: g *= scale changes the caller's gradients.",
    "recurrent.perplexity.perplexity":
        "Take -log p straight from logsumexp with the maximum subtracted: exp of raw scores overflows, "
        "and the log of a softmax probability that underflowed to 0 is -inf.",
    "recurrent.cells.lstm_cell":
        "The four blocks come in the order i, f, g, o with both biases added, h' = o * tanh(c'), and "
        "only torch operations (no numpy, no in-place updates) let the gradients flow.",
    "recurrent.cells.gru_cell":
        "The reset gate multiplies h W_hn^T + b_hn, after its bias, and h' = (1 - z) * n + z * h, "
        "with the blocks in the order r, z, n.",
    "recurrent.layers.bidirectional":
        "Reverse each sequence within its own length (its padding stays at the end), and reverse the "
        "backward outputs again before concatenating [forward; backward].",
    "recurrent.elmo.scalar_mix":
        "Use torch.softmax (exp of weights of +-1000 overflows) and keep gamma a tensor, so that "
        "gradients reach the weights, gamma and the layers.",
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
    "transformer.scaled_attention.scaled_dot_product_attention":
        "Divide Q K^T by sqrt(hs), the size of a query, set the scores where a bool mask is False to -inf (a float "
        "mask is added instead) before one softmax over the last axis (the keys), and return (weights @ value, weights).",
    "transformer.multi_head.multi_head_attention":
        "Split in_weight and in_bias into the Q, K, V blocks in that order, give head h the columns h*hs to (h+1)*hs "
        "by a reshape to (B, T, nh, hs) and a transpose to (B, nh, T, hs), call attention_fn once for all heads, and "
        "merge the heads back the same way before out_weight.T and out_bias.",
    "transformer.positions.sinusoidal_encoding":
        "Column 2i holds sin(t w_i) and column 2i+1 holds cos(t w_i), with w_i = base ** (-2i / D) for the pair "
        "index i (not the column index), computed in float64 and returned as float32.",
    "transformer.positions.rope":
        "Rotate the interleaved pairs (x[..., 0::2], x[..., 1::2]) by t * theta_i with t = start + row and "
        "theta_i = base ** (-2i / hs), the angles in float64, and interleave the rotated pairs back (not the first "
        "half with the second).",
    "transformer.layer_norm.layer_norm":
        "Normalise over the last axis only, with the biased variance (the mean of (x - mu) ** 2, not torch.var's "
        "unbiased default) and eps inside the square root, then multiply by weight and add bias.",
    "transformer.blocks.pre_ln_encoder_block":
        "Normalise the input of each sublayer, not its output, and add the sublayer's result to that input: "
        "h = x + self_attention(norm1(x), mask), then h + feed_forward(norm2(h)).",
    "gpt.causal_attention.causal_self_attention":
        "Put the cached keys and values before the new ones along the positions (torch.cat on dim 2, never into the "
        "cache itself), attend with causal_mask_after(P, T), so that new position i sees the keys up to P + i, and "
        "return the projected output with the new cache (keys, values) of all P + T positions.",
    "gpt.filters.temperature_top_k":
        "Divide by the temperature, then set to -inf, in a new tensor, every logit below the k-th largest of its row "
        "(topk(k).values[..., -1:]), so that ties with the k-th are kept, and keep every token when k is None or k >= V.",
    "gpt.filters.top_p_filter":
        "Keep token v when the tokens strictly more probable than v hold less than p of the softmax's mass (so the "
        "top token and every token tied with the least probable kept one stay), and return the logits themselves "
        "with the others set to -inf.",
    "gpt.beam.beam_search":
        "Read the prompt once, then run the K live hypotheses' last tokens as one (K, 1) batch with the cache "
        "reordered by their parents (reorder_cache), keep the beam_width best of all K x V extensions by total "
        "log-probability (finished ones take a place too), and divide by len(tokens) ** alpha only to choose among "
        "finished hypotheses.",
    "bert.wordpiece.wordpiece_word":
        "At each step take the longest piece that is in the vocabulary (try the end from the word's end down), write "
        "every piece after the first as '##' + piece, and return [unk_token] alone (not the pieces found so far) as "
        "soon as no piece fits, or when the word has more than max_chars characters.",
    "bert.embeddings.bert_embeddings":
        "Add token_weight[ids], segment_weight[segments] and the first T rows of position_weight (the same rows for "
        "every sequence of the batch), then normalise over the last axis with layer_norm and the eps given (BERT's "
        "1e-12, not torch's default 1e-5).",
    "bert.self_attention.bert_self_attention":
        "Project x by each (D, D) weight transposed plus its bias, split the heads with split_heads, divide the scores "
        "by sqrt(hs) and set those of padded keys (padding[:, None, None, :] False) to -inf before one softmax over "
        "the keys, average V with dropout(weights) but return the weights before dropout, and merge the heads "
        "without any output projection.",
    "bert.pooling.mean_pool":
        "Multiply the vectors by the padding mask as floats, (B, T, 1), sum over the positions and divide by each "
        "row's own number of real tokens, padding.sum(dim=1), in new tensors (padded vectors may hold anything).",
    "bert.masking.mlm_mask":
        "Choose each non-special position with the probability given, give a chosen one [MASK] with probability 0.8 "
        "and a uniformly drawn non-special id with probability 0.1 (else its own token), label it with its original "
        "id and every other position -100, and draw everything from the generator given.",
}
"""One sentence per exercise naming its most common mistake, shown when a test fails (never an expected value)."""


def _negative_samples_property(case, value) -> str | None:
    """negative_samples draws at random: any correct sampler passes, whatever its draws."""
    noise, size = np.asarray(case["args"][0], dtype=np.float64), case["args"][1]
    draws = np.asarray(value)
    if draws.shape != tuple(np.atleast_1d(size)):
        return f"the draws have shape {draws.shape}, expected {tuple(np.atleast_1d(size))}"
    if draws.dtype.kind not in "iu":
        return f"the draws have dtype {draws.dtype}: word ids are integers"
    if draws.size and (draws.min() < 0 or draws.max() >= len(noise)):
        return "some draws are not word ids of the noise distribution"
    frequencies = np.bincount(draws.ravel(), minlength=len(noise)) / max(draws.size, 1)
    if np.any(frequencies[noise == 0] > 0):
        return "a word of probability 0 was drawn"
    allowed = max(0.01, 2.5 / np.sqrt(max(draws.size, 1)))  # about 5 standard deviations of a frequency
    if draws.size >= 1000 and np.max(np.abs(frequencies - noise / noise.sum())) > allowed:
        return f"the draws do not follow the noise distribution (frequencies off by more than {allowed:.2g})"
    return None


def _off(count, total, probability, tail=3e-7):
    """Whether ``count`` successes in ``total`` draws of chance ``probability`` are too few or too many: a binomial
    tail below ``tail`` on either side (3e-7: about 5 standard deviations where the normal approximation holds).
    ``count`` and ``probability`` may be arrays (one answer per entry)."""
    from scipy.stats import binom

    off = (binom.cdf(count, total, probability) < tail) | (binom.sf(np.subtract(count, 1), total, probability) < tail)
    return off if np.ndim(off) else bool(off)


def _spread(counts, totals, probability, tail=1e-12) -> str | None:
    """Whether per-row counts of independent choices are spread too evenly or too unevenly; ``None`` if not.

    Row ``r`` made ``counts[r]`` of ``totals[r]`` choices, each with chance ``probability``, independently, so its
    count is binomial and ``Y_r = (counts[r] - totals[r] p) ** 2 / (totals[r] p (1 - p))`` has mean 1. Their sum ``D``
    over the rows is tested on both sides with Chernoff bounds computed exactly from the binomial laws,
    ``P(D <= d) <= exp(l d) prod_r E[exp(-l Y_r)]`` and ``P(D >= d) <= exp(-l d) prod_r E[exp(l Y_r)]`` for every
    ``l > 0`` (the smallest over a grid of ``l`` is taken): the spread is off when a bound is below ``tail``, so a
    correct answer fails each side with probability below ``tail`` (1e-12), whatever its seed. Exactly
    ``round(p n)`` choices per row give ``D`` near 0 (far too even); choosing whole rows, far too uneven.
    """
    from scipy.special import logsumexp
    from scipy.stats import binom

    totals, counts = np.asarray(totals), np.asarray(counts)
    used = totals > 0
    if not 0 < probability < 1 or used.sum() < 2:
        return None
    totals, counts = totals[used], counts[used]
    variance = totals * probability * (1 - probability)
    d = float(np.sum((counts - totals * probability) ** 2 / variance))
    rates = np.concatenate([-np.logspace(-3, 2, 60), np.logspace(-4, 0.5, 60)])  # l of each side: -l and +l
    log_moments = np.zeros_like(rates)  # sum_r log E[exp(rate Y_r)], rows grouped by their total
    for n, rows in zip(*np.unique(totals, return_counts=True)):
        k = np.arange(n + 1)
        y = (k - n * probability) ** 2 / (n * probability * (1 - probability))  # (n + 1,)
        log_moments += rows * logsumexp(rates[:, None] * y[None, :] + binom.logpmf(k, n, probability)[None, :], axis=1)
    log_bounds = log_moments - rates * d  # log exp(l d) E[exp(-l Y)] on the low side, exp(-l d) E[exp(l Y)] above
    if log_bounds[rates < 0].min() < np.log(tail):
        return "too evenly"
    if log_bounds[rates > 0].min() < np.log(tail):
        return "too unevenly"
    return None


def _mlm_mask_property(case, value) -> str | None:
    """mlm_mask draws at random: any correct corruption passes, whatever its draws and their order.

    Exact rules: two int64 tensors of the shape of ``ids``; labels -100 where a position is not chosen and the
    original id where it is; specials never chosen; unchosen positions unchanged; chosen ones become ``[MASK]``, a
    non-special id or stay; probability 0 chooses nothing and 1 every non-special position. Counts (binomial tails
    of at least 3e-7, about 5 standard deviations): the share chosen, the shares masked, replaced and kept among the
    chosen, how often two neighbours are both chosen and two successive chosen positions both escape [MASK] (no
    pattern of positions), and how often each non-special id comes up as a replacement (uniform over them). The spread
    of the rows' counts of chosen positions and of [MASK] among them (:func:`_spread`: a fixed number per row, or a
    chance that varies by row, fails; a correct answer fails it with probability below 4e-12 per case, two counts
    with two sides each, whatever its seed). What one call cannot show is whether the draws came from ``generator``:
    an answer that draws from a generator of its own with a fixed seed passes here (the probe's second call, with the
    same seed, only catches torch's global one).
    """
    from .plain_values import Tensor

    names = ("ids", "special_ids", "mask_id", "vocab_size", "probability", "generator")
    given = {"probability": 0.15, **dict(zip(names, case["args"])), **case.get("kwargs", {})}
    ids = np.asarray(given["ids"])
    specials = sorted({int(i) for i in given["special_ids"]})
    mask_id, vocab_size, probability = int(given["mask_id"]), int(given["vocab_size"]), float(given["probability"])
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return "should return the pair (inputs, labels)"
    for name, x in zip(("inputs", "labels"), value):
        if not isinstance(x, Tensor):
            return f"{name} should be a torch tensor"
        if x.shape != ids.shape:
            return f"{name} has shape {x.shape}, expected the shape of ids, {ids.shape}"
        if x.dtype != np.int64:
            return f"{name} has dtype {x.dtype}, expected int64"
    inputs, labels = (np.asarray(x) for x in value)
    special = np.isin(ids, specials)
    chosen = labels != -100  # -100: the label of a position that is not predicted
    if np.any(chosen & special):
        return "chooses special tokens (their labels must be -100)"
    if np.any(labels[chosen] != ids[chosen]):
        return "gives chosen positions labels other than their original ids"
    if np.any(inputs[~chosen] != ids[~chosen]):
        return "changes positions that were not chosen (label -100)"
    masked = chosen & (inputs == mask_id)
    replaced = chosen & ~masked & (inputs != ids)
    kept = chosen & (inputs == ids)
    drawn = inputs[chosen & ~masked]
    if np.any((drawn < 0) | (drawn >= vocab_size)) or np.any(np.isin(drawn, specials)):
        return "puts special tokens or ids outside [0, vocab_size) at chosen positions (random tokens are " \
               "non-special ids)"
    total, count = int((~special).sum()), int(chosen.sum())
    if probability == 0 and count:
        return "chooses positions with probability 0"
    if probability == 1 and count != total:
        return "leaves non-special positions unchosen with probability 1"
    candidates = np.setdiff1d(np.arange(vocab_size), specials)
    same = 1 / max(len(candidates), 1)  # a random token may be the original one
    if _off(count, total, probability):
        return f"chooses {count} of {total} non-special positions, too far from the probability {probability}"
    for what, positions, share in (("[MASK]", masked, 0.8), ("a random token", replaced, 0.1 * (1 - same)),
                                   ("their own token", kept, 0.1 + 0.1 * same)):
        if _off(int(positions.sum()), count, share):
            return f"gives {int(positions.sum())} of {count} chosen positions {what}, too far from {share:.3g} of them"
    # No pattern of positions: in disjoint neighbours (t, t + 1), t even, both non-special, both are chosen with
    # probability p ** 2 (every k-th position has the right share but never, or always, two neighbours); in disjoint
    # pairs of successive chosen positions (in reading order), neither is [MASK] with probability 0.2 ** 2 (fates dealt in
    # turn, 8 [MASK] then 1 then 1, make it 0.2). Draws in any order, per position or only at the chosen ones, and
    # exact shares dealt by a random permutation all pass.
    pairs = ~special[:, 0:-1:2] & ~special[:, 1::2]
    both = int((pairs & chosen[:, 0:-1:2] & chosen[:, 1::2]).sum())
    if 0 < probability < 1 and _off(both, int(pairs.sum()), probability ** 2):
        return f"chooses positions in a pattern: of {int(pairs.sum())} disjoint pairs of neighbouring non-special " \
               f"positions, {both} are both chosen, too far from {probability ** 2:.3g} of them (choose each " \
               f"position independently, with the generator)"
    unmasked = inputs[chosen] != mask_id  # the chosen positions in reading order
    half = len(unmasked) // 2
    neither = int((unmasked[0:2 * half:2] & unmasked[1:2 * half:2]).sum())
    if _off(neither, half, 0.2 ** 2):
        return f"gives the chosen positions their fate in a pattern: of {half} disjoint pairs of successive chosen " \
               f"positions, {neither} have no [MASK], too far from 0.04 of them (draw each fate independently)"
    # The spread, not only the mean: the rows' counts of chosen positions (of their non-special ones), and of
    # [MASK] (of their chosen ones), vary as independent binomial counts do (a fixed number per row does not)
    rows = ids.reshape(-1, ids.shape[-1]) if ids.ndim else ids.reshape(1, 1)
    special_rows, chosen_rows, masked_rows = (a.reshape(rows.shape) for a in (special, chosen, masked))
    for what, made, out_of, share in (("chooses positions", chosen_rows, ~special_rows, probability),
                                      ("gives [MASK] to chosen positions", masked_rows, chosen_rows, 0.8)):
        off = _spread(made.sum(axis=1), out_of.sum(axis=1), share)
        if off:
            fixed = "not a fixed number per row" if off == "too evenly" else "with the same chance in every row"
            return f"{what} {off} across the rows: their counts per row vary {'less' if fixed[0] == 'n' else 'more'} " \
                   f"than independent draws with chance {share:.3g} do (draw each position independently, {fixed})"
    if 1 < len(candidates) <= 1000:
        # a replaced position holds any id but its original, uniformly: id v with share (1 - q_v) / (N - 1),
        # q_v the share of v among the chosen positions' originals
        originals = np.bincount(ids[chosen], minlength=vocab_size)[candidates] / max(count, 1)
        drawn_counts = np.bincount(inputs[replaced], minlength=vocab_size)[candidates]
        uneven = np.flatnonzero(_off(drawn_counts, int(replaced.sum()), (1 - originals) / (len(candidates) - 1),
                                     tail=1e-9))  # 1e-9: up to 1000 ids, one test each
        if uneven.size:
            v, n = candidates[uneven[0]], int(drawn_counts[uneven[0]])
            return f"draws the random tokens unevenly (id {v} {n} times of {int(replaced.sum())}): " \
                   f"draw them uniformly from the non-special ids"
    return None


PROPERTIES = {"vectors.word2vec.negative_samples": _negative_samples_property,
              "bert.masking.mlm_mask": _mlm_mask_property}
"""Exercises judged by a property of their result instead of the reference's exact values."""


def _mlm_mask_varies(case) -> bool:
    """At least 40 positions are chosen on average, so two correct draws with different seeds all but never agree."""
    args, kwargs = case["args"], case.get("kwargs", {})
    ids, special_ids = args[0], args[1]
    probability = args[4] if len(args) > 4 else kwargs.get("probability", 0.15)
    eligible = int((~np.isin(np.asarray(ids), np.asarray(list(special_ids)))).sum())
    return eligible * float(probability) >= 40


VARIES = {"bert.masking.mlm_mask": _mlm_mask_varies}
"""Random exercises whose result must change with the generator's seed in the cases where this function says so
(the probe calls them once more with every generator replaced by one of another seed)."""

