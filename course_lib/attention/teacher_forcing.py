"""Training a sequence-to-sequence model with teacher forcing. Chapter 5.

At training time the decoder reads the *true* previous word ``y_{t-1}`` at every
step and is asked for ``y_t``: the loss is the mean cross-entropy
``-(1/N) sum log p(y_t | y_<t, x)`` over the ``N`` real target words of a batch
(padding is not counted). At test time it reads its own guesses instead, which
it never saw in training (exposure bias). See :doc:`/chapters/ch05_attention`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from course_lib import checks
from course_lib.progress import progress_bar
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed


def pad_batch(sequences: Sequence) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack id sequences of different lengths into one batch, padded with id 0. Chapter 5.

    Args:
        sequences: ``B`` sequences of ids, ``(T_d,)`` each, at least one id long.

    Returns:
        ``(ids (B, T), lengths (B,))``, ``T`` the longest length, both int64.
    """
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.int64)
    if len(lengths) == 0 or int(lengths.min()) < 1:
        raise ValueError("pad_batch needs at least one sequence, each at least one id long")
    ids = torch.zeros(len(sequences), int(lengths.max()), dtype=torch.int64)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = torch.as_tensor(np.asarray(sequence), dtype=torch.int64)
    return ids, lengths


def sequence_loss(model, source, lengths, target) -> torch.Tensor:
    """The teacher-forced cross-entropy of a batch: ``-(1/N) sum log p(y_t | y_<t, x)``. Chapter 5.

    Args:
        model: a :class:`~course_lib.attention.seq2seq.Seq2Seq`.
        source: ``(B, Tk)`` padded source ids; lengths: ``(B,)``.
        target: ``(B, T)`` padded target ids, ``<bos> y_1 .. y_n <eos>``; the decoder reads
            ``target[:, :-1]`` and predicts ``target[:, 1:]``, ignoring padding (id 0).

    Returns:
        the mean loss over the real target words, a scalar tensor.
    """
    logits, _ = model(source, lengths, target[:, :-1])  # (B, T - 1, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1), ignore_index=0)


def train_seq2seq(model, sources: Sequence, targets: Sequence, steps: int, batch_size: int = 64, lr: float = 3e-3,
                  max_norm: float | None = 1.0, valid: tuple | None = None, eval_every: int = 100, seed: int = 0,
                  progress: bool = True, schedule: Callable | None = None) -> TrainingHistory:
    """Train a ``Seq2Seq`` with Adam and teacher forcing on random batches of sentence pairs. Chapter 5.

    Each step draws ``batch_size`` pairs at random (with a ``numpy`` generator seeded by
    ``seed``), pads them (:func:`pad_batch`) and takes an Adam step on
    :func:`sequence_loss`, gradients clipped to global norm ``max_norm``. ``schedule(step)``
    multiplies the learning rate of step ``step = 1 .. steps`` (a decay to a small rate at the end
    makes where training stops depend less on the last batches).

    Args:
        model: a ``Seq2Seq``, trained in place.
        sources, targets: ``N`` source id arrays and ``N`` target id arrays (with ``<bos>`` and ``<eos>``).
        steps: optimizer steps.
        batch_size: ``B``.
        lr, max_norm: Adam's step size and the clipping norm (``None``: no clipping).
        valid: ``(sources, targets)`` to measure the teacher-forced loss on every ``eval_every`` steps.
        seed: seeds the batches and torch's global generator (restored afterwards).
        progress: show a tqdm bar.
        schedule: ``None`` (constant ``lr``) or ``step -> factor``, e.g.
            :func:`course_lib.gpt.training.warmup_cosine`.

    Returns:
        a :class:`~course_lib.training.TrainingHistory` with records ``"loss"`` and ``"grad_norm"``
        ``(steps,)``, ``"valid_step"`` and ``"valid_loss"`` ``(n_eval,)``.
    """
    steps = checks.positive_int(steps, "steps")
    eval_every = checks.positive_int(eval_every, "eval_every")
    if len(sources) != len(targets) or not len(sources):
        raise ValueError(f"sources and targets must be two non-empty lists of the same length, "
                         f"got {len(sources)} and {len(targets)}")
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    factor = schedule or (lambda step: 1.0)
    history = {"loss": [], "grad_norm": [], "valid_step": [], "valid_loss": []}
    with torch_seed(seed), progress_bar(steps, "training", progress) as bar:
        for step in range(1, steps + 1):
            for group in optimizer.param_groups:
                group["lr"] = lr * factor(step)
            rows = rng.integers(0, len(sources), size=batch_size)
            source, lengths = pad_batch([sources[i] for i in rows])
            target, _ = pad_batch([targets[i] for i in rows])
            model.train()
            loss = sequence_loss(model, source, lengths, target)
            history["grad_norm"].append(optimizer_step(model, optimizer, loss, max_norm))
            history["loss"].append(loss.item())
            if valid is not None and (step % eval_every == 0 or step == steps):
                history["valid_step"].append(step)
                history["valid_loss"].append(evaluate_loss(model, *valid))
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    return TrainingHistory(history)


@torch.no_grad()
def evaluate_loss(model, sources: Sequence, targets: Sequence, batch_size: int = 256) -> float:
    """The teacher-forced cross-entropy per target word over a whole set of pairs. Chapter 5.

    Args:
        model: a ``Seq2Seq``.
        sources, targets: ``N`` source and ``N`` target id arrays, ``(T_d,)`` each (targets with ``<bos>`` and ``<eos>``).
        batch_size: pairs per forward pass.

    Returns:
        ``-(1/N) sum log p(y_t | y_<t, x)`` over all real target words, a float.
    """
    if len(sources) != len(targets) or not len(sources):
        raise ValueError(f"sources and targets must be two non-empty lists of the same length, "
                         f"got {len(sources)} and {len(targets)}")
    total, count = 0.0, 0
    with eval_mode(model):
        for start in range(0, len(sources), batch_size):
            source, lengths = pad_batch(sources[start:start + batch_size])
            target, _ = pad_batch(targets[start:start + batch_size])
            words = int((target[:, 1:] != 0).sum())
            total += float(sequence_loss(model, source, lengths, target)) * words
            count += words
    return total / count
