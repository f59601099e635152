"""Splitting text into tokens. Chapter 1 on.

Word tokens for the count models, word2vec and the word-level language models.
See :doc:`/chapters/ch01_counts`.
"""

from __future__ import annotations

import re

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
