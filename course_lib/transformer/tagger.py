"""A small causal Transformer that predicts a label at every position, and a task that needs relative position. Chapter 6.

:class:`Tagger` is an encoder-only Transformer: token embeddings with one of the
position kinds of :mod:`~course_lib.transformer.positions`, ``L`` encoder blocks
whose self-attention is causal (position ``t`` reads positions ``s <= t`` only),
and a linear layer that gives logits at every position.

:func:`offset_copy_task` makes sequences of random tokens whose label at position
``t`` is the token ``offset`` positions earlier, ``y_t = x_{t - offset}``. The rule is
the same at every position: a model that has learned *where* to look relative to
``t`` solves it at any length, one that has learned absolute positions only at the
lengths it was trained on. :func:`recent_key_task` asks at every position for the
most recent *key* token, which needs what a token is and how recent it is.
:func:`train_tagger` trains on short sequences and :func:`position_accuracy`
measures the accuracy at every position of longer ones. See
:doc:`/chapters/ch06_transformer`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.progress import progress_bar
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed
from course_lib.transformer.blocks import EncoderBlock, Stack
from course_lib.transformer.embedding import TokenEmbedding, rotary_for, self_attention_mask

IGNORE = -100
"""The label of a position that has no answer (the first ``offset`` ones); the loss skips it."""


class Tagger(nn.Module):
    """An encoder-only Transformer that gives label logits ``(B, T, V)`` at every position. Chapter 6.

    ``ids (B, T) -> TokenEmbedding -> L x EncoderBlock (causal self-attention) -> final LayerNorm
    -> Linear -> (B, T, V)``. With ``positions="alibi"`` the mask carries ALiBi's
    distance penalties, with ``"rope"`` the attention rotates queries and keys.

    Args:
        vocab_size: ``V`` (id 0 is padding and never a label here).
        width: ``D``. num_heads: ``nh``. ff_size: the feed-forward network's inner size.
        layers: ``L``.
        positions: one of :data:`~course_lib.transformer.positions.KINDS`.
        max_len: the longest sequence (``sinusoidal`` and ``learned`` need it; positions a
            training run never reached keep their random initial vectors under ``learned``).
        norm_first: pre-LN (True) or post-LN blocks.
        causal: mask the future (``False`` lets every position read the whole sequence).
        block_fn, attention_fn, multi_head_fn, norm_fn: passed to
            :class:`~course_lib.transformer.blocks.EncoderBlock`.
    """

    def __init__(self, vocab_size: int, width: int = 32, num_heads: int = 4, ff_size: int = 64, layers: int = 2,
                 positions: str = "rope", max_len: int = 64, norm_first: bool = True, causal: bool = True,
                 **block_options):
        super().__init__()
        self.vocab_size = checks.positive_int(vocab_size, "vocab_size")
        self.num_heads, self.positions, self.causal = num_heads, positions, bool(causal)
        self.embedding = TokenEmbedding(vocab_size, width, positions, max_len)
        blocks = [EncoderBlock(width, num_heads, ff_size, norm_first=norm_first, rotary=rotary_for(positions),
                               **block_options) for _ in range(checks.positive_int(layers, "layers"))]
        self.encoder = Stack(blocks, width, norm_fn=block_options.get("norm_fn"))
        self.output = nn.Linear(width, vocab_size)

    def forward(self, ids):
        """The logits ``(B, T, V)`` of the label at every position of a ``(B, T)`` batch of ids."""
        checks.token_batch(ids, "ids")
        mask = self_attention_mask(self.positions, self.num_heads, causal=self.causal, steps=ids.shape[1])
        return self.output(self.encoder(self.embedding(ids), mask))


def offset_copy_task(batch_size: int, steps: int, rng: np.random.Generator, vocab_size: int = 16,
                     offset: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, labels)``: random tokens, and at every position the token ``offset`` places back. Chapter 6.

    ``ids[b, t]`` is drawn uniformly from ``1 .. V - 1`` (0 is padding), and
    ``labels[b, t] = ids[b, t - offset]`` for ``t >= offset``; the first ``offset``
    positions have no answer and get :data:`IGNORE`.

    Args:
        batch_size: ``B``. steps: ``T``.
        rng: a ``numpy.random.Generator``; the same seed gives the same batch.
        vocab_size: ``V``, at least 3.
        offset: how far back the answer lies (0: the token itself).

    Returns:
        ``ids`` ``(B, T)`` and ``labels`` ``(B, T)``, int64.
    """
    batch_size, steps = checks.positive_int(batch_size, "batch_size"), checks.positive_int(steps, "steps")
    checks.generator(rng)
    vocab_size, offset = checks.positive_int(vocab_size, "vocab_size"), checks.nonnegative_int(offset, "offset")
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be at least 3 (padding and two tokens), got {vocab_size}")
    if offset >= steps:
        raise ValueError(f"offset = {offset} must be smaller than steps = {steps}")
    ids = rng.integers(1, vocab_size, size=(batch_size, steps)).astype(np.int64)  # (B, T)
    labels = np.full((batch_size, steps), IGNORE, dtype=np.int64)
    labels[:, offset:] = ids[:, :steps - offset]
    return ids, labels



def recent_key_task(batch_size: int, steps: int, rng: np.random.Generator, vocab_size: int = 16,
                    num_keys: int = 4, key_rate: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, labels)``: keys among filler tokens, and at every position the most recent key. Chapter 6.

    Each token is a key, drawn uniformly from ``1 .. num_keys``, with probability
    ``key_rate``, and otherwise a filler from ``num_keys + 1 .. V - 1``. ``labels[b, t]`` is
    the last key at a position ``s <= t``; positions before the first key get
    :data:`IGNORE`. The answer is found by *what* a token is (a key) and *how recent*
    it is, not by its absolute position.

    Args:
        batch_size: ``B``. steps: ``T``.
        rng: a ``numpy.random.Generator``.
        vocab_size: ``V``, larger than ``num_keys + 1``.
        num_keys: the number of key tokens. key_rate: the chance that a token is a key.

    Returns:
        ``ids`` ``(B, T)`` and ``labels`` ``(B, T)``, int64.
    """
    batch_size, steps = checks.positive_int(batch_size, "batch_size"), checks.positive_int(steps, "steps")
    checks.generator(rng)
    vocab_size, num_keys = checks.positive_int(vocab_size, "vocab_size"), checks.positive_int(num_keys, "num_keys")
    if vocab_size <= num_keys + 1:
        raise ValueError(f"vocab_size = {vocab_size} must leave room for padding, {num_keys} keys and a filler")
    if not 0.0 < key_rate <= 1.0:
        raise ValueError(f"key_rate must be in (0, 1], got {key_rate!r}")
    is_key = rng.random((batch_size, steps)) < key_rate  # (B, T)
    ids = np.where(is_key, rng.integers(1, num_keys + 1, size=(batch_size, steps)),
                   rng.integers(num_keys + 1, vocab_size, size=(batch_size, steps))).astype(np.int64)
    positions = np.where(is_key, np.arange(steps), -1)  # (B, T) the position of each key, -1 elsewhere
    last = np.maximum.accumulate(positions, axis=1)  # (B, T) the position of the last key so far
    labels = np.where(last >= 0, np.take_along_axis(ids, np.maximum(last, 0), axis=1), IGNORE)
    return ids, labels.astype(np.int64)

def tagging_loss(model, ids, labels):
    """The mean cross-entropy over the positions that have a label (``labels != IGNORE``). Chapter 6.

    Args:
        model: maps ``(B, T)`` ids to ``(B, T, V)`` logits, e.g. a :class:`Tagger`.
        ids: ``(B, T)`` int64 tensor. labels: ``(B, T)`` int64 tensor.

    Returns:
        a scalar tensor.
    """
    logits = model(ids)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


def train_tagger(model, steps: int, task_fn: Callable = offset_copy_task, seq_len: int = 16, batch_size: int = 32,
                 lr: float = 3e-3, max_norm: float | None = 1.0, seed: int = 0, progress: bool = True) -> TrainingHistory:
    """Train a :class:`Tagger` with Adam on fresh batches of a synthetic task. Chapter 6.

    Every step draws a new ``(B, T)`` batch from ``task_fn`` (with a
    ``numpy`` generator seeded by ``seed``), and takes an Adam step on
    :func:`tagging_loss`, gradients clipped to global norm ``max_norm``. The learning
    rate is constant (no warm-up).

    Args:
        model: a ``Tagger``, trained in place.
        steps: optimizer steps.
        task_fn: ``(batch_size, steps, rng, vocab_size) -> (ids (B, T), labels (B, T))``, e.g.
            :func:`offset_copy_task` (the default) or :func:`recent_key_task`.
        seq_len: ``T``, the length of every training sequence.
        batch_size: ``B``. lr: Adam's step size.
        max_norm: the clipping norm (``None``: no clipping).
        seed: seeds the batches and torch's global generator (restored afterwards).
        progress: show a tqdm bar.

    Returns:
        a :class:`~course_lib.training.TrainingHistory` with records ``"loss"`` and
        ``"grad_norm"``, ``(steps,)`` each.
    """
    steps, seq_len = checks.positive_int(steps, "steps"), checks.positive_int(seq_len, "seq_len")
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "grad_norm": []}
    with torch_seed(seed), progress_bar(steps, "training", progress) as bar:
        model.train()
        for _ in range(steps):
            ids, labels = task_fn(batch_size, seq_len, rng, model.vocab_size)
            loss = tagging_loss(model, torch.from_numpy(ids), torch.from_numpy(labels))
            history["grad_norm"].append(optimizer_step(model, optimizer, loss, max_norm))
            history["loss"].append(loss.item())
            bar.update(1)
    return TrainingHistory(history)


@torch.no_grad()
def position_accuracy(model, steps: int, task_fn: Callable = offset_copy_task, count: int = 256,
                      seed: int = 1) -> np.ndarray:
    """The fraction of correct labels at every position of ``count`` fresh sequences of length ``steps``. Chapter 6.

    Args:
        model: a trained :class:`Tagger`.
        steps: ``T``, the test length (at most the model's ``max_len`` for ``sinusoidal`` and ``learned``).
        task_fn: the task, as in :func:`train_tagger`.
        count: ``N``, sequences drawn (with a generator seeded by ``seed``).

    Returns:
        ``(T,)`` float array: the accuracy at each position ``t`` over the sequences that
        have a label there, NaN where none has.
    """
    count = checks.positive_int(count, "count")
    ids, labels = task_fn(count, checks.positive_int(steps, "steps"), np.random.default_rng(seed), model.vocab_size)
    with eval_mode(model):
        predicted = model(torch.from_numpy(ids)).argmax(dim=-1).numpy()  # (N, T)
    labelled = labels != IGNORE
    with np.errstate(invalid="ignore"):
        return ((predicted == labels) & labelled).sum(axis=0) / np.where(labelled.any(axis=0), labelled.sum(axis=0), np.nan)
