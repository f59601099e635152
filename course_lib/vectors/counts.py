"""Chapter 1, from one-hot to counts: sparse vectors for words and documents.

The chapter's path: one-hot vectors (no notion of similarity), bags of words
and TF-IDF for documents, word-context co-occurrence counts, positive PMI,
truncated SVD for dense word vectors, and cosine similarity for comparing them.
See :doc:`/chapters/ch01_counts`.

Four functions here are exercises of assignment ps01 (``one_hot``, ``tfidf``,
``ppmi``, ``cosine_similarity``): their bodies sit between the solution
markers and are replaced by ``raise NotImplementedError`` in the student
edition. The pipeline functions take them as arguments, so an assignment can
run a student's own function through the same code the chapter uses.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from course_lib import checks


def one_hot(ids, vocab_size):
    """Encode word ids as one-hot row vectors.

    Row ``t`` of the result is the standard basis vector ``e_{ids[t]}``: all
    zeros except a 1 in column ``ids[t]``. ``ids`` is not modified. Chapter 1,
    exercise of ps01.

    Args:
        ids: ``(N,)`` integer word ids, each in ``[0, vocab_size)``.
        vocab_size: ``V``, the number of words in the vocabulary.

    Returns:
        ``(N, V)`` float64 array with exactly one 1 per row (``(0, V)`` for no ids).
    """
    ids = checks.token_ids(ids, vocab_size)
    ### BEGIN SOLUTION
    vectors = np.zeros((len(ids), vocab_size))  # (N, V)
    vectors[np.arange(len(ids)), ids] = 1.0
    return vectors
    ### END SOLUTION


def bag_of_words(documents: Sequence, vocab_size: int) -> sp.csr_matrix:
    """Count how often each word occurs in each document.

    ``X[d, w]`` is the number of times word ``w`` occurs in document ``d``:
    the sum of the one-hot vectors of the document's tokens. Chapter 1.

    Args:
        documents: ``n_docs`` documents, each a ``(T_d,)`` array of word ids.
        vocab_size: ``V``.

    Returns:
        ``(n_docs, V)`` sparse CSR matrix of counts (float64).
    """
    checks.positive_int(vocab_size, "vocab_size")
    rows, cols = [], []
    for d, doc in enumerate(documents):
        ids = checks.token_ids(doc, vocab_size, name=f"documents[{d}]")
        rows.append(np.full(len(ids), d))
        cols.append(ids)
    n_docs = len(rows)
    rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    cols = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    counts = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_docs, vocab_size))
    return counts.tocsr()  # duplicates are summed


def tfidf(counts, smooth_idf=True, normalize=True):
    """Weight a document-term count matrix by term frequency times inverse document frequency.

    With ``n_docs`` documents and ``df_w`` the number of documents that contain word
    ``w``, the inverse document frequency is

    ``idf_w = ln((1 + n_docs) / (1 + df_w)) + 1`` if ``smooth_idf``, else ``ln(n_docs / df_w) + 1``

    and ``tfidf[d, w] = counts[d, w] * idf_w``. With ``normalize`` each row is
    then divided by its Euclidean norm (rows of zeros stay zero). These are the
    conventions of scikit-learn's ``TfidfTransformer``. ``counts`` is not modified:
    the sparse matrix the checks return may share its data with the caller's, so
    build new arrays rather than writing into ``counts.data``. Chapter 1, exercise of ps01.

    Args:
        counts: ``(n_docs, V)`` non-negative counts, a numpy array or scipy sparse matrix.
        smooth_idf: add one to ``n_docs`` and every ``df_w``, as if one extra document
            contained every word once (no division by zero for unseen words).
        normalize: scale each row to unit L2 norm.

    Returns:
        ``(n_docs, V)`` scipy sparse CSR matrix (float64).
    """
    counts = sp.csr_matrix(checks.matrix(counts, "counts", nonnegative=True))
    ### BEGIN SOLUTION
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices[counts.data > 0], minlength=counts.shape[1])  # (V,)
    if smooth_idf:
        idf = np.log((1 + n_docs) / (1 + df)) + 1  # (V,)
    else:
        with np.errstate(divide="ignore"):
            idf = np.log(n_docs / df) + 1  # (V,); inf only where df = 0, never used
        idf[df == 0] = 0.0
    weighted = sp.csr_matrix(counts.multiply(idf[None, :]))  # (n_docs, V)
    if normalize:
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())  # (n_docs,)
        norms[norms == 0] = 1.0
        weighted = sp.csr_matrix(weighted.multiply(1.0 / norms[:, None]))
    return weighted
    ### END SOLUTION


def cooccurrence_matrix(documents: Sequence, vocab_size: int, window: int = 4,
                        harmonic: bool = False) -> sp.csr_matrix:
    """Count how often each word appears near each other word.

    ``cooc[w, c]`` counts the pairs of positions ``(i, j)`` in the same document
    with ``0 < |i - j| <= window``, word ``w`` at ``i`` and context ``c`` at
    ``j``. With ``harmonic`` a pair at distance ``k`` adds ``1/k`` instead of 1
    (as GloVe does). ``cooc`` is symmetric: its ``C = V`` contexts are the words
    themselves. Chapter 1.

    Args:
        documents: ``n_docs`` documents, each a ``(T_d,)`` array of word ids.
        vocab_size: ``V``.
        window: the largest distance that counts.
        harmonic: weight pairs by the inverse of their distance.

    Returns:
        ``(V, V)`` sparse CSR matrix (float64).
    """
    checks.positive_int(vocab_size, "vocab_size")
    window = checks.positive_int(window, "window")
    words, contexts, weights = [], [], []
    for d, doc in enumerate(documents):
        ids = checks.token_ids(doc, vocab_size, name=f"documents[{d}]")
        for k in range(1, min(window, len(ids) - 1) + 1):
            left, right = ids[:-k], ids[k:]  # (T_d - k,) each: the pairs at distance k
            weight = np.full(len(left), 1.0 / k if harmonic else 1.0)
            words += [left, right]
            contexts += [right, left]
            weights += [weight, weight]
    if not words:
        return sp.csr_matrix((vocab_size, vocab_size))
    pairs = sp.coo_matrix((np.concatenate(weights), (np.concatenate(words), np.concatenate(contexts))),
                          shape=(vocab_size, vocab_size))
    return pairs.tocsr()  # duplicates are summed


def ppmi(cooc, alpha=0.75):
    """Positive pointwise mutual information of a word-context count matrix.

    With ``total = sum(cooc)``, ``P(w, c) = cooc[w, c] / total``,
    ``P(w) = sum_c cooc[w, c] / total`` and the context distribution smoothed by
    ``alpha`` (Levy et al., 2015),
    ``P_alpha(c) = n_c ** alpha / sum_c' n_c' ** alpha`` with ``n_c = sum_w cooc[w, c]``:

    ``PPMI(w, c) = max(0, log(P(w, c) / (P(w) * P_alpha(c))))``

    Pairs never seen together (``cooc[w, c] = 0``) get 0. ``alpha = 1`` gives
    plain PPMI. ``cooc`` is not modified: the sparse matrix the checks return may
    share its data with the caller's, so build new arrays rather than writing into
    ``cooc.data``. Chapter 1, exercise of ps01.

    Args:
        cooc: ``(V, C)`` non-negative co-occurrence counts, numpy array or
            scipy sparse matrix, with at least one positive entry.
        alpha: the exponent that smooths the context distribution, in ``(0, 1]``.

    Returns:
        ``(V, C)`` scipy sparse CSR matrix (float64) with only non-negative entries.
    """
    cooc = sp.csr_matrix(checks.matrix(cooc, "cooc", nonnegative=True))
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if cooc.sum() <= 0:
        raise ValueError("cooc has no positive count, so no probabilities can be estimated")
    ### BEGIN SOLUTION
    cooc = cooc.copy()
    cooc.eliminate_zeros()
    total = cooc.sum()
    p_word = np.asarray(cooc.sum(axis=1)).ravel() / total  # (V,)
    context_counts = np.asarray(cooc.sum(axis=0)).ravel() ** alpha  # (C,)
    p_context = context_counts / context_counts.sum()  # (C,)
    rows = np.repeat(np.arange(cooc.shape[0]), np.diff(cooc.indptr))  # (nnz,) row of each entry
    pmi = np.log(cooc.data / total) - np.log(p_word[rows]) - np.log(p_context[cooc.indices])  # (nnz,)
    out = sp.csr_matrix((np.maximum(pmi, 0.0), cooc.indices, cooc.indptr), shape=cooc.shape)
    out.eliminate_zeros()
    return out
    ### END SOLUTION


def truncated_svd(matrix, dim: int, power: float = 0.5, seed: int = 0) -> np.ndarray:
    """Dense word vectors from the top singular vectors of a (sparse) matrix.

    With the rank-``k`` SVD ``M ~ U_k S_k V_k^T`` (``k = dim``, the embedding
    size ``E`` of the word vectors), returns ``U_k S_k ** power``.
    ``power = 1`` is the plain low-rank projection; ``power = 0.5`` weights the
    dimensions more evenly, which usually gives better word similarities (Levy
    et al., 2015). Columns are ordered by decreasing
    singular value and each column's sign is fixed so that its largest-magnitude
    entry is positive, so the result is reproducible. Chapter 1.

    Args:
        matrix: ``(V, C)`` numpy array or scipy sparse matrix.
        dim: ``E``, the number of dimensions to keep, ``E < min(V, C)``.
        power: the exponent applied to the singular values.
        seed: seeds the starting vector of the iterative solver.

    Returns:
        ``(V, E)`` float64 array.
    """
    from scipy.sparse.linalg import svds

    matrix = checks.matrix(matrix, "matrix")
    dim = checks.positive_int(dim, "dim")
    if dim >= min(matrix.shape):
        raise ValueError(f"dim must be smaller than both sides of the {matrix.shape} matrix, got {dim}")
    v0 = np.random.default_rng(seed).uniform(-1, 1, size=min(matrix.shape))
    u, s, _vt = svds(matrix, k=dim, v0=v0)  # u: (V, E), s: (E,)
    order = np.argsort(-s)
    u, s = u[:, order], s[order]
    signs = np.sign(u[np.abs(u).argmax(axis=0), np.arange(dim)])  # (E,)
    return u * signs * s ** power  # (V, E)


def cosine_similarity(a, b=None):
    """Cosine similarity between every row of ``a`` and every row of ``b``.

    ``S[i, j] = a_i . b_j / (||a_i|| ||b_j||)``, a number in ``[-1, 1]``: 1 for
    vectors pointing the same way, 0 for orthogonal ones. A row of zeros has no
    direction; its similarity to everything is defined as 0 (not NaN). ``a`` and
    ``b`` are not modified. Chapter 1, exercise of ps01.

    Args:
        a: ``(N, E)`` array of row vectors.
        b: ``(M, E)`` array of row vectors; ``None`` means ``b = a``.

    Returns:
        ``(N, M)`` float64 array.
    """
    a = checks.matrix(a, "a", allow_sparse=False)
    b = a if b is None else checks.matrix(b, "b", allow_sparse=False)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must have the same number of columns, got {a.shape} and {b.shape}")
    ### BEGIN SOLUTION
    def unit_rows(x):  # (N, E) -> (N, E), zero rows stay zero
        norms = np.linalg.norm(x, axis=1, keepdims=True)  # (N, 1)
        return x / np.where(norms == 0, 1.0, norms)

    return unit_rows(a) @ unit_rows(b).T  # (N, M)
    ### END SOLUTION


def nearest_neighbours(vectors, queries, k: int = 5,
                       similarity_fn: Callable = cosine_similarity):
    """The ``k`` rows of ``vectors`` most similar to each query row, the query excluded.

    Chapter 1. ``similarity_fn`` is any function with the signature of
    :func:`cosine_similarity`; the assignment passes the student's own.

    Args:
        vectors: ``(V, E)`` array, one row per word.
        queries: ``(N,)`` integer row ids to find neighbours for.
        k: how many neighbours to return per query.
        similarity_fn: ``(N, E), (V, E) -> (N, V)`` similarity function.

    Returns:
        ``(ids, scores)``: two ``(N, k)`` arrays, the neighbours' row ids and
        their similarities, most similar first.
    """
    vectors = checks.matrix(vectors, "vectors", allow_sparse=False)
    queries = checks.token_ids(queries, len(vectors), name="queries")
    k = checks.positive_int(k, "k")
    if k >= len(vectors):
        raise ValueError(f"k must be smaller than the number of vectors ({len(vectors)}), got {k}")
    scores = np.array(similarity_fn(vectors[queries], vectors), dtype=np.float64)  # (N, V)
    if scores.shape != (len(queries), len(vectors)):
        raise ValueError(f"similarity_fn returned shape {scores.shape}, expected {(len(queries), len(vectors))}")
    scores[np.arange(len(queries)), queries] = -np.inf  # a word is not its own neighbour
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # (N, k)
    return ids, np.take_along_axis(scores, ids, axis=1)


def neighbour_table(vocab, vectors, words: Sequence[str], k: int = 5,
                    similarity_fn: Callable = cosine_similarity):
    """A table of each word's ``k`` nearest neighbours, for display. Chapter 1.

    Args:
        vocab: a :class:`course_lib.text.vocabulary.Vocabulary` whose ids index ``vectors``.
        vectors: ``(V, E)`` word vectors.
        words: the query words.
        k: neighbours per word.
        similarity_fn: as in :func:`nearest_neighbours`.

    Returns:
        a pandas DataFrame with one row per query word and one column per rank,
        each cell ``"neighbour (similarity)"``.
    """
    import pandas as pd

    ids, scores = nearest_neighbours(vectors, [vocab[w] for w in words], k, similarity_fn)
    cells = [[f"{vocab.words[i]} ({s:.2f})" for i, s in zip(row_ids, row_scores)]
             for row_ids, row_scores in zip(ids, scores)]
    return pd.DataFrame(cells, index=pd.Index(list(words), name="word"),
                        columns=[f"#{r + 1}" for r in range(k)])


def word_vectors(documents: Sequence, vocab_size: int, dim: int = 100, window: int = 4,
                 alpha: float = 0.75, weighting_fn: Callable = ppmi, seed: int = 0) -> np.ndarray:
    """The chapter's whole pipeline: counts, then PPMI, then truncated SVD.

    ``truncated_svd(weighting_fn(cooccurrence_matrix(documents, window), alpha), dim)``.
    Chapter 1; ``weighting_fn`` is any function with the signature of :func:`ppmi`.

    Args:
        documents: ``n_docs`` documents, each a ``(T_d,)`` array of word ids.
        vocab_size: ``V``.
        dim: ``E``, dimensions of the word vectors.
        window: co-occurrence window.
        alpha: context-distribution smoothing passed to ``weighting_fn``.
        weighting_fn: ``(V, V) counts -> (V, V)`` association matrix.
        seed: seed of the SVD solver.

    Returns:
        ``(V, E)`` array of word vectors.
    """
    cooc = cooccurrence_matrix(documents, vocab_size, window=window)
    return truncated_svd(weighting_fn(cooc, alpha=alpha), dim, seed=seed)
