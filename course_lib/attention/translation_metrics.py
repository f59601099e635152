"""How good is a translation: exact match, accuracy by source length, BLEU and chrF. Chapter 5.

Exact match counts outputs identical to the reference. BLEU (Papineni et al., 2002)
and chrF (Popović, 2015) are the corpus metrics of machine translation, computed by
``sacrebleu`` (Post, 2018; Apache-2.0), the maintained implementation, not by hand.
See :doc:`/chapters/ch05_attention`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def exact_match(outputs: Sequence, references: Sequence) -> np.ndarray:
    """Whether each output equals its reference, word for word: an ``(N,)`` bool array. Chapter 5.

    Args:
        outputs, references: ``N`` token lists (or id arrays) each.
    """
    if len(outputs) != len(references):
        raise ValueError(f"outputs and references must be as many, got {len(outputs)} and {len(references)}")
    return np.array([list(o) == list(r) for o, r in zip(outputs, references)], dtype=bool)


def accuracy_by_length(correct, lengths, bins: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact-match accuracy per range of source lengths. Chapter 5.

    Args:
        correct: ``(N,)`` bools from :func:`exact_match`.
        lengths: ``(N,)`` source lengths.
        bins: the edges ``b_0 < b_1 < ... < b_k``; bin ``j`` holds lengths in ``[b_j, b_{j+1})``.

    Returns:
        ``(centers, accuracy, counts)``, ``(k,)`` arrays each: the middle length of each bin, the
        fraction correct in it (NaN when empty) and the number of sentences in it.
    """
    correct, lengths, edges = np.asarray(correct, dtype=float), np.asarray(lengths), np.asarray(bins)
    if correct.shape != lengths.shape or correct.ndim != 1:
        raise ValueError(f"correct and lengths must be two (N,) arrays, got {correct.shape} and {lengths.shape}")
    if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"bins must be at least two increasing edges, got {bins!r}")
    which = np.digitize(lengths, edges) - 1  # bin of each sentence; -1 or k when outside
    counts = np.array([(which == j).sum() for j in range(len(edges) - 1)])
    with np.errstate(invalid="ignore"):
        accuracy = np.array([correct[which == j].mean() if counts[j] else np.nan for j in range(len(edges) - 1)])
    return (edges[:-1] + edges[1:] - 1) / 2, accuracy, counts


def corpus_scores(outputs: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Corpus BLEU and chrF of tokenized outputs against one reference each, by sacrebleu. Chapter 5.

    The tokens are joined with spaces; BLEU uses sacrebleu's default ``13a`` tokenization
    and 4-grams, chrF character 6-grams with ``beta = 2``. Both are on a 0-100 scale.

    Args:
        outputs: ``N`` token lists (the translations), ``(T_d,)`` each.
        references: ``N`` token lists, ``(T_d,)`` each.

    Returns:
        ``{"bleu": ..., "chrf": ...}``.
    """
    import sacrebleu

    if len(outputs) != len(references) or not len(outputs):
        raise ValueError(f"outputs and references must be two non-empty lists of the same length, "
                         f"got {len(outputs)} and {len(references)}")
    hypotheses = [" ".join(o) for o in outputs]
    refs = [[" ".join(r) for r in references]]
    return {"bleu": float(sacrebleu.corpus_bleu(hypotheses, refs).score),
            "chrf": float(sacrebleu.corpus_chrf(hypotheses, refs).score)}
