"""Training a GPT: the warm-up and cosine schedule, sliding-window perplexity, bits per character. Chapter 7.

The loop itself is chapters 3 and 4's
:func:`~course_lib.recurrent.language_model.train_language_model`, fed the same
``(B, T)`` chunks of the same stream as the recurrent models, so that a
comparison at an equal budget is a comparison of models only. A Transformer has no
state to carry between chunks; it gets a schedule instead. See :doc:`/chapters/ch07_gpt`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F

from course_lib import checks
from course_lib.recurrent.language_model import batchify, train_language_model
from course_lib.training import TrainingHistory, eval_mode


def warmup_cosine(warmup: int, steps: int, floor: float = 0.1) -> Callable[[int], float]:
    """The learning-rate factor of step ``s``: a linear warm-up, then a cosine decay to ``floor``. Chapter 7.

    ``f(s) = s / warmup`` for ``s <= warmup``; afterwards, with ``u = (s - warmup) / (steps - warmup)``,
    ``f(s) = floor + (1 - floor) (1 + cos(pi u)) / 2``, which falls from 1 to ``floor`` at ``s = steps``.

    Args:
        warmup: the steps of the warm-up, ``0 <= warmup < steps``.
        steps: the length of the run.
        floor: the final factor, in ``[0, 1]``.

    Returns:
        a function ``step -> factor`` for steps ``1 .. steps``.
    """
    warmup, steps = checks.nonnegative_int(warmup, "warmup"), checks.positive_int(steps, "steps")
    if warmup >= steps:
        raise ValueError(f"warmup = {warmup} must be shorter than the run of {steps} steps")
    if not 0 <= floor <= 1:
        raise ValueError(f"floor must lie in [0, 1], got {floor!r}")

    def factor(step: int) -> float:
        if step <= warmup:
            return step / warmup
        progress = min((step - warmup) / (steps - warmup), 1.0)
        return floor + (1 - floor) * (1 + math.cos(math.pi * progress)) / 2
    return factor


@torch.no_grad()
def window_losses(model, ids, context: int | None = None, stride: int | None = None,
                  batch_size: int = 8, windows_per_batch: int = 64) -> torch.Tensor:
    """The loss of every prediction of a fixed-context model on a stream, read in overlapping windows. Chapter 7.

    The stream is cut into ``B`` rows as :func:`~course_lib.recurrent.language_model.evaluate_perplexity`
    does, so both score the same targets: every position of a row but the first. Along
    each row, windows of ``context`` tokens start every ``stride`` tokens; the first window
    scores all its predictions, every later one only its last ``stride``, each of which then
    sees at least ``context - stride`` tokens before it. Each target is scored exactly once:
    ``loss[b, t] = -log p(row_b[t + 1] | its window)``.

    Args:
        model: maps ``(B, T)`` ids to ``(logits (B, T, V), ...)``, ``T <= context``.
        ids: ``(N,)`` ids.
        context: the window (default: ``model.config.context``).
        stride: the step between windows (default: half the context).
        batch_size: ``B``, the rows the stream is cut into.
        windows_per_batch: windows run through the model at once.

    Returns:
        ``(B, N // B - 1)`` float64 losses in nats; target ``[b, t]`` is ``batchify(ids, B)[b, t + 1]``.
    """
    context = checks.positive_int(context or model.config.context, "context")
    stride = checks.positive_int(stride or max(context // 2, 1), "stride")
    if stride > context:
        raise ValueError(f"stride = {stride} must not exceed the context of {context}")
    rows = batchify(ids, batch_size)  # (B, N // B)
    width = rows.shape[1]
    spans, start = [], 0  # (start, end): inputs row[start:end], targets row[start+1:end+1]
    while True:
        end = min(start + context, width - 1)
        spans.append((start, end, 0 if start == 0 else context - stride))
        if end >= width - 1:
            break
        start += stride
    losses = torch.zeros(len(rows), width - 1, dtype=torch.float64)
    with eval_mode(model):
        for length in sorted({end - start for start, end, _ in spans}):
            same = [span for span in spans if span[1] - span[0] == length]
            for i in range(0, len(same), windows_per_batch):
                chunk = same[i:i + windows_per_batch]
                index = torch.tensor([start for start, _, _ in chunk])[:, None] + torch.arange(length + 1)
                windows = rows[:, index]  # (B, n, length + 1)
                logits, _ = model(windows[:, :, :-1].reshape(-1, length))  # (B * n, length, V)
                nll = F.cross_entropy(logits.transpose(1, 2), windows[:, :, 1:].reshape(-1, length),
                                      reduction="none").reshape(len(rows), len(chunk), length)
                for j, (start, _, skip) in enumerate(chunk):  # the targets this window scores
                    losses[:, start + skip:start + length] = nll[:, j, skip:]
    return losses


def window_perplexity(model, ids, context: int | None = None, stride: int | None = None,
                      batch_size: int = 8, windows_per_batch: int = 64) -> float:
    """The perplexity of a fixed-context model on a stream, read in overlapping windows. Chapter 7.

    ``PPL = exp(-(1/N) sum log p(x_{t+1} | window))`` over the targets and windows of
    :func:`window_losses`.

    Args:
        model, context, stride, batch_size, windows_per_batch: as :func:`window_losses`.
        ids: ``(N,)`` ids.

    Returns:
        the perplexity, a float ``>= 1``.
    """
    return math.exp(float(window_losses(model, ids, context, stride, batch_size, windows_per_batch).mean()))


def bits_per_character(model, ids, characters, context: int | None = None, stride: int | None = None,
                       batch_size: int = 8) -> float:
    """The information a model needs per character of text, whatever its tokens. Chapter 7.

    ``bits/char = sum_t -log2 p(x_{t+1} | window) / sum_t c(x_{t+1})`` over the targets of
    :func:`window_losses`, where ``c(x)`` is the number of characters token ``x`` stands for.
    Per-token perplexities of models with different tokens do not compare (a token of
    three characters is harder to guess than one of one); the cost of the same text does.

    Args:
        model, context, stride, batch_size: as :func:`window_losses`.
        ids: ``(N,)`` ids.
        characters: ``(N,)`` the number of characters each id of ``ids`` stands for (``>= 0``).

    Returns:
        bits per character, a float ``>= 0``.
    """
    characters = np.asarray(characters)
    if characters.shape != (len(ids),) or not np.issubdtype(characters.dtype, np.integer) or (characters < 0).any():
        raise ValueError(f"characters must hold one integer count >= 0 per id, shape ({len(ids)},), "
                         f"got shape {characters.shape}, dtype {characters.dtype}")
    losses = window_losses(model, ids, context, stride, batch_size)  # (B, N // B - 1)
    scored = batchify(characters, batch_size)[:, 1:]  # the characters of the same targets
    return float(losses.sum() / math.log(2) / scored.sum())


def train_gpt(model, ids, steps: int, seq_len: int | None = None, batch_size: int = 32, lr: float = 3e-3,
              warmup: int | None = None, floor: float = 0.1, max_norm: float | None = 1.0,
              weight_decay: float = 0.0, valid_ids=None, eval_every: int = 100, seed: int = 0,
              progress: bool = True) -> TrainingHistory:
    """Train a GPT on a stream of ids, with warm-up and cosine decay, as the recurrent models are trained. Chapter 7.

    Calls :func:`~course_lib.recurrent.language_model.train_language_model` with the same
    ``(B, T)`` chunks, Adam and clipping, the schedule :func:`warmup_cosine` and no
    state carried between chunks; validation perplexity is :func:`window_perplexity`.

    Args:
        model: a :class:`~course_lib.gpt.model.GPT`.
        ids: ``(N,)`` training ids.
        steps: optimizer steps.
        seq_len: ``T``, at most the context (default: the context).
        batch_size: ``B``.
        lr: the peak learning rate.
        warmup: warm-up steps (default: a tenth of ``steps``). floor: the final factor.
        max_norm, weight_decay, valid_ids, eval_every, seed, progress: as in
            :func:`~course_lib.recurrent.language_model.train_language_model`.

    Returns:
        its :class:`~course_lib.training.TrainingHistory` (``"loss"``, ``"grad_norm"``,
        ``"valid_step"``, ``"valid_perplexity"``).
    """
    seq_len = checks.positive_int(seq_len or model.config.context, "seq_len")
    if seq_len > model.config.context:
        raise ValueError(f"seq_len = {seq_len} exceeds the model's context of {model.config.context}")
    steps = checks.positive_int(steps, "steps")
    schedule = warmup_cosine(steps // 10 if warmup is None else warmup, steps, floor)
    return train_language_model(model, ids, steps, seq_len=seq_len, batch_size=batch_size, lr=lr,
                                max_norm=max_norm, weight_decay=weight_decay, valid_ids=valid_ids,
                                eval_every=eval_every, seed=seed, progress=progress, schedule=schedule,
                                carry_state=False, evaluate_fn=lambda m, v: window_perplexity(m, v))
