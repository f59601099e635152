"""Judging word vectors on the benchmarks that gensim ships. Chapter 2 on.

Word similarity: Spearman correlation between the cosine similarities of word
pairs and human ratings, on WordSim-353 (Finkelstein et al., 2002) and
SimLex-999 (Hill et al., 2015). Analogies: accuracy on Google's
``questions-words.txt`` (Mikolov et al., 2013), "a is to b as c is to ?" answered
by the nearest word to ``b - a + c``. The scoring is gensim's ``KeyedVectors``;
pairs with a word outside the vocabulary are skipped and counted as out of
vocabulary. See :doc:`/chapters/ch02_word2vec`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Sequence

import numpy as np

from course_lib import checks

BENCHMARKS = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}


def keyed_vectors(words: Sequence[str], vectors):
    """Wrap word vectors in gensim's ``KeyedVectors``. Chapter 2.

    Args:
        words: the ``V`` words, ``words[i]`` for row ``i``.
        vectors: ``(V, E)`` array.

    Returns:
        a ``gensim.models.KeyedVectors`` with the words in the given order.
    """
    from gensim.models import KeyedVectors

    vectors = checks.matrix(vectors, "vectors", allow_sparse=False)
    if len(words) != len(vectors):
        raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
    kv = KeyedVectors(vectors.shape[1])
    kv.add_vectors(list(words), vectors.astype(np.float32))
    return kv


@contextlib.contextmanager
def _quiet_gensim():
    """Silence gensim's INFO log inside the block, then restore its level (no global state left changed)."""
    logger = logging.getLogger("gensim")
    previous = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)


def word_similarity(kv, benchmark: str = "wordsim353") -> tuple[float, float]:
    """Spearman correlation with human similarity ratings. Chapter 2.

    Args:
        kv: gensim ``KeyedVectors``.
        benchmark: ``"wordsim353"`` or ``"simlex999"``.

    Returns:
        ``(spearman, oov_percent)``: the correlation over the pairs whose words
        are both in the vocabulary, and the percentage of pairs skipped.
    """
    from gensim.test.utils import datapath

    if benchmark not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {sorted(BENCHMARKS)}, got {benchmark!r}")
    with _quiet_gensim():
        _pearson, spearman, oov = kv.evaluate_word_pairs(datapath(BENCHMARKS[benchmark]))
    return float(spearman[0]), float(oov)


def analogy_accuracy(kv, restrict_vocab: int = 30000) -> tuple[float, int]:
    """Accuracy on Google's analogy questions. Chapter 2.

    Args:
        kv: gensim ``KeyedVectors``.
        restrict_vocab: only the first (most frequent) words are candidates and questions.

    Returns:
        ``(accuracy, questions)``: the fraction answered right among the questions
        whose four words are in the vocabulary, and how many those were.
    """
    from gensim.test.utils import datapath

    with _quiet_gensim():
        score, sections = kv.evaluate_word_analogies(datapath("questions-words.txt"), restrict_vocab=restrict_vocab)
    total = next(s for s in sections if s["section"] == "Total accuracy")
    return float(score), len(total["correct"]) + len(total["incorrect"])


def evaluate(kv) -> dict[str, float]:
    """All three benchmarks in one dict, for tables. Chapter 2.

    Returns:
        ``{"wordsim353": rho, "simlex999": rho, "analogies": accuracy, "analogy questions": n}``.
    """
    accuracy, questions = analogy_accuracy(kv)
    return {"wordsim353": word_similarity(kv, "wordsim353")[0],
            "simlex999": word_similarity(kv, "simlex999")[0],
            "analogies": accuracy, "analogy questions": questions}
