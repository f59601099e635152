"""Chapter 2, word2vec: skip-gram with negative sampling (SGNS).

Skip-gram trains two vectors per word, an input ("center") vector ``v_w`` and an
output ("context") vector ``u_w``, so that ``sigma(u_o . v_c)`` is high for a
word ``o`` seen near ``c`` and low for ``K`` noise words drawn from the unigram
distribution raised to the power 3/4 (Mikolov et al., 2013). Both vectors have
``E`` entries. See :doc:`/chapters/ch02_word2vec`.

Exercises of assignment ps02 here: ``skipgram_pairs``, ``negative_samples`` and
``sgns_loss_and_grads``. The trainers take them as arguments.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from course_lib import checks
from course_lib.activations import logistic as sigmoid  # sigma(x), stable for large |x|; ps02 imports it from here
from course_lib.progress import progress_bar
from course_lib.training import TrainingHistory, torch_threads
from course_lib.vectors import sgns_fast


def skipgram_pairs(ids, window, rng=None):
    """The (center, context) pairs of skip-gram in one document.

    Every position ``i`` is a center; its contexts are the positions ``j`` with
    ``0 < |i - j| <= b_i``. Without ``rng``, ``b_i = window`` for every ``i``.
    With ``rng`` (a ``numpy.random.Generator``), each center draws its own
    *dynamic* window ``b_i`` uniformly from ``{1, ..., window}``, as word2vec
    does, which weights near contexts more than far ones: draw all ``T`` of
    them at once, ``rng.integers(1, window + 1, size=T)``, so that a seed gives
    the same pairs everywhere. ``ids`` is not modified. Chapter 2, exercise of ps02.

    Args:
        ids: ``(T,)`` word ids of one document.
        window: the largest distance between a center and its context.
        rng: ``None`` for the fixed window, or a Generator for dynamic windows.

    Returns:
        ``(centers, contexts)``: two ``(N,)`` int64 arrays of word ids, one per pair, ordered by
        center position, then by context position; two empty int64 arrays when the
        document has fewer than two words.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"ids must be a 1-D array of integer word ids, got shape {ids.shape}, dtype {ids.dtype}")
    window = checks.positive_int(window, "window")
    ### BEGIN SOLUTION
    n = len(ids)
    reach = np.full(n, window) if rng is None else rng.integers(1, window + 1, size=n)  # (T,) b_i
    offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])  # (2*window,) ascending
    positions = np.arange(n)[:, None] + offsets[None, :]  # (T, 2*window) context positions
    valid = (positions >= 0) & (positions < n) & (np.abs(offsets)[None, :] <= reach[:, None])  # (T, 2*window)
    rows, cols = np.nonzero(valid)  # row-major: by center, then by context position
    return ids[rows].astype(np.int64), ids[positions[rows, cols]].astype(np.int64)
    ### END SOLUTION


def noise_distribution(counts, power: float = 0.75) -> np.ndarray:
    """The negative-sampling distribution ``P_n(w) = c_w^power / sum_w' c_w'^power``.

    Chapter 2. ``power = 0.75`` (Mikolov et al., 2013) gives rare words more
    noise samples than their frequency alone would.

    Args:
        counts: ``(V,)`` corpus counts of the words.
        power: the exponent.

    Returns:
        ``(V,)`` float64 probabilities summing to 1.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0 or counts.min() < 0 or counts.sum() <= 0:
        raise ValueError("counts must be a non-empty 1-D array of non-negative counts, not all zero")
    weights = counts ** power
    return weights / weights.sum()


def negative_samples(noise, shape, rng):
    """Draw noise words for negative sampling.

    Each entry is an independent draw of a word id ``w`` with probability
    ``noise[w]`` (``noise`` is used as given, already smoothed), so a word of
    probability 0 is never drawn. ``rng`` is the only source of randomness: the
    same seed gives the same draws. Chapter 2, exercise of ps02.

    Args:
        noise: ``(V,)`` probabilities summing to 1, e.g. from :func:`noise_distribution`.
        shape: the shape of the result, e.g. ``(B, K)`` for ``K`` noise words per pair.
        rng: a ``numpy.random.Generator``, the only source of randomness.

    Returns:
        int64 array of word ids in ``[0, V)`` with the given shape.
    """
    noise = np.asarray(noise, dtype=np.float64)
    if noise.ndim != 1 or not np.isclose(noise.sum(), 1.0) or noise.min() < 0:
        raise ValueError("noise must be a 1-D probability vector (non-negative, summing to 1)")
    ### BEGIN SOLUTION
    cumulative = np.cumsum(noise)  # (V,)
    draws = rng.random(size=shape)
    return np.minimum(np.searchsorted(cumulative, draws * cumulative[-1], side="right"),
                      len(noise) - 1).astype(np.int64)
    ### END SOLUTION


def sgns_loss_and_grads(center, context, negatives):
    """The skip-gram negative-sampling loss of a batch, and its gradients.

    For pair ``b`` with center vector ``v = center[b]``, context vector
    ``u_o = context[b]`` and noise vectors ``u_k = negatives[b, k]``:

    ``L_b = -log sigma(u_o . v) - sum_k log sigma(-u_k . v)``

    and the loss is the mean ``L = (1/B) sum_b L_b``. Its gradients are

    ``dL/dv   = (1/B) [(sigma(u_o . v) - 1) u_o + sum_k sigma(u_k . v) u_k]``
    ``dL/du_o = (1/B) (sigma(u_o . v) - 1) v``
    ``dL/du_k = (1/B) sigma(u_k . v) v``

    The loss must be finite and exact for dot products of any size, also beyond
    ``+-745`` where ``exp`` overflows and ``sigma`` rounds to 0 or 1 in float64:
    compute ``-log sigma(x) = log(1 + exp(-x))`` as ``np.logaddexp(0, -x)``, never
    as the log of a sigmoid. The arguments are not modified. Chapter 2, exercise of ps02.

    Args:
        center: ``(B, E)`` input vectors of the center words.
        context: ``(B, E)`` output vectors of the observed context words.
        negatives: ``(B, K, E)`` output vectors of the noise words.

    Returns:
        ``(loss, grad_center, grad_context, grad_negatives)``: a float and float64 arrays
        of shapes ``(B, E)``, ``(B, E)``, ``(B, K, E)``.
    """
    center = checks.matrix(center, "center", allow_sparse=False)
    context = checks.matrix(context, "context", allow_sparse=False)
    negatives = np.asarray(negatives, dtype=np.float64)
    if context.shape != center.shape or negatives.ndim != 3 or negatives.shape[::2] != center.shape:
        raise ValueError(f"expected center (B, E), context (B, E), negatives (B, K, E); got "
                         f"{center.shape}, {context.shape}, {negatives.shape}")
    ### BEGIN SOLUTION
    batch = len(center)
    positive = np.sum(context * center, axis=1)  # (B,) u_o . v
    negative = np.einsum("bkd,bd->bk", negatives, center)  # (B, K) u_k . v
    # -log sigma(x) = log(1 + exp(-x)) = logaddexp(0, -x): finite for any x
    loss = (np.sum(np.logaddexp(0.0, -positive)) + np.sum(np.logaddexp(0.0, negative))) / batch
    g_positive = (sigmoid(positive) - 1.0) / batch  # (B,) dL/d(u_o . v)
    g_negative = sigmoid(negative) / batch  # (B, K) dL/d(u_k . v)
    grad_center = g_positive[:, None] * context + np.einsum("bk,bkd->bd", g_negative, negatives)
    grad_context = g_positive[:, None] * center
    grad_negatives = g_negative[:, :, None] * center[:, None, :]
    return float(loss), grad_center, grad_context, grad_negatives
    ### END SOLUTION


def keep_probabilities(counts, sample: float = 1e-3) -> np.ndarray:
    """Probability of keeping each occurrence of a word when subsampling frequent words.

    word2vec's rule, as in its C code and gensim: with ``f_w = c_w / sum(c)``,
    ``keep(w) = min(1, (sqrt(f_w / sample) + 1) * sample / f_w)``. Words rarer than
    about ``sample`` are always kept; "the" loses most of its occurrences. Chapter 2.

    Args:
        counts: ``(V,)`` corpus counts.
        sample: the threshold ``t``; 0 keeps everything.

    Returns:
        ``(V,)`` float64 probabilities.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if sample <= 0:
        return np.ones_like(counts)
    freq = counts / counts.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = (np.sqrt(freq / sample) + 1) * sample / freq
    return np.where(freq > 0, np.minimum(keep, 1.0), 1.0)


def _scatter_add(table, rows, values):
    """``table[rows[i]] += values[i]`` for every ``i``, repeated rows summed (a fast ``np.add.at``)."""
    order = np.argsort(rows, kind="stable")
    unique, starts = np.unique(rows[order], return_index=True)
    table[unique] += np.add.reduceat(values[order], starts, axis=0)


def _epoch_pairs(documents, window, keep, rng, pair_fn):
    """Subsample each document, then collect its skip-gram pairs: two ``(N,)`` arrays."""
    centers, contexts = [], []
    for doc in documents:
        doc = np.asarray(doc, dtype=np.int64)  # (T_d,), a list too
        doc = doc[rng.random(len(doc)) < keep[doc]]
        if len(doc) > 1:
            c, o = pair_fn(doc, window, rng)
            centers.append(np.asarray(c, dtype=np.int64))
            contexts.append(np.asarray(o, dtype=np.int64))
    if not centers:
        raise ValueError("no skip-gram pairs: the documents are too short or too heavily subsampled")
    return np.concatenate(centers), np.concatenate(contexts)


def train_sgns_numpy(documents: Sequence, counts, dim: int = 50, window: int = 5, negatives: int = 5,
                     epochs: int = 3, lr: float = 0.05, batch_size: int = 1024, sample: float = 1e-3,
                     seed: int = 0, pair_fn: Callable = skipgram_pairs,
                     negative_fn: Callable = negative_samples, loss_fn: Callable = sgns_loss_and_grads,
                     progress: bool = True):
    """Train SGNS word vectors with numpy and hand-written gradients (the teaching trainer).

    Minibatch SGD on ``L`` of :func:`sgns_loss_and_grads`; the learning rate decays
    linearly from ``lr`` to ``lr / 1000`` as in word2vec, and is multiplied by the
    batch size because the loss is a mean over the batch. Chapter 2. The three
    exercise functions are arguments, so an assignment can train with its own.

    Args:
        documents: ``n_docs`` documents, each a ``(T_d,)`` array of word ids.
        counts: ``(V,)`` corpus counts (for subsampling and the noise distribution).
        dim, window, negatives, epochs, lr, batch_size, sample: hyperparameters;
            ``dim`` is ``E``, ``negatives`` is ``K`` and ``batch_size`` is ``B``.
        seed: seeds initialization, subsampling, windows, shuffling and noise.
        pair_fn, negative_fn, loss_fn: the functions of the same names in this module.
        progress: show a tqdm progress bar.

    Returns:
        ``(vectors, history)``: ``(V, E)`` input vectors and a
        :class:`~course_lib.training.TrainingHistory` whose ``"loss"`` record holds the loss of each batch.
    """
    counts = np.asarray(counts)
    rng = np.random.default_rng(seed)
    vocab_size = len(counts)
    w_in = (rng.random((vocab_size, dim)) - 0.5) / dim  # (V, E) as word2vec initializes
    w_out = np.zeros((vocab_size, dim))  # (V, E)
    noise, keep = noise_distribution(counts), keep_probabilities(counts, sample)
    losses = []
    for epoch in range(epochs):
        centers, contexts = _epoch_pairs(documents, window, keep, rng, pair_fn)
        order = rng.permutation(len(centers))
        n_batches = math.ceil(len(order) / batch_size)
        with progress_bar(len(order), f"epoch {epoch + 1}/{epochs}", progress, unit="pair") as bar:
            for b in range(n_batches):
                batch = order[b * batch_size:(b + 1) * batch_size]
                done = (epoch * n_batches + b) / (epochs * n_batches)
                step = lr * max(1 - done, 1e-3) * len(batch)
                c, o = centers[batch], contexts[batch]  # (B,), (B,)
                k = negative_fn(noise, (len(batch), negatives), rng)  # (B, K)
                loss, g_c, g_o, g_k = loss_fn(w_in[c], w_out[o], w_out[k])
                _scatter_add(w_in, c, -step * g_c)
                _scatter_add(w_out, o, -step * g_o)
                _scatter_add(w_out, k.ravel(), -step * g_k.reshape(-1, dim))
                losses.append(loss)
                bar.update(len(batch))
    return w_in, TrainingHistory({"loss": losses})


def train_sgns(documents: Sequence, counts, dim: int = 100, window: int = 5, negatives: int = 5,
               epochs: int = 5, lr: float = 0.025, batch_size: int = 1024, shared_negatives: int = 16,
               sample: float = 1e-3, seed: int = 0, threads: int = 2, pair_fn: Callable = skipgram_pairs,
               progress: bool = True):
    """Train SGNS word vectors fast, with PyTorch on the CPU.

    The model and the learning-rate schedule of :func:`train_sgns_numpy`
    (per-pair SGD on the summed loss, ``lr`` decaying linearly to ``lr / 1000``),
    with changes for speed, all standard in fast implementations:

    - **Shared noise words.** A batch of ``B`` pairs draws ``S = shared_negatives``
      noise words once, and every pair uses all ``S``, each weighted by ``K / S``:
      ``L_b = -log sigma(u_o . v) - (K / S) sum_s log sigma(-u_s . v)``.
      Its expectation equals that of ``K`` independent noise words per pair, and
      the scores of a whole batch become one matrix product, ``(B, E) @ (E, S)``.
    - **Sparse row updates.** Gradients are added into the rows a batch uses
      (:func:`~course_lib.vectors.sgns_fast.sgns_step`); no dense ``(V, E)`` gradient is ever formed.
    - **Worker threads.** ``threads`` Python threads share the batches of an epoch and
      update the same vectors without locks, as gensim's workers do; each runs torch on one
      core, since a second intra-op thread costs more than it gives on such small products.
      With ``threads=1`` a seed gives the same vectors on every run; with more, the order
      of the updates depends on the threads' timing and the vectors vary a little from
      run to run, as gensim's do.

    Chapter 2.

    Args:
        documents: ``n_docs`` documents, each a ``(T_d,)`` array of word ids.
        counts: ``(V,)`` corpus counts.
        dim: ``E``, the vector size.
        window: the largest (dynamic) window.
        negatives: ``K``, noise words per pair (in expectation).
        epochs: passes over the corpus.
        lr: the initial learning rate.
        batch_size: ``B``, pairs per update.
        shared_negatives: ``S``, noise words drawn per batch.
        sample: the subsampling threshold of :func:`keep_probabilities`.
        seed: seeds everything random.
        threads: worker threads (each with one torch thread).
        pair_fn: the pair generator, called on each subsampled document (default :func:`skipgram_pairs`).
        progress: show a tqdm progress bar.

    Returns:
        ``(vectors, history)``: a ``(V, E)`` float32 numpy array of input vectors and a
        :class:`~course_lib.training.TrainingHistory` whose ``"pairs"`` record holds the number of
        (center, context) pairs trained on in each epoch, after subsampling. No loss is recorded:
        computing it would cost as much as a third of the update.
    """
    import torch

    counts = np.asarray(counts)
    threads, batch_size = checks.positive_int(threads, "threads"), checks.positive_int(batch_size, "batch_size")
    shared_negatives = checks.positive_int(shared_negatives, "shared_negatives")
    tokens = np.concatenate([np.asarray(d) for d in documents if len(d)] or [np.zeros(0, np.int64)])
    checks.token_ids(tokens, len(counts), "documents")  # every document's ids, checked once
    pairs_per_epoch = []
    with torch_threads(1):
        rng = np.random.default_rng(seed)
        generator = torch.Generator().manual_seed(seed)
        vocab_size = len(counts)
        w_in = (torch.rand(vocab_size, dim, generator=generator) - 0.5) / dim  # (V, E)
        w_out = torch.zeros(vocab_size, dim)  # (V, E)
        noise = torch.as_tensor(noise_distribution(counts), dtype=torch.float32)  # (V,)
        keep = keep_probabilities(counts, sample)
        for epoch in range(epochs):
            centers, contexts = _epoch_pairs(documents, window, keep, rng, pair_fn)
            order = torch.randperm(len(centers), generator=generator)
            centers = torch.as_tensor(centers).index_select(0, order)  # (N,) shuffled
            contexts = torch.as_tensor(contexts).index_select(0, order)
            n = len(centers)
            pairs_per_epoch.append(n)
            n_batches = math.ceil(n / batch_size)
            batch_noise = torch.multinomial(noise, n_batches * shared_negatives, replacement=True,
                                            generator=generator).view(n_batches, shared_negatives)  # (n_batches, S)
            steps = [lr * max(1 - (epoch * n + b * batch_size) / (epochs * n), 1e-3) for b in range(n_batches)]
            with progress_bar(n, f"epoch {epoch + 1}/{epochs}", progress, unit="pair") as bar:
                sgns_fast.sgns_epoch(w_in, w_out, centers, contexts, batch_noise, steps, negatives / shared_negatives,
                                     batch_size, threads, on_batch=bar.update)
    return w_in.numpy(), TrainingHistory({"pairs": pairs_per_epoch})
