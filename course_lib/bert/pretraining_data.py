"""Pre-training data for a small BERT: sentences of documents, a compact vocabulary, next-sentence pairs. Chapter 8.

BERT is pre-trained on pairs of text spans ``[CLS] A [SEP] B [SEP]``: half the time
``B`` is the span that follows ``A`` in its document (label 0, *IsNext*), half the
time a sentence from another document (label 1, *NotNext*) (Devlin et al., 2019).
So the corpus is kept as documents of sentences: :func:`split_sentences` cuts a text
with a simple rule (a ``.``, ``!`` or ``?`` followed by a space and a capital, a
digit or a quote; or a line break), and :func:`nsp_pairs` builds the pairs.

A model pre-trained in seconds cannot afford BERT's 30,522-row embedding table. The
:class:`CompactTokenizer` keeps the real WordPiece tokenization of all-MiniLM-L6-v2's
vocabulary but only the pieces that occur at least ``min_count`` times in the corpus,
renumbered ``0 .. V - 1`` after the five special tokens; the other pieces become
``[UNK]``. See :doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

import collections
import re
from typing import NamedTuple, Sequence

import numpy as np
import torch

from course_lib import checks
from course_lib.bert.inputs import BertBatch, truncate_pair
from course_lib.bert.wordpiece import WordPieceTokenizer

NOT_NEXT, IS_NEXT = 1, 0  # transformers' labels of next sentence prediction

_SENTENCE_END = re.compile(r"([.!?][\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")  # the end, kept; the space, cut
_MARKUP_LINE = re.compile(r"^\s*[=#*|{}!:;]")  # headings, lists and tables that wiki markup leaves
_EMPHASIS = re.compile(r"'{2,}")  # ''italic'' and '''bold'''


def split_sentences(text: str, min_words: int = 3) -> list[str]:
    """The sentences of a text: cut at line breaks and after ``.``, ``!`` or ``?`` before a capital or a digit. Chapter 8.

    A rule, not a parser: "Dr. Smith" is cut after "Dr.". Lines that Wikipedia's
    markup leaves as headings, lists or tables (starting with ``=``, ``#``, ``*``,
    ``|``, ...) are dropped, runs of two or more apostrophes (wiki italics and bold)
    removed, and pieces with fewer than ``min_words`` words dropped.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    min_words = checks.nonnegative_int(min_words, "min_words")
    sentences = []
    for line in text.splitlines():
        if _MARKUP_LINE.match(line):
            continue
        for piece in _SENTENCE_END.sub("\\1\n", _EMPHASIS.sub("", line).strip()).split("\n"):
            piece = piece.strip()
            if piece and len(piece.split()) >= min_words:
                sentences.append(piece)
    return sentences


class CompactTokenizer(WordPieceTokenizer):
    """A WordPiece tokenizer whose vocabulary is a subset of another's, renumbered densely. Chapter 8.

    Texts are cut exactly as the full ``tokenizer`` cuts them; a piece outside
    ``tokens`` becomes ``[UNK]``. Compact ids are the five special tokens (``[PAD]``
    0, ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4), then ``tokens`` in order.
    Everything a :class:`~course_lib.bert.wordpiece.WordPieceTokenizer` does works
    (``tokenize``, ``convert_tokens_to_ids``, ``decode``, :func:`~course_lib.bert.inputs.encode_batch`).

    Args:
        tokenizer: the full :class:`~course_lib.bert.wordpiece.WordPieceTokenizer`.
        tokens: the pieces to keep (each in the full vocabulary, specials excluded).
    """

    def __init__(self, tokenizer: WordPieceTokenizer, tokens: Sequence[str]):
        kept = list(self.SPECIAL) + [t for t in tokens if t not in self.SPECIAL]
        unknown = [t for t in kept if t not in tokenizer.vocab]
        if unknown:
            raise ValueError(f"tokens not in the full vocabulary: {unknown[:5]}")
        if len(set(kept)) != len(kept):
            raise ValueError("tokens holds a piece twice")
        super().__init__({t: i for i, t in enumerate(kept)}, tokenizer.lowercase, tokenizer.max_chars,
                         tokenizer.wordpiece_fn)
        self.full = tokenizer
        self.full_ids = torch.tensor([tokenizer.vocab[t] for t in kept], dtype=torch.int64)  # (V,)
        self._to_compact = torch.full((len(tokenizer),), self.unk_id, dtype=torch.int64)
        self._to_compact[self.full_ids] = torch.arange(len(kept))

    @classmethod
    def from_corpus(cls, tokenizer: WordPieceTokenizer, token_lists, min_count: int = 5) -> "CompactTokenizer":
        """The compact tokenizer of the pieces that occur at least ``min_count`` times, most frequent first."""
        min_count = checks.positive_int(min_count, "min_count")
        counts = collections.Counter(t for tokens in token_lists for t in tokens)
        kept = [t for t, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
                if n >= min_count and t not in cls.SPECIAL]
        return cls(tokenizer, kept)

    def tokenize(self, text: str) -> list[str]:
        """The full tokenizer's WordPiece tokens of a text (pieces outside the vocabulary become ``[UNK]`` as ids)."""
        return self.full.tokenize(text)

    def to_compact(self, full_ids):
        """Compact ids ``(...)`` of full ids ``(...)`` (any shape); pieces not kept give ``[UNK]``."""
        full_ids = torch.as_tensor(full_ids, dtype=torch.int64)
        if full_ids.numel() and (full_ids.min() < 0 or full_ids.max() >= len(self._to_compact)):
            raise ValueError(f"full ids must lie in [0, {len(self._to_compact)})")
        return self._to_compact[full_ids]

    def to_full(self, ids):
        """Full-vocabulary ids ``(...)`` of compact ids ``(...)`` (any shape)."""
        ids = torch.as_tensor(ids, dtype=torch.int64)
        if ids.numel() and (ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(f"compact ids must lie in [0, {len(self)})")
        return self.full_ids[ids]


def pretraining_corpus(tokenizer: WordPieceTokenizer, documents: Sequence[str], min_count: int = 5,
                       min_words: int = 3) -> tuple[CompactTokenizer, list]:
    """A compact tokenizer for ``documents`` and every document as a list of sentences of compact ids. Chapter 8.

    Each document is split with :func:`split_sentences` and each sentence tokenized
    once with ``tokenizer``; the :class:`CompactTokenizer` keeps the pieces seen at
    least ``min_count`` times. Documents with fewer than two sentences are dropped.

    Returns:
        ``(compact tokenizer, documents)``, each document a list of sentences, each a list of ids.
    """
    if isinstance(documents, str):
        raise TypeError("documents must be a sequence of strings, not one string")
    tokenized = [[tokenizer.tokenize(s) for s in split_sentences(doc, min_words)] for doc in documents]
    tokenized = [doc for doc in tokenized if len(doc) >= 2]
    if len(tokenized) < 2:
        raise ValueError("need at least two documents of two sentences or more")
    compact = CompactTokenizer.from_corpus(tokenizer, (s for doc in tokenized for s in doc), min_count)
    return compact, [[compact.convert_tokens_to_ids(s) for s in doc] for doc in tokenized]


class SentencePair(NamedTuple):
    """One pre-training example: the ids of span ``a``, of span ``b`` and ``label`` (0 IsNext, 1 NotNext). Chapter 8."""

    a: list
    b: list
    label: int


def nsp_pairs(documents: Sequence, rng: np.random.Generator, max_tokens: int = 64,
              not_next: float = 0.5) -> list[SentencePair]:
    """Pairs for next sentence prediction: consecutive sentences of a document, half of them with a random second. Chapter 8.

    Walking through each document, ``a`` takes consecutive sentences while they fit in
    half of the ``max_tokens - 3`` tokens left after ``[CLS]`` and two ``[SEP]`` (at
    least one sentence); ``b`` is the sentence that follows (label 0, IsNext) or, with
    probability ``not_next``, a random sentence of another document (label 1,
    NotNext). The next pair starts where ``a`` ended. Both are cut with
    :func:`~course_lib.bert.inputs.truncate_pair` so that every encoded pair has at
    most ``max_tokens`` tokens.

    Args:
        documents: ``n_docs`` documents, each a list of sentences, each a list of ids
            (at least two documents).
        rng: a ``numpy.random.Generator``.
        max_tokens: the longest encoded pair, ``[CLS]`` and ``[SEP]`` included.
        not_next: the probability of a random second sentence.

    Returns:
        a list of :class:`SentencePair`.
    """
    rng = checks.generator(rng)
    budget = checks.positive_int(max_tokens, "max_tokens") - 3
    if budget < 2:
        raise ValueError(f"max_tokens = {max_tokens} leaves no room for two spans")
    if not 0 <= not_next <= 1:
        raise ValueError(f"not_next must lie in [0, 1], got {not_next!r}")
    documents = [[list(s) for s in doc if len(s)] for doc in documents]
    if sum(1 for doc in documents if doc) < 2:
        raise ValueError("need at least two non-empty documents (the random second sentence comes from another)")
    pairs = []
    for number, doc in enumerate(documents):
        start = 0
        while start < len(doc) - 1:
            end, a = start + 1, list(doc[start])
            while end < len(doc) - 1 and len(a) + len(doc[end]) <= budget // 2:
                a += doc[end]
                end += 1
            if rng.random() < not_next:
                other = number
                while other == number or not documents[other]:
                    other = int(rng.integers(len(documents)))
                b, label = documents[other][int(rng.integers(len(documents[other])))], NOT_NEXT
            else:
                b, label = doc[end], IS_NEXT
            a, b = truncate_pair(a, b, budget)
            pairs.append(SentencePair(a, b, label))
            start = end
    return pairs


def collate_pairs(pairs: Sequence[SentencePair], tokenizer: WordPieceTokenizer) -> tuple[BertBatch, torch.Tensor]:
    """A padded batch ``[CLS] a [SEP] b [SEP]`` of ``B`` pairs and their labels ``(B,)``. Chapter 8.

    Returns:
        ``(BertBatch of three (B, T) tensors, labels (B,) int64)``, ``T`` the longest pair.
    """
    if not len(pairs):
        raise ValueError("pairs is empty")
    steps = max(len(p.a) + len(p.b) + 3 for p in pairs)
    ids = torch.full((len(pairs), steps), tokenizer.pad_id, dtype=torch.int64)
    segments = torch.zeros((len(pairs), steps), dtype=torch.int64)
    padding = torch.zeros((len(pairs), steps), dtype=torch.bool)
    for row, pair in enumerate(pairs):
        row_ids = [tokenizer.cls_id, *pair.a, tokenizer.sep_id, *pair.b, tokenizer.sep_id]
        ids[row, :len(row_ids)] = torch.tensor(row_ids)
        segments[row, len(pair.a) + 2:len(row_ids)] = 1
        padding[row, :len(row_ids)] = True
    return BertBatch(ids, segments, padding), torch.tensor([p.label for p in pairs], dtype=torch.int64)
