"""Batches for pre-training an encoder-decoder with T5's span corruption: many sentences corrupted at once. Chapter 9.

:mod:`~course_lib.transfer.span_corruption` corrupts one text at a time, which is clear but
costs a tenth of a millisecond a sentence in small tensor operations, longer than a step of a
tiny model. Here the same rules act on a padded batch ``(B, T)`` at once:

- :func:`batch_noise_masks` draws T5's masks for ``B`` lengths: for each row, the numbers of
  dropped tokens and spans of :func:`~course_lib.transfer.span_corruption.span_counts`, kept
  and dropped tokens each split into that many runs uniformly, kept run first; then, unless
  ``roll=False``, each mask rolled by a random offset. T5 corrupts texts of hundreds of tokens,
  where a mask that always ends with a dropped span does no harm; a sentence of 14 tokens gets
  a single span, which would always be its last tokens. Rolling keeps the numbers of dropped
  tokens and spans (a span cut by the end becomes two) and puts the spans anywhere;
- :func:`corrupt_batch` replaces each span by a sentinel and lists the spans after their
  sentinels, exactly as :func:`~course_lib.transfer.span_corruption.corrupt_spans` does row by
  row (tested against it);
- :func:`span_batch` puts them together with the decoder's inputs for teacher forcing.

The sentinels take the ids ``V, V + 1, ...`` after a vocabulary of ``V`` tokens
(:func:`sentinel_ids`). See :doc:`/chapters/ch09_after_bert`.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from course_lib import checks
from course_lib.bert.masking import IGNORE
from course_lib.transfer.span_corruption import span_counts


def sentinel_ids(vocab_size: int, max_length: int, noise_density: float = 0.15,
                 mean_span_length: float = 3.0) -> list[int]:
    """The ids ``V, V + 1, ...`` of enough sentinels for any sentence of up to ``max_length`` tokens. Chapter 9.

    A rolled mask has at most one span more than
    :func:`~course_lib.transfer.span_corruption.span_counts` gives (a span cut in two by the
    end), or ends with kept tokens and needs a final sentinel: ``spans + 1`` sentinels at the
    longest length. The model's vocabulary is then ``V + N``.

    Returns:
        the ``(N,)`` ids as a list of ints, ``N = spans + 1``.
    """
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    max_length = checks.positive_int(max_length, "max_length")
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2 (one token kept, one dropped), got {max_length}")
    spans = max(span_counts(n, noise_density, mean_span_length)[1] for n in range(2, max_length + 1))
    return list(range(vocab_size, vocab_size + spans + 1))


def _run_numbers(totals, parts, width: int, generator) -> torch.Tensor:
    """``(B, width)``: for item ``i`` of row ``b``, how many of its ``parts[b]`` runs end before it.

    The ``parts - 1`` run ends are drawn among the ``totals - 1`` gaps between items without
    replacement, each choice equally likely (the gaps with the smallest random keys).
    """
    keys = torch.rand((len(totals), max(width - 1, 0)), generator=generator)  # (B, width - 1)
    gaps = torch.arange(keys.shape[1])
    keys = keys.masked_fill(gaps >= (totals - 1)[:, None], 2.0)  # gaps past the row's end: never chosen
    rank = keys.argsort(dim=1).argsort(dim=1)
    ends = rank < (parts - 1)[:, None]  # (B, width - 1) a run ends after item g
    return torch.cat([torch.zeros(len(totals), 1, dtype=torch.int64), ends.long().cumsum(1)], dim=1)


def batch_noise_masks(lengths, noise_density: float = 0.15, mean_span_length: float = 3.0, roll: bool = True,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """T5's masks for ``B`` texts of the given lengths at once, each rolled by a random offset. Chapter 9.

    Row ``b`` has ``n_b`` tokens, of which ``noise`` are dropped in ``spans`` runs
    (:func:`~course_lib.transfer.span_corruption.span_counts`). Kept and dropped tokens are split
    into ``spans`` runs each, uniformly (as
    :func:`~course_lib.transfer.span_corruption.noise_mask`); kept run ``r`` comes before dropped
    run ``r``, so kept token ``i`` of run ``r`` stands at ``i +`` (dropped tokens in runs before
    ``r``) and dropped token ``j`` of run ``r`` at ``j +`` (kept tokens in runs up to ``r``).
    With ``roll``, row ``b`` is then rolled by an offset drawn from ``0 .. n_b - 1``.

    Args:
        lengths: ``(B,)`` the lengths, each at least 2.
        noise_density, mean_span_length: as in :func:`~course_lib.transfer.span_corruption.noise_mask`.
        roll: roll each mask (``False``: T5's masks, kept tokens first and a dropped span last).
        generator: a ``torch.Generator`` (``None``: torch's global one).

    Returns:
        ``(B, T)`` bool, ``T = max(lengths)``, True on dropped tokens, False on padding.
    """
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    checks.expect_tensor(lengths, "lengths", (None,), "(B,)")
    if len(lengths) == 0 or lengths.min() < 2:
        raise ValueError("lengths must hold at least one length, each at least 2")
    counts = torch.tensor([span_counts(int(n), noise_density, mean_span_length) for n in lengths])  # (B, 2)
    noise, spans = counts[:, 0], counts[:, 1]
    width = int(lengths.max())
    kept_run = _run_numbers(lengths - noise, spans, width, generator)  # (B, T)
    dropped_run = _run_numbers(noise, spans, width, generator)  # (B, T)
    items = torch.arange(width)
    is_kept = items[None, :] < (lengths - noise)[:, None]  # (B, T) kept token i exists
    is_dropped = items[None, :] < noise[:, None]  # (B, T) dropped token j exists
    # Position of dropped token j: j plus the kept tokens in runs up to its own.
    before = (kept_run[:, None, :] <= dropped_run[:, :, None]) & is_kept[:, None, :]  # (B, T, T)
    position = items[None, :] + before.sum(-1)  # (B, T)
    mask = torch.zeros(len(lengths), width + 1, dtype=torch.bool)
    rows = torch.arange(len(lengths))[:, None].expand(-1, width)
    mask[rows[is_dropped], position[is_dropped]] = True
    mask = mask[:, :width]
    if roll:
        offsets = (torch.rand(len(lengths), generator=generator) * lengths).long()  # (B,) in 0 .. n_b - 1
        source = (items[None, :] - offsets[:, None]) % lengths[:, None]  # (B, T) rolled[t] = mask[t - o]
        mask = mask.gather(1, source) & (items[None, :] < lengths[:, None])
    return mask


def _pack(values, keep, fill: int) -> torch.Tensor:
    """``(B, K)``: the ``values`` ``(B, M)`` where ``keep`` is True moved left in order, the rest ``fill``."""
    order = (~keep).long().argsort(dim=1, stable=True)  # kept columns first, in order
    packed = values.gather(1, order)
    count = keep.sum(1, keepdim=True)
    packed = packed.masked_fill(torch.arange(values.shape[1])[None, :] >= count, fill)
    return packed[:, :max(int(count.max()), 1)]


def corrupt_batch(ids, lengths, mask, sentinels: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`~course_lib.transfer.span_corruption.corrupt_spans` of every row of a padded batch at once. Chapter 9.

    Row ``b`` (its first ``n_b`` tokens) gives the inputs, the row with dropped span ``k``
    replaced by ``sentinels[k]``, and the targets, each sentinel followed by its span, plus a
    final sentinel when the row ends with kept tokens.

    Args:
        ids: ``(B, T)`` int64 token ids. lengths: ``(B,)`` the real lengths.
        mask: ``(B, T)`` bool, True on dropped tokens (nothing past a row's length).
        sentinels: the sentinel ids, enough for every row.

    Returns:
        ``(inputs (B, Tk) padded with 0, their lengths (B,), targets (B, T) padded with IGNORE (-100))``.
    """
    checks.token_batch(ids, "ids")
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    checks.sequence_lengths(lengths, ids.shape[0], ids.shape[1])
    checks.expect_tensor(mask, "mask", tuple(ids.shape), "(B, T)")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True on dropped tokens), got dtype {mask.dtype}")
    real = torch.arange(ids.shape[1])[None, :] < lengths[:, None]  # (B, T)
    if (mask & ~real).any():
        raise ValueError("mask drops a token past the end of its row")
    sentinels = torch.as_tensor(list(sentinels), dtype=torch.int64)
    first = mask.clone()
    first[:, 1:] &= ~mask[:, :-1]  # (B, T) the first token of each dropped span
    spans = first.sum(1)  # (B,)
    final = ~mask.gather(1, (lengths - 1)[:, None])[:, 0]  # (B,) the row ends with a kept token
    if int((spans + final.long()).max()) > len(sentinels):
        raise ValueError(f"a row needs {int((spans + final.long()).max())} sentinels, got {len(sentinels)}")
    sentinel_at = sentinels[(first.cumsum(1) - 1).clamp(0, len(sentinels) - 1)]  # (B, T)
    inputs = _pack(torch.where(first, sentinel_at, ids), (~mask | first) & real, 0)
    pairs = torch.stack([sentinel_at, ids], dim=2).flatten(1)  # (B, 2T) sentinel, token, sentinel, ...
    chosen = torch.stack([first, mask], dim=2).flatten(1)  # (B, 2T)
    last = sentinels[spans.clamp(max=len(sentinels) - 1)]  # (B,) the final sentinel, where needed
    pairs = torch.cat([pairs, last[:, None]], dim=1)
    chosen = torch.cat([chosen, final[:, None]], dim=1)
    return inputs, lengths - mask.sum(1) + spans, _pack(pairs, chosen, IGNORE)


class SpanBatch(NamedTuple):
    """A padded batch for span corruption: ``source`` ``(B, Tk)``, ``lengths`` ``(B,)``, ``target_in`` and ``target_out`` ``(B, T)``. Chapter 9.

    ``target_in`` is the start id followed by the targets but their last token (teacher
    forcing), 0 wherever ``target_out`` is padding; ``target_out`` the targets, padded with
    ``IGNORE`` (-100).
    """

    source: torch.Tensor
    lengths: torch.Tensor
    target_in: torch.Tensor
    target_out: torch.Tensor


def span_batch(sentences, sentinels: Sequence[int], start_id: int, generator: torch.Generator | None = None,
               noise_density: float = 0.15, mean_span_length: float = 3.0, roll: bool = True) -> SpanBatch:
    """T5's inputs and targets of ``B`` sentences, padded: masks drawn (and rolled), spans replaced by sentinels. Chapter 9.

    Args:
        sentences: ``B`` sentences, each a list of at least 2 token ids.
        sentinels: the sentinel ids (:func:`sentinel_ids`). start_id: the decoder's first input.
        generator: a ``torch.Generator`` (``None``: torch's global one).
        noise_density, mean_span_length, roll: as in :func:`batch_noise_masks`.

    Returns:
        a :class:`SpanBatch`: ``source`` ``(B, Tk)``, ``lengths`` ``(B,)``, ``target_in``,
        ``target_out`` ``(B, T)``.
    """
    if isinstance(sentences, (str, torch.Tensor)) or not len(sentences):
        raise ValueError("sentences must be a non-empty list of sentences, each a list of token ids")
    lengths = torch.tensor([len(s) for s in sentences])
    ids = torch.zeros(len(sentences), int(lengths.max()), dtype=torch.int64)
    for row, sentence in enumerate(sentences):
        ids[row, :len(sentence)] = torch.as_tensor(sentence, dtype=torch.int64)
    mask = batch_noise_masks(lengths, noise_density, mean_span_length, roll, generator)
    source, source_lengths, target_out = corrupt_batch(ids, lengths, mask, sentinels)
    target_in = torch.cat([torch.full((len(sentences), 1), int(start_id)), target_out[:, :-1]], dim=1)
    return SpanBatch(source, source_lengths, target_in.masked_fill(target_out == IGNORE, 0), target_out)
