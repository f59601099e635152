"""Decoding: greedy search, beam search with length normalisation, and a table model to test them on. Chapter 5.

A decoder gives ``log p(y_t | y_<t, x)``; decoding looks for the output with the
highest ``log p(y | x) = sum_t log p(y_t | y_<t, x)``. Greedy search takes the most
probable word at every step; beam search keeps the ``K`` best partial outputs.
With length normalisation the final choice ranks finished outputs by
``log p(y | x) / |y|^alpha`` (Wu et al., 2016, use a smoother penalty), which stops the
search from preferring short outputs only because they add fewer negative terms.
See :doc:`/chapters/ch05_attention`. Tested: width 1 equals greedy search, and a beam
wide enough to keep every hypothesis equals exhaustive search over all outputs.

Both searches work with any ``step_fn(tokens, state) -> (log_probs, state)``:
``tokens`` is ``(K,)`` int64 (the last word of each hypothesis), ``state`` a tensor whose
first axis indexes the same ``K`` hypotheses (or ``None``), ``log_probs`` ``(K, V)``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from course_lib import checks
from course_lib.attention.teacher_forcing import pad_batch
from course_lib.training import eval_mode


def check_search_args(step_fn, bos, eos, max_len) -> int:
    """Raise unless ``step_fn`` is callable and ``bos``, ``eos``, ``max_len`` are valid; return ``max_len``. Chapter 5."""
    if not callable(step_fn):
        raise TypeError(f"step_fn must be a function (tokens, state) -> (log_probs, state), got {type(step_fn).__name__}")
    checks.nonnegative_int(bos, "bos")
    checks.nonnegative_int(eos, "eos")
    return checks.positive_int(max_len, "max_len")


@torch.no_grad()
def greedy_decode(step_fn: Callable, state, bos: int, eos: int, max_len: int) -> tuple[list[int], float]:
    """The output of greedy search: the most probable word at every step, until ``<eos>``. Chapter 5.

    ``y_t = argmax_w log p(w | y_<t)``, stopping after ``<eos>`` or ``max_len`` words. ``step_fn``
    is called on a ``(1,)`` token tensor and returns ``(1, V)`` log-probabilities.

    Args:
        step_fn: see the module; called with one hypothesis, ``K = 1``.
        state: the decoder's first state, first axis 1 (or ``None``).
        bos, eos: the ids of ``<bos>`` (the first input) and ``<eos>``.
        max_len: the most words to generate.

    Returns:
        ``(words, log_prob)``: the generated ids (``<eos>`` included if it came, ``<bos>``
        not) and their total log-probability ``sum_t log p(y_t | y_<t)``.
    """
    max_len = check_search_args(step_fn, bos, eos, max_len)
    words, total, token = [], 0.0, torch.tensor([bos])
    for _ in range(max_len):
        log_probs, state = step_fn(token, state)  # (1, V)
        word = int(log_probs[0].argmax())
        words.append(word)
        total += float(log_probs[0, word])
        if word == eos:
            break
        token = torch.tensor([word])
    return words, total


@torch.no_grad()
def beam_search(step_fn, state, bos, eos, beam_width, max_len, alpha=0.0):
    """The output of beam search: keep the ``K`` most probable partial outputs at every step.

    Start from the one hypothesis ``[<bos>]`` with ``state``. At every step, extend each
    live hypothesis by every word (``step_fn`` on their last words, all at once), score
    each extension by its total log-probability ``log p(y_1..y_t)``, and keep the
    ``beam_width`` best extensions (``torch.topk`` over all of them). A kept extension
    that ends with ``<eos>`` is finished; the others stay live, with their states
    reordered to follow them (``state[index]``). Stop when no hypothesis is live or
    after ``max_len`` words, when the live ones are finished too. Return the finished
    hypothesis with the highest ``log p(y) / |y|^alpha``, ``|y|`` its number of words
    (``<eos>`` included). With ``beam_width = 1`` this is greedy search. Chapter 5,
    exercise of ps05.

    Args:
        step_fn: ``(tokens (K,), state) -> (log_probs (K, V), state)``; see the module.
        state: the first state, first axis 1 (or ``None``).
        bos, eos: the ids of ``<bos>`` and ``<eos>``.
        beam_width: ``K``, the hypotheses kept.
        max_len: the most words to generate.
        alpha: the length normalisation exponent (0: rank by total log-probability).

    Returns:
        ``(words, log_prob)`` of the best finished hypothesis: its ids without ``<bos>``
        as a list of ints (``.tolist()``, not a tensor), and its total (not normalised)
        log-probability, a float.
    """
    max_len = check_search_args(step_fn, bos, eos, max_len)
    beam_width = checks.positive_int(beam_width, "beam_width")
    ### BEGIN SOLUTION
    live = [[]]  # the words of each live hypothesis
    scores = torch.zeros(1, dtype=torch.float64)  # (K,) their total log-probabilities
    tokens = torch.tensor([bos])
    finished = []  # (words, log_prob)
    for _length in range(1, max_len + 1):
        log_probs, state = step_fn(tokens, state)  # (K, V)
        vocab = log_probs.shape[1]
        totals = (scores[:, None] + log_probs.to(torch.float64)).reshape(-1)  # (K * V,)
        best, index = totals.topk(min(beam_width, len(totals)))
        parents, words = index // vocab, index % vocab
        keep = []
        for total, parent, word in zip(best.tolist(), parents.tolist(), words.tolist()):
            hypothesis = live[parent] + [word]
            if word == eos:
                finished.append((hypothesis, total))
            else:
                keep.append((hypothesis, total, parent))
        if not keep:
            break
        live = [h for h, _, _ in keep]
        scores = torch.tensor([s for _, s, _ in keep], dtype=torch.float64)
        if state is not None:  # each kept hypothesis takes its parent's state
            state = state[torch.tensor([p for _, _, p in keep])]
        tokens = torch.tensor([h[-1] for h in live])
    else:
        finished.extend(zip(live, scores.tolist()))
    return max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)
    ### END SOLUTION


class TableModel:
    """A decoder given by a table: ``log p(y_t = w | y_{t-1} = u) = table[t, u, w]``. Chapter 5.

    A stand-in for a trained decoder, small enough to search exhaustively: its
    :meth:`step` is a ``step_fn`` for :func:`greedy_decode` and :func:`beam_search`,
    with the step number as the state, a ``(K,)`` int64 tensor (start from ``torch.zeros(1)``).

    Args:
        log_probs: ``(T, V, V)`` array of log-probabilities; each ``[t, u]`` row is
            normalised (``log_softmax`` of it is itself); ``-inf`` marks an impossible word.
    """

    def __init__(self, log_probs):
        table = np.asarray(log_probs, dtype=np.float64)
        if table.ndim != 3 or table.shape[1] != table.shape[2]:
            raise ValueError(f"log_probs must have shape (T, V, V), got {table.shape}")
        if not np.allclose(np.exp(table).sum(axis=-1), 1.0):
            raise ValueError("each row log_probs[t, u] must be a log-distribution (its exp sums to 1)")
        self.log_probs = table

    @classmethod
    def random(cls, rng: np.random.Generator, steps: int, vocab_size: int, sharpness: float = 2.0) -> "TableModel":
        """A table with random distributions: ``log_softmax(sharpness * z)``, ``z`` a ``(steps, V, V)`` standard normal array."""
        z = checks.generator(rng).normal(size=(steps, vocab_size, vocab_size)) * sharpness
        return cls(z - np.logaddexp.reduce(z, axis=-1, keepdims=True))

    def step(self, tokens, state):
        """``(tokens (K,), step numbers (K,)) -> (log_probs (K, V), step numbers + 1)``."""
        position = state.long().clamp(max=len(self.log_probs) - 1)
        return torch.from_numpy(self.log_probs[position.numpy(), tokens.numpy()]), state + 1

    def __call__(self, tokens, state):
        return self.step(tokens, state)


def translation_step_fn(model, source) -> tuple[Callable, torch.Tensor]:
    """A ``step_fn`` and first state that decode one source sentence with a :class:`~course_lib.attention.seq2seq.Seq2Seq`.

    Chapter 5. The source is encoded once; the step function runs the decoder for
    ``K`` hypotheses at once, repeating the encoder states for each.

    Args:
        model: a trained ``Seq2Seq``.
        source: ``(Tk,)`` source ids.

    Returns:
        ``(step_fn, state)``: ``state`` is the decoder's first state ``(1, H)``.
    """
    ids = torch.as_tensor(np.asarray(source), dtype=torch.int64)[None, :]  # (1, Tk)
    with torch.no_grad():
        memory, state, mask = model.encode(ids, torch.tensor([ids.shape[1]]))

    def step_fn(tokens, state):
        count = len(tokens)
        with torch.no_grad():
            logits, state, _ = model.decoder.step(tokens, state, memory.expand(count, -1, -1), mask.expand(count, -1))
        return F.log_softmax(logits, dim=-1), state

    return step_fn, state


@torch.no_grad()
def greedy_translate(model, sources, bos: int, eos: int, max_len: int = 30, batch_size: int = 256):
    """Greedy translations of many sentences, a batch at a time, with their attention weights. Chapter 5.

    Args:
        model: a ``Seq2Seq``.
        sources: ``N`` source sentences, ``(T_d,)`` id arrays.
        bos, eos: the target ids of ``<bos>`` and ``<eos>``.
        max_len: the most words per translation.
        batch_size: sentences decoded together.

    Returns:
        ``(outputs, weights)``: ``N`` arrays of ids (without ``<bos>`` and ``<eos>``) and ``N``
        ``(T, T_d)`` arrays of attention weights, one row per output word and ``<eos>``
        (``None`` for the plain model).
    """
    outputs, alignments = [], []
    with eval_mode(model):
        for start in range(0, len(sources), checks.positive_int(batch_size, "batch_size")):
            chunk = sources[start:start + batch_size]
            padded, lengths = pad_batch(chunk)
            memory, state, mask = model.encode(padded, lengths)
            token, steps, weights = torch.full((len(chunk),), bos), [], []
            for _ in range(max_len):
                logits, state, step_weights = model.decoder.step(token, state, memory, mask)
                token = logits.argmax(dim=-1)
                steps.append(token)
                weights.append(step_weights)
                if bool((torch.stack(steps, 1) == eos).any(dim=1).all()):
                    break
            words = torch.stack(steps, dim=1).numpy()  # (B, T_out)
            for row in range(len(chunk)):
                ended = np.flatnonzero(words[row] == eos)
                stop = int(ended[0]) if len(ended) else words.shape[1]
                outputs.append(words[row, :stop])
                alignments.append(None if weights[0] is None else torch.stack(
                    [w[row, :lengths[row]] for w in weights[:stop + 1]]).numpy())
    return outputs, alignments
