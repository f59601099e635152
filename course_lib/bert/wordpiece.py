"""WordPiece: BERT's basic tokenization, then greedy longest-match-first subwords with ``##`` continuations. Chapter 8.

A text becomes tokens in two stages, as the ``BasicTokenizer`` and ``WordpieceTokenizer``
of BERT's released ``tokenization.py`` (Devlin et al., 2019; the vocabulary's wordpieces
are Wu et al.'s, 2016):

1. *basic tokenization*: drop control characters and turn every kind of white space
   into a space; put spaces around CJK unified ideographs (each one becomes a word;
   Hangul and kana are not split, see ``_CJK``); split on
   white space; lower-case and strip accents (Unicode NFD, then drop the combining
   marks); split every punctuation character off as a word of its own.
2. *WordPiece*: each word is cut into the longest prefix that is in the vocabulary,
   then the longest piece of the rest that is in the vocabulary as ``##piece``, and so
   on. A word that cannot be cut this way, or is longer than ``max_chars``, becomes
   ``[UNK]`` as a whole.

The vocabulary is the model's own ``vocab.txt``: one token per line, the line number
is its id. For speed, each per-character rule of stage 1 is a ``str.translate`` table
filled as characters are met, and the tokenizer remembers the pieces of every word it has
cut, so stage 2 runs once per distinct word. See :doc:`/chapters/ch08_bert`.

Tested against the ``tokenizers`` library's BERT normalizer, pre-tokenizer and
WordPiece model with the same vocabulary on every Lee article, every review sentence,
a third of the Wikipedia text, every character of the Basic Multilingual Plane and
hard cases, and against the steps of stage 1 written one character at a time. Python's
Unicode tables are newer than that library's, so a few characters added since differ.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Callable, Mapping

from course_lib import checks
from course_lib.text.memo import BoundedMemo

# The CJK ideograph blocks that BERT treats as one word per character (Unicode code point ranges), those of
# _is_chinese_char in BERT's tokenization.py: CJK Unified Ideographs, Extensions A to E, and the two CJK
# Compatibility Ideographs blocks. Hangul, hiragana and katakana are not among them.
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(char: str) -> bool:
    """ASCII symbols count as punctuation (``$``, ``^``, ``~``, ...), as do Unicode's ``P*`` categories."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _cleaned(char: str) -> str:
    """Step 1 for one character: white space -> a space; NUL, U+FFFD and controls -> nothing; a CJK ideograph spaced."""
    if char in "\t\n\r" or unicodedata.category(char) == "Zs":
        return " "
    if ord(char) in (0, 0xFFFD) or unicodedata.category(char).startswith("C"):
        return ""
    return f" {char} " if _is_cjk(ord(char)) else char


class _CharacterTable(dict):
    """A ``str.translate`` table that asks ``rule(char)`` the first time it meets a character, then remembers.

    ``text.translate(table)`` then looks up, at C speed, every character already seen.
    It remembers at most ``size`` characters; the rule answers for the others every time.
    """

    def __init__(self, rule: Callable[[str], str], size: int = 2 ** 16):
        super().__init__()
        self.rule, self.size = rule, size

    def __missing__(self, code: int) -> str:
        replacement = self.rule(chr(code))
        if len(self) < self.size:
            self[code] = replacement
        return replacement


_CLEANED = _CharacterTable(_cleaned)
_MARKS_DROPPED = _CharacterTable(lambda char: "" if unicodedata.category(char) == "Mn" else char)
_PUNCTUATION_SPACED = _CharacterTable(lambda char: f" {char} " if _is_punctuation(char) else char)


def strip_accents(text: str) -> str:
    """``"Café" -> "Cafe"``: decompose (NFD) and drop the combining marks (category ``Mn``). Chapter 8."""
    if text.isascii():  # nothing to decompose, no marks
        return text
    return unicodedata.normalize("NFD", text).translate(_MARKS_DROPPED)


def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """BERT's basic tokenization of a text into words, before WordPiece. Chapter 8.

    Cleans the text, isolates CJK ideographs, splits on white space, lower-cases and
    strips accents (both only if ``lowercase``, as BERT's uncased models) and splits
    off every punctuation character: ``"Don't stop!" -> ["don", "'", "t", "stop", "!"]``.

    Each step is a rule per character, applied to the whole text with ``str.translate``;
    the split on white space comes last, once, which gives the same words as splitting
    before lower-casing: neither lower-casing nor NFD makes or removes white space.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text.translate(_CLEANED)
    if lowercase:  # character by character as the model's tokenizer: str.lower's final-sigma rule would give "ς"
        text = strip_accents(text.replace("Σ", "σ").lower())
    return text.translate(_PUNCTUATION_SPACED).split()


def wordpiece_word(word: str, vocab: Mapping[str, int], unk_token: str = "[UNK]", max_chars: int = 100) -> list[str]:
    """The WordPiece tokens of one word: greedy longest-match-first, continuations written ``##piece``.

    From the start of the word take the longest prefix ``word[0:e]`` that is in the
    vocabulary; from there take the longest ``"##" + word[s:e]`` that is, and so on until
    the word is used up. If at some point no piece, not even one character, is in the
    vocabulary, or the word has more than ``max_chars`` characters, the whole word is
    ``[unk_token]``. For example, with ``"un"``, ``"##aff"`` and ``"##able"`` in the
    vocabulary, ``"unaffable" -> ["un", "##aff", "##able"]``. Chapter 8, exercise of ps08.

    Args:
        word: one word after :func:`basic_tokenize` (no spaces).
        vocab: token -> id; only membership is used.
        unk_token: the token for a word that cannot be cut.
        max_chars: longer words are ``[unk_token]`` without trying.

    Returns:
        A non-empty list of tokens (an empty word gives an empty list).
    """
    if not isinstance(word, str):
        raise TypeError(f"word must be a str, got {type(word).__name__}")
    ### BEGIN SOLUTION
    if len(word) > max_chars:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:  # not even one character matched
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces
    ### END SOLUTION


def read_vocab(path) -> dict[str, int]:
    """A ``vocab.txt`` (one token per line) as token -> id, the id being the line number. Chapter 8."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {}
    for number, token in enumerate(lines):
        token = token.rstrip("\r")
        if token in vocab:
            raise ValueError(f"{path}: token {token!r} on line {number + 1} already on line {vocab[token] + 1}")
        vocab[token] = number
    return vocab


class WordPieceTokenizer:
    """BERT's tokenizer: :func:`basic_tokenize`, then :func:`wordpiece_word` on every word. Chapter 8.

    Args:
        vocab: token -> id (see :func:`read_vocab`), with the special tokens in it.
        lowercase: lower-case and strip accents (uncased models).
        max_chars: passed to the WordPiece function.
        wordpiece_fn: ``(word, vocab, unk_token, max_chars) -> tokens``; default :func:`wordpiece_word`.
        cache_size: the most words whose pieces are remembered (text repeats its words, and
            ``wordpiece_fn`` runs once per distinct word); when full, the memory starts afresh.
            0 remembers nothing.

    Change ``vocab``, ``max_chars`` or ``wordpiece_fn`` by making a new tokenizer: the
    remembered pieces were cut with the old ones.
    """

    SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

    def __init__(self, vocab: Mapping[str, int], lowercase: bool = True, max_chars: int = 100,
                 wordpiece_fn: Callable | None = None, cache_size: int = 2 ** 16):
        missing = [t for t in self.SPECIAL if t not in vocab]
        if missing:
            raise ValueError(f"the vocabulary lacks the special tokens {missing}")
        self.vocab = dict(vocab)
        self.tokens = {i: t for t, i in self.vocab.items()}
        self.lowercase, self.max_chars = lowercase, max_chars
        self.wordpiece_fn = wordpiece_fn or wordpiece_word
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.vocab[t] for t in self.SPECIAL)
        self.cache_size = checks.nonnegative_int(cache_size, "cache_size")
        self._pieces = BoundedMemo(self.cache_size)  # word -> its WordPiece tokens

    @classmethod
    def from_file(cls, path, **kwargs) -> "WordPieceTokenizer":
        """The tokenizer of a ``vocab.txt``."""
        return cls(read_vocab(path), **kwargs)

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def special_ids(self) -> tuple[int, ...]:
        """The ids of ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]`` and ``[MASK]``."""
        return (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)

    def _cut(self, word: str) -> list[str]:
        """One word's WordPiece tokens, by ``wordpiece_fn``."""
        return self.wordpiece_fn(word, self.vocab, "[UNK]", self.max_chars)

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of a text, without ``[CLS]`` and ``[SEP]``; ``"[MASK]"`` written in the text is text, not the token."""
        tokens = []
        for word in basic_tokenize(text, self.lowercase):
            tokens += self._pieces.remember(word, self._cut)
        return tokens

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        """The ids of a list of tokens (unknown tokens get ``[UNK]``'s id)."""
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def decode(self, ids, skip_special: bool = True) -> str:
        """The text of a list of ids, ``##`` pieces joined to the word before them."""
        text = ""
        for i in ids:
            token = self.tokens[int(i)]
            if skip_special and token in self.SPECIAL:
                continue
            text += token[2:] if token.startswith("##") else (" " + token if text else token)
        return text
