"""course_lib.vectors.counts against independent references.

scikit-learn (TF-IDF, cosine similarity, truncated SVD), numpy.linalg.svd, and
naive pure-Python or dense-numpy versions written here from the docstrings'
equations (PPMI, bags of words, co-occurrence counts, nearest neighbours).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics.pairwise import cosine_similarity as sk_cosine_similarity

from course_lib.text import corpus, tokenizers, vocabulary
from course_lib.vectors.counts import (bag_of_words, cooccurrence_matrix, cosine_similarity, nearest_neighbours,
                                      neighbour_table, one_hot, ppmi, tfidf, truncated_svd, word_vectors)

SPARSE_FORMATS = {
    "dense": np.asarray,
    "csr": sp.csr_matrix,
    "csc": sp.csc_matrix,
    "coo": sp.coo_matrix,
}


def as_dense(x) -> np.ndarray:
    return x.toarray() if sp.issparse(x) else np.asarray(x)


def assert_csr(x, shape):
    assert sp.issparse(x), f"expected a scipy sparse matrix, got {type(x).__name__}"
    assert x.format == "csr", f"expected CSR, got {x.format}"
    assert x.shape == shape
    assert x.dtype == np.float64


def random_counts(seed: int, shape=(9, 13), rate=0.8) -> np.ndarray:
    """Poisson counts with an all-zero document (row 4) and a never-seen word (column 6)."""
    counts = np.random.default_rng(seed).poisson(rate, size=shape).astype(np.float64)
    counts[0] += 1  # no other empty row or column by chance
    counts[:, 0] += 1
    counts[4] = 0
    counts[:, 6] = 0
    return counts


# ---------------------------------------------------------------- one_hot

@pytest.mark.parametrize("seed", [0, 1])
def test_one_hot_rows_are_rows_of_identity(seed):
    rng = np.random.default_rng(seed)
    vocab_size = 11
    ids = rng.integers(0, vocab_size, size=17)
    out = one_hot(ids, vocab_size)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.eye(vocab_size)[ids])


def test_one_hot_accepts_python_lists_and_empty_input():
    np.testing.assert_array_equal(one_hot([2, 0, 2], 3), [[0, 0, 1], [1, 0, 0], [0, 0, 1]])
    assert one_hot([], 4).shape == (0, 4)


@pytest.mark.parametrize("ids, error, pattern", [
    ([0, 5], ValueError, r"ids.*5"),            # == vocab_size: out of range
    ([0, -1], ValueError, r"ids.*-1"),
    ([[0, 1], [1, 2]], ValueError, r"ids.*1-D"),
    ([0.0, 1.0], TypeError, r"ids.*integer"),
    (np.array([1.5]), TypeError, r"ids.*integer"),
])
def test_one_hot_rejects_bad_ids_naming_the_argument(ids, error, pattern):
    with pytest.raises(error, match=pattern):
        one_hot(ids, 5)


@pytest.mark.parametrize("vocab_size", [0, -3, 2.0, True])
def test_one_hot_rejects_bad_vocab_size(vocab_size):
    with pytest.raises(ValueError, match="vocab_size"):
        one_hot([0], vocab_size)


# ---------------------------------------------------------------- bag_of_words

def naive_bag_of_words(documents, vocab_size):
    out = np.zeros((len(documents), vocab_size))
    for d, doc in enumerate(documents):
        for word, count in Counter(int(w) for w in doc).items():
            out[d, word] = count
    return out


def random_documents(seed: int, vocab_size: int, n_docs: int = 7):
    rng = np.random.default_rng(seed)
    lengths = [0, 1, 2, 3] + list(rng.integers(4, 30, size=n_docs - 4))  # some shorter than any window
    rng.shuffle(lengths)
    return [rng.integers(0, vocab_size, size=n) for n in lengths]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bag_of_words_matches_counter(seed):
    vocab_size = 10
    docs = random_documents(seed, vocab_size)
    out = bag_of_words(docs, vocab_size)
    assert_csr(out, (len(docs), vocab_size))
    np.testing.assert_array_equal(out.toarray(), naive_bag_of_words(docs, vocab_size))


def test_bag_of_words_empty_documents_and_lists():
    out = bag_of_words([[1, 1, 2], [], [0]], 4)
    np.testing.assert_array_equal(out.toarray(), [[0, 2, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
    empty = bag_of_words([], 4)
    assert empty.shape == (0, 4) and empty.nnz == 0
    assert bag_of_words([[], []], 3).shape == (2, 3)


def test_bag_of_words_names_the_bad_document():
    with pytest.raises(ValueError, match=r"documents\[1\]"):
        bag_of_words([[0, 1], [1, 7]], 4)


# ---------------------------------------------------------------- cooccurrence_matrix

def naive_cooccurrence(documents, vocab_size, window, harmonic):
    counter = Counter()
    for doc in documents:
        doc = [int(w) for w in doc]
        for i in range(len(doc)):
            for j in range(len(doc)):
                distance = abs(i - j)
                if 0 < distance <= window:
                    counter[doc[i], doc[j]] += 1.0 / distance if harmonic else 1.0
    out = np.zeros((vocab_size, vocab_size))
    for (w, c), value in counter.items():
        out[w, c] = value
    return out


@pytest.mark.parametrize("harmonic", [False, True])
@pytest.mark.parametrize("window", [1, 2, 3, 5, 40])
def test_cooccurrence_matches_naive_loops(window, harmonic):
    vocab_size = 8  # small: many repeated words, including a word next to itself
    docs = random_documents(window, vocab_size)
    out = cooccurrence_matrix(docs, vocab_size, window=window, harmonic=harmonic)
    assert_csr(out, (vocab_size, vocab_size))
    expected = naive_cooccurrence(docs, vocab_size, window, harmonic)
    np.testing.assert_allclose(out.toarray(), expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(out.toarray(), out.toarray().T, rtol=1e-12, atol=0)


def test_cooccurrence_default_window_is_4():
    docs = random_documents(3, 6)
    np.testing.assert_allclose(cooccurrence_matrix(docs, 6).toarray(),
                               naive_cooccurrence(docs, 6, 4, False))


def test_cooccurrence_small_example_by_hand():
    # "a b a" with window 1: pairs (a,b), (b,a), (b,a), (a,b); window 2 adds (a,a) twice.
    np.testing.assert_array_equal(cooccurrence_matrix([[0, 1, 0]], 2, window=1).toarray(),
                                  [[0, 2], [2, 0]])
    np.testing.assert_array_equal(cooccurrence_matrix([[0, 1, 0]], 2, window=2).toarray(),
                                  [[2, 2], [2, 0]])
    np.testing.assert_allclose(cooccurrence_matrix([[0, 1, 0]], 2, window=2, harmonic=True).toarray(),
                               [[1, 2], [2, 0]])


def test_cooccurrence_of_short_and_empty_documents_is_zero():
    out = cooccurrence_matrix([[], [3], []], 5, window=3)
    assert out.shape == (5, 5) and out.nnz == 0
    out = cooccurrence_matrix([], 5)
    assert out.shape == (5, 5) and out.nnz == 0


@pytest.mark.parametrize("window", [0, -1, 1.5])
def test_cooccurrence_rejects_bad_window(window):
    with pytest.raises(ValueError, match="window"):
        cooccurrence_matrix([[0, 1]], 2, window=window)


# ---------------------------------------------------------------- tfidf

def sklearn_tfidf(counts, smooth_idf, normalize):
    transformer = TfidfTransformer(norm="l2" if normalize else None, smooth_idf=smooth_idf,
                                   sublinear_tf=False, use_idf=True)
    return as_dense(transformer.fit_transform(sp.csr_matrix(counts)))


@pytest.mark.parametrize("fmt", list(SPARSE_FORMATS))
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("smooth_idf", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_tfidf_matches_sklearn(seed, smooth_idf, normalize, fmt):
    counts = random_counts(seed)
    if not smooth_idf:  # sklearn divides by df = 0 here; the unseen column has its own test
        counts = np.delete(counts, 6, axis=1)
    out = tfidf(SPARSE_FORMATS[fmt](counts), smooth_idf=smooth_idf, normalize=normalize)
    assert_csr(out, counts.shape)
    np.testing.assert_allclose(out.toarray(), sklearn_tfidf(counts, smooth_idf, normalize),
                               rtol=1e-10, atol=1e-12)


def test_tfidf_rows_and_defaults():
    counts = random_counts(3)
    out = tfidf(counts).toarray()
    np.testing.assert_allclose(out, sklearn_tfidf(counts, True, True), rtol=1e-10, atol=1e-12)
    norms = np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(np.delete(norms, 4), 1.0)
    assert norms[4] == 0 and not np.isnan(out).any()
    assert (out[:, 6] == 0).all()


@pytest.mark.parametrize("normalize", [True, False])
def test_tfidf_unseen_word_without_smoothing_is_zero_and_ignored(normalize):
    counts = random_counts(4)  # column 6 is never seen: df = 0
    out = tfidf(counts, smooth_idf=False, normalize=normalize).toarray()
    assert np.isfinite(out).all()
    assert (out[:, 6] == 0).all()
    np.testing.assert_allclose(np.delete(out, 6, axis=1),
                               sklearn_tfidf(np.delete(counts, 6, axis=1), False, normalize),
                               rtol=1e-10, atol=1e-12)


def test_tfidf_by_hand():
    # D = 2; word 0 in both documents, word 1 in one. Unsmoothed idf: [1, ln 2 + 1].
    counts = np.array([[2.0, 0.0], [1.0, 3.0]])
    expected = counts * np.array([1.0, np.log(2) + 1])
    np.testing.assert_allclose(tfidf(counts, smooth_idf=False, normalize=False).toarray(), expected)


def test_tfidf_ignores_explicit_zeros_in_df():
    stored = sp.csr_matrix((np.array([0.0, 2.0, 1.0]), np.array([0, 0, 1]), np.array([0, 1, 3])),
                           shape=(2, 2))  # row 0 stores an explicit 0 for word 0
    np.testing.assert_allclose(tfidf(stored, smooth_idf=False).toarray(),
                               tfidf(stored.toarray(), smooth_idf=False).toarray(), rtol=1e-12)


def test_tfidf_same_for_non_canonical_csr():
    # Row 0 stores word 0 twice (1 + 1): word 0 occurs in one document, not two.
    noncanonical = sp.csr_matrix((np.ones(3), np.array([0, 0, 1]), np.array([0, 2, 3, 3])),
                                 shape=(3, 2))
    dense = noncanonical.toarray()  # [[2, 0], [0, 1], [0, 0]]
    np.testing.assert_allclose(tfidf(noncanonical, smooth_idf=False, normalize=False).toarray(),
                               tfidf(dense, smooth_idf=False, normalize=False).toarray())


def test_tfidf_does_not_modify_its_input():
    counts = sp.csr_matrix(random_counts(5))
    before = counts.toarray().copy()
    tfidf(counts)
    np.testing.assert_array_equal(counts.toarray(), before)


@pytest.mark.parametrize("bad, error", [
    (np.array([[1.0, -1.0]]), ValueError),
    (np.array([1.0, 2.0]), ValueError),
    (np.array([[1.0, np.nan]]), ValueError),
])
def test_tfidf_rejects_bad_counts(bad, error):
    with pytest.raises(error, match="counts"):
        tfidf(bad)


# ---------------------------------------------------------------- cosine_similarity

def vectors_with_zero_rows(seed, n, d=6):
    x = np.random.default_rng(seed).normal(size=(n, d))
    x[1] = 0.0
    return x


@pytest.mark.parametrize("case", ["b=None", "b=a", "b taller", "b shorter"])
def test_cosine_similarity_matches_sklearn(case):
    a = vectors_with_zero_rows(0, 7)
    b = {"b=None": None, "b=a": a, "b taller": vectors_with_zero_rows(1, 11),
         "b shorter": vectors_with_zero_rows(2, 3)}[case]
    out = cosine_similarity(a) if b is None else cosine_similarity(a, b)
    expected = sk_cosine_similarity(a, b)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_cosine_similarity_zero_rows_give_zero_and_others_one_on_diagonal():
    a = vectors_with_zero_rows(3, 5)
    out = cosine_similarity(a)
    assert (out[1] == 0).all() and (out[:, 1] == 0).all()
    np.testing.assert_allclose(np.delete(np.diag(out), 1), 1.0)
    assert np.all(np.abs(out) <= 1 + 1e-12)
    np.testing.assert_allclose(out, out.T)


def test_cosine_similarity_by_hand_and_integer_input():
    out = cosine_similarity(np.array([[1, 0], [1, 1], [0, 0]]), np.array([[0, 2], [-3, 0]]))
    np.testing.assert_allclose(out, [[0, -1], [np.sqrt(0.5), -np.sqrt(0.5)], [0, 0]])


def test_cosine_similarity_errors():
    with pytest.raises(ValueError, match="columns"):
        cosine_similarity(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="a must be a 2-D"):
        cosine_similarity(np.ones(3))
    with pytest.raises(TypeError, match="dense"):
        cosine_similarity(sp.csr_matrix(np.eye(3)))


# ---------------------------------------------------------------- truncated_svd

@pytest.fixture(scope="module")
def svd_matrix():
    m = np.random.default_rng(7).poisson(0.6, size=(40, 30)).astype(np.float64)
    s = np.linalg.svd(m, compute_uv=False)
    assert np.min(-np.diff(s[:8])) > 1e-3, "test matrix needs distinct singular values"
    return m


def align_signs(columns, reference):
    signs = np.sign(np.sum(columns * reference, axis=0))
    return columns * signs


@pytest.mark.parametrize("fmt", ["dense", "csr", "coo"])
@pytest.mark.parametrize("power", [0.5, 1.0, 0.0])
@pytest.mark.parametrize("dim", [1, 4, 7])
def test_truncated_svd_matches_numpy_svd(svd_matrix, dim, power, fmt):
    out = truncated_svd(SPARSE_FORMATS[fmt](svd_matrix), dim, power=power, seed=0)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert out.shape == (svd_matrix.shape[0], dim)
    u, s, _vt = np.linalg.svd(svd_matrix, full_matrices=False)
    expected = u[:, :dim] * s[:dim] ** power
    np.testing.assert_allclose(align_signs(out, expected), expected, rtol=1e-7, atol=1e-9)


def test_truncated_svd_singular_values_match_sklearn(svd_matrix):
    dim = 6
    out = truncated_svd(sp.csr_matrix(svd_matrix), dim, power=1.0)
    reference = TruncatedSVD(n_components=dim, algorithm="arpack").fit(svd_matrix)
    np.testing.assert_allclose(np.linalg.norm(out, axis=0), reference.singular_values_, rtol=1e-8)
    # power 0.5: column norms are the square roots of the singular values
    out_half = truncated_svd(svd_matrix, dim, power=0.5)
    np.testing.assert_allclose(np.linalg.norm(out_half, axis=0) ** 2, reference.singular_values_,
                               rtol=1e-8)


def test_truncated_svd_columns_by_decreasing_singular_value(svd_matrix):
    norms = np.linalg.norm(truncated_svd(svd_matrix, 8, power=1.0), axis=0)
    assert np.all(np.diff(norms) < 0)


def test_truncated_svd_is_deterministic(svd_matrix):
    first = truncated_svd(svd_matrix, 5, seed=3)
    np.testing.assert_array_equal(first, truncated_svd(svd_matrix, 5, seed=3))
    # the sign convention makes the result independent of the solver's start
    for seed in (0, 1, 12345):
        np.testing.assert_allclose(truncated_svd(svd_matrix, 5, seed=seed), first, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_truncated_svd_sign_convention(svd_matrix, seed):
    rng = np.random.default_rng(seed)
    # flip the matrix's rows' signs so that the natural SVD signs vary between cases
    matrix = svd_matrix * rng.choice([-1.0, 1.0], size=(svd_matrix.shape[0], 1))
    out = truncated_svd(matrix, 6, seed=seed)
    largest = out[np.abs(out).argmax(axis=0), np.arange(out.shape[1])]
    assert np.all(largest > 0), f"largest-magnitude entries {largest} should be positive"


@pytest.mark.parametrize("dim", [30, 31, 100, 0, -1])
def test_truncated_svd_rejects_bad_dim(svd_matrix, dim):
    with pytest.raises(ValueError, match="dim"):
        truncated_svd(svd_matrix, dim)


def test_truncated_svd_rejects_dim_equal_to_rows():
    with pytest.raises(ValueError, match="dim"):
        truncated_svd(np.ones((3, 8)), 3)


# ---------------------------------------------------------------- ppmi

def dense_ppmi(cooc, alpha):
    """PPMI straight from the docstring's equation, one entry at a time."""
    cooc = np.asarray(cooc, dtype=np.float64)
    total = cooc.sum()
    p_word = cooc.sum(axis=1) / total
    n_context = cooc.sum(axis=0)
    p_context = n_context ** alpha / np.sum(n_context ** alpha)
    out = np.zeros_like(cooc)
    for w in range(cooc.shape[0]):
        for c in range(cooc.shape[1]):
            if cooc[w, c] > 0:
                pmi = np.log((cooc[w, c] / total) / (p_word[w] * p_context[c]))
                out[w, c] = max(0.0, pmi)
    return out


def random_cooc(seed, shape=(9, 11)):
    cooc = np.random.default_rng(seed).poisson(1.2, size=shape).astype(np.float64)
    cooc[2] = 0.0  # a word never seen
    cooc[:, 5] = 0.0  # a context never seen
    return cooc


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc", "coo"])
@pytest.mark.parametrize("alpha", [1.0, 0.75, 0.3])
@pytest.mark.parametrize("seed", [0, 1])
def test_ppmi_matches_dense_reference(seed, alpha, fmt):
    cooc = random_cooc(seed)
    out = ppmi(SPARSE_FORMATS[fmt](cooc), alpha=alpha)
    assert_csr(out, cooc.shape)
    expected = dense_ppmi(cooc, alpha)
    assert (expected > 0).any() and (expected[cooc > 0] == 0).any()  # both cases exercised
    np.testing.assert_allclose(out.toarray(), expected, rtol=1e-10, atol=1e-12)


def test_ppmi_default_alpha_is_0_75():
    cooc = random_cooc(3)
    np.testing.assert_allclose(ppmi(cooc).toarray(), dense_ppmi(cooc, 0.75), rtol=1e-10, atol=1e-12)


def test_ppmi_by_hand():
    # Two words, each only with its own context: P(w,c) = 1/2, P(w) = P(c) = 1/2, PMI = ln 2.
    np.testing.assert_allclose(ppmi(np.array([[3.0, 0.0], [0.0, 3.0]]), alpha=1.0).toarray(),
                               [[np.log(2), 0], [0, np.log(2)]])


@pytest.mark.parametrize("alpha", [1.0, 0.75])
def test_ppmi_zero_counts_stay_zero_and_nothing_negative(alpha):
    cooc = random_cooc(4)
    out = ppmi(sp.csr_matrix(cooc), alpha=alpha).toarray()
    assert (out[cooc == 0] == 0).all()
    assert (out >= 0).all()
    assert np.isfinite(out).all()


def test_ppmi_non_canonical_and_integer_input():
    cooc = sp.csr_matrix((np.array([1.0, 1.0, 2.0, 3.0, 1.0, 4.0]), np.array([0, 0, 2, 1, 2, 0]),
                          np.array([0, 3, 5, 6])), shape=(3, 3))  # row 0 stores column 0 twice
    np.testing.assert_allclose(ppmi(cooc, alpha=0.75).toarray(), dense_ppmi(cooc.toarray(), 0.75),
                               atol=1e-12)
    ints = np.array([[2, 0, 2], [0, 3, 1], [4, 0, 0]])
    np.testing.assert_allclose(ppmi(ints, alpha=1.0).toarray(), dense_ppmi(ints, 1.0), atol=1e-12)


def test_ppmi_does_not_modify_its_input():
    cooc = sp.csr_matrix(random_cooc(5))
    before = cooc.toarray().copy()
    ppmi(cooc)
    np.testing.assert_array_equal(cooc.toarray(), before)


def test_ppmi_rejects_negative_counts():
    cooc = random_cooc(0)
    cooc[0, 0] = -1.0
    with pytest.raises(ValueError, match="non-negative"):
        ppmi(cooc)
    with pytest.raises(ValueError, match="non-negative"):
        ppmi(sp.csr_matrix(cooc))


@pytest.mark.parametrize("cooc", [np.zeros((3, 4)), sp.csr_matrix((3, 4))])
def test_ppmi_rejects_all_zero_matrix(cooc):
    with pytest.raises(ValueError, match="positive"):
        ppmi(cooc)


@pytest.mark.parametrize("alpha", [0.0, -0.5, 1.5, float("nan")])
def test_ppmi_rejects_alpha_outside_unit_interval(alpha):
    with pytest.raises(ValueError, match="alpha"):
        ppmi(random_cooc(0), alpha=alpha)


# ---------------------------------------------------------------- nearest_neighbours

def brute_force_neighbours(similarities, queries, k):
    ids, scores = [], []
    for row, q in zip(similarities, queries):
        ranked = sorted((j for j in range(len(row)) if j != q), key=lambda j: -row[j])[:k]
        ids.append(ranked)
        scores.append([row[j] for j in ranked])
    return np.array(ids), np.array(scores)


@pytest.mark.parametrize("k", [1, 3, 11])
def test_nearest_neighbours_matches_brute_force(k):
    vectors = np.random.default_rng(0).normal(size=(12, 5))
    queries = [0, 3, 3, 11]
    ids, scores = nearest_neighbours(vectors, queries, k=k)
    expected_ids, expected_scores = brute_force_neighbours(
        sk_cosine_similarity(vectors[queries], vectors), queries, k)
    assert ids.shape == scores.shape == (len(queries), k)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-10)
    for q, row_ids, row_scores in zip(queries, ids, scores):
        assert q not in row_ids
        assert np.all(np.diff(row_scores) <= 0)


def test_nearest_neighbours_excludes_query_even_with_a_duplicate_vector():
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    ids, scores = nearest_neighbours(vectors, [0], k=2)
    np.testing.assert_array_equal(ids, [[1, 3]])
    np.testing.assert_allclose(scores, [[1.0, np.sqrt(0.5)]])


def test_nearest_neighbours_uses_the_similarity_argument():
    vectors = np.array([[1.0, 0.0], [10.0, 0.0], [1.0, 0.6], [-1.0, 0.0]])
    calls = []

    def negative_distance(a, b):
        calls.append((a.copy(), b.copy()))
        return -np.linalg.norm(a[:, None, :] - b[None, :, :], axis=-1)

    ids, scores = nearest_neighbours(vectors, [0], k=3, similarity_fn=negative_distance)
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0][0], vectors[[0]])
    np.testing.assert_array_equal(calls[0][1], vectors)
    # by distance: [1, .6] (0.6), [-1, 0] (2), [10, 0] (9); cosine would rank [10, 0] first
    np.testing.assert_array_equal(ids, [[2, 3, 1]])
    np.testing.assert_allclose(scores, [[-0.6, -2.0, -9.0]])
    assert nearest_neighbours(vectors, [0], k=1)[0][0, 0] == 1


@pytest.mark.parametrize("wrong", [
    lambda a, b: cosine_similarity(b, a),          # (V, Q): transposed
    lambda a, b: cosine_similarity(a, b)[:, :-1],  # one column short
    lambda a, b: cosine_similarity(a, b)[0],       # 1-D
])
def test_nearest_neighbours_rejects_wrong_similarity_shape(wrong):
    vectors = np.random.default_rng(1).normal(size=(6, 3))
    with pytest.raises(ValueError, match="similarity_fn returned shape"):
        nearest_neighbours(vectors, [0, 2], k=2, similarity_fn=wrong)


@pytest.mark.parametrize("k", [6, 7, 0])
def test_nearest_neighbours_rejects_bad_k(k):
    vectors = np.random.default_rng(2).normal(size=(6, 3))
    with pytest.raises(ValueError, match="k"):
        nearest_neighbours(vectors, [0], k=k)


def test_nearest_neighbours_rejects_bad_queries():
    vectors = np.random.default_rng(3).normal(size=(6, 3))
    with pytest.raises(ValueError, match="queries"):
        nearest_neighbours(vectors, [6], k=2)
    with pytest.raises(TypeError, match="queries"):
        nearest_neighbours(vectors, [0.0], k=2)


# ---------------------------------------------------------------- word_vectors, neighbour_table

@pytest.fixture(scope="module")
def lee_slice():
    docs = [tokenizers.tokenize(text) for text in corpus.lee_documents()[:50]]
    vocab = vocabulary.Vocabulary.build(docs, min_count=2)
    return vocab, [vocab.encode(doc) for doc in docs]


def test_word_vectors_on_real_text(lee_slice):
    vocab, ids = lee_slice
    vectors = word_vectors(ids, len(vocab), dim=12, seed=0)
    assert isinstance(vectors, np.ndarray) and vectors.shape == (len(vocab), 12)
    assert np.isfinite(vectors).all()
    expected = truncated_svd(ppmi(cooccurrence_matrix(ids, len(vocab), window=4), alpha=0.75), 12, seed=0)
    np.testing.assert_allclose(vectors, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(vectors, word_vectors(ids, len(vocab), dim=12, seed=0))


def test_word_vectors_passes_weighting_window_and_alpha_through(lee_slice):
    vocab, ids = lee_slice
    calls = []

    def weighting(cooc, alpha):
        calls.append((cooc, alpha))
        return ppmi(cooc, alpha=1.0)

    vectors = word_vectors(ids, len(vocab), dim=8, window=2, alpha=0.5, weighting_fn=weighting, seed=1)
    assert len(calls) == 1
    cooc, alpha = calls[0]
    assert alpha == 0.5
    np.testing.assert_allclose(as_dense(cooc), cooccurrence_matrix(ids, len(vocab), window=2).toarray())
    expected = truncated_svd(ppmi(cooccurrence_matrix(ids, len(vocab), window=2), alpha=1.0), 8, seed=1)
    np.testing.assert_allclose(vectors, expected, rtol=1e-8, atol=1e-10)
    default = word_vectors(ids, len(vocab), dim=8, window=2, alpha=0.5, seed=1)
    assert not np.allclose(vectors, default), "the weighting argument made no difference"


def test_neighbour_table_layout_and_cells():
    vocab = vocabulary.Vocabulary(["a", "b", "c", "d"], np.array([4, 3, 2, 1]))
    vectors = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]])
    table = neighbour_table(vocab, vectors, ["a", "c"], k=2)
    assert isinstance(table, pd.DataFrame)
    assert list(table.index) == ["a", "c"] and table.index.name == "word"
    assert list(table.columns) == ["#1", "#2"]
    assert table.loc["a"].tolist() == ["b (0.80)", "c (0.00)"]
    assert table.loc["c"].tolist() == ["b (0.60)", "a (0.00)"]


def test_neighbour_table_on_real_vectors(lee_slice):
    vocab, ids = lee_slice
    vectors = word_vectors(ids, len(vocab), dim=10)
    words = ["the", "said", "government"]
    table = neighbour_table(vocab, vectors, words, k=4)
    assert table.shape == (3, 4)
    expected_ids, _ = nearest_neighbours(vectors, [vocab[w] for w in words], k=4)
    for word, row in zip(words, expected_ids):
        assert [cell.split(" (")[0] for cell in table.loc[word]] == [vocab.words[i] for i in row]


def test_neighbour_table_unknown_word():
    vocab = vocabulary.Vocabulary(["a", "b", "c"], np.array([3, 2, 1]))
    with pytest.raises(KeyError, match="zebra"):
        neighbour_table(vocab, np.eye(3), ["zebra"], k=1)
