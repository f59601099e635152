"""course_lib's SGNS trainer against gensim's Word2Vec: same corpus, same hyperparameters, same scorer.

Quality only (throughput is measured in benchmarks/word2vec_vs_gensim.py, never asserted).
"""

from __future__ import annotations

import pytest

from course_lib.text import corpus
from course_lib.vectors import evaluation

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scores():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from word2vec_vs_gensim import train_gensim, train_ours
    finally:
        sys.path.pop(0)
    documents = corpus.english_documents()
    return {name: evaluation.evaluate(fn(documents, seed=1))
            for name, fn in [("gensim", train_gensim), ("course_lib", train_ours)]}


def test_wordsim_is_no_more_than_003_below_gensim(scores):
    assert scores["course_lib"]["wordsim353"] >= scores["gensim"]["wordsim353"] - 0.03, scores


def test_simlex_and_analogies_are_in_gensims_range(scores):
    assert scores["course_lib"]["simlex999"] >= scores["gensim"]["simlex999"] - 0.05, scores
    assert scores["course_lib"]["analogies"] >= scores["gensim"]["analogies"] - 0.02, scores
    assert scores["course_lib"]["analogy questions"] == scores["gensim"]["analogy questions"]
