"""Vocabularies: word types, their ids and counts, and text as a stream of ids. Chapter 1 on.

See :doc:`/chapters/ch01_counts` (vocabularies) and :doc:`/chapters/ch03_rnn`
(special tokens, streams of ids for language models).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from course_lib import checks


@dataclass
class Vocabulary:
    """A fixed list of word types with their ids and corpus counts.

    Ids are assigned by decreasing count, ties broken alphabetically, so the
    same corpus always gives the same ids. Chapter 1.

    Attributes:
        words: the word of each id, ``words[i]``.
        counts: ``(V,)`` int64 array, how often each word occurs in the corpus.
        index: the id of each word, ``index[word]``.
    """

    words: list[str]
    counts: np.ndarray
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self):
        self.counts = np.asarray(self.counts, dtype=np.int64)
        if self.counts.shape != (len(self.words),):
            raise ValueError(f"counts must have shape ({len(self.words)},), got {self.counts.shape}")
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("words must not repeat")

    @classmethod
    def build(cls, documents: Iterable[Sequence[str]], min_count: int = 1,
              max_size: int | None = None) -> "Vocabulary":
        """Return the vocabulary of ``documents``: count their tokens and keep the frequent ones.

        Args:
            documents: an iterable of token lists.
            min_count: drop words seen fewer times than this.
            max_size: keep at most this many of the most frequent words.
        """
        checks.positive_int(min_count, "min_count")
        counter = Counter()
        for doc in documents:
            if isinstance(doc, str):
                raise TypeError("documents must be lists of tokens, not strings; call tokenize() first")
            counter.update(doc)
        items = sorted((item for item in counter.items() if item[1] >= min_count),
                       key=lambda wc: (-wc[1], wc[0]))
        if max_size is not None:
            items = items[:checks.positive_int(max_size, "max_size")]
        return cls([w for w, _ in items], np.array([c for _, c in items], dtype=np.int64))

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __getitem__(self, word: str) -> int:
        try:
            return self.index[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary of {len(self)} words") from None

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Return the ids of ``tokens``, dropping tokens outside the vocabulary.

        Returns a ``(N,)`` int64 array, ``N <= len(tokens)``.
        """
        if isinstance(tokens, str):
            raise TypeError("encode expects a list of tokens, not a string; call tokenize() first")
        return np.array([self.index[t] for t in tokens if t in self.index], dtype=np.int64)

    def decode(self, ids) -> list[str]:
        """Return the words of ``ids``, a ``(N,)`` array of ints in ``[0, V)``: a list of ``N`` strings."""
        return [self.words[i] for i in checks.token_ids(ids, len(self))]


def with_specials(vocab: Vocabulary, *tokens: str) -> Vocabulary:
    """A copy of ``vocab`` with special tokens such as ``"<unk>"`` appended (count 0). Chapter 3."""
    new = [t for t in tokens if t not in vocab]
    return Vocabulary(vocab.words + new, np.concatenate([vocab.counts, np.zeros(len(new), dtype=np.int64)]))


def stream_ids(documents: Sequence[Sequence[str]], vocab: Vocabulary, unknown: str = "<unk>",
               separator: str | None = "<eos>") -> np.ndarray:
    """Encode documents as one stream of ids for language modelling. Chapter 3.

    Tokens outside ``vocab`` become ``unknown`` (which must be in ``vocab``);
    ``separator`` (if in ``vocab``) ends every document.

    Args:
        documents: ``n_docs`` lists of tokens (words), or strings (read as characters).
        vocab: the vocabulary, including ``unknown`` and ``separator``.

    Returns:
        ``(N,)`` int64 ids.
    """
    unk = vocab[unknown]
    end = [vocab[separator]] if separator is not None and separator in vocab else []
    ids = []
    for doc in documents:
        ids.extend(vocab.index.get(token, unk) for token in doc)
        ids.extend(end)
    return np.array(ids, dtype=np.int64)
