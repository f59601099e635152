"""Byte-pair encoding (BPE): a subword vocabulary learned from a corpus, then applied to text. Chapter 7.

**Learning** (Sennrich et al., 2016). Start from a table of words and their counts, each
word a sequence of symbols, its characters. Count every pair of adjacent symbols over the
table, each word weighted by its count; merge the most frequent pair, wherever it occurs,
into one new symbol; count again and repeat until the vocabulary holds ``vocab_size``
symbols. Pairs never cross a word's boundary. Symbols are numbered in the order they
enter the vocabulary: the alphabet sorted by code point, then each merge's result (a
merge whose result is already a symbol adds no new one). Ties between equally frequent
pairs go to the pair of smallest numbers (left symbol, then right): the rule of the
``tokenizers`` library's ``BpeTrainer``, so that the merges here are its merges.

Cost: counting all pairs once costs ``O(N)`` for the ``N`` symbols of the table. A merge
then changes only the words that hold its pair (an index from each pair to those
words), and the most frequent pair is kept in a heap whose stale entries are corrected
when they reach the top, so a merge costs what those words cost, not another pass over
the table.

**Applying** the merges to a word: split it into its characters, then merge, again and
again, the adjacent pair that was learned first (the lowest rank), leftmost first, until no
adjacent pair is a learned merge.

**Byte level** (GPT-2, Radford et al., 2019): text is cut into words by a regular expression
(letters, digits, other characters, white space; a word keeps the space before it), each
word's UTF-8 bytes are written as characters, one printable character per byte value
(:func:`byte_alphabet`), and BPE runs on those. Every text can then be encoded with the
256 byte symbols at worst (nothing is unknown), and decoding gives back the exact text.

Tested equal to ``tokenizers`` (the same merges and vocabulary from the same words, the
same tokens for the same text) on the course's corpus and on hard text. See
:doc:`/chapters/ch07_gpt`.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Iterable, Mapping

import regex

from course_lib import checks
from course_lib.text.memo import BoundedMemo

GPT2_SPLIT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
"""GPT-2's rule for cutting text into words before BPE: English contractions, letters, digits and other
characters, each run with the space before it, and runs of white space."""


def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable stand-in for each of the 256 byte values. Chapter 7.

    The bytes that are printable Latin-1 characters (``!`` to ``~``, ``¡`` to ``¬``, ``®`` to ``ÿ``)
    stand for themselves; the other 68 (control characters, the space, ...) are given the
    characters from U+0100 on, in byte order. So every byte is one visible character and
    BPE never sees a space or a control character.

    Returns:
        ``{byte value: character}`` for the 256 byte values.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {b: chr(b) for b in printable}, 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


_TO_SYMBOL = byte_alphabet()
_TO_BYTE = {symbol: b for b, symbol in _TO_SYMBOL.items()}


def to_byte_symbols(text: str) -> str:
    """``text``'s UTF-8 bytes, each written as its :func:`byte_alphabet` character. Chapter 7."""
    return "".join(_TO_SYMBOL[b] for b in text.encode("utf-8"))


def from_byte_symbols(symbols: str) -> str:
    """The text whose UTF-8 bytes :func:`to_byte_symbols` wrote as ``symbols``. Chapter 7.

    Bytes that are not valid UTF-8 (a prefix of a character, say) become U+FFFD.
    """
    return bytes(_TO_BYTE[s] for s in symbols).decode("utf-8", errors="replace")


def byte_level_words(text: str) -> list[str]:
    """``text`` cut into words by :data:`GPT2_SPLIT`, each word in byte symbols. Chapter 7."""
    return [to_byte_symbols(word) for word in GPT2_SPLIT.findall(text)]


def _merge_word(word: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """``word`` (symbol ids) with every occurrence of ``pair``, left to right, replaced by ``new``."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def train_bpe(word_counts: Mapping[str, int], vocab_size: int, alphabet: Iterable[str] = ()):
    """Learn BPE merges from a table of words and their counts, until the vocabulary holds ``vocab_size`` symbols.

    Chapter 7. The algorithm, the tie rule and the cost are in this module's docstring.
    Stops early when no pair is left to merge.

    Args:
        word_counts: ``{word: count}``, counts positive integers (a word is a str of at least one character).
        vocab_size: ``V``, the size of the vocabulary to learn (the alphabet included).
        alphabet: characters to include even if no word holds them (for byte-level BPE, all 256 byte
            symbols, so that every text is encodable).

    Returns:
        ``(vocab, merges)``: ``vocab`` the list of symbols, the index of each its id; ``merges`` the
        list of merged pairs of symbols, ``(left, right)``, in the order they were learned (their rank).
    """
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    words, counts = [], []
    for word, count in word_counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"every word must be a non-empty str, got {word!r}")
        words.append(word)
        counts.append(checks.positive_int(count, f"the count of {word!r}"))
    vocab = sorted(set("".join(words)) | set(alphabet))
    ids = {symbol: i for i, symbol in enumerate(vocab)}
    sequences = [[ids[c] for c in word] for word in words]
    pair_counts: Counter = Counter()
    holders = defaultdict(set)  # pair -> the words that hold it (some may no longer: checked when merging)
    for k, sequence in enumerate(sequences):
        for pair in zip(sequence, sequence[1:]):
            pair_counts[pair] += counts[k]
            holders[pair].add(k)
    heap = [(-count, pair) for pair, count in pair_counts.items()]  # most frequent first, then smallest ids
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size and heap:
        negative, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -negative:  # stale: a merge took some of its occurrences
            if count > 0:
                heapq.heappush(heap, (-count, pair))
            continue
        merged = vocab[pair[0]] + vocab[pair[1]]
        if merged not in ids:
            ids[merged] = len(vocab)
            vocab.append(merged)
        new, touched = ids[merged], set()
        for k in sorted(holders.pop(pair)):
            before, after = sequences[k], _merge_word(sequences[k], pair, new)
            if len(after) == len(before):
                continue
            for old in zip(before, before[1:]):
                pair_counts[old] -= counts[k]
            for fresh in zip(after, after[1:]):
                pair_counts[fresh] += counts[k]
                holders[fresh].add(k)
                touched.add(fresh)
            sequences[k] = after
        del pair_counts[pair]
        merges.append((vocab[pair[0]], vocab[pair[1]]))
        for fresh in touched:
            if pair_counts[fresh] > 0:
                heapq.heappush(heap, (-pair_counts[fresh], fresh))
    return vocab, merges


class BPETokenizer:
    """Apply learned merges: words to subword symbols and ids, and back. Chapter 7.

    Args:
        vocab: the symbols, the index of each its id (as :func:`train_bpe` returns).
        merges: the learned pairs of symbols in the order they were learned.
        byte_level: cut text with :data:`GPT2_SPLIT` and encode its bytes (:func:`byte_level_words`);
            otherwise text is cut at white space and must use only the vocabulary's characters.
    """

    def __init__(self, vocab: list[str], merges: list[tuple[str, str]], byte_level: bool = True):
        self.vocab, self.byte_level = list(vocab), byte_level
        self.ids = {symbol: i for i, symbol in enumerate(self.vocab)}
        self.ranks = {tuple(pair): rank for rank, pair in enumerate(merges)}
        self._cache = BoundedMemo(2 ** 16)  # word -> its symbols

    def split_word(self, word: str) -> list[str]:
        """The subword symbols of one word, at most as many as its characters.

        Its characters, then the learned pair of lowest rank merged, leftmost first, until no
        adjacent pair is a learned merge (remembered for the next time the word comes).
        """
        return list(self._cache.remember(word, self._merged))

    def _merged(self, word: str) -> list[str]:
        """:meth:`split_word` without the memory."""
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(pair, len(self.ranks)), i) for i, pair in enumerate(zip(symbols, symbols[1:]))]
            rank, i = min(ranked)
            if rank == len(self.ranks):
                break
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        return symbols

    def words(self, text: str) -> list[str]:
        """``text`` cut into the words BPE runs on (byte symbols at byte level)."""
        return byte_level_words(text) if self.byte_level else text.split()

    def tokenize(self, text: str) -> list[str]:
        """The subword symbols of ``text``, word after word."""
        return [symbol for word in self.words(text) for symbol in self.split_word(word)]

    def encode(self, text: str) -> list[int]:
        """The ids of :meth:`tokenize`'s symbols.

        A character outside the vocabulary raises a ``KeyError`` naming it (never at byte level,
        whose vocabulary holds every byte symbol).
        """
        try:
            return [self.ids[symbol] for symbol in self.tokenize(text)]
        except KeyError as error:
            raise KeyError(f"{error.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: at byte level exactly the encoded text; otherwise the words joined by spaces."""
        symbols = [self.vocab[int(i)] for i in ids]
        return from_byte_symbols("".join(symbols)) if self.byte_level else " ".join(symbols)
