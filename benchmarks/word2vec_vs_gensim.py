"""course_lib's PyTorch SGNS trainer against gensim's Word2Vec, same corpus, same settings, one run.

    .venv/bin/python benchmarks/word2vec_vs_gensim.py [--repeats 2]

Both train skip-gram with negative sampling on all of the course's English text
(``course_lib.text.corpus.english_documents``, about 530 000 tokens) with the same
hyperparameters: 100 dimensions, window 5 (dynamic), 5 noise words, 5 epochs,
subsampling 1e-3, min_count 5, initial learning rate 0.025, 2 threads. Throughput
is corpus words times epochs over the wall time of training (best of the repeats;
gensim's time includes its vocabulary scan, ours its pair generation). Quality is
WordSim-353 and SimLex-999 Spearman and Google analogy accuracy, scored by gensim's
KeyedVectors for both.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from course_lib.text import corpus, vocabulary
from course_lib.vectors import evaluation, word2vec

SETTINGS = dict(dim=100, window=5, negatives=5, epochs=5, sample=1e-3, lr=0.025, threads=2, min_count=5)


def train_gensim(documents, seed):
    from gensim.models import Word2Vec

    s = SETTINGS
    model = Word2Vec([d[i:i + 10000] for d in documents for i in range(0, len(d), 10000)],
                     vector_size=s["dim"], window=s["window"], negative=s["negatives"], epochs=s["epochs"],
                     sample=s["sample"], alpha=s["lr"], workers=s["threads"], min_count=s["min_count"],
                     sg=1, hs=0, seed=seed)
    return model.wv


def train_ours(documents, seed):
    s = SETTINGS
    vocab = vocabulary.Vocabulary.build(documents, min_count=s["min_count"])
    ids = [vocab.encode(d) for d in documents]
    vectors, _ = word2vec.train_sgns(ids, vocab.counts, dim=s["dim"], window=s["window"], negatives=s["negatives"],
                                  epochs=s["epochs"], sample=s["sample"], lr=s["lr"], threads=s["threads"],
                                  seed=seed, progress=False)
    return evaluation.keyed_vectors(vocab.words, vectors)


def timed(fn, documents, repeats):
    best, kv = np.inf, None
    for seed in range(repeats):
        start = time.perf_counter()
        kv = fn(documents, seed + 1)
        best = min(best, time.perf_counter() - start)
    return best, kv


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    documents = corpus.english_documents()
    words = sum(map(len, documents)) * SETTINGS["epochs"]
    print(f"corpus: {len(documents)} documents, {words // SETTINGS['epochs']} tokens; settings: {SETTINGS}\n")
    results = {}
    for name, fn in [("gensim Word2Vec", train_gensim), ("course_lib train_sgns", train_ours)]:
        seconds, kv = timed(fn, documents, args.repeats)
        results[name] = dict(words_per_second=words / seconds, seconds=seconds, **evaluation.evaluate(kv))
    print(f"{'':<24}{'words/s':>10}{'seconds':>9}{'WS-353':>8}{'SL-999':>8}{'analogy':>9}")
    for name, r in results.items():
        print(f"{name:<24}{r['words_per_second']:>10.0f}{r['seconds']:>9.2f}{r['wordsim353']:>8.3f}"
              f"{r['simlex999']:>8.3f}{r['analogies']:>9.3f}")
    ours, theirs = results["course_lib train_sgns"], results["gensim Word2Vec"]
    print(f"\nthroughput ratio (course_lib / gensim): {ours['words_per_second'] / theirs['words_per_second']:.2f}"
          f"  (target >= 0.5)")
    print(f"WordSim-353 difference (course_lib - gensim): {ours['wordsim353'] - theirs['wordsim353']:+.3f}"
          f"  (target >= -0.03)")


if __name__ == "__main__":
    main()
