"""course_lib.vectors.word2vec against independent references.

PyTorch autograd (float64) for the SGNS loss and its gradients, finite
differences from course_lib.vectors.gradcheck, naive double loops for skip-gram pairs,
the exercise functions themselves for the fast trainer's parts (course_lib.vectors.sgns_fast),
a chi-square test for the noise sampler, gensim's own subsampling table for
``keep_probabilities``, and, for the trainers, properties any working word2vec
has: words of two disjoint topics end up in two separate clusters, and on the
course's real corpus WordSim-353 Spearman is above 0.2 (slow; gensim's
Word2Vec gets about 0.22 there).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats

from course_lib.text import corpus, vocabulary
from course_lib.vectors import evaluation, gradcheck, sgns_fast
from course_lib.vectors.word2vec import (keep_probabilities, negative_samples, noise_distribution, sgns_loss_and_grads,
                                 skipgram_pairs, train_sgns, train_sgns_numpy)


# ---------------------------------------------------------------- skipgram_pairs

def naive_pairs(ids, reach):
    """Centers and contexts by a double loop: ``0 < |i - j| <= reach[i]``, by center then context position."""
    centers, contexts = [], []
    for i in range(len(ids)):
        for j in range(len(ids)):
            if 0 < abs(i - j) <= reach[i]:
                centers.append(int(ids[i]))
                contexts.append(int(ids[j]))
    return centers, contexts


def assert_int64_pairs(out):
    assert isinstance(out, tuple) and len(out) == 2
    centers, contexts = out
    for a in (centers, contexts):
        assert isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1
    assert centers.shape == contexts.shape


@pytest.mark.parametrize("length", [2, 3, 7, 25])
@pytest.mark.parametrize("window", [1, 2, 5, 30])
def test_skipgram_pairs_fixed_window_matches_double_loop(length, window):
    ids = np.random.default_rng(length * 100 + window).integers(0, 6, size=length)  # repeated ids
    out = skipgram_pairs(ids, window)
    assert_int64_pairs(out)
    centers, contexts = naive_pairs(ids, [window] * length)
    np.testing.assert_array_equal(out[0], centers)
    np.testing.assert_array_equal(out[1], contexts)


def test_skipgram_pairs_small_example_by_hand():
    centers, contexts = skipgram_pairs([10, 11, 12], 1)
    np.testing.assert_array_equal(centers, [10, 11, 11, 12])
    np.testing.assert_array_equal(contexts, [11, 10, 12, 11])


def test_skipgram_pairs_accepts_lists_and_int32_and_returns_int64():
    for ids in ([4, 2, 4], np.array([4, 2, 4], dtype=np.int32), np.array([4, 2, 4], dtype=np.uint8)):
        out = skipgram_pairs(ids, 2)
        assert_int64_pairs(out)
        np.testing.assert_array_equal(out[0], [4, 4, 2, 2, 4, 4])
        np.testing.assert_array_equal(out[1], [2, 4, 4, 4, 4, 2])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("window", [1, 3, 5])
def test_skipgram_pairs_dynamic_window_matches_documented_draw(seed, window):
    """With a Generator, b = rng.integers(1, window + 1, size=T) is drawn once, then the fixed-window rule."""
    ids = np.random.default_rng(1000 + seed).integers(0, 50, size=40)
    out = skipgram_pairs(ids, window, np.random.default_rng(seed))
    assert_int64_pairs(out)
    reach = np.random.default_rng(seed).integers(1, window + 1, size=len(ids))
    centers, contexts = naive_pairs(ids, reach)
    np.testing.assert_array_equal(out[0], centers)
    np.testing.assert_array_equal(out[1], contexts)


def test_skipgram_pairs_dynamic_window_same_seed_same_pairs_and_rng_is_used():
    ids = np.arange(300)
    a = skipgram_pairs(ids, 5, np.random.default_rng(7))
    b = skipgram_pairs(ids, 5, np.random.default_rng(7))
    c = skipgram_pairs(ids, 5, np.random.default_rng(8))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert len(a[0]) != len(c[0]) or not np.array_equal(a[1], c[1]), "a different seed must give other windows"
    fixed = skipgram_pairs(ids, 5)
    # b_i is uniform on {1..5}: about 3 of the 5 contexts on each side, far fewer pairs than the fixed window
    assert 0.45 * len(fixed[0]) < len(a[0]) < 0.75 * len(fixed[0])


@pytest.mark.parametrize("window", [1, 2, 4, 10])
def test_skipgram_pairs_dynamic_pairs_are_within_window(window):
    ids = np.arange(500)  # id == position, so a pair's distance is |center - context|
    centers, contexts = skipgram_pairs(ids, window, np.random.default_rng(window))
    distance = np.abs(centers - contexts)
    assert distance.min() >= 1 and distance.max() <= window
    if window > 1:  # near contexts are kept more often than far ones (P(d kept) = (window - d + 1) / window)
        seen = np.bincount(distance, minlength=window + 1)[1:]
        assert seen[0] > seen[-1] and seen[0] == 2 * 500 - 2  # distance 1 is always in the window


@pytest.mark.parametrize("ids", [[], np.array([], dtype=np.int64), [3], np.array([9], dtype=np.int32)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_skipgram_pairs_of_empty_and_one_token_documents_are_empty(ids, dynamic):
    out = skipgram_pairs(ids, 3, np.random.default_rng(0) if dynamic else None)
    assert_int64_pairs(out)
    assert out[0].shape == (0,)


@pytest.mark.parametrize("ids", [np.zeros((2, 3), dtype=np.int64), [[0, 1], [1, 2]]])
def test_skipgram_pairs_rejects_2d_ids(ids):
    with pytest.raises((ValueError, TypeError), match="ids"):
        skipgram_pairs(ids, 2)


@pytest.mark.parametrize("ids", [[0.0, 1.0, 2.0], np.array([1.5, 2.0]), ["a", "b"]])
def test_skipgram_pairs_rejects_non_integer_ids(ids):
    with pytest.raises((ValueError, TypeError), match="integer"):
        skipgram_pairs(ids, 2)


@pytest.mark.parametrize("window", [0, -1, 2.5, True, "3"])
def test_skipgram_pairs_rejects_bad_window(window):
    with pytest.raises(ValueError, match="window"):
        skipgram_pairs([0, 1, 2], window)


# ---------------------------------------------------------------- noise_distribution, keep_probabilities

def test_noise_distribution_by_hand():
    # 1, 16, 81 to the power 3/4 are 1, 8, 27
    np.testing.assert_allclose(noise_distribution([1, 16, 81, 0]), np.array([1, 8, 27, 0]) / 36, rtol=1e-14)
    np.testing.assert_allclose(noise_distribution([1, 3], power=1.0), [0.25, 0.75], rtol=1e-14)
    np.testing.assert_allclose(noise_distribution([5, 5, 5, 5]), [0.25] * 4, rtol=1e-14)


def test_noise_distribution_sums_to_one_and_flattens_frequencies():
    counts = np.random.default_rng(0).zipf(1.5, size=200).astype(float)
    noise = noise_distribution(counts)
    assert noise.dtype == np.float64 and noise.shape == (200,)
    assert math.isclose(noise.sum(), 1.0, rel_tol=1e-12)
    freq = counts / counts.sum()
    rare, common = np.argmin(counts), np.argmax(counts)
    assert noise[rare] > freq[rare] and noise[common] < freq[common]  # the point of the 3/4 power


@pytest.mark.parametrize("counts", [[], [0, 0, 0], [1, -1, 3], [[1, 2], [3, 4]]])
def test_noise_distribution_rejects_bad_counts(counts):
    with pytest.raises(ValueError, match="counts"):
        noise_distribution(counts)


def test_keep_probabilities_formula_values():
    # total 10 000: f = 0.1, 0.01, 0.004, 0.001, 0.0001 and 0.8849
    counts = np.array([1000, 100, 40, 10, 1, 8849])
    keep = keep_probabilities(counts, sample=1e-3)
    expected = [(10 + 1) / 100,  # (sqrt(f/t) + 1) * t / f with f/t = 100
                (math.sqrt(10) + 1) / 10,
                (2 + 1) / 4,
                1.0,  # (1 + 1) * 1 = 2, capped at 1
                1.0,
                (math.sqrt(884.9) + 1) / 884.9]
    np.testing.assert_allclose(keep, expected, rtol=1e-12)


def test_keep_probabilities_rare_words_always_kept_and_monotone():
    counts = np.array([100000, 5000, 300, 20, 3, 1, 0])
    keep = keep_probabilities(counts, sample=1e-3)
    assert keep.dtype == np.float64 and keep.shape == counts.shape
    assert np.all((keep > 0) & (keep <= 1))
    np.testing.assert_array_equal(keep[3:], 1.0)  # f <= 2.6 * sample is always kept; so is an unseen word
    assert np.all(np.diff(keep) >= 0) and keep[0] < 0.2


@pytest.mark.parametrize("sample", [0, 0.0])
def test_keep_probabilities_sample_zero_keeps_everything(sample):
    np.testing.assert_array_equal(keep_probabilities([1000000, 10, 1], sample=sample), [1.0, 1.0, 1.0])


def test_keep_probabilities_match_gensim():
    """gensim stores keep(w) * (2**32 - 1) as each word's ``sample_int``."""
    from gensim.models import Word2Vec

    rng = np.random.default_rng(0)
    tokens = [f"w{i}" for i in np.minimum(rng.zipf(1.3, size=20000), 500)]
    sentences = [tokens[i:i + 100] for i in range(0, len(tokens), 100)]
    counter = Counter(tokens)
    words = sorted(counter)
    counts = np.array([counter[w] for w in words])
    for sample in (1e-3, 1e-2):
        model = Word2Vec(vector_size=4, min_count=1, sample=sample, sg=1, workers=1)
        model.build_vocab(sentences)
        theirs = np.array([model.wv.get_vecattr(w, "sample_int") for w in words]) / (2 ** 32 - 1)
        ours = keep_probabilities(counts, sample=sample)
        assert (ours < 1).sum() >= 3 and (ours == 1).sum() >= 3  # both regimes are exercised
        np.testing.assert_allclose(ours, theirs, atol=1e-8)


# ---------------------------------------------------------------- negative_samples

NOISE_COUNTS = np.array([0, 50, 3, 0, 1000, 7, 120, 20, 0])  # zero-probability words first, inside and last


@pytest.mark.parametrize("shape", [(4, 3), (7,), (2, 3, 5), (0, 5)])
def test_negative_samples_shape_dtype_and_range(shape):
    noise = noise_distribution(NOISE_COUNTS)
    out = negative_samples(noise, shape, np.random.default_rng(0))
    assert isinstance(out, np.ndarray) and out.dtype == np.int64 and out.shape == shape
    if out.size:
        assert out.min() >= 0 and out.max() < len(noise)


def test_negative_samples_frequencies_match_noise():
    """Chi-square goodness of fit over 200 000 draws.

    The threshold is the chi-square quantile at 1 - 1e-6, so a correct sampler
    fails with probability 1e-6 (and the seed is fixed). The max-deviation check
    allows 6 standard deviations of a frequency, sqrt(p (1 - p) / n) <= 0.0011.
    An off-by-one in the cumulative search moves whole probabilities between
    neighbours (deviations of 0.05 and more) and fails both by far.
    """
    noise = noise_distribution(NOISE_COUNTS)
    n = 200_000
    draws = negative_samples(noise, (n // 4, 4), np.random.default_rng(12345))
    observed = np.bincount(draws.ravel(), minlength=len(noise))
    positive = noise > 0
    expected = n * noise[positive]
    chi2 = np.sum((observed[positive] - expected) ** 2 / expected)
    assert chi2 < stats.chi2.ppf(1 - 1e-6, df=positive.sum() - 1), f"chi2 = {chi2:.1f}"
    sd = np.sqrt(noise * (1 - noise) / n)
    assert np.all(np.abs(observed / n - noise) <= 6 * sd + 1e-12)
    np.testing.assert_array_equal(observed[~positive], 0)  # zero-probability words are never drawn


@pytest.mark.parametrize("zero_at", [0, 2, 4])
def test_negative_samples_never_draws_zero_probability_word(zero_at):
    noise = np.full(5, 0.25)
    noise[zero_at] = 0.0
    draws = negative_samples(noise, (50_000,), np.random.default_rng(zero_at))
    assert not np.any(draws == zero_at)
    assert set(np.unique(draws)) == set(range(5)) - {zero_at}


def test_negative_samples_point_mass():
    assert np.all(negative_samples([0, 0, 1.0, 0], (100,), np.random.default_rng(0)) == 2)


def test_negative_samples_deterministic_for_a_seeded_generator():
    noise = noise_distribution(NOISE_COUNTS)
    a = negative_samples(noise, (50, 5), np.random.default_rng(3))
    b = negative_samples(noise, (50, 5), np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(3)
    first, second = negative_samples(noise, (50, 5), rng), negative_samples(noise, (50, 5), rng)
    np.testing.assert_array_equal(first, a)
    assert not np.array_equal(first, second), "the generator must be advanced, not re-seeded"


@pytest.mark.parametrize("noise", [
    [0.5, 0.6],               # sums to 1.1
    [0.2, 0.2],               # sums to 0.4
    [1.5, -0.5],              # sums to 1 but negative
    [[0.5, 0.5]],             # 2-D
    [],
    [np.nan, 1.0],
])
def test_negative_samples_rejects_non_probability_vectors(noise):
    with pytest.raises(ValueError, match="noise"):
        negative_samples(noise, (3,), np.random.default_rng(0))


# ---------------------------------------------------------------- sgns_loss_and_grads

def torch_sgns(center, context, negatives):
    """The SGNS loss by PyTorch autograd in float64: loss and the three gradients."""
    v, u_o, u_k = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (center, context, negatives))
    positive = (u_o * v).sum(1)  # (B,)
    negative = torch.einsum("bkd,bd->bk", u_k, v)  # (B, K)
    loss = -(torch.nn.functional.logsigmoid(positive).sum()
             + torch.nn.functional.logsigmoid(-negative).sum()) / len(center)
    loss.backward()
    return loss.item(), v.grad.numpy(), u_o.grad.numpy(), u_k.grad.numpy()


def random_batch(seed, batch, k, dim, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((batch, dim)), scale * rng.standard_normal((batch, dim)),
            scale * rng.standard_normal((batch, k, dim)))


def assert_sgns_matches_torch(center, context, negatives, rtol=1e-10, atol=1e-12):
    out = sgns_loss_and_grads(center, context, negatives)
    assert len(out) == 4
    loss, g_c, g_o, g_k = out
    ref = torch_sgns(center, context, negatives)
    assert isinstance(loss, float)
    assert math.isfinite(loss), f"loss is {loss}"
    assert math.isclose(loss, ref[0], rel_tol=rtol, abs_tol=atol), f"loss {loss!r}, torch {ref[0]!r}"
    for name, ours, theirs, x in [("center", g_c, ref[1], center), ("context", g_o, ref[2], context),
                                  ("negatives", g_k, ref[3], negatives)]:
        assert ours.shape == np.shape(x), f"grad of {name}: shape {ours.shape}, expected {np.shape(x)}"
        assert np.all(np.isfinite(ours)), f"grad of {name} is not finite"
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=f"grad of {name}")


@pytest.mark.parametrize("batch, k, dim", [(1, 1, 1), (3, 2, 4), (16, 5, 10), (7, 1, 3), (2, 20, 6), (4, 0, 3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_sgns_matches_torch_autograd(batch, k, dim, seed):
    assert_sgns_matches_torch(*random_batch(seed, batch, k, dim))


def test_sgns_matches_torch_for_word2vec_scale_vectors():
    # as at the start of training: tiny input vectors, zero output vectors -> loss (1 + K) log 2
    center, context, negatives = random_batch(0, 8, 5, 20, scale=0.01)
    assert_sgns_matches_torch(center, context, negatives)
    loss, *_ = sgns_loss_and_grads(center, np.zeros_like(context), np.zeros_like(negatives))
    assert math.isclose(loss, 6 * math.log(2), rel_tol=1e-12)


def test_sgns_gradients_match_finite_differences():
    center, context, negatives = random_batch(5, 4, 3, 5)
    _loss, g_c, g_o, g_k = sgns_loss_and_grads(center, context, negatives)
    numerical = [
        gradcheck.numerical_gradient(lambda x: sgns_loss_and_grads(x, context, negatives)[0], center.copy()),
        gradcheck.numerical_gradient(lambda x: sgns_loss_and_grads(center, x, negatives)[0], context.copy()),
        gradcheck.numerical_gradient(lambda x: sgns_loss_and_grads(center, context, x)[0], negatives.copy()),
    ]
    for analytic, num in zip((g_c, g_o, g_k), numerical):
        np.testing.assert_allclose(analytic, num, rtol=1e-6, atol=1e-8)


def test_sgns_does_not_modify_its_inputs():
    batch = random_batch(2, 5, 3, 4)
    copies = [x.copy() for x in batch]
    sgns_loss_and_grads(*batch)
    for x, c in zip(batch, copies):
        np.testing.assert_array_equal(x, c)


def large_dot_batch(scale):
    """Dot products of +-scale: right and wrong contexts, easy and hard noise words."""
    e = np.array([1.0, 0.0, 0.0])
    center = scale * np.stack([e, e])  # (2, 3)
    context = np.stack([e, -e])  # dots +scale (easy) and -scale (very wrong)
    negatives = np.stack([np.stack([-e, e]), np.stack([e, -e])])  # (2, 2, 3): dots -+scale
    return center, context, negatives


@pytest.mark.parametrize("scale", [10, 30, 50, 500])
def test_sgns_gradients_finite_and_right_for_large_dot_products(scale):
    center, context, negatives = large_dot_batch(scale)
    with np.errstate(all="ignore"):  # only the gradients here; the loss has its own test below
        _loss, *grads = sgns_loss_and_grads(center, context, negatives)
    ref = torch_sgns(center, context, negatives)
    for ours, theirs in zip(grads, ref[1:]):
        assert np.all(np.isfinite(ours))
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("scale", [10, 30, 50, 500])
def test_sgns_loss_finite_and_right_for_large_dot_products(scale):
    """log sigma(x) through log(0.5 * (1 + tanh(x / 2))) gives inf for x <= -38 and is off by 1.7e-4 at -30."""
    center, context, negatives = large_dot_batch(scale)
    with np.errstate(divide="raise", over="raise", invalid="raise"):
        assert_sgns_matches_torch(center, context, negatives)


@pytest.mark.parametrize("context_shape, negatives_shape", [
    ((4, 3), (4, 2)),        # negatives not 3-D
    ((5, 3), (4, 2, 3)),     # context has another batch size
    ((4, 2), (4, 2, 3)),     # context has another dimension
    ((4, 3), (5, 2, 3)),     # negatives have another batch size
    ((4, 3), (4, 2, 2)),     # negatives have another dimension
])
def test_sgns_rejects_mismatched_shapes(context_shape, negatives_shape):
    with pytest.raises(ValueError, match=r"\(B, K, E\)"):
        sgns_loss_and_grads(np.zeros((4, 3)), np.zeros(context_shape), np.zeros(negatives_shape))


def test_sgns_rejects_1d_center():
    with pytest.raises(ValueError, match="center"):
        sgns_loss_and_grads(np.zeros(3), np.zeros(3), np.zeros((1, 2, 3)))


# ---------------------------------------------------------------- trainers

PER_TOPIC = 8
SHARED = 2 * PER_TOPIC  # a function word of both topics


def topic_corpus(seed=0, n_docs=120, length=40):
    """Documents alternate between two topics with disjoint words, ids 0..7 and 8..15; about 30% of
    the tokens of every document are the shared word 16.

    The shared word is what makes the test need negative sampling: with attraction alone (no noise
    words) both topics are pulled towards it and all vectors collapse to one direction (cosine ~0.99).
    """
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        doc = rng.integers(0, PER_TOPIC, size=length) + (d % 2) * PER_TOPIC
        doc[rng.random(length) < 0.3] = SHARED
        docs.append(doc)
    counts = np.bincount(np.concatenate(docs), minlength=SHARED + 1)
    return docs, counts


def assert_topics_separate(vectors):
    """Every topic word is closer (cosine) to each word of its topic than to any word of the other topic."""
    assert vectors.shape == (SHARED + 1, vectors.shape[1])
    topic_vectors = vectors[:SHARED]
    unit = topic_vectors / np.linalg.norm(topic_vectors, axis=1, keepdims=True)
    sims = unit @ unit.T  # (16, 16)
    topic = np.arange(SHARED) // PER_TOPIC
    same = topic[:, None] == topic[None, :]
    other = ~np.eye(len(sims), dtype=bool)
    least_within = np.where(same & other, sims, np.inf).min(axis=1)  # (16,)
    most_across = np.where(~same, sims, -np.inf).max(axis=1)  # (16,)
    assert np.all(least_within > most_across), (
        f"topic words are not clustered: within-topic min {least_within.round(2)}, "
        f"across-topic max {most_across.round(2)}")
    assert sims[same & other].mean() - sims[~same].mean() > 0.5, "the two topics collapsed together"


SMALL = dict(dim=10, window=2, negatives=3, epochs=3, batch_size=128, sample=0, progress=False)


@pytest.mark.parametrize("seed", [0, 1])
def test_train_sgns_numpy_separates_topics_and_loss_decreases(seed):
    docs, counts = topic_corpus(seed)
    vectors, history = train_sgns_numpy(docs, counts, seed=seed, **SMALL)
    losses = history["loss"]
    assert isinstance(vectors, np.ndarray) and vectors.shape == (SHARED + 1, SMALL["dim"])
    assert_topics_separate(vectors)
    assert losses.ndim == 1 and np.all(np.isfinite(losses))
    tenth = max(1, len(losses) // 10)
    assert losses[-tenth:].mean() < losses[:tenth].mean() - 0.3, (losses[:tenth].mean(), losses[-tenth:].mean())
    # untrained, the loss is (1 + K) log 2 (zero output vectors)
    assert math.isclose(losses[0], 4 * math.log(2), rel_tol=1e-3)


def test_train_sgns_numpy_calls_the_given_functions():
    docs, counts = topic_corpus(0, n_docs=20)
    calls = Counter()
    returned_losses = []

    def pair_fn(ids, window, rng):
        calls["pair"] += 1
        assert window == SMALL["window"] and isinstance(rng, np.random.Generator)
        return skipgram_pairs(ids, window, rng)

    def negative_fn(noise, shape, rng):
        calls["negative"] += 1
        assert shape[1] == SMALL["negatives"]
        return negative_samples(noise, shape, rng)

    def loss_fn(center, context, negatives):
        calls["loss"] += 1
        out = sgns_loss_and_grads(center, context, negatives)
        returned_losses.append(out[0])
        return out

    _vectors, history = train_sgns_numpy(docs, counts, pair_fn=pair_fn, negative_fn=negative_fn, loss_fn=loss_fn,
                                        **SMALL)
    assert calls["pair"] == len(docs) * SMALL["epochs"]  # sample=0: no word dropped, every document used
    assert calls["loss"] == calls["negative"] == len(history["loss"]) > 0
    np.testing.assert_array_equal(history["loss"], returned_losses)


def test_train_sgns_numpy_first_step_is_sgd_with_summed_repeated_rows():
    """One batch: w_in[w] moves by -lr * B * (sum of the center gradients of the pairs whose center is w)."""
    docs = [np.array([0, 1, 2, 1, 0]), np.array([3, 3, 1]), np.array([4])]
    counts = np.array([2, 3, 1, 2, 1, 1])  # word 5 never occurs
    centers_seen = []

    def pair_fn(ids, window, rng):
        pairs = skipgram_pairs(ids, window, rng)
        centers_seen.append(pairs[0])
        return pairs

    def loss_fn_with(center_grad):
        def loss_fn(center, context, negatives):
            return 0.0, np.full_like(center, center_grad), np.zeros_like(context), np.zeros_like(negatives)
        return loss_fn

    settings = dict(dim=4, window=2, negatives=2, epochs=1, lr=0.05, batch_size=1000, sample=0, seed=3,
                    progress=False, pair_fn=pair_fn)
    before, _ = train_sgns_numpy(docs, counts, loss_fn=loss_fn_with(0.0), **settings)
    centers_seen.clear()
    after, history = train_sgns_numpy(docs, counts, loss_fn=loss_fn_with(1.0), **settings)
    assert len(history["loss"]) == 1
    centers = np.concatenate(centers_seen)
    per_word = np.bincount(centers, minlength=len(counts))  # repeated centers: their gradients add up
    assert per_word.max() > 1
    expected = -settings["lr"] * len(centers) * per_word[:, None] * np.ones((1, 4))
    np.testing.assert_allclose(after - before, expected, rtol=1e-12, atol=1e-15)
    assert np.all(np.abs(before) <= 0.5 / 4)  # word2vec's initialization, uniform in [-0.5/d, 0.5/d)


def test_train_sgns_numpy_is_deterministic_for_a_seed():
    docs, counts = topic_corpus(0, n_docs=20)
    a, la = train_sgns_numpy(docs, counts, seed=4, **SMALL)
    b, lb = train_sgns_numpy(docs, counts, seed=4, **SMALL)
    c, _ = train_sgns_numpy(docs, counts, seed=5, **SMALL)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la["loss"], lb["loss"])
    assert not np.allclose(a, c)


TORCH_SMALL = dict(SMALL, shared_negatives=8, threads=1)  # one thread: fast on a busy machine


@pytest.mark.parametrize("seed", [0, 1])
def test_train_sgns_separates_topics(seed):
    docs, counts = topic_corpus(seed)
    vectors, _ = train_sgns(docs, counts, seed=seed, **TORCH_SMALL)
    assert_topics_separate(vectors)


def test_train_sgns_returns_float32_vocab_by_dim():
    docs, counts = topic_corpus(0, n_docs=10)
    counts = np.append(counts, [0, 0])  # two words that never occur still get rows
    vectors, history = train_sgns(docs, counts, **dict(TORCH_SMALL, dim=7, epochs=2))
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32 and vectors.shape == (len(counts), 7)
    assert np.all(np.isfinite(vectors))
    pairs = history["pairs"]  # one entry per epoch, each at most every pair of the corpus
    assert pairs.shape == (2,) and np.all(pairs > 0)
    assert np.all(pairs <= sum(len(d) for d in docs) * 2 * SMALL["window"])


def test_train_sgns_is_deterministic_for_a_seed():
    docs, counts = topic_corpus(0, n_docs=40)
    a, _ = train_sgns(docs, counts, seed=4, **TORCH_SMALL)
    b, _ = train_sgns(docs, counts, seed=4, **TORCH_SMALL)
    c, _ = train_sgns(docs, counts, seed=5, **TORCH_SMALL)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_train_sgns_restores_torch_threads_and_calls_pair_fn():
    docs, counts = topic_corpus(0, n_docs=10)
    original = torch.get_num_threads()
    calls = []

    def pair_fn(ids, window, rng):
        calls.append(torch.get_num_threads())
        return skipgram_pairs(ids, window, rng)

    try:
        torch.set_num_threads(3)
        train_sgns(docs, counts, pair_fn=pair_fn, **dict(TORCH_SMALL, threads=2, epochs=2))
        assert torch.get_num_threads() == 3
        assert calls and set(calls) == {1}, "training must run torch on one thread (per worker)"
        assert len(calls) == 2 * len(docs)

        def failing_pair_fn(ids, window, rng):
            raise RuntimeError("student bug")

        with pytest.raises(RuntimeError, match="student bug"):
            train_sgns(docs, counts, pair_fn=failing_pair_fn, **TORCH_SMALL)
        assert torch.get_num_threads() == 3, "an exception must not leave torch's thread count changed"
    finally:
        torch.set_num_threads(original)


@pytest.mark.parametrize("seed", [0, 1])
def test_train_sgns_with_two_worker_threads_separates_topics(seed):
    docs, counts = topic_corpus(seed)
    vectors, history = train_sgns(docs, counts, seed=seed, **dict(TORCH_SMALL, threads=2))
    assert_topics_separate(vectors)
    assert history["pairs"].shape == (SMALL["epochs"],)


@pytest.mark.parametrize("bad", [dict(threads=0), dict(batch_size=0), dict(shared_negatives=0)])
def test_train_sgns_rejects_bad_sizes(bad):
    docs, counts = topic_corpus(0, n_docs=4)
    with pytest.raises(ValueError, match=list(bad)[0]):
        train_sgns(docs, counts, **dict(TORCH_SMALL, **bad))


def test_train_sgns_rejects_ids_outside_the_vocabulary_and_non_integer_ids():
    docs, counts = topic_corpus(0, n_docs=4)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        train_sgns(docs + [np.array([len(counts)])], counts, **TORCH_SMALL)
    with pytest.raises(TypeError, match="integer"):
        train_sgns([d.astype(float) for d in docs], counts, **TORCH_SMALL)


def test_train_sgns_accepts_lists_and_empty_documents():
    docs, counts = topic_corpus(0, n_docs=20)
    vectors, _ = train_sgns([d.tolist() for d in docs] + [[], [3]], counts, **TORCH_SMALL)
    assert vectors.shape == (len(counts), SMALL["dim"]) and np.all(np.isfinite(vectors))


# ---------------------------------------------------------------- sgns_fast: the fast trainer's parts

def summed_loss(w_in, w_out, centers, contexts, noise, weight):
    """The loss sgns_step follows, by autograd: sum_b [-log sigma(u_o . v) - weight sum_s log sigma(-u_s . v)]."""
    v, u_o, u_s = w_in[centers], w_out[contexts], w_out[noise]
    logsig = torch.nn.functional.logsigmoid
    return -(logsig((v * u_o).sum(1)).sum() + weight * logsig(-(v @ u_s.T)).sum())


@pytest.mark.parametrize("weight", [1.0, 5 / 16])
@pytest.mark.parametrize("seed", [0, 1])
def test_sgns_step_is_an_sgd_step_on_the_summed_loss(weight, seed):
    gen = torch.Generator().manual_seed(seed)
    vocab, dim, batch = 12, 5, 30  # few words: rows repeat within the batch
    w_in = torch.randn(vocab, dim, generator=gen, dtype=torch.float64)
    w_out = torch.randn(vocab, dim, generator=gen, dtype=torch.float64)
    centers = torch.randint(0, vocab, (batch,), generator=gen)
    contexts = torch.randint(0, vocab, (batch,), generator=gen)
    noise = torch.tensor([3, 7, 3, 0])  # a noise word twice, and one that may also be a context
    params = [w_in.clone().requires_grad_(), w_out.clone().requires_grad_()]
    summed_loss(*params, centers, contexts, noise, weight).backward()
    new_in, new_out = w_in.clone(), w_out.clone()
    sgns_fast.sgns_step(new_in, new_out, centers, contexts, noise, 0.1, weight)
    torch.testing.assert_close(new_in, w_in - 0.1 * params[0].grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new_out, w_out - 0.1 * params[1].grad, rtol=1e-12, atol=1e-12)
    assert not torch.equal(new_in, w_in) and not torch.equal(new_out, w_out)


def test_sgns_step_equals_the_exercise_gradients_with_the_noise_words_given_to_every_pair():
    """weight 1: sgns_loss_and_grads (a mean over the batch) with the S shared vectors as each pair's negatives."""
    gen = torch.Generator().manual_seed(3)
    w_in = torch.randn(10, 4, generator=gen, dtype=torch.float64)
    w_out = torch.randn(10, 4, generator=gen, dtype=torch.float64)
    centers = torch.randint(0, 10, (25,), generator=gen)
    contexts = torch.randint(0, 10, (25,), generator=gen)
    noise = torch.tensor([1, 5, 5])
    _, g_c, g_o, g_k = sgns_loss_and_grads(w_in[centers].numpy(), w_out[contexts].numpy(),
                                           np.broadcast_to(w_out[noise].numpy(), (25, 3, 4)))
    expected_in, expected_out = w_in.numpy().copy(), w_out.numpy().copy()
    step = 0.05
    np.add.at(expected_in, centers.numpy(), -step * 25 * g_c)
    np.add.at(expected_out, contexts.numpy(), -step * 25 * g_o)
    np.add.at(expected_out, np.tile(noise.numpy(), 25), -step * 25 * g_k.reshape(-1, 4))
    sgns_fast.sgns_step(w_in, w_out, centers, contexts, noise, step, 1.0)
    np.testing.assert_allclose(w_in.numpy(), expected_in, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(w_out.numpy(), expected_out, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_sgns_epoch_runs_every_batch_once_with_its_step_and_noise(threads, monkeypatch):
    seen, lock = [], __import__("threading").Lock()

    def recording_step(w_in, w_out, centers, contexts, noise, step, weight):
        with lock:
            seen.append((int(centers[0]), len(centers), int(contexts[0]), int(noise[0]), step, weight))

    monkeypatch.setattr(sgns_fast, "sgns_step", recording_step)
    n, batch = 1000, 64
    n_batches = math.ceil(n / batch)
    centers, contexts = torch.arange(n), torch.arange(n) + 5000
    noise = torch.arange(n_batches)[:, None].repeat(1, 3)
    steps = [0.1 * b for b in range(n_batches)]
    updates = []
    sgns_fast.sgns_epoch(None, None, centers, contexts, noise, steps, 0.25, batch, threads, on_batch=updates.append)
    expected = [(b * batch, min(batch, n - b * batch), b * batch + 5000, b, 0.1 * b, 0.25) for b in range(n_batches)]
    assert sorted(seen) == expected
    assert sum(updates) == n and len(updates) == n_batches
    if threads == 1:
        assert seen == expected, "one thread runs the batches in order"


def test_sgns_epoch_passes_a_worker_error_on():
    def bad_step(*args):
        raise RuntimeError("worker failed")

    centers = torch.arange(100)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sgns_fast, "sgns_step", bad_step)
        with pytest.raises(RuntimeError, match="worker failed"):
            sgns_fast.sgns_epoch(None, None, centers, centers, torch.zeros(4, 2, dtype=torch.long), [0.1] * 4, 1.0,
                                 25, 2)


@pytest.mark.slow
def test_train_sgns_on_real_corpus_scores_on_wordsim353():
    docs = corpus.english_documents()
    vocab = vocabulary.Vocabulary.build(docs, min_count=5)
    ids = [vocab.encode(d) for d in docs]
    vectors, _ = train_sgns(ids, vocab.counts, epochs=5, seed=1, progress=False)
    rho, oov = evaluation.word_similarity(evaluation.keyed_vectors(vocab.words, vectors))
    assert rho > 0.2, f"WordSim-353 Spearman {rho:.3f} (gensim gets about 0.22 on this corpus)"
    assert oov < 40

