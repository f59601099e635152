"""course_lib.attention.decoding and course_lib.attention.translation_metrics against references.

Beam search of width 1 against greedy search (and greedy search against a loop
over the table) on many random ``TableModel``'s; a beam wide enough to keep every
hypothesis (``beam_width >= V**max_len``) against exhaustive search over all
outputs, enumerated here, scored by ``log p(y) / |y|**alpha``; a decoder whose state
is the whole prefix, to check that states follow their hypotheses; hand-made tables
where greedy search misses the most probable output and where length normalisation
changes the choice. The metrics against sacrebleu called directly, BLEU's formula on
a hand example, and loops.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu
import torch

from course_lib.attention.decoding import TableModel, beam_search, greedy_decode
from course_lib.attention.translation_metrics import accuracy_by_length, corpus_scores, exact_match

ALPHAS = [0.0, 0.7, 1.0]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def start():
    """The first state of a :class:`TableModel`: step 0."""
    return torch.zeros(1)


def exhaustive(log_prob_of, vocab: int, bos: int, eos: int, max_len: int) -> list[tuple[list[int], float]]:
    """Every output: the sequences that end at their first ``<eos>`` or reach ``max_len`` words, with
    their total log-probability; ``log_prob_of(prefix, word)`` is ``log p(word | <bos> prefix)``."""
    outputs = []

    def grow(words, total):
        for word in range(vocab):
            longer, score = words + [word], total + log_prob_of(words, word)
            if word == eos or len(longer) == max_len:
                outputs.append((longer, score))
            else:
                grow(longer, score)

    grow([], 0.0)
    return outputs


def best_of(outputs, alpha: float) -> tuple[list[int], float]:
    return max(outputs, key=lambda o: o[1] / len(o[0]) ** alpha)


def table_log_prob(table: np.ndarray, bos: int):
    """``log p(word | prefix)`` of a table model: ``table[min(t, steps - 1), previous word, word]``."""
    def log_prob_of(words, word):
        previous = words[-1] if words else bos
        return float(table[min(len(words), len(table) - 1), previous, word])
    return log_prob_of


def greedy_by_loop(table: np.ndarray, bos: int, eos: int, max_len: int) -> tuple[list[int], float]:
    words, total, previous = [], 0.0, bos
    for t in range(max_len):
        row = table[min(t, len(table) - 1), previous]
        previous = int(np.argmax(row))
        words.append(previous)
        total += float(row[previous])
        if previous == eos:
            break
    return words, total


def log_table(probabilities) -> np.ndarray:
    return np.log(np.asarray(probabilities, dtype=np.float64))


# ---------------------------------------------------------------- TableModel

def test_table_model_steps_through_its_table():
    rng = np.random.default_rng(0)
    model = TableModel.random(rng, steps=3, vocab_size=4)
    assert model.log_probs.shape == (3, 4, 4)
    assert np.allclose(np.exp(model.log_probs).sum(-1), 1.0)
    state = start()
    for t in range(5):  # past the last step the last table is reused
        tokens = torch.tensor([0, 3, 2])
        log_probs, new_state = model(tokens, state.expand(3))
        assert log_probs.shape == (3, 4) and log_probs.dtype == torch.float64
        assert np.array_equal(log_probs.numpy(), model.log_probs[min(t, 2)][[0, 3, 2]])
        assert torch.equal(new_state, state.expand(3) + 1)
        state = state + 1


# ---------------------------------------------------------------- greedy search and beam width 1

def random_cases(count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        vocab = int(rng.integers(2, 9))
        bos, eos = (int(x) for x in rng.choice(vocab, size=2, replace=False))
        model = TableModel.random(rng, steps=int(rng.integers(1, 7)), vocab_size=vocab,
                                  sharpness=float(rng.uniform(0.3, 3.0)))
        yield model, bos, eos, int(rng.integers(1, 9)), float(rng.choice(ALPHAS))


def test_greedy_decode_matches_a_loop_over_the_table():
    for model, bos, eos, max_len, _ in random_cases(60, seed=1):
        words, total = greedy_decode(model, start(), bos, eos, max_len)
        expected_words, expected_total = greedy_by_loop(model.log_probs, bos, eos, max_len)
        assert words == expected_words
        assert total == pytest.approx(expected_total, abs=1e-12)
        assert len(words) <= max_len and (eos not in words[:-1])


def test_beam_width_1_is_greedy_search():
    for model, bos, eos, max_len, alpha in random_cases(200, seed=2):
        greedy = greedy_decode(model, start(), bos, eos, max_len)
        words, total = beam_search(model, start(), bos, eos, beam_width=1, max_len=max_len, alpha=alpha)
        assert words == greedy[0], f"V={model.log_probs.shape[1]}, max_len={max_len}, alpha={alpha}"
        assert total == pytest.approx(greedy[1], abs=1e-9)


# ---------------------------------------------------------------- a wide beam is exhaustive search

@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("vocab, max_len", [(3, 3), (3, 4), (4, 3), (4, 4)])
def test_wide_beam_equals_exhaustive_search(vocab, max_len, alpha):
    rng = np.random.default_rng(10 * vocab + max_len)
    for case in range(15):
        bos, eos = (int(x) for x in rng.choice(vocab, size=2, replace=False))
        model = TableModel.random(rng, steps=max_len, vocab_size=vocab, sharpness=float(rng.uniform(0.3, 2.0)))
        outputs = exhaustive(table_log_prob(model.log_probs, bos), vocab, bos, eos, max_len)
        assert len(outputs) == sum((vocab - 1) ** k for k in range(max_len)) + (vocab - 1) ** max_len
        expected = best_of(outputs, alpha)
        for width in (vocab ** max_len, vocab ** max_len + 5):
            words, total = beam_search(model, start(), bos, eos, beam_width=width, max_len=max_len, alpha=alpha)
            assert words == expected[0], f"case {case}, width {width}"
            assert total == pytest.approx(expected[1], abs=1e-9), "the total log-probability, not normalised"


class PrefixModel:
    """A decoder whose state is every word it has read, ``(K, t)`` (``<bos>`` first), and whose next-word
    distribution depends on all of them: a hypothesis given another's state gets other numbers."""

    def __init__(self, vocab: int, seed: int):
        self.vocab, self.seed, self.calls = vocab, seed, []

    def log_probs_after(self, prefix: tuple) -> np.ndarray:
        code = self.seed
        for word in prefix:
            code = code * (self.vocab + 1) + word + 1
        z = np.random.default_rng(code).normal(size=self.vocab) * 1.5
        return z - np.logaddexp.reduce(z)

    def __call__(self, tokens, state):
        assert state.dim() == 2 and len(state) == len(tokens) and tokens.dtype == torch.int64
        self.calls.append(len(tokens))
        read = torch.cat([state, tokens[:, None]], dim=1)  # (K, t + 1)
        rows = [self.log_probs_after(tuple(p)) for p in read.tolist()]
        return torch.tensor(np.array(rows)), read

    @staticmethod
    def start():
        return torch.zeros(1, 0, dtype=torch.int64)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_wide_beam_with_a_prefix_state_equals_exhaustive_search(alpha):
    vocab, max_len, bos, eos = 4, 4, 0, 3
    for seed in range(10):
        model = PrefixModel(vocab, seed)
        expected = best_of(exhaustive(lambda words, w: float(model.log_probs_after((bos, *words))[w]),
                                      vocab, bos, eos, max_len), alpha)
        words, total = beam_search(model, PrefixModel.start(), bos, eos, beam_width=vocab ** max_len,
                                   max_len=max_len, alpha=alpha)
        assert (words, pytest.approx(total, abs=1e-9)) == (expected[0], expected[1])


def test_beam_keeps_at_most_beam_width_hypotheses_and_follows_states():
    vocab, bos, eos = 6, 0, 5
    for seed in range(10):
        model = PrefixModel(vocab, 100 + seed)
        words, total = beam_search(model, PrefixModel.start(), bos, eos, beam_width=3, max_len=6)
        assert model.calls[0] == 1 and max(model.calls) <= 3
        assert 1 <= len(words) <= 6 and eos not in words[:-1]
        prefix, expected = (bos,), 0.0
        for word in words:  # the returned log-probability is that of the returned words
            expected += float(model.log_probs_after(prefix)[word])
            prefix += (word,)
        assert total == pytest.approx(expected, abs=1e-9)


def test_beam_search_with_no_state():
    rng = np.random.default_rng(3)
    model = TableModel.random(rng, steps=1, vocab_size=5)
    bigram = lambda tokens, state: (torch.from_numpy(model.log_probs[0][tokens.numpy()]), None)  # noqa: E731
    for width in (1, 2, 7):
        assert beam_search(bigram, None, 0, 1, width, 5, 0.7) == beam_search(model, start(), 0, 1, width, 5, 0.7)
    assert greedy_decode(bigram, None, 0, 1, 5) == greedy_decode(model, start(), 0, 1, 5)


# ---------------------------------------------------------------- hand-made tables

BOS, EOS, X, Y = 0, 1, 2, 3


def greedy_trap() -> TableModel:
    """Greedy takes x (0.5) and then cannot end well; y (0.4) then <eos> (0.9) is the most probable output."""
    uniform = [0.25] * 4
    first = [uniform] * 4
    first[BOS] = [0.0 + 1e-12, 0.1, 0.5, 0.4 - 1e-12]
    second = [uniform] * 4
    second[X] = [1e-12, 0.33, 0.34, 0.33 - 1e-12]
    second[Y] = [1e-12, 0.9, 0.05, 0.05 - 1e-12]
    return TableModel(log_table([first, second]))


def test_greedy_misses_the_most_probable_output_and_beam_width_2_finds_it():
    model = greedy_trap()
    greedy_words, greedy_total = greedy_decode(model, start(), BOS, EOS, max_len=2)
    assert greedy_words == [X, X] and greedy_total == pytest.approx(math.log(0.5 * 0.34))
    beam_words, beam_total = beam_search(model, start(), BOS, EOS, beam_width=2, max_len=2)
    assert beam_words == [Y, EOS] and beam_total == pytest.approx(math.log(0.4 * 0.9))
    assert beam_total > greedy_total
    assert beam_search(model, start(), BOS, EOS, beam_width=1, max_len=2)[0] == [X, X]
    assert best_of(exhaustive(table_log_prob(model.log_probs, BOS), 4, BOS, EOS, 2), 0.0)[0] == [Y, EOS]


def short_or_long() -> TableModel:
    """``[<eos>]`` has log p = log 0.5; ``[x, <eos>]`` has log 0.5 + log 0.6, lower in total, higher per word."""
    uniform = [0.25] * 4
    first = [uniform] * 4
    first[BOS] = [1e-12, 0.5, 0.5 - 1e-12, 0.0 + 1e-12]
    second = [uniform] * 4
    second[X] = [1e-12, 0.6, 0.2, 0.2 - 1e-12]
    return TableModel(log_table([first, second]))


def test_length_normalisation_changes_the_choice():
    model = short_or_long()
    assert beam_search(model, start(), BOS, EOS, 2, 2, alpha=0.0) == ([EOS], pytest.approx(math.log(0.5)))
    words, total = beam_search(model, start(), BOS, EOS, 2, 2, alpha=1.0)
    assert words == [X, EOS] and total == pytest.approx(math.log(0.5 * 0.6)), "raw log p, not divided by 2"


# ---------------------------------------------------------------- argument errors

SEARCHES = {"greedy": lambda **kw: greedy_decode(**{k: v for k, v in kw.items() if k not in ("beam_width", "alpha")}),
            "beam": lambda **kw: beam_search(**kw)}
GOOD = dict(step_fn=TableModel.random(np.random.default_rng(0), 2, 3), state=torch.zeros(1), bos=0, eos=1,
            beam_width=2, max_len=3, alpha=0.0)
BAD = {
    "step_fn not callable": (dict(step_fn="model"), TypeError, r"step_fn must be a function"),
    "max_len 0": (dict(max_len=0), ValueError, r"max_len must be a positive integer"),
    "max_len float": (dict(max_len=2.0), ValueError, r"max_len must be a positive integer"),
    "bos negative": (dict(bos=-1), ValueError, r"bos must be a non-negative integer"),
    "eos float": (dict(eos=1.5), ValueError, r"eos must be a non-negative integer"),
}


@pytest.mark.parametrize("search", list(SEARCHES))
@pytest.mark.parametrize("change, error, match", list(BAD.values()), ids=list(BAD))
def test_search_argument_errors(search, change, error, match):
    with pytest.raises(error, match=match):
        SEARCHES[search](**{**GOOD, **change})


@pytest.mark.parametrize("width", [0, -1, 1.0, True])
def test_beam_width_must_be_a_positive_integer(width):
    with pytest.raises(ValueError, match=r"beam_width must be a positive integer"):
        beam_search(**{**GOOD, "beam_width": width})


TABLE_ERRORS = {
    "rank 2": (lambda: TableModel(np.zeros((3, 3))), ValueError, r"log_probs must have shape \(T, V, V\)"),
    "not square": (lambda: TableModel(np.log(np.full((2, 3, 4), 0.25))), ValueError, r"got \(2, 3, 4\)"),
    "not normalised": (lambda: TableModel(np.zeros((2, 3, 3))), ValueError, r"log-distribution"),
    "rng": (lambda: TableModel.random(0, 2, 3), TypeError, r"rng must be a numpy.random.Generator"),
}


@pytest.mark.parametrize("call, error, match", list(TABLE_ERRORS.values()), ids=list(TABLE_ERRORS))
def test_table_model_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------- translation metrics

SENTENCES = [["drei", "hundert", "vier", "und", "zwanzig"], ["eine", "million", "zwei", "hundert", "tausend"],
             ["sieben", "und", "achtzig"], ["elf"]]


def test_corpus_scores_equal_sacrebleu_called_directly():
    outputs = [["drei", "hundert", "vier", "und", "dreißig"], ["eine", "million", "hundert", "tausend"],
               ["sieben", "und", "achtzig"], ["zwölf"]]
    got = corpus_scores(outputs, SENTENCES)
    hypotheses, references = [" ".join(o) for o in outputs], [[" ".join(r) for r in SENTENCES]]
    assert got == {"bleu": pytest.approx(sacrebleu.corpus_bleu(hypotheses, references).score, abs=1e-9),
                   "chrf": pytest.approx(sacrebleu.corpus_chrf(hypotheses, references).score, abs=1e-9)}
    assert 0 < got["bleu"] < 100 and 0 < got["chrf"] < 100
    assert set(got) == {"bleu", "chrf"} and all(type(v) is float for v in got.values())


def test_corpus_scores_hand_examples():
    assert corpus_scores(SENTENCES, SENTENCES) == {"bleu": pytest.approx(100.0), "chrf": pytest.approx(100.0)}
    # every n-gram of the output is right, but it is 6 words against 8: BLEU = 100 * exp(1 - 8/6)
    short = corpus_scores([["a", "b", "c", "d", "e", "f"]], [["a", "b", "c", "d", "e", "f", "g", "h"]])
    assert short["bleu"] == pytest.approx(100 * math.exp(1 - 8 / 6), abs=1e-9)
    assert corpus_scores([["x", "y", "z", "w"]], [["a", "b", "c", "d"]])["bleu"] == pytest.approx(0.0)


def test_exact_match():
    outputs = [["a", "b"], ["a"], [], np.array([3, 4]), ["b", "a"]]
    references = [["a", "b"], ["a", "b"], [], [3, 4], ["a", "b"]]
    got = exact_match(outputs, references)
    assert got.dtype == bool and got.shape == (5,)
    assert got.tolist() == [True, False, True, True, False]


def test_accuracy_by_length_matches_a_loop():
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 20, size=300)
    correct = rng.random(300) < 1 / lengths
    bins = [1, 3, 6, 10, 18]
    centers, accuracy, counts = accuracy_by_length(correct, lengths, bins)
    for j in range(len(bins) - 1):
        inside = [c for c, n in zip(correct, lengths) if bins[j] <= n < bins[j + 1]]
        assert counts[j] == len(inside)
        assert accuracy[j] == pytest.approx(sum(inside) / len(inside))
        assert centers[j] == pytest.approx((bins[j] + bins[j + 1] - 1) / 2), "the middle of [b_j, b_{j+1} - 1]"
    assert counts.sum() == sum(1 <= n < 18 for n in lengths), "lengths outside the bins are not counted"


def test_accuracy_by_length_empty_bin_is_nan():
    centers, accuracy, counts = accuracy_by_length([True, False, True], [1, 1, 9], [1, 3, 5, 10])
    assert counts.tolist() == [2, 0, 1]
    assert accuracy[0] == 0.5 and np.isnan(accuracy[1]) and accuracy[2] == 1.0
    assert centers.tolist() == [1.5, 3.5, 7.0]


METRIC_ERRORS = {
    "exact_match lengths": (lambda: exact_match([["a"]], [["a"], ["b"]]), r"outputs and references must be as many"),
    "corpus_scores lengths": (lambda: corpus_scores([["a"]], []), r"two non-empty lists of the same length"),
    "corpus_scores empty": (lambda: corpus_scores([], []), r"two non-empty lists"),
    "accuracy shapes": (lambda: accuracy_by_length([True], [1, 2], [1, 3]), r"correct and lengths must be two \(N,\)"),
    "accuracy 2-D": (lambda: accuracy_by_length([[True]], [[1]], [1, 3]), r"correct and lengths must be two \(N,\)"),
    "bins one edge": (lambda: accuracy_by_length([True], [1], [1]), r"bins must be at least two increasing edges"),
    "bins decreasing": (lambda: accuracy_by_length([True], [1], [5, 3]), r"bins must be at least two increasing"),
    "bins repeated": (lambda: accuracy_by_length([True], [1], [1, 3, 3]), r"bins must be at least two increasing"),
}


@pytest.mark.parametrize("call, match", list(METRIC_ERRORS.values()), ids=list(METRIC_ERRORS))
def test_metric_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
