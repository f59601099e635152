"""Chapter 3, recurrent neural networks: perplexity, how surprised a language model is.

A language model gives each position a distribution over the ``V`` next
tokens, ``p(w) = softmax(z)_w`` for its scores ``z``. Its perplexity on a text
of ``N`` positions with targets ``w_1 ... w_N`` is the exponential of the mean
negative log-likelihood,

``PP = exp( (1/N) sum_n -log p_n(w_n) )``,

the number of equally likely choices the model is, on average, hesitating
between: ``V`` for a model that knows nothing, 1 for one that is always sure
and right. Its base-2 logarithm, bits per token (bits per character for
character models), is the length of the code the model would give the text.

Exercise of assignment ps03 here: ``perplexity``. See :doc:`/chapters/ch03_rnn`.
"""

from __future__ import annotations

import math

import numpy as np

from course_lib import checks
from course_lib.activations import log_softmax


def flatten_positions(logits, targets):
    """Check the scores and targets of a language model and flatten their positions. Chapter 3.

    Args:
        logits: ``(..., V)`` unnormalized scores, ``V >= 1``, one row per position.
        targets: ``(...)`` int token ids in ``[0, V)``, the leading shape of ``logits``.

    Returns:
        ``(logits, targets)`` of shapes ``(N, V)`` float64 and ``(N,)`` int64, ``N``
        the number of positions (at least 1).
    """
    logits, targets = np.asarray(logits), np.asarray(targets)
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1 scores per position, got {logits.shape}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {logits.shape[:-1]} (the leading axes of logits "
                         f"{logits.shape}), got {targets.shape}")
    if targets.size == 0:
        raise ValueError(f"targets holds no positions (shape {targets.shape})")
    vocab_size = logits.shape[-1]
    flat_logits = checks.matrix(logits.reshape(-1, vocab_size), "logits", allow_sparse=False)  # (N, V)
    flat_targets = checks.token_ids(targets.reshape(-1), vocab_size, "targets")  # (N,)
    return flat_logits, flat_targets


def perplexity(logits, targets):
    """The perplexity of a language model's predictions.

    With ``z_n`` the scores at position ``n`` and ``w_n`` its target,
    ``-log p_n(w_n) = logsumexp(z_n) - z_n[w_n]``, and

    ``PP = exp( (1/N) sum_n (logsumexp(z_n) - z_n[w_n]) )``.

    ``logsumexp(z) = m + log sum_v exp(z_v - m)`` with ``m = max_v z_v``, so
    scores of +-1000 neither overflow nor underflow; take ``-log p_n(w_n)`` from
    it directly, not as the log of a softmax probability, which can round to 0.
    When the mean negative log-likelihood exceeds ``log`` of the largest float64
    (about 709.78), the perplexity itself is too large for float64 and ``inf`` is
    returned (``np.exp`` gives it; ``math.exp`` raises ``OverflowError`` instead).
    The arguments are not modified. Chapter 3, exercise of ps03.

    Args:
        logits: ``(..., V)`` unnormalized scores, e.g. ``(B, T, V)``.
        targets: ``(...)`` int token ids in ``[0, V)``, e.g. ``(B, T)``.

    Returns:
        the perplexity, a float ``>= 1`` (``inf`` when it exceeds the float64 range).
    """
    logits, targets = flatten_positions(logits, targets)  # (N, V), (N,)
    ### BEGIN SOLUTION
    top = logits.max(axis=1, keepdims=True)  # (N, 1)
    log_normalizer = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))  # (N,) logsumexp(z_n)
    nll = log_normalizer - logits[np.arange(len(targets)), targets]  # (N,) -log p_n(w_n)
    return float(np.exp(nll.mean()))
    ### END SOLUTION


def bits_per_token(logits, targets):
    """Bits per token, ``log2 PP = (1/N) sum_n -log2 p_n(w_n)``: bits per character for a character model.

    The same quantity as :func:`perplexity` on a log scale, computed
    here with :func:`course_lib.activations.log_softmax`. Chapter 3.

    Args:
        logits: ``(..., V)`` unnormalized scores.
        targets: ``(...)`` int token ids in ``[0, V)``.

    Returns:
        the mean number of bits per token, a float ``>= 0``.
    """
    logits, targets = flatten_positions(logits, targets)  # (N, V), (N,)
    log_probs = log_softmax(logits, axis=1)  # (N, V) natural log
    return float(-log_probs[np.arange(len(targets)), targets].mean() / math.log(2))
