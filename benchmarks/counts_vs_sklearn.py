"""Chapter 1's course_lib functions against scikit-learn, on the course's real text, in one run.

    .venv/bin/python benchmarks/counts_vs_sklearn.py

For each function: the wall time of course_lib and of scikit-learn on the same input over
5 rounds (3 for the SVD), the two sides interleaved, their ratio (course_lib / sklearn; below 1
means course_lib is faster) as the median [range] of the per-round ratios, and the largest
absolute difference between the two results.
"""

from __future__ import annotations

import os
import statistics

import numpy as np
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics.pairwise import cosine_similarity as sk_cosine

from course_lib.text import corpus, vocabulary
from course_lib.vectors import counts

from timing import cpu_name, interleaved, ratios, record, spread_text


def compare(name, ours, theirs, difference, rounds=5):
    """Time ``ours()`` against ``theirs()`` (rounds interleaved), print one row and record the ratio."""
    out = {}
    times = interleaved({"ours": lambda: out.__setitem__("ours", ours()),
                         "theirs": lambda: out.__setitem__("theirs", theirs())}, rounds, 1)
    ratio, low, high = ratios(times["ours"], times["theirs"])
    print(f"{name:<34} {statistics.median(times['ours']) * 1e3:9.1f} ms {statistics.median(times['theirs']) * 1e3:9.1f} ms"
          f" {spread_text(ratio, low, high):>18}   {difference(out['ours'], out['theirs']):.1e}")
    record("counts_vs_sklearn", f"{name}: time course_lib/scikit-learn", ratio, low, high, rounds=rounds)
    return out["ours"]


def main():
    documents = corpus.english_documents()
    vocab = vocabulary.Vocabulary.build(documents, min_count=5)
    ids = [vocab.encode(doc) for doc in documents]
    doc_term = counts.bag_of_words(ids, len(vocab))
    cooc = counts.cooccurrence_matrix(ids, len(vocab), window=4)
    print(f"{sum(map(len, ids))} tokens, {len(vocab)} words; doc-term {doc_term.shape}, "
          f"co-occurrence {cooc.shape} with {cooc.nnz} nonzeros\n")
    print(f"{cpu_name()}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'function':<34} {'course_lib':>12} {'sklearn':>12} {'ratio':>18}   max |diff|")
    compare("tfidf (406 x V)", lambda: counts.tfidf(doc_term), lambda: TfidfTransformer().fit_transform(doc_term),
            lambda a, b: abs(a - b).max())
    weighted = counts.ppmi(cooc)
    svd = TruncatedSVD(100, algorithm="arpack", random_state=0)
    ours = compare("truncated_svd (V x V -> 100)", lambda: counts.truncated_svd(weighted, 100, power=1.0),
                   lambda: svd.fit_transform(weighted), lambda a, b: np.abs(np.abs(a) - np.abs(b)).max(), rounds=3)
    vectors = ours[:5000]
    compare("cosine_similarity (5000 x 5000)", lambda: counts.cosine_similarity(vectors), lambda: sk_cosine(vectors),
            lambda a, b: np.abs(a - b).max())

if __name__ == "__main__":
    main()
