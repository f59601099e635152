"""Chapter 1's course_lib functions against scikit-learn, on the course's real text, in one run.

    .venv/bin/python benchmarks/counts_vs_sklearn.py

For each function: best-of-5 wall time of course_lib and of scikit-learn on the
same input, their ratio (course_lib / sklearn; below 1 means course_lib is faster)
and the largest absolute difference between the two results.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics.pairwise import cosine_similarity as sk_cosine

from course_lib.text import corpus, vocabulary
from course_lib.vectors import counts


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def row(name, ours, theirs, diff):
    print(f"{name:<34} {ours * 1e3:9.1f} ms {theirs * 1e3:9.1f} ms {ours / theirs:7.2f}x   {diff:.1e}")


def main():
    documents = corpus.english_documents()
    vocab = vocabulary.Vocabulary.build(documents, min_count=5)
    ids = [vocab.encode(doc) for doc in documents]
    doc_term = counts.bag_of_words(ids, len(vocab))
    cooc = counts.cooccurrence_matrix(ids, len(vocab), window=4)
    print(f"{sum(map(len, ids))} tokens, {len(vocab)} words; doc-term {doc_term.shape}, "
          f"co-occurrence {cooc.shape} with {cooc.nnz} nonzeros\n")
    print(f"{'function':<34} {'course_lib':>12} {'sklearn':>12} {'ratio':>8}   max |diff|")

    t_ours, ours = best_of(lambda: counts.tfidf(doc_term))
    t_theirs, theirs = best_of(lambda: TfidfTransformer().fit_transform(doc_term))
    row("tfidf (406 x V)", t_ours, t_theirs, abs(ours - theirs).max())

    weighted = counts.ppmi(cooc)
    t_ours, ours = best_of(lambda: counts.truncated_svd(weighted, 100, power=1.0), repeat=3)
    svd = TruncatedSVD(100, algorithm="arpack", random_state=0)
    t_theirs, theirs = best_of(lambda: svd.fit_transform(weighted), repeat=3)
    row("truncated_svd (V x V -> 100)", t_ours, t_theirs,
        np.abs(np.abs(ours) - np.abs(theirs)).max())

    vectors = ours[:5000]
    t_ours, ours = best_of(lambda: counts.cosine_similarity(vectors))
    t_theirs, theirs = best_of(lambda: sk_cosine(vectors))
    row("cosine_similarity (5000 x 5000)", t_ours, t_theirs, np.abs(ours - theirs).max())


if __name__ == "__main__":
    main()
