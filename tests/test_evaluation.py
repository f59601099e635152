"""course_lib.vectors.evaluation on word vectors built so that the right score is known.

The benchmark files are read here independently (gensim's test data). Vectors
are constructed to be perfect (cosine equal to the human rating / 10, analogy
offsets exact), perfectly wrong, or random, so each score has a known value.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from gensim.models import KeyedVectors
from gensim.test.utils import datapath

from course_lib.testing import quiet
from course_lib.vectors import evaluation
from course_lib.vectors.evaluation import analogy_accuracy, evaluate, keyed_vectors, word_similarity

BENCHMARK_FILES = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}


def read_pairs(benchmark):
    """``(word, word, rating)`` of every judgement in the benchmark file."""
    pairs = []
    with open(datapath(BENCHMARK_FILES[benchmark]), encoding="utf8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            a, b, rating = line.rstrip("\n").split("\t")
            pairs.append((a.lower(), b.lower(), float(rating)))
    return pairs


def read_analogies():
    """``{section: [(a, b, c, d), ...]}`` of questions-words.txt."""
    sections, name = defaultdict(list), None
    with open(datapath("questions-words.txt"), encoding="utf8") as f:
        for line in f:
            if line.startswith(": "):
                name = line[2:].strip()
            elif line.strip():
                sections[name].append(tuple(line.lower().split()))
    return sections


def isolated_pairs(pairs):
    """A greedy set of pairs no other judgement connects: only these pairs get scored.

    Pairs judged twice (wordsim353 has both "money bank" and "bank money") and words judged
    against themselves are left out.
    """
    neighbours, judged = defaultdict(set), Counter(frozenset((a, b)) for a, b, _ in pairs)
    for a, b, _ in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    chosen, used = [], set()
    for a, b, rating in pairs:
        if (a in neighbours[a] or b in neighbours[b]  # "tiger tiger" is judged too
                or a in used or b in used or judged[frozenset((a, b))] > 1
                or (neighbours[a] | neighbours[b]) & used):
            continue
        chosen.append((a, b, rating))
        used |= {a, b}
    scored = [p for p in pairs if p[0] in used and p[1] in used]
    assert sorted(scored) == sorted(chosen)  # the premise of the constructed vectors
    return chosen


def pair_vectors(chosen, similarity):
    """Each pair in its own 2-D plane, at cosine ``similarity(rating)``; other pairs are orthogonal."""
    words, rows = [], []
    dim = 2 * len(chosen)
    for i, (a, b, rating) in enumerate(chosen):
        cos = similarity(rating)
        va, vb = np.zeros(dim), np.zeros(dim)
        va[2 * i] = 1.0
        vb[2 * i], vb[2 * i + 1] = cos, np.sqrt(1 - cos ** 2)
        words += [a, b]
        rows += [va, vb]
    return words, np.array(rows)


def random_vectors(words, dim=50, seed=0):
    return keyed_vectors(words, np.random.default_rng(seed).standard_normal((len(words), dim)))


def benchmark_words(benchmark):
    return sorted({w for a, b, _ in read_pairs(benchmark) for w in (a, b)})


# ---------------------------------------------------------------- keyed_vectors

def test_keyed_vectors_rows_and_order():
    words = ["the", "cat", "sat", "mat"]
    vectors = np.arange(12, dtype=np.float64).reshape(4, 3) / 7
    kv = keyed_vectors(words, vectors)
    assert isinstance(kv, KeyedVectors)
    assert kv.index_to_key == words and kv.vector_size == 3 and len(kv) == 4
    for i, w in enumerate(words):
        assert kv.get_index(w) == i
        np.testing.assert_array_equal(kv[w], vectors[i].astype(np.float32))
    np.testing.assert_allclose(kv.similarity("cat", "mat"),
                               vectors[1] @ vectors[3] / np.linalg.norm(vectors[1]) / np.linalg.norm(vectors[3]),
                               rtol=1e-6)


def test_keyed_vectors_accepts_float32_and_lists():
    kv = keyed_vectors(("a", "b"), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(kv["b"], [3, 4])
    kv32 = keyed_vectors(["x"], np.ones((1, 5), dtype=np.float32))
    assert kv32.vector_size == 5


@pytest.mark.parametrize("words, vectors, pattern", [
    (["a", "b", "c"], np.zeros((2, 4)), "3 words for 2 vectors"),
    (["a"], np.zeros((2, 4)), "1 words for 2 vectors"),
    (["a", "b"], np.zeros(2), "vectors"),
])
def test_keyed_vectors_rejects_mismatch(words, vectors, pattern):
    with pytest.raises(ValueError, match=pattern):
        keyed_vectors(words, vectors)


# ---------------------------------------------------------------- word_similarity

@pytest.mark.parametrize("benchmark", ["wordsim353", "simlex999"])
def test_word_similarity_perfect_and_perfectly_wrong_vectors(benchmark):
    pairs = read_pairs(benchmark)
    chosen = isolated_pairs(pairs)
    assert len(chosen) > 50
    expected_oov = 100 * (len(pairs) - len(chosen)) / len(pairs)

    # cosine (rating / 10)^3: the same ranking as the ratings (Spearman 1), but not linear (Pearson 0.93)
    perfect = keyed_vectors(*pair_vectors(chosen, lambda rating: (rating / 10) ** 3))
    rho, oov = word_similarity(perfect, benchmark)
    assert isinstance(rho, float) and isinstance(oov, float)
    assert rho > 0.999, f"cosines increasing with the rating must rank the pairs exactly, got {rho}"
    assert oov == pytest.approx(expected_oov)

    wrong = keyed_vectors(*pair_vectors(chosen, lambda rating: -(rating / 10) ** 3))
    rho, oov = word_similarity(wrong, benchmark)
    assert rho < -0.999
    assert oov == pytest.approx(expected_oov)


@pytest.mark.parametrize("benchmark", ["wordsim353", "simlex999"])
def test_word_similarity_random_vectors_near_zero(benchmark):
    """Random vectors: Spearman over n pairs has standard deviation 1/sqrt(n - 1) <= 0.054; allow 4 of them."""
    rho, oov = word_similarity(random_vectors(benchmark_words(benchmark)), benchmark)
    assert abs(rho) < 4 / np.sqrt(len(read_pairs(benchmark)) - 1)
    assert oov == 0.0


def test_word_similarity_default_is_wordsim353():
    kv = random_vectors(benchmark_words("wordsim353"), seed=3)
    assert word_similarity(kv) == word_similarity(kv, "wordsim353")
    assert word_similarity(kv) != word_similarity(kv, "simlex999")


def test_word_similarity_ignores_case_of_the_vocabulary():
    chosen = isolated_pairs(read_pairs("wordsim353"))
    words, rows = pair_vectors(chosen, lambda rating: rating / 10)
    rho, oov = word_similarity(keyed_vectors([w.upper() for w in words], rows))
    assert rho > 0.999 and oov < 100


@pytest.mark.parametrize("benchmark", ["wordsim", "WordSim353", "men", ""])
def test_word_similarity_unknown_benchmark(benchmark):
    kv = random_vectors(["cat", "dog"])
    with pytest.raises(ValueError, match="benchmark"):
        word_similarity(kv, benchmark)


def test_benchmarks_name_shipped_files():
    assert set(evaluation.BENCHMARKS) == {"wordsim353", "simlex999"}


# ---------------------------------------------------------------- analogy_accuracy

def capital_vectors(pairs, dim=40, seed=0):
    """capital = (r, 1, 0), country = (r, 0, 1) with |r| = 1: every offset country - capital is the same."""
    rng = np.random.default_rng(seed)
    words, rows = [], []
    for capital, country in pairs:
        r = rng.standard_normal(dim)
        r /= np.linalg.norm(r)
        words += [capital, country]
        rows += [np.r_[r, 1.0, 0.0], np.r_[r, 0.0, 1.0]]
    return words, np.array(rows)


def capital_pairs():
    questions = read_analogies()["capital-common-countries"]
    return sorted({(a, b) for a, b, _c, _d in questions})


def count_questions(vocabulary):
    vocabulary = set(vocabulary)
    return sum(all(w in vocabulary for w in q) for qs in read_analogies().values() for q in qs)


def test_analogy_accuracy_perfect_offsets():
    pairs = capital_pairs()
    assert len(pairs) == 23
    words, rows = capital_vectors(pairs)
    accuracy, questions = analogy_accuracy(keyed_vectors(words, rows))
    assert isinstance(accuracy, float) and isinstance(questions, int)
    assert questions == count_questions(words) >= 23 * 22
    assert accuracy == 1.0


def test_analogy_accuracy_random_vectors_near_chance():
    words, _ = capital_vectors(capital_pairs())
    accuracy, questions = analogy_accuracy(random_vectors(words, seed=1))
    assert questions == count_questions(words)
    assert 0.0 <= accuracy < 0.15  # chance is about 1 / 43 candidates


def test_analogy_accuracy_restrict_vocab():
    words, rows = capital_vectors(capital_pairs())
    kv = keyed_vectors(words, rows)
    accuracy, questions = analogy_accuracy(kv, restrict_vocab=20)
    assert questions == count_questions(words[:20]) > 0
    assert accuracy == 1.0
    assert analogy_accuracy(kv, restrict_vocab=1) == (0.0, 0)


# ---------------------------------------------------------------- evaluate

def test_evaluate_returns_the_four_scores():
    words = sorted(set(benchmark_words("wordsim353")) | set(benchmark_words("simlex999"))
                   | set(capital_vectors(capital_pairs())[0]))
    kv = random_vectors(words, seed=2)
    scores = evaluate(kv)
    assert set(scores) == {"wordsim353", "simlex999", "analogies", "analogy questions"}
    assert scores["wordsim353"] == word_similarity(kv, "wordsim353")[0]
    assert scores["simlex999"] == word_similarity(kv, "simlex999")[0]
    assert (scores["analogies"], scores["analogy questions"]) == analogy_accuracy(kv)
    assert 0 <= scores["analogies"] <= 1 and scores["analogy questions"] >= 23 * 22
    assert all(-1 <= scores[k] <= 1 for k in ("wordsim353", "simlex999"))


def test_evaluation_leaves_gensims_log_level_as_it_was():
    import logging

    logger = logging.getLogger("gensim")
    before = logger.level
    try:
        logger.setLevel(logging.DEBUG)
        kv = keyed_vectors(["king", "queen", "man", "woman"], np.eye(4))
        with quiet():  # four words give a constant correlation, which scipy warns about
            word_similarity(kv)
            analogy_accuracy(kv)
        assert logger.level == logging.DEBUG, "a library call must not change gensim's log level"
    finally:
        logger.setLevel(before)
