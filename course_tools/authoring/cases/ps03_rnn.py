"""Hidden cases of ps03_rnn: the Elman network, backpropagation through time and perplexity (chapter 3).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np


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


GENERATORS = {
    "recurrent.elman.rnn_step": rnn_step,
    "recurrent.elman.rnn_backward": rnn_backward,
    "recurrent.clipping.clip_gradients": clip_gradients,
    "recurrent.perplexity.perplexity": perplexity,
}

HINTS: dict[str, str] = {
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
}
