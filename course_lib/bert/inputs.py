"""BERT's input: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, segment ids and the padding mask of a batch. Chapter 8.

Every input starts with ``[CLS]``, whose final vector stands for the whole input, and
each sentence ends with ``[SEP]``. Tokens of the first sentence (and ``[CLS]``) have
segment 0, those of the second segment 1 (Devlin et al., 2019). A batch is padded with
``[PAD]`` to its longest input; the padding mask is True on real tokens, and attention
never looks at the rest. See :doc:`/chapters/ch08_bert`. Tested against ``transformers``'
tokenizer of the model on single sentences, pairs and padding, and against its pure-Python
``BertTokenizerLegacy`` on truncated pairs (the Rust tokenizer gives an odd spare token to the
longer text instead; :func:`truncate_pair` keeps Google's BERT rule, the second text on a tie).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from course_lib import checks
from course_lib.bert.wordpiece import WordPieceTokenizer


class BertBatch(NamedTuple):
    """A padded batch: ``ids`` ``(B, T)`` int64, ``segments`` ``(B, T)`` int64, ``padding`` ``(B, T)`` bool (True on real tokens). Chapter 8."""

    ids: torch.Tensor
    segments: torch.Tensor
    padding: torch.Tensor


def truncate_pair(first: list, second: list, budget: int) -> tuple[list, list]:
    """Drop tokens from the end of the longer list (the second on a tie) until both fit ``budget``. Chapter 8.

    ``first`` and ``second`` are lists of ``N`` and ``M`` tokens; the result holds at most
    ``budget`` tokens in all. The inputs are not modified.
    """
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        if len(first) > len(second):
            first.pop()
        else:
            second.pop()
    return first, second


def encode(tokenizer: WordPieceTokenizer, text: str, pair: str | None = None,
           max_length: int | None = None) -> tuple[list[int], list[int]]:
    """The ids and segment ids of ``[CLS] text [SEP]`` or ``[CLS] text [SEP] pair [SEP]``. Chapter 8.

    Args:
        tokenizer: the :class:`~course_lib.bert.wordpiece.WordPieceTokenizer`.
        text: the first (or only) sentence; pair: ``None`` or the second.
        max_length: ``None`` or the most tokens in all, special tokens included; longer
            inputs are cut with :func:`truncate_pair`.

    Returns:
        ``(ids, segments)``, two lists of ``N`` ints.
    """
    first = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
    second = [] if pair is None else tokenizer.convert_tokens_to_ids(tokenizer.tokenize(pair))
    specials = 2 if pair is None else 3
    if max_length is not None:
        budget = checks.positive_int(max_length, "max_length") - specials
        if budget < 0:
            raise ValueError(f"max_length = {max_length} leaves no room for the {specials} special tokens")
        first, second = truncate_pair(first, second, budget)
    ids = [tokenizer.cls_id] + first + [tokenizer.sep_id]
    segments = [0] * len(ids)
    if pair is not None:
        ids += second + [tokenizer.sep_id]
        segments += [1] * (len(second) + 1)
    return ids, segments


def encode_batch(tokenizer: WordPieceTokenizer, texts: Sequence[str], pairs: Sequence[str] | None = None,
                 max_length: int | None = 128) -> BertBatch:
    """A padded :class:`BertBatch` of ``B`` inputs, each encoded with :func:`encode`: three ``(B, T)`` tensors. Chapter 8.

    ``T`` is the length of the longest input; shorter ones are padded with ``[PAD]``
    (segment 0, padding mask False).
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    if not len(texts):
        raise ValueError("texts is empty")
    if pairs is not None and len(pairs) != len(texts):
        raise ValueError(f"pairs must have one entry per text ({len(texts)}), got {len(pairs)}")
    encoded = [encode(tokenizer, t, None if pairs is None else pairs[i], max_length) for i, t in enumerate(texts)]
    steps = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), steps), tokenizer.pad_id, dtype=torch.int64)
    segments = torch.zeros((len(encoded), steps), dtype=torch.int64)
    padding = torch.zeros((len(encoded), steps), dtype=torch.bool)
    for row, (row_ids, row_segments) in enumerate(encoded):
        ids[row, :len(row_ids)] = torch.tensor(row_ids)
        segments[row, :len(row_ids)] = torch.tensor(row_segments)
        padding[row, :len(row_ids)] = True
    return BertBatch(ids, segments, padding)
