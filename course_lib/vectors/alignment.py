"""Aligning two embedding spaces with orthogonal Procrustes. Chapter 2.

Two word2vec runs (or two languages) give vector spaces that agree up to a
rotation at best. Given matched rows ``X`` and ``Y``, both ``(N, E)`` (the same
``N`` words in both spaces), the rotation ``R`` minimizing ``||X R^T - Y||_F`` over orthogonal
matrices is ``R = U V^T``, where ``U S V^T`` is the SVD of ``Y^T X``
(Schönemann, 1966); Mikolov et al. (2013) and Xing et al. (2015) used such maps
to translate words between languages. See :doc:`/chapters/ch02_word2vec`.
"""

from __future__ import annotations

import numpy as np

from course_lib import checks


def procrustes(source, target):
    """The orthogonal matrix that best rotates ``source`` rows onto ``target`` rows.

    ``R = argmin_{R^T R = I} ||source R^T - target||_F = U V^T`` with
    ``U S V^T = svd(target^T source)``. Apply it as ``source @ R.T``. The
    arguments are not modified. Chapter 2, exercise of ps02.

    Args:
        source: ``(N, E)`` vectors of ``N`` words in the first space.
        target: ``(N, E)`` vectors of the same words in the second space.

    Returns:
        ``(E, E)`` orthogonal float64 array ``R``.
    """
    source = checks.matrix(source, "source", allow_sparse=False)
    target = checks.matrix(target, "target", allow_sparse=False)
    if source.shape != target.shape:
        raise ValueError(f"source and target must have the same shape, got {source.shape} and {target.shape}")
    ### BEGIN SOLUTION
    u, _s, vt = np.linalg.svd(target.T @ source)  # (E, E), (E,), (E, E)
    return u @ vt
    ### END SOLUTION


def retrieval_accuracy(source, target, k: int = 1) -> float:
    """How often row ``i`` of ``target`` is among the ``k`` nearest (cosine) rows to ``source[i]``.

    Chapter 2: measures how well two spaces line up, before and after alignment.

    Args:
        source: ``(N, E)`` query vectors.
        target: ``(N, E)`` candidate vectors; row ``i`` is the right answer for query ``i``.
        k: how many nearest candidates count as a hit.

    Returns:
        the fraction of hits, in ``[0, 1]``.
    """
    source = checks.matrix(source, "source", allow_sparse=False)
    target = checks.matrix(target, "target", allow_sparse=False)
    if source.shape != target.shape:
        raise ValueError(f"source and target must have the same shape, got {source.shape} and {target.shape}")
    a = source / np.maximum(np.linalg.norm(source, axis=1, keepdims=True), 1e-12)
    b = target / np.maximum(np.linalg.norm(target, axis=1, keepdims=True), 1e-12)
    sims = a @ b.T  # (N, N)
    top = np.argsort(-sims, axis=1)[:, :k]  # (N, k)
    return float(np.mean(np.any(top == np.arange(len(a))[:, None], axis=1)))
