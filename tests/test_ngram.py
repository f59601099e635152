"""course_lib.recurrent.ngram, the smoothed n-gram baseline of chapter 3.

References: probabilities worked out by hand on a five-token corpus (absolute
discounting and Kneser-Ney), and a naive implementation written from the
docstring's recursion with Counters and one loop per context, compared on
random corpora for every context, seen or not.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from course_lib.recurrent.ngram import NGramModel


def naive_probability(ids, V, order, D, w, history, kneser_ney=False):
    """p(w | history) from the recursion, counting with Counters over the training ids."""
    ids = [int(i) for i in ids]
    history = tuple(int(i) for i in history)[max(len(history) - (order - 1), 0):] if order > 1 else ()

    def counts_of(length):
        grams = Counter(tuple(ids[t - length + 1:t + 1]) for t in range(length - 1, len(ids)))
        if not kneser_ney or length == order:
            return grams
        longer = Counter(tuple(ids[t - length:t + 1]) for t in range(length, len(ids)))
        return Counter(gram[1:] for gram in longer)  # each distinct u h w counts once for h w

    def p(k, h):  # h holds the last k ids
        if k < 0:
            return 1.0 / V
        counts = counts_of(k + 1)
        following = {gram[-1]: c for gram, c in counts.items() if gram[:-1] == h}
        total = sum(following.values())
        lower = p(k - 1, h[1:] if k > 0 else ())
        if total == 0:
            return lower
        return (max(following.get(w, 0) - D, 0) + D * len(following) * lower) / total

    if len(history) < order - 1:  # the stream's start: only the contexts that fit exist
        return p(len(history), history)
    return p(order - 1, history)


# The corpus 0 1 0 1 2 over V = 4 symbols (3 never occurs), D = 0.5.
TINY = np.array([0, 1, 0, 1, 2])
# Unigram: c = (2, 2, 1, 0), N = 5, three types: p(w) = (max(c - 0.5, 0) + 0.5 * 3 / 4) / 5.
TINY_UNIGRAM = np.array([1.875, 1.875, 0.875, 0.375]) / 5
# Bigram after 0: c(0 1) = 2, one type: p(w | 0) = (max(c(0 w) - 0.5, 0) + 0.5 * 1 * p(w)) / 2.
TINY_AFTER_0 = np.array([0.09375, 0.84375, 0.04375, 0.01875])
# Bigram after 1: c(1 0) = c(1 2) = 1, two types: p(w | 1) = (max(c(1 w) - 0.5, 0) + 0.5 * 2 * p(w)) / 2.
TINY_AFTER_1 = np.array([0.4375, 0.1875, 0.3375, 0.0375])


def test_order_one_is_the_discounted_unigram_worked_out_by_hand():
    model = NGramModel.fit(TINY, 4, 1, discount=0.5)
    np.testing.assert_allclose(np.exp(model.next_log_probs([])), TINY_UNIGRAM, rtol=1e-12)
    np.testing.assert_allclose(np.exp(model.next_log_probs([2, 0])), TINY_UNIGRAM, rtol=1e-12)  # order 1 ignores it


def test_bigram_probabilities_worked_out_by_hand():
    model = NGramModel.fit(TINY, 4, 2, discount=0.5)
    np.testing.assert_allclose(np.exp(model.next_log_probs([0])), TINY_AFTER_0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(model.next_log_probs([3, 1])), TINY_AFTER_1, rtol=1e-12)
    np.testing.assert_allclose(np.exp(model.next_log_probs([3])), TINY_UNIGRAM, rtol=1e-12)  # unseen context
    np.testing.assert_allclose(np.exp(model.next_log_probs([])), TINY_UNIGRAM, rtol=1e-12)  # no context yet
    # The stream 0 1 2 scores p(1 | 0) and p(2 | 1).
    np.testing.assert_allclose(model.log_probs([0, 1, 2]), np.log([0.84375, 0.3375]), rtol=1e-12)
    assert model.perplexity([0, 1, 2]) == pytest.approx(1 / math.sqrt(0.84375 * 0.3375), rel=1e-12)


def test_kneser_ney_worked_out_by_hand():
    model = NGramModel.fit(TINY, 4, 2, discount=0.5, kneser_ney=True)
    # Continuation counts: 0, 1 and 2 each follow one distinct token (the bigram types 01, 10, 12), 3 none:
    # p(w) = (max(1 - 0.5, 0) + 0.5 * 3 / 4) / 3 for w = 0, 1, 2 and (0.5 * 3 / 4) / 3 for w = 3.
    unigram = np.array([0.875, 0.875, 0.875, 0.375]) / 3
    np.testing.assert_allclose(np.exp(model.next_log_probs([])), unigram, rtol=1e-12)
    # The highest order keeps the raw counts: p(1 | 0) = (2 - 0.5 + 0.5 * 1 * p(1)) / 2.
    assert math.exp(model.next_log_probs([0])[1]) == pytest.approx((1.5 + 0.5 * unigram[1]) / 2, rel=1e-12)


@pytest.mark.parametrize("order,kneser_ney", [(1, False), (2, False), (3, False), (4, False), (3, True), (4, True)])
def test_matches_a_naive_implementation_on_every_context(order, kneser_ney):
    rng = np.random.default_rng(order + 10 * kneser_ney)
    V, D = 4, 0.6
    train = rng.choice(V, size=60, p=[0.5, 0.3, 0.15, 0.05])  # some n-grams frequent, many unseen
    model = NGramModel.fit(train, V, order, discount=D, kneser_ney=kneser_ney)
    for length in range(order):  # every context of every length, the unseen ones included
        for history in itertools.product(range(V), repeat=length):
            got = np.exp(model.next_log_probs(list(history)))
            want = [naive_probability(train, V, order, D, w, history, kneser_ney) for w in range(V)]
            np.testing.assert_allclose(got, want, rtol=1e-10, err_msg=f"context {history}")
    stream = rng.choice(V, size=25)
    want = [math.log(naive_probability(train, V, order, D, stream[t], stream[:t], kneser_ney)) for t in range(1, 25)]
    np.testing.assert_allclose(model.log_probs(stream), want, rtol=1e-10)


@pytest.mark.parametrize("kneser_ney", [False, True])
@pytest.mark.parametrize("discount", [0.1, 0.75, 1.0])
def test_every_conditional_distribution_sums_to_one(discount, kneser_ney):
    rng = np.random.default_rng(3)
    V = 6
    model = NGramModel.fit(rng.integers(0, V, size=200), V, 3, discount=discount, kneser_ney=kneser_ney)
    for history in itertools.product(range(V), repeat=2):
        assert np.exp(model.next_log_probs(list(history))).sum() == pytest.approx(1.0, abs=1e-12)
    unseen_type = NGramModel.fit([0, 1, 1, 0], V, 3, discount=discount, kneser_ney=kneser_ney)  # ids 2..5 never seen
    for history in ([], [5], [0, 1], [4, 4], [1, 0, 1]):
        probs = np.exp(unseen_type.next_log_probs(history))
        assert probs.sum() == pytest.approx(1.0, abs=1e-12) and probs.min() > 0


def test_perplexity_of_a_uniform_unigram_is_the_vocabulary_size():
    V = 7
    model = NGramModel.fit(np.tile(np.arange(V), 5), V, 1)  # every symbol equally often: p(w) = 1/V
    assert model.perplexity(np.random.default_rng(0).integers(0, V, size=50)) == pytest.approx(V, rel=1e-12)


def test_a_longer_context_predicts_a_cycle_better():
    cycle = np.tile(np.arange(5), 40)  # 0 1 2 3 4 0 1 ...: the previous symbol decides the next
    perplexities = [NGramModel.fit(cycle, 5, n, discount=0.1).perplexity(cycle[:50]) for n in (1, 2)]
    assert perplexities[0] == pytest.approx(5, rel=1e-9) and perplexities[1] < 1.1


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        NGramModel.fit([0, 1, 5], 4, 2)
    with pytest.raises(ValueError, match="1-D sequence"):
        NGramModel.fit(np.zeros((2, 3), dtype=int), 4, 2)
    with pytest.raises(TypeError, match="integer word ids"):
        NGramModel.fit([0.0, 1.0], 4, 2)
    with pytest.raises(ValueError, match="order must be a positive integer"):
        NGramModel.fit([0, 1], 4, 0)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer"):
        NGramModel.fit([0, 1], 0, 2)
    for discount in (0, 1.5, -0.2, "0.5", True):
        with pytest.raises(ValueError, match="discount must be a number in"):
            NGramModel.fit([0, 1], 4, 2, discount=discount)
    with pytest.raises(ValueError, match="too high"):
        NGramModel.fit([0, 1], 1000, 8)
    with pytest.raises(ValueError, match="at least one token"):
        NGramModel.fit(np.array([], dtype=int), 4, 2)
    model = NGramModel.fit(TINY, 4, 2)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        model.perplexity([1])
    with pytest.raises(ValueError, match="context holds id 4"):
        model.next_log_probs([0, 4])
