"""Sequence to sequence: a GRU encoder and a GRU decoder, without or with attention. Chapter 5.

The encoder reads the source ``x_1..x_Tk`` into states ``h_1..h_Tk``. The plain
decoder (Sutskever et al., 2014; Cho et al., 2014) starts from the last state
``s_0 = h_Tk`` and must find everything there; the attention decoder also looks
back at every ``h_i`` at every step, as in Bahdanau et al. (2015), simplified: a
one-way encoder, ``s_0 = h_Tk`` (theirs is ``tanh(W_s h_1)`` of the backward
encoder) and a linear read-out of ``[s_t; c_t]`` (theirs also reads ``y_{t-1}``,
through a maxout layer)::

    c_t, a_t = attention(s_{t-1}, h_1..h_Tk)          (context and weights)
    s_t      = GRUCell([embed(y_{t-1}); c_t], s_{t-1})
    logits_t = W_o [s_t; c_t] + b_o

Training feeds the true previous word ``y_{t-1}`` (teacher forcing); decoding
feeds the model's own (:mod:`course_lib.attention.decoding`). See
:doc:`/chapters/ch05_attention`. The GRU is ``torch.nn.GRU``, which chapter 4 showed
equal to course_lib's own cell.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.attention.masking import padding_mask
from course_lib.attention.scores import Attention


class Encoder(nn.Module):
    """Embedding and a one-layer GRU over a padded source batch. Chapter 5.

    Args:
        vocab_size: the source vocabulary ``V`` (id 0 is padding).
        embed_dim: ``E``.
        hidden_size: ``H``.
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int):
        super().__init__()
        self.embedding = nn.Embedding(checks.positive_int(vocab_size, "vocab_size"), embed_dim, padding_idx=0)
        self.rnn = nn.GRU(embed_dim, hidden_size, batch_first=True)

    def forward(self, source, lengths):
        """Encode ``source`` ``(B, Tk)`` ids of the given ``(B,)`` lengths.

        Returns:
            ``(states (B, Tk, H), final (B, H))``: the state at every position (past a
            sequence's length they are not used) and the state after its last real token.
        """
        checks.token_batch(source, "source")
        lengths = checks.sequence_lengths(lengths, source.shape[0], source.shape[1])
        states, _ = self.rnn(self.embedding(source))  # (B, Tk, H)
        final = states[torch.arange(source.shape[0]), lengths - 1]  # (B, H): one-way, so padding is not read
        return states, final


def plain_decoder_step(decoder, y_prev, s_prev, memory, mask):
    """One step of the plain decoder: ``s_t = GRUCell(embed(y_{t-1}), s_{t-1})``, ``logits = W_o s_t + b_o``. Chapter 5.

    ``memory`` ``(B, Tk, H)`` and ``mask`` ``(B, Tk)`` are not read: the decoder knows the
    source only through its first state ``s_0``. ``y_prev`` is ``(B,)`` and ``s_prev`` ``(B, H)``;
    returns ``(logits (B, V), s_t (B, H), None)`` (no weights).
    """
    check_step_args(decoder, y_prev, s_prev, memory, mask)
    state = decoder.cell(decoder.embedding(y_prev), s_prev)  # (B, H)
    return decoder.readout(state), state, None


def attention_decoder_step(decoder, y_prev, s_prev, memory, mask):
    """One step of the attention decoder: attend with the previous state, update the state, predict.

    ``c_t, a_t = attention(s_{t-1}, memory, mask)`` with the query ``s_{t-1}`` as a
    ``(B, 1, H)`` tensor (one query per sentence); ``s_t = cell([embed(y_{t-1}); c_t],
    s_{t-1})`` and ``logits_t = readout([s_t; c_t])``, ``[;]`` concatenation on the last
    axis. Uses the decoder's parts ``decoder.attention``, ``decoder.embedding``,
    ``decoder.cell`` (a ``torch.nn.GRUCell``) and ``decoder.readout`` (a ``torch.nn.Linear``).
    Chapter 5, exercise of ps05.

    Args:
        decoder: a :class:`Decoder` with attention.
        y_prev: ``(B,)`` int64 ids of the previous target words.
        s_prev: ``(B, H)`` previous decoder states.
        memory: ``(B, Tk, H)`` encoder states.
        mask: ``(B, Tk)`` bool, True on real source tokens.

    Returns:
        ``(logits (B, V), s_t (B, H), weights (B, Tk))``, three tensors of the dtype of ``s_prev``.
    """
    check_step_args(decoder, y_prev, s_prev, memory, mask)
    ### BEGIN SOLUTION
    context, weights = decoder.attention(s_prev[:, None, :], memory, mask)  # (B, 1, H), (B, 1, Tk)
    context = context[:, 0]
    state = decoder.cell(torch.cat([decoder.embedding(y_prev), context], dim=-1), s_prev)  # (B, H)
    logits = decoder.readout(torch.cat([state, context], dim=-1))  # (B, V)
    return logits, state, weights[:, 0]
    ### END SOLUTION


def check_step_args(decoder, y_prev, s_prev, memory, mask) -> None:
    """Raise unless the arguments of a decoder step have matching shapes. Chapter 5.

    ``y_prev`` ``(B,)`` int64, ``s_prev`` ``(B, H)``, ``memory`` ``(B, Tk, H)``, ``mask`` ``(B, Tk)``,
    as :func:`attention_decoder_step` takes them.
    """
    if not isinstance(decoder, Decoder):
        raise TypeError(f"decoder must be a course_lib.attention.seq2seq.Decoder, got {type(decoder).__name__}")
    if not isinstance(y_prev, torch.Tensor) or y_prev.dim() != 1 or y_prev.dtype != torch.int64:
        raise ValueError(f"y_prev must be a (B,) int64 tensor of word ids, got {getattr(y_prev, 'shape', y_prev)!r}")
    batch, hidden = len(y_prev), decoder.hidden_size
    checks.expect_tensor(s_prev, "s_prev", (batch, hidden), "(B, H)")
    checks.expect_tensor(memory, "memory", (batch, None, hidden), "(B, Tk, H)")
    checks.expect_tensor(mask, "mask", (batch, memory.shape[1]), "(B, Tk)")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True on real tokens), got dtype {mask.dtype}")


class Decoder(nn.Module):
    """A GRU decoder, plain or with attention, read one step at a time. Chapter 5.

    Args:
        vocab_size: the target vocabulary ``V``.
        embed_dim: ``E``.
        hidden_size: ``H`` (that of the encoder).
        attention: ``None`` (plain decoder) or a callable ``(query (B, Tq, H), keys (B, Tk, H),
            mask (B, Tk)) -> (context (B, Tq, H), weights (B, Tq, Tk))`` such as
            :class:`~course_lib.attention.scores.Attention`.
        step_fn: the step (default: :func:`plain_decoder_step` or :func:`attention_decoder_step`).
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, attention: Callable | None = None,
                 step_fn: Callable | None = None):
        super().__init__()
        self.hidden_size = checks.positive_int(hidden_size, "hidden_size")
        context = hidden_size if attention is not None else 0
        self.embedding = nn.Embedding(checks.positive_int(vocab_size, "vocab_size"), embed_dim, padding_idx=0)
        self.cell = nn.GRUCell(embed_dim + context, hidden_size)
        self.readout = nn.Linear(hidden_size + context, vocab_size)
        self.attention = attention
        self.step_fn = step_fn or (plain_decoder_step if attention is None else attention_decoder_step)

    def step(self, y_prev, s_prev, memory, mask):
        """One step, by :attr:`step_fn`: ``(logits (B, V), s_t (B, H), weights (B, Tk) or None)``."""
        return self.step_fn(self, y_prev, s_prev, memory, mask)


class Seq2Seq(nn.Module):
    """An encoder-decoder translation model, plain or with attention. Chapter 5.

    Args:
        source_vocab_size, target_vocab_size: the two vocabularies (id 0 is padding in both).
        embed_dim: ``E``. hidden_size: ``H``.
        attention: ``None`` for the plain model, or a kind of
            :class:`~course_lib.attention.scores.Attention` (``"additive"``, ``"general"``, ``"dot"``).
        attention_fn: the function that computes the attention (default: the reference of its kind).
        step_fn: the decoder step (default: the reference).
    """

    def __init__(self, source_vocab_size: int, target_vocab_size: int, embed_dim: int = 64, hidden_size: int = 128,
                 attention: str | None = "additive", attention_fn: Callable | None = None,
                 step_fn: Callable | None = None):
        super().__init__()
        self.encoder = Encoder(source_vocab_size, embed_dim, hidden_size)
        scorer = None if attention is None else Attention(attention, hidden_size, attention_fn=attention_fn)
        self.decoder = Decoder(target_vocab_size, embed_dim, hidden_size, scorer, step_fn)

    def encode(self, source, lengths):
        """``(memory (B, Tk, H), s_0 (B, H), mask (B, Tk))`` of a ``(B, Tk)`` source batch with ``(B,)`` lengths."""
        memory, final = self.encoder(source, lengths)
        return memory, final, padding_mask(lengths, source.shape[1])

    def forward(self, source, lengths, target_in):
        """Teacher forcing: the logits of every next target word given the true previous ones.

        Args:
            source: ``(B, Tk)`` source ids; lengths: ``(B,)``.
            target_in: ``(B, T)`` target ids starting with ``<bos>`` (the decoder's inputs).

        Returns:
            ``(logits (B, T, V), weights (B, T, Tk))``; the weights are ``None`` for the plain model.
        """
        checks.token_batch(target_in, "target_in")
        if target_in.shape[1] == 0 or target_in.shape[0] != source.shape[0]:
            raise ValueError(f"target_in must have shape (B, T) = ({source.shape[0]}, ?) with T >= 1, "
                             f"got {tuple(target_in.shape)}")
        memory, state, mask = self.encode(source, lengths)
        logits, weights = [], []
        for t in range(target_in.shape[1]):
            step_logits, state, step_weights = self.decoder.step(target_in[:, t], state, memory, mask)
            logits.append(step_logits)
            weights.append(step_weights)
        return torch.stack(logits, dim=1), (None if weights[0] is None else torch.stack(weights, dim=1))
