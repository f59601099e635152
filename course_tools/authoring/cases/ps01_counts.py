"""Hidden cases of ps01_counts: one-hot vectors, counts, TF-IDF and PPMI (chapter 1).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


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


GENERATORS = {
    "vectors.counts.one_hot": one_hot,
    "vectors.counts.tfidf": tfidf,
    "vectors.counts.ppmi": ppmi,
    "vectors.counts.cosine_similarity": cosine_similarity,
}

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
}
