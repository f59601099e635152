"""Real English text that ships offline, tokenizing, and vocabularies.

Used from chapter 1 on. Every loader reads files that an installed package
ships; nothing is downloaded. Each loader's docstring names the text's source
and licence.
"""

from __future__ import annotations

import bz2
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from . import checks

_GALLERY_FILE = re.compile(r"^[^\n|]*\.(?:jpe?g|png|gif|svg|tiff?)(?:\||[ \t]*$)",  # "Name.jpg|" of a gallery line
                           re.IGNORECASE | re.MULTILINE)
_TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")  # runs of (Unicode) letters


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case word tokens.

    A token is a run of letters (any alphabet: "gödel" is one token),
    optionally with one apostrophe inside
    (``"don't"``, ``"world's"``). Digits and punctuation separate tokens and are
    dropped. Chapter 1.

    >>> tokenize("The cat's 2 hats!")
    ['the', "cat's", 'hats']
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
    return _TOKEN.findall(text.lower())


def _gensim_data(name: str) -> str:
    from gensim.test.utils import datapath

    return datapath(name)


@functools.lru_cache(maxsize=None)
def lee_documents() -> tuple[str, ...]:
    """The Lee background corpus: 300 short news articles, one string each.

    Source: the corpus of Australian Broadcasting Corporation news articles
    collected by Lee, Pincombe and Welsh (2005) for their study of human
    document-similarity judgements, as shipped in gensim's test data
    (``gensim/test/test_data/lee_background.cor``; gensim is LGPL-2.1).
    About 60 000 words. Chapter 1.
    """
    with open(_gensim_data("lee_background.cor"), encoding="utf-8") as f:
        return tuple(line.strip() for line in f if line.strip())


@functools.lru_cache(maxsize=None)
def wikipedia_articles() -> tuple[tuple[str, str], ...]:
    """106 English Wikipedia articles as ``(title, plain text)`` pairs.

    Source: the first articles of an English Wikipedia dump (the ones from
    "Anarchism" to about "A"), shortened, as shipped in gensim's test data
    (``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``).
    Wikipedia text is licensed CC BY-SA 3.0. Wiki markup is removed with
    gensim's ``filter_wiki``, and the file names that it leaves from image
    galleries (a line that starts ``File:Name.jpg|``) are dropped; redirects are skipped. About 450 000 words.
    Chapter 1.
    """
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    path = _gensim_data("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    articles = []
    with bz2.open(path) as f:
        for title, markup, _page_id in extract_pages(f):
            if markup.lstrip().lower().startswith("#redirect"):
                continue
            articles.append((title, _GALLERY_FILE.sub("", filter_wiki(markup))))
    return tuple(articles)


def english_documents() -> list[list[str]]:
    """All shipped English text, tokenized: Lee's news articles, then Wikipedia's.

    Returns a list of documents, each a list of tokens (about 510 000 tokens in
    406 documents). See :func:`lee_documents` and :func:`wikipedia_articles`
    for sources and licences. Chapter 1.
    """
    docs = [tokenize(text) for text in lee_documents()]
    docs += [tokenize(text) for _title, text in wikipedia_articles()]
    return docs


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
        """Count the tokens of ``documents`` and keep the frequent ones.

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
        """Map tokens to ids, dropping tokens outside the vocabulary.

        Returns a ``(T',)`` int64 array, ``T' <= len(tokens)``.
        """
        if isinstance(tokens, str):
            raise TypeError("encode expects a list of tokens, not a string; call tokenize() first")
        return np.array([self.index[t] for t in tokens if t in self.index], dtype=np.int64)

    def decode(self, ids) -> list[str]:
        """Map ids back to words. ``ids``: ``(T,)`` ints in ``[0, V)``."""
        return [self.words[i] for i in checks.token_ids(ids, len(self))]
