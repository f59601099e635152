"""T5's pre-training objective: random spans of the text dropped, each replaced by a sentinel, and predicted. Chapter 9.

BERT hides single tokens and predicts each where it stood (chapter 8). T5 (Raffel et al.,
2020, sections 3.1.4 and 3.3.4) drops *spans*: about 15 % of the tokens, in spans of 3
tokens on average. In the encoder's input each dropped span becomes one *sentinel*, a
special token that appears nowhere else (``<extra_id_0>``, ``<extra_id_1>``, ...), and
the decoder's target lists each sentinel followed by the tokens it replaced. The inputs
and targets are shorter than the text, so pre-training is cheaper than predicting every
token, and the model learns to fill a gap of several tokens with one sentence. For the
paper's Figure 2, "Thank you for inviting me to your party last week ." with "for
inviting" and "last" dropped::

    inputs:  Thank you <X> me to your party <Y> week .
    targets: <X> for inviting <Y> last <Z>

:func:`noise_mask` draws which tokens are dropped as T5 does (``random_spans_noise_mask``
of the ``t5`` library and of ``transformers``' T5 pre-training example): the numbers of
dropped tokens and spans are fixed by the length, and among the masks with those numbers,
alternating kept and dropped spans and starting with kept tokens, each is equally likely.
:func:`corrupt_spans` builds the inputs and targets. See :doc:`/chapters/ch09_after_bert`.
Tested on the paper's example, on counts of tokens and spans over many lengths and seeds,
on reassembling the text from inputs and targets, and against T5's rule for the targets.
"""

from __future__ import annotations

from typing import Sequence

import torch

from course_lib import checks


def span_counts(length: int, noise_density: float = 0.15, mean_span_length: float = 3.0) -> tuple[int, int]:
    """The number of dropped tokens and of dropped spans T5 uses for a text of ``length`` tokens. Chapter 9.

    ``noise = round(length * noise_density)``, kept within ``[1, length - 1]`` so that at
    least one token is dropped and one kept, and ``spans = round(noise / mean_span_length)``,
    at least 1, as T5's ``random_spans_noise_mask``. Rounding is half to even, as numpy's and
    Python's (``round(4.5) = 4``). When so many tokens are dropped (more than half) that fewer
    are kept than there are spans, ``spans`` is cut to the ``length - noise`` kept tokens, one
    between each two spans: T5's own code cannot build such a mask, and ``transformers``'
    example rounds ``min(noise, length - noise) / mean_span_length`` instead.

    Returns:
        ``(noise, spans)``, two ints.
    """
    length = checks.positive_int(length, "length")
    if length < 2:
        raise ValueError(f"length must be at least 2 (one token kept, one dropped), got {length}")
    if not 0 < noise_density < 1:
        raise ValueError(f"noise_density must lie in (0, 1), got {noise_density!r}")
    if not mean_span_length >= 1:
        raise ValueError(f"mean_span_length must be at least 1, got {mean_span_length!r}")
    noise = min(max(round(length * noise_density), 1), length - 1)
    spans = min(max(round(noise / mean_span_length), 1), length - noise)
    return noise, spans


def random_span_lengths(total: int, parts: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``parts`` positive lengths that add up to ``total``, each such split equally likely. Chapter 9.

    The ``parts - 1`` places where a part ends are drawn without replacement among the
    ``total - 1`` gaps between the items, so each of the ``C(total - 1, parts - 1)`` splits
    has the same chance.

    Args:
        total: the number of items, ``>= parts``.
        parts: the number of parts, ``>= 1``.
        generator: a ``torch.Generator`` (``None``: torch's global one).

    Returns:
        ``(N,)`` int64 tensor, ``N = parts``.
    """
    total, parts = checks.positive_int(total, "total"), checks.positive_int(parts, "parts")
    if parts > total:
        raise ValueError(f"cannot split {total} items into {parts} non-empty parts")
    ends = torch.randperm(total - 1, generator=generator)[:parts - 1].sort().values + 1  # where parts end
    bounds = torch.cat([torch.tensor([0]), ends, torch.tensor([total])])
    return bounds.diff()


def noise_mask(length: int, noise_density: float = 0.15, mean_span_length: float = 3.0,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """T5's bool mask of the ``length`` tokens to drop, True in random spans of dropped tokens. Chapter 9.

    With ``(noise, spans) =`` :func:`span_counts`, the ``noise`` dropped tokens are split into
    ``spans`` spans and the ``length - noise`` kept tokens into as many, each split drawn by
    :func:`random_span_lengths`; the mask is then kept span 1, dropped span 1, kept span 2, dropped
    span 2, ...: it starts with a kept token and ends with a dropped one, as T5's.

    Args:
        length: the number of tokens, at least 2.
        noise_density: the fraction of the tokens to drop, in ``(0, 1)`` (T5: 0.15).
        mean_span_length: the mean number of tokens in a dropped span, at least 1 (T5: 3).
        generator: a ``torch.Generator`` (``None``: torch's global one); the same seed gives the same mask.

    Returns:
        ``(N,)`` bool tensor, ``N = length``, with ``noise`` True entries in ``spans`` runs.
    """
    noise, spans = span_counts(length, noise_density, mean_span_length)
    dropped = random_span_lengths(noise, spans, generator)  # (spans,)
    kept = random_span_lengths(length - noise, spans, generator)  # (spans,)
    run_lengths = torch.stack([kept, dropped], dim=1).flatten()  # kept 1, dropped 1, kept 2, ...
    is_dropped = torch.tensor([False, True]).repeat(spans)
    return is_dropped.repeat_interleave(run_lengths)


def corrupt_spans(ids, mask, sentinels: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """T5's inputs and targets: each dropped span replaced by a sentinel; the spans after their sentinels. Chapter 9.

    Let the dropped spans (the runs of True in ``mask``) be ``s_1 .. s_n`` and ``X_k =
    sentinels[k]``. The inputs are ``ids`` with span ``s_k`` replaced by the one token
    ``X_{k-1}``; the targets are ``X_0 s_1 X_1 s_2 ... X_{n-1} s_n``, followed by a final
    sentinel ``X_n`` when the text ends with kept tokens, as the paper's Figure 2 ends with
    ``<Z>``. This is what T5's code computes (``noise_span_to_unique_sentinel``: the inputs;
    the same with the *kept* spans replaced by sentinels: the targets) for every mask that
    starts with a kept token, as :func:`noise_mask`'s do. Those masks end with a dropped span,
    so T5's pre-training targets end with the last span's tokens, without the final sentinel
    the paper's text describes. T5 then appends its end-of-sequence token to both (not done
    here).

    Args:
        ids: ``(N,)`` int64 token ids of the text.
        mask: ``(N,)`` bool, True on the dropped tokens.
        sentinels: the ids of the sentinels in the order they are used (T5: ``<extra_id_0>``,
            ``<extra_id_1>``, ...); at least ``n``, or ``n + 1`` when the text ends with kept tokens.

    Returns:
        ``(inputs, targets)``, two 1-D int64 tensors.
    """
    checks.expect_tensor(ids, "ids", (None,), "(N,)")
    if ids.dtype != torch.int64:
        raise TypeError(f"ids must be an int64 tensor of token ids, got dtype {ids.dtype}")
    checks.expect_tensor(mask, "mask", tuple(ids.shape), "(N,)")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True on dropped tokens), got dtype {mask.dtype}")
    sentinels = torch.as_tensor(list(sentinels), dtype=torch.int64)
    first = mask.clone()
    first[1:] &= ~mask[:-1]  # (N,) the first token of each dropped span
    spans = int(first.sum())
    needed = spans + int(len(mask) > 0 and not mask[-1])
    if len(sentinels) < needed:
        raise ValueError(f"{spans} dropped spans need {needed} sentinels, got {len(sentinels)}")
    span_of = (first.cumsum(0) - 1).clamp(min=0)  # (N,) for a dropped token, the number k - 1 of its span
    sentinel_at = sentinels[span_of] if spans else torch.zeros_like(ids)  # (N,)
    inputs = torch.where(first, sentinel_at, ids)[~mask | first]
    # Each dropped token contributes its span's sentinel (if it is the span's first) and itself.
    pairs = torch.stack([sentinel_at, ids], dim=1)  # (N, 2)
    targets = pairs[torch.stack([first, mask], dim=1)]
    if needed > spans:
        targets = torch.cat([targets, sentinels[spans:spans + 1]])
    return inputs, targets
