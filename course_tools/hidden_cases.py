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


def skipgram_pairs(rng):
    for case, (length, window) in enumerate([(1, 2), (2, 1), (9, 3), (25, 5), (6, 10), (40, 2)]):
        ids = rng.integers(0, 30, size=length)
        if case % 2:  # dynamic windows, drawn as the docstring says
            yield (ids, window, np.random.default_rng(int(rng.integers(1000)))), {}
        else:
            yield (ids, window), {}


def sgns_loss_and_grads(rng):
    for b, k, d in [(1, 1, 1), (3, 2, 4), (8, 5, 10), (16, 3, 7)]:
        scale = rng.uniform(0.1, 3.0)
        yield (rng.normal(size=(b, d)) * scale, rng.normal(size=(b, d)), rng.normal(size=(b, k, d))), {}
    yield (np.full((2, 3), 10.0), np.full((2, 3), -10.0), np.full((2, 2, 3), 10.0)), {}  # |u.v| = 300


def procrustes(rng):
    for n, d in [(5, 2), (30, 4), (100, 8), (12, 12)]:
        source = rng.normal(size=(n, d))
        rotation, _ = np.linalg.qr(rng.normal(size=(d, d)))
        yield (source, source @ rotation.T + rng.normal(size=(n, d)) * rng.uniform(0, 0.5)), {}


GENERATORS = {
    "counts.one_hot": one_hot,
    "counts.tfidf": tfidf,
    "counts.ppmi": ppmi,
    "counts.cosine_similarity": cosine_similarity,
    "word2vec.skipgram_pairs": skipgram_pairs,
    "word2vec.sgns_loss_and_grads": sgns_loss_and_grads,
    "alignment.procrustes": procrustes,
}
