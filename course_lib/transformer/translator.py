"""The encoder-decoder Transformer of Vaswani et al. (2017), for chapter 5's translation task. Chapter 6.

Source ids are embedded (with positions) and run through ``L`` encoder blocks; the target
ids so far run through ``L`` decoder blocks, each attending to itself causally and to the
encoder's output; a linear layer gives the next word's logits. Its ``forward`` has the
signature of chapter 5's :class:`~course_lib.attention.seq2seq.Seq2Seq`, so chapter 5's
:func:`~course_lib.attention.teacher_forcing.train_seq2seq` trains it and
:func:`~course_lib.attention.decoding.beam_search` decodes it. The encoder and decoder
stacks (:attr:`Transformer.core`) carry the parameter names of ``torch.nn.Transformer``.
See :doc:`/chapters/ch06_transformer`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.attention.masking import padding_mask
from course_lib.attention.teacher_forcing import pad_batch
from course_lib.training import eval_mode
from course_lib.transformer.blocks import DecoderBlock, EncoderBlock, Stack
from course_lib.transformer.embedding import TokenEmbedding, rotary_for, self_attention_mask
from course_lib.transformer.multi_head import attention_mask


class Core(nn.Module):
    """The encoder and decoder stacks, named as in ``torch.nn.Transformer`` (``encoder.layers.0...``). Chapter 6."""

    def __init__(self, width, num_heads, ff_size, layers, norm_first, block_fn=None, norm_fn=None, **attention):
        super().__init__()
        common = dict(norm_first=norm_first, norm_fn=norm_fn, **attention)
        self.encoder = Stack([EncoderBlock(width, num_heads, ff_size, block_fn=block_fn, **common)
                              for _ in range(layers)], width, norm_fn=norm_fn)
        self.decoder = Stack([DecoderBlock(width, num_heads, ff_size, **common) for _ in range(layers)], width,
                             norm_fn=norm_fn)


class Transformer(nn.Module):
    """An encoder-decoder Transformer translation model. Chapter 6.

    Args:
        source_vocab_size, target_vocab_size: the vocabularies (id 0 is padding in both).
        width: ``D``. num_heads: ``nh``. ff_size: ``F``. layers: ``L`` encoder and ``L`` decoder blocks.
        positions: one of :data:`~course_lib.transformer.positions.KINDS`.
        norm_first: pre-LN (True) or post-LN.
        max_len: the longest sentence.
        causal: mask the decoder's self-attention (set False only to see what goes wrong).
        block_fn: the encoder block function (default: the reference for ``norm_first``).
        attention_fn, multi_head_fn, norm_fn, sinusoidal_fn, rope_fn: the functions the parts call
            (default: the references), so an assignment runs the student's own.
    """

    def __init__(self, source_vocab_size: int, target_vocab_size: int, width: int = 64, num_heads: int = 4,
                 ff_size: int = 128, layers: int = 2, positions: str = "sinusoidal", norm_first: bool = True,
                 max_len: int = 64, causal: bool = True, block_fn: Callable | None = None,
                 norm_fn: Callable | None = None, sinusoidal_fn: Callable | None = None,
                 rope_fn: Callable | None = None, **attention):
        super().__init__()
        self.num_heads, self.positions, self.causal = num_heads, positions, bool(causal)
        self.source_embedding = TokenEmbedding(source_vocab_size, width, positions, max_len, sinusoidal_fn)
        self.target_embedding = TokenEmbedding(target_vocab_size, width, positions, max_len, sinusoidal_fn)
        self.core = Core(width, num_heads, ff_size, layers, norm_first, block_fn, norm_fn,
                         rotary=rotary_for(positions, rope_fn), **attention)
        self.output = nn.Linear(width, checks.positive_int(target_vocab_size, "target_vocab_size"))

    def encode(self, source, lengths):
        """``(memory (B, Tk, D), source mask (B, Tk))`` of a ``(B, Tk)`` source batch with ``(B,)`` lengths."""
        checks.token_batch(source, "source")
        mask = padding_mask(lengths, source.shape[1])
        self_mask = self_attention_mask(self.positions, self.num_heads, mask, steps=source.shape[1])
        return self.core.encoder(self.source_embedding(source), self_mask), mask

    def decode(self, target_in, memory, mask):
        """The logits ``(B, T, V)`` of every next word given ``(B, T)`` target ids, the memory and its mask."""
        checks.token_batch(target_in, "target_in")
        steps = target_in.shape[1]
        self_mask = self_attention_mask(self.positions, self.num_heads, causal=self.causal, steps=steps)
        cross_mask = attention_mask(mask)  # (B, 1, 1, Tk)
        hidden = self.core.decoder(self.target_embedding(target_in), memory, mask=self_mask, memory_mask=cross_mask)
        return self.output(hidden)

    def forward(self, source, lengths, target_in):
        """Teacher forcing: ``(logits (B, T, V), cross-attention weights of the last block (B, nh, T, Tk))``."""
        checks.token_batch(target_in, "target_in")
        if target_in.shape[1] == 0 or target_in.shape[0] != source.shape[0]:
            raise ValueError(f"target_in must have shape (B, T) = ({source.shape[0]}, ?) with T >= 1, "
                             f"got {tuple(target_in.shape)}")
        memory, mask = self.encode(source, lengths)
        logits = self.decode(target_in, memory, mask)
        return logits, self.core.decoder.layers[-1].cross_weights


def transformer_step_fn(model: Transformer, source) -> tuple[Callable, torch.Tensor]:
    """A ``step_fn`` and first state to decode one source sentence with chapter 5's searches. Chapter 6.

    The state is the ``(K, T)`` prefix of each hypothesis (starting empty): without a
    cache of keys and values (chapter 7), each step runs the decoder over the whole prefix.

    Args:
        model: a trained :class:`Transformer`.
        source: ``(Tk,)`` source ids.

    Returns:
        ``(step_fn, state)`` for :func:`~course_lib.attention.decoding.greedy_decode` and
        :func:`~course_lib.attention.decoding.beam_search`.
    """
    ids = torch.as_tensor(np.asarray(source), dtype=torch.int64)[None, :]  # (1, Tk)
    with torch.no_grad(), eval_mode(model):
        memory, mask = model.encode(ids, torch.tensor([ids.shape[1]]))

    def step_fn(tokens, prefix):
        prefix = torch.cat([prefix, tokens[:, None]], dim=1)  # (K, t + 1)
        count = len(tokens)
        with torch.no_grad(), eval_mode(model):
            logits = model.decode(prefix, memory.expand(count, -1, -1), mask.expand(count, -1))
        return F.log_softmax(logits[:, -1], dim=-1), prefix

    return step_fn, torch.zeros(1, 0, dtype=torch.int64)


@torch.no_grad()
def transformer_translate(model: Transformer, sources, bos: int, eos: int, max_len: int = 30,
                          batch_size: int = 256):
    """Greedy translations of many sentences with a :class:`Transformer`, and their cross-attention. Chapter 6.

    Args:
        model: a trained ``Transformer``.
        sources: ``N`` source sentences, ``(T_d,)`` id arrays.
        bos, eos: the target ids of ``<bos>`` and ``<eos>``.
        max_len: the most words per translation. batch_size: sentences decoded together.

    Returns:
        ``(outputs, weights)``: ``N`` id arrays (without ``<bos>``, ``<eos>``) and ``N`` arrays
        ``(L, nh, T, T_d)`` of every decoder block's cross-attention weights, one row per
        output word and ``<eos>``.
    """
    outputs, alignments = [], []
    with eval_mode(model):
        for start in range(0, len(sources), checks.positive_int(batch_size, "batch_size")):
            chunk = sources[start:start + batch_size]
            padded, lengths = pad_batch(chunk)
            memory, mask = model.encode(padded, lengths)
            prefix = torch.full((len(chunk), 1), bos)
            for _ in range(max_len):
                token = model.decode(prefix, memory, mask)[:, -1].argmax(dim=-1)
                prefix = torch.cat([prefix, token[:, None]], dim=1)
                if bool((prefix[:, 1:] == eos).any(dim=1).all()):
                    break
            cross = torch.stack([block.cross_weights for block in model.core.decoder.layers], dim=1)  # (B, L, nh, T, Tk)
            words = prefix[:, 1:].numpy()
            for row in range(len(chunk)):
                ended = np.flatnonzero(words[row] == eos)
                stop = int(ended[0]) if len(ended) else words.shape[1]
                outputs.append(words[row, :stop])
                alignments.append(cross[row, :, :, :stop + 1, :lengths[row]].numpy())
    return outputs, alignments
