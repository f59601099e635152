"""course_lib's PyTorch SGNS trainer against gensim's Word2Vec, same corpus, same settings, interleaved rounds.

    .venv/bin/python benchmarks/word2vec_vs_gensim.py [--repeats 3]

Both train skip-gram with negative sampling on all of the course's English text
(``course_lib.text.corpus.english_documents``, about 480 000 tokens) with the same
hyperparameters: 100 dimensions, window 5 (dynamic), 5 noise words, 5 epochs,
subsampling 1e-3, min_count 5, initial learning rate 0.025, 2 threads. Throughput
is corpus words times epochs over the wall time of training (gensim's time includes
its vocabulary scan, ours its vocabulary and pair generation). The two run in turn,
``--repeats`` rounds with the order alternating and a new seed each round; the
throughput ratio of each round is the quotient of that round's two times, and the
script prints the median ratio and its range over the rounds. Quality is WordSim-353
and SimLex-999 Spearman and Google analogy accuracy, scored by gensim's KeyedVectors
for both: the median over the rounds, and for WordSim-353 the range.
"""

from __future__ import annotations

import argparse
import statistics
import time

from timing import cpu_name, record

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


def timed_rounds(functions: dict, documents, repeats: int):
    """Seconds and vectors of each function, one run per round, the order alternating round by round."""
    seconds = {name: [] for name in functions}
    vectors = {name: [] for name in functions}
    for number in range(repeats):
        names = list(functions) if number % 2 == 0 else list(reversed(functions))
        for name in names:
            start = time.perf_counter()
            kv = functions[name](documents, number + 1)
            seconds[name].append(time.perf_counter() - start)
            vectors[name].append(kv)
    return seconds, vectors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    documents = corpus.english_documents()
    words = sum(map(len, documents)) * SETTINGS["epochs"]
    print(f"corpus: {len(documents)} documents, {words // SETTINGS['epochs']} tokens; settings: {SETTINGS}")
    print(f"CPU: {cpu_name()}; {args.repeats} rounds, interleaved\n")
    functions = {"gensim Word2Vec": train_gensim, "course_lib train_sgns": train_ours}
    seconds, vectors = timed_rounds(functions, documents, args.repeats)
    scores = {name: [evaluation.evaluate(kv) for kv in kvs] for name, kvs in vectors.items()}
    print(f"{'':<24}{'words/s':>10}{'seconds':>9}{'WS-353':>8}{'SL-999':>8}{'analogy':>9}   (medians of the rounds)")
    for name in functions:
        median = {key: statistics.median(s[key] for s in scores[name]) for key in ("wordsim353", "simlex999",
                                                                                  "analogies")}
        time_median = statistics.median(seconds[name])
        print(f"{name:<24}{words / time_median:>10.0f}{time_median:>9.2f}{median['wordsim353']:>8.3f}"
              f"{median['simlex999']:>8.3f}{median['analogies']:>9.3f}")
    ratios = [theirs / ours for theirs, ours in zip(seconds["gensim Word2Vec"], seconds["course_lib train_sgns"])]
    print(f"\nthroughput ratio (course_lib / gensim words/s): median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} rounds  (target >= 0.8)")
    ours_ws = [s["wordsim353"] for s in scores["course_lib train_sgns"]]
    theirs_ws = [s["wordsim353"] for s in scores["gensim Word2Vec"]]
    differences = [a - b for a, b in zip(ours_ws, theirs_ws)]
    print(f"WordSim-353 difference (course_lib - gensim): median {statistics.median(differences):+.3f}, "
          f"range {min(differences):+.3f} to {max(differences):+.3f}  (target >= -0.03)")
    ratio, difference = statistics.median(ratios), statistics.median(differences)
    record("word2vec_vs_gensim", "SGNS training, words/s course_lib/gensim (same threads)", ratio, min(ratios),
           max(ratios), ">= 0.8", ratio >= 0.8, len(ratios))
    record("word2vec_vs_gensim", "WordSim-353 Spearman, course_lib minus gensim (a difference)", difference,
           min(differences), max(differences), ">= -0.03", difference >= -0.03, len(differences))


if __name__ == "__main__":
    main()
