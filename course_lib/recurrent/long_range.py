"""Chapter 4: classification tasks whose answer lies early in a long sequence, to test a network's memory.

Both tasks are read left to right and answered after the last token, so a
network must carry the answer over ``delay`` steps or more; they are small
versions of the "long time lag" problems of Hochreiter and Schmidhuber (1997).

- :func:`first_tokens_task`, "remember the first tokens": each sequence opens
  with ``prefix`` *key* symbols, followed by ``delay`` *distractors* drawn from a
  separate set of symbols. The label is the key. Nothing after the start looks
  like a key, so the network only has to keep what it read first.
- :func:`marked_token_task`, "remember the token after the marker": every token
  is drawn from the keys, except one *marker* at a random position near the
  start; the label is the key right after the marker, followed by ``delay`` or
  more tokens that look exactly like keys. The network must decide what to
  store, from what it has just read, and then ignore everything else: the
  behaviour an LSTM's input and forget gates (and a GRU's update gate) provide.

See :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

import numpy as np

from course_lib import checks


def vocabulary_size(num_keys: int, num_distractors: int) -> int:
    """Return ``V = num_keys + num_distractors``, the number of token ids of :func:`first_tokens_task`. Chapter 4.

    Ids ``0 .. num_keys - 1`` are the keys, the rest the distractors; the ids
    of a ``(B, T)`` batch of the task all lie in ``[0, V)``.
    """
    return checks.positive_int(num_keys, "num_keys") + checks.positive_int(num_distractors, "num_distractors")


def num_classes(num_keys: int, prefix: int = 1) -> int:
    """Return ``num_keys ** prefix``, the number of labels of :func:`first_tokens_task`. Chapter 4.

    The labels of a batch are a ``(B,)`` array of integers in ``[0, num_keys ** prefix)``.
    """
    return checks.positive_int(num_keys, "num_keys") ** checks.positive_int(prefix, "prefix")


def first_tokens_task(batch_size: int, delay: int, rng: np.random.Generator, num_keys: int = 4,
                      num_distractors: int = 8, prefix: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, labels)``: sequences that open with a key, then ``delay`` distractors; the label is the key. Chapter 4.

    Each of the ``B = batch_size`` sequences has ``T = prefix + delay`` tokens.
    Positions ``0 .. prefix - 1`` hold keys ``k_0, ..., k_{prefix-1}``, drawn
    independently and uniformly from ``0 .. num_keys - 1``; positions
    ``prefix .. T - 1`` hold distractors, drawn independently and uniformly from
    ``num_keys .. num_keys + num_distractors - 1``. The label is the key read
    as a number in base ``num_keys``,

        ``label = sum_j k_j * num_keys ** (prefix - 1 - j)``,

    (with ``prefix = 1`` simply the first token), one of
    :func:`num_classes` ``= num_keys ** prefix`` equally likely classes. A
    model that answers after the last token must remember the key over
    ``delay`` steps.

    Args:
        batch_size: ``B``, the number of sequences.
        delay: the number of distractors after the key (0 allowed: then ``T = prefix``).
        rng: a ``numpy.random.Generator``; the same seed gives the same batch.
        num_keys: how many different key symbols (at least 2).
        num_distractors: how many different distractor symbols.
        prefix: how many key tokens open each sequence.

    Returns:
        ``ids``, ``(B, T)`` int64 token ids in ``[0, V)`` with
        ``V = num_keys + num_distractors``, and ``labels``, ``(B,)`` int64 in
        ``[0, num_keys ** prefix)``.
    """
    batch_size, delay, num_keys = _check_task_args(batch_size, delay, rng, num_keys)
    num_distractors = checks.positive_int(num_distractors, "num_distractors")
    prefix = checks.positive_int(prefix, "prefix")

    keys = rng.integers(0, num_keys, size=(batch_size, prefix))  # (B, prefix)
    distractors = rng.integers(num_keys, num_keys + num_distractors, size=(batch_size, delay))  # (B, delay)
    ids = np.concatenate([keys, distractors], axis=1).astype(np.int64)  # (B, T)
    place_values = num_keys ** np.arange(prefix - 1, -1, -1)  # (prefix,) num_keys^(prefix-1), ..., 1
    labels = (keys * place_values).sum(axis=1).astype(np.int64)  # (B,)
    return ids, labels


def marked_token_task(batch_size: int, delay: int, rng: np.random.Generator, num_keys: int = 4,
                      max_start: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, labels)``: keys with one marker; the label is the key right after the marker. Chapter 4.

    Each of the ``B = batch_size`` sequences has ``T = max_start + 2 + delay``
    tokens. Every position holds a key drawn uniformly from ``0 .. num_keys - 1``,
    except position ``s``, drawn uniformly from ``0 .. max_start``, which holds
    the marker, id ``num_keys``. The label is the key at position ``s + 1``,

        ``label = ids[b, s_b + 1]``,

    so ``T - 2 - s >= delay`` tokens follow it, all of them keys too: only the
    marker says which key counts. The vocabulary has ``V = num_keys + 1``
    ids; there are ``num_keys`` equally likely classes.

    Args:
        batch_size: ``B``, the number of sequences.
        delay: the least number of tokens after the labelled key (0 allowed).
        rng: a ``numpy.random.Generator``; the same seed gives the same batch.
        num_keys: how many different key symbols (at least 2).
        max_start: the last position the marker may take (0: always first).

    Returns:
        ``ids``, ``(B, T)`` int64 token ids in ``[0, num_keys]``, exactly one of
        them ``num_keys`` per row, and ``labels``, ``(B,)`` int64 in ``[0, num_keys)``.
    """
    batch_size, delay, num_keys = _check_task_args(batch_size, delay, rng, num_keys)
    max_start = checks.nonnegative_int(max_start, "max_start")
    rows = np.arange(batch_size)
    ids = rng.integers(0, num_keys, size=(batch_size, int(max_start) + 2 + delay)).astype(np.int64)  # (B, T)
    start = rng.integers(0, int(max_start) + 1, size=batch_size)  # (B,) the marker's position
    ids[rows, start] = num_keys
    return ids, ids[rows, start + 1].copy()  # (B, T), (B,)


def _check_task_args(batch_size, delay, rng, num_keys) -> tuple[int, int, int]:
    """The checks both tasks share; returns ``batch_size``, ``delay`` and ``num_keys`` as ints."""
    batch_size = checks.positive_int(batch_size, "batch_size")
    delay = checks.nonnegative_int(delay, "delay")
    checks.generator(rng)
    num_keys = checks.positive_int(num_keys, "num_keys")
    if num_keys < 2:
        raise ValueError(f"num_keys must be at least 2 (one key carries no information), got {num_keys}")
    return batch_size, int(delay), num_keys
