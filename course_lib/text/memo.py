"""A bounded memory of what a function gave for each word: the subword tokenizers' caches. Chapters 7 and 8.

Text reuses its words all the time, and cutting a word into subwords (BPE's merges in
:mod:`course_lib.gpt.bpe`, WordPiece in :mod:`course_lib.bert.wordpiece`) gives the same
pieces every time, so a tokenizer remembers them. The memory is bounded: when it is full
it starts afresh, and the common words come back at once. See :doc:`/chapters/ch07_gpt` and
:doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

from typing import Callable


class BoundedMemo(dict):
    """``{word: what compute gave for it}``, at most ``size`` entries (0: remember nothing). Chapters 7 and 8."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def remember(self, word: str, compute: Callable[[str], list]) -> list:
        """``compute(word)``, from memory when the word came before (the remembered list itself: do not change it)."""
        value = self.get(word)
        if value is None:
            value = compute(word)
            if self.size:
                if len(self) >= self.size:
                    self.clear()
                self[word] = value
        return value
