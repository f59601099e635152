"""The attention masks of the three families of Transformers: encoder, decoder, prefix LM, cross-attention. Chapter 9.

One architecture, three ways of letting positions read each other (Raffel et al., 2020,
section 3.2.1). An *encoder* (BERT) lets every position read every position. A
*decoder* (GPT) lets position ``i`` read positions ``j <= i`` only, so that it can be
trained to predict the next token. A *prefix language model* is a decoder whose first
``prefix`` positions (the input, e.g. "translate English to German: ...") read each other
in both directions, while the positions after them (the output) stay causal. In an
*encoder-decoder* (T5) the decoder's positions also read every position of the
encoder's output through *cross-attention*.

Every mask here says who *may attend*, the convention of
:func:`~course_lib.transformer.scaled_attention.scaled_dot_product_attention` and of
``torch.nn.functional.scaled_dot_product_attention``: ``mask[i, j]`` is True when query
``i`` may read key ``j``. With ``lengths`` (a padded batch) the padding keys are hidden
too and the mask is ``(B, 1, Tq, Tk)``, which broadcasts over the heads. See
:doc:`/chapters/ch09_after_bert`. Tested on hand-written matrices, against chapter 6's
and chapter 7's causal masks and against ``transformers.masking_utils.sdpa_mask``.
"""

from __future__ import annotations

import torch

from course_lib import checks
from course_lib.attention.masking import padding_mask
from course_lib.transformer.scaled_attention import causal_mask


def _with_padding(allowed, lengths):
    """``allowed`` ``(Tq, Tk)``, or, with ``lengths`` ``(B,)``, ``(B, 1, Tq, Tk)`` with the padding keys hidden."""
    if lengths is None:
        return allowed
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be (B,), one length per sequence, got shape {tuple(lengths.shape)}")
    real = padding_mask(lengths, allowed.shape[1])  # (B, Tk), True on real keys (chapter 5)
    return allowed[None, None] & real[:, None, None, :]  # (B, 1, Tq, Tk)


def encoder_mask(steps: int, lengths=None) -> torch.Tensor:
    """The ``(T, T)`` mask of an encoder: every position may read every position. Chapter 9.

    ``mask[i, j] = True`` for all ``i, j`` (BERT, T5's encoder): each token's vector is
    built from the whole sequence, both sides of it.

    Args:
        steps: ``T``.
        lengths: ``None``, or ``(B,)`` the real lengths of a padded batch, in ``[1, T]``:
            key ``j`` of sequence ``b`` is hidden when ``j >= lengths[b]``.

    Returns:
        ``(T, T)`` bool tensor, or ``(B, 1, T, T)`` with ``lengths``.
    """
    steps = checks.positive_int(steps, "steps")
    return _with_padding(torch.ones(steps, steps, dtype=torch.bool), lengths)


def decoder_mask(steps: int, lengths=None) -> torch.Tensor:
    """The ``(T, T)`` causal mask of a decoder: position ``i`` may read positions ``j <= i``. Chapter 9.

    ``mask[i, j] = j <= i`` (GPT, T5's decoder): the lower triangle, the mask of
    :func:`~course_lib.transformer.scaled_attention.causal_mask`, so that the prediction
    of token ``i + 1`` never reads it.

    Args:
        steps: ``T``.
        lengths: ``None``, or ``(B,)`` real lengths in ``[1, T]`` (keys ``j >= lengths[b]`` hidden).

    Returns:
        ``(T, T)`` bool tensor, or ``(B, 1, T, T)`` with ``lengths``.
    """
    return _with_padding(causal_mask(checks.positive_int(steps, "steps")), lengths)


def prefix_lm_mask(steps: int, prefix: int, lengths=None) -> torch.Tensor:
    """The ``(T, T)`` mask of a prefix language model: full attention in the prefix, causal after it. Chapter 9.

    ``mask[i, j] = (j <= i) or (j < prefix)``: every position reads the whole prefix
    (the first ``prefix`` positions, which therefore also read each other in both
    directions), and a position after the prefix reads, beyond it, only itself and the
    positions before it (Raffel et al., 2020, section 3.2.1). ``prefix = 0`` gives
    :func:`decoder_mask`, ``prefix = T`` gives :func:`encoder_mask`.

    Args:
        steps: ``T``.
        prefix: the length of the prefix, in ``[0, T]``.
        lengths: ``None``, or ``(B,)`` real lengths in ``[1, T]`` (keys ``j >= lengths[b]`` hidden).

    Returns:
        ``(T, T)`` bool tensor, or ``(B, 1, T, T)`` with ``lengths``.
    """
    steps = checks.positive_int(steps, "steps")
    prefix = checks.nonnegative_int(prefix, "prefix")
    if prefix > steps:
        raise ValueError(f"prefix must lie in [0, T] = [0, {steps}], got {prefix}")
    allowed = causal_mask(steps)  # (T, T), chapter 6's
    allowed[:, :prefix] = True  # every query reads the whole prefix
    return _with_padding(allowed, lengths)


def cross_mask(target_steps: int, source_steps: int, lengths=None) -> torch.Tensor:
    """The ``(Tq, Tk)`` mask of cross-attention: every target position may read every source position. Chapter 9.

    ``mask[i, j] = True``: in an encoder-decoder (T5, chapter 6's translator) the
    decoder's query ``i`` reads all ``Tk`` vectors of the encoder's output; only padding
    of the source is hidden.

    Args:
        target_steps: ``Tq``, the decoder's positions.
        source_steps: ``Tk``, the encoder's positions.
        lengths: ``None``, or ``(B,)`` the real lengths of the sources, in ``[1, Tk]``.

    Returns:
        ``(Tq, Tk)`` bool tensor, or ``(B, 1, Tq, Tk)`` with ``lengths``.
    """
    target_steps = checks.positive_int(target_steps, "target_steps")
    source_steps = checks.positive_int(source_steps, "source_steps")
    return _with_padding(torch.ones(target_steps, source_steps, dtype=torch.bool), lengths)
