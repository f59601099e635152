"""Chapters 3 and 4: recurrent language models in PyTorch, their training loop and sampling.

A language model predicts token ``x_{t+1}`` from ``x_1..x_t``: it embeds the
tokens, runs a :class:`~course_lib.recurrent.layers.RecurrentNetwork` and maps each
state to ``V`` logits. Training minimizes the mean cross-entropy
``-(1/N) sum log p(x_{t+1} | x_1..x_t)`` with truncated backpropagation
through time: the text is cut into ``B`` parallel streams and walked through in
chunks of ``T`` tokens; the state is carried from chunk to chunk but gradients
stop at chunk boundaries. Perplexity is ``exp`` of the mean cross-entropy.
See :doc:`/chapters/ch03_rnn` and :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.progress import progress_bar
from course_lib.recurrent.layers import RecurrentNetwork
from course_lib.recurrent.sampling import sample
from course_lib.text.vocabulary import Vocabulary
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed


def batchify(ids, batch_size: int) -> torch.Tensor:
    """Cut a stream of ``N`` ids into ``B`` parallel rows: ``(B, N // B)``. Chapter 3.

    ``ids`` is ``(N,)``; row ``b`` of the int64 result holds ids
    ``b*(N // B) .. (b+1)*(N // B) - 1``; the last ``N mod B`` ids are dropped.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a 1-D array of integer ids, got shape {ids.shape}, dtype {ids.dtype}")
    batch_size = checks.positive_int(batch_size, "batch_size")
    width = len(ids) // batch_size
    if width < 2:
        raise ValueError(f"{len(ids)} ids are too few for {batch_size} rows of at least 2 tokens")
    return torch.as_tensor(ids[:width * batch_size].reshape(batch_size, width), dtype=torch.int64)


class RecurrentLanguageModel(nn.Module):
    """Embedding, recurrent network, linear read-out: ``p(x_{t+1} | x_<=t) = softmax(W_o h_t + b_o)``. Chapter 3.

    The embedding ``self.embedding`` has weights ``(V, E)``; ``W_o``, ``(V, H)``,
    and ``b_o``, ``(V,)``, are the weight and bias of the read-out ``self.readout``.

    Args:
        vocab_size: ``V``.
        embed_dim: ``E``, the size of the token embeddings.
        hidden_size: ``H``.
        mode: ``"rnn"``, ``"lstm"`` or ``"gru"``.
        num_layers: stacked layers.
        dropout: dropout on the embeddings, between layers and before the read-out.
        cell_fn: the cell function (default: the reference cell of ``mode``).
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, mode: str = "lstm",
                 num_layers: int = 1, dropout: float = 0.0, cell_fn: Callable | None = None):
        super().__init__()
        self.vocab_size = checks.positive_int(vocab_size, "vocab_size")
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.network = RecurrentNetwork(mode, embed_dim, hidden_size, num_layers, dropout=dropout, cell_fn=cell_fn)
        self.dropout = nn.Dropout(dropout)
        self.readout = nn.Linear(hidden_size, vocab_size)

    def forward(self, ids: torch.Tensor, state=None):
        """``ids`` ``(B, T)`` and an optional carried state give ``(logits (B, T, V), final state)``."""
        embedded = self.dropout(self.embedding(checks.token_batch(ids)))  # (B, T, E)
        outputs, state = self.network(embedded, state=state)  # (B, T, H)
        return self.readout(self.dropout(outputs)), state  # (B, T, V)


def detach_state(state):
    """Return ``state`` cut from the graph behind it (truncated BPTT). Chapter 3.

    Works on a state ``h``, e.g. ``(L, B, H)``, on a pair ``(h, c)`` of them, and on ``None``.
    """
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    return state.detach()


def train_language_model(model: nn.Module, ids, steps: int, seq_len: int = 64, batch_size: int = 32,
                         lr: float = 3e-3, max_norm: float | None = 1.0, weight_decay: float = 0.0,
                         valid_ids=None, eval_every: int = 100, seed: int = 0,
                         progress: bool = True, schedule: Callable | None = None, carry_state: bool = True,
                         evaluate_fn: Callable | None = None) -> TrainingHistory:
    """Train a language model with Adam and truncated BPTT on a stream of ids. Chapters 3 and 4.

    Each step reads the next ``(B, T)`` chunk of :func:`batchify`'s rows,
    predicts every next token, and minimizes the mean cross-entropy; the state
    is carried to the next chunk with :func:`detach_state` and reset when the
    rows wrap around. Gradients are clipped to global norm ``max_norm``;
    ``weight_decay`` adds the L2 penalty ``lambda ||theta||^2 / 2`` to the loss
    through Adam's gradient. ``schedule(step)`` multiplies the learning rate of step
    ``step = 1 .. steps`` (chapter 7's warm-up and cosine decay); with
    ``carry_state=False`` every chunk starts from ``state=None``, as a Transformer reads it.

    Args:
        model: maps ``(B, T)`` ids and a state to ``(B, T, V)`` logits and a state.
        ids: ``(N,)`` training ids.
        steps: optimizer steps.
        seq_len, batch_size: ``T`` and ``B``.
        lr, max_norm, weight_decay: Adam's step size, the clipping norm (``None``: no clipping), L2.
        valid_ids: ``(M,)`` ids to measure perplexity on every ``eval_every`` steps, or ``None``.
        seed: seeds dropout (torch's global generator, restored afterwards: :func:`~course_lib.training.torch_seed`).
        progress: show a tqdm bar.
        schedule: ``None`` (constant ``lr``) or ``step -> factor``.
        carry_state: carry the state from chunk to chunk (recurrent models) or not.
        evaluate_fn: ``(model, valid_ids) -> perplexity`` (default: :func:`evaluate_perplexity`
            with the training ``T`` and ``B``).

    Returns:
        a :class:`~course_lib.training.TrainingHistory` with records ``"loss"`` ``(steps,)``,
        ``"grad_norm"`` ``(steps,)`` (before clipping), ``"valid_step"`` and ``"valid_perplexity"``
        ``(n_eval,)``. The model is trained in place.
    """
    steps = checks.positive_int(steps, "steps")
    eval_every = checks.positive_int(eval_every, "eval_every")
    if max_norm is not None and not max_norm > 0:
        raise ValueError(f"max_norm must be positive, or None for no clipping; got {max_norm!r}")
    data = batchify(ids, batch_size)  # (B, N // B)
    if data.shape[1] <= seq_len:
        raise ValueError(f"each of the {batch_size} rows has {data.shape[1]} tokens; need more than seq_len={seq_len}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    factor = schedule or (lambda step: 1.0)
    evaluate_fn = evaluate_fn or (lambda m, v: evaluate_perplexity(m, v, seq_len, batch_size))
    history = {"loss": [], "grad_norm": [], "valid_step": [], "valid_perplexity": []}
    state, position = None, 0
    with torch_seed(seed), progress_bar(steps, "training", progress) as bar:
        for step in range(1, steps + 1):
            if position + seq_len + 1 > data.shape[1]:
                state, position = None, 0  # wrap around: start the rows again from a zero state
            inputs = data[:, position:position + seq_len]  # (B, T)
            targets = data[:, position + 1:position + seq_len + 1]  # (B, T)
            position += seq_len
            model.train()
            for group in optimizer.param_groups:
                group["lr"] = lr * factor(step)
            logits, state = model(inputs, detach_state(state) if carry_state else None)  # (B, T, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            history["grad_norm"].append(optimizer_step(model, optimizer, loss, max_norm))
            history["loss"].append(loss.item())
            if valid_ids is not None and (step % eval_every == 0 or step == steps):
                history["valid_step"].append(step)
                history["valid_perplexity"].append(evaluate_fn(model, valid_ids))
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    return TrainingHistory(history)


@torch.no_grad()
def evaluate_perplexity(model: nn.Module, ids, seq_len: int = 64, batch_size: int = 8) -> float:
    """``exp`` of the mean cross-entropy of every next-token prediction in ``ids``. Chapter 3.

    ``PPL = exp(-(1/N) sum_t log p(x_{t+1} | x_<=t))``; the state is carried
    through the whole stream, as in training.

    Args:
        model: as in :func:`train_language_model`.
        ids: ``(N,)`` ids.
        seq_len, batch_size: ``T`` and ``B``, the chunks the stream is read in.

    Returns:
        the perplexity, a float ``>= 1``.
    """
    data = batchify(ids, batch_size)  # (B, N // B)
    total, count, state = 0.0, 0, None
    with eval_mode(model):
        for position in range(0, data.shape[1] - 1, seq_len):
            targets = data[:, position + 1:position + seq_len + 1]  # (B, T'), T' <= T at the end
            inputs = data[:, position:position + targets.shape[1]]  # (B, T')
            logits, state = model(inputs, state)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                     reduction="sum").item()
            count += targets.numel()
    return math.exp(total / count)


def next_token_fn(model: nn.Module) -> Callable:
    """A step function for :func:`course_lib.recurrent.sampling.sample`: ``(token_id, state) -> (logits (V,), state)``.

    Chapter 3. Runs the model on one token without building a graph.
    """
    def step(token_id: int, state):
        with torch.no_grad():
            logits, state = model(torch.tensor([[int(token_id)]]), state)  # (1, 1, V)
        return logits[0, -1].numpy(), state
    return step


def generate(model: nn.Module, vocab: Vocabulary, prompt: Sequence[str], length: int, seed: int = 0,
             temperature: float = 1.0, joiner: str = "") -> str:
    """Continue ``prompt`` by sampling ``length`` tokens from the model. Chapter 3.

    Args:
        model: a trained language model.
        vocab: its vocabulary.
        prompt: the tokens to start from (characters, or words).
        length: how many tokens to sample.
        seed: seeds the sampler.
        temperature: divides the logits before the softmax; below 1 is more conservative.
        joiner: the string put between tokens (``""`` for characters, ``" "`` for words).

    Returns:
        the prompt followed by the sampled tokens, as one string.
    """
    ids = [vocab[token] for token in prompt]
    if not ids:
        raise ValueError("prompt must hold at least one token")
    state = None
    step = next_token_fn(model)
    with eval_mode(model):
        for token in ids[:-1]:  # read the prompt
            _, state = step(token, state)
        sampled = sample(step, ids[-1], length, np.random.default_rng(seed), temperature, state)
    return joiner.join(list(prompt) + vocab.decode(sampled))
