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

Cost: counting all pairs once costs ``O(N)`` for the ``N`` symbols of the table. Recounting
before every merge (:func:`train_bpe_plain`, with :func:`most_frequent_pair`) costs ``O(N)`` a
merge; :func:`train_bpe` instead changes only the words that hold the merged pair (an index from
each pair to those words) and keeps the most frequent pair in a heap whose stale entries are
corrected when they reach the top, so a merge costs what those words cost.

**Applying** the merges to a word (:func:`apply_merges`): split it into its characters, then
merge, again and again, the adjacent pair that was learned first (the lowest rank), leftmost
first, until no adjacent pair is a learned merge.

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


def _checked_table(word_counts: Mapping[str, int]) -> tuple[list[str], list[int]]:
    """The words of ``word_counts`` and their counts, after checking them (non-empty str, positive int)."""
    words, counts = [], []
    for word, count in word_counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"every word must be a non-empty str, got {word!r}")
        words.append(word)
        counts.append(checks.positive_int(count, f"the count of {word!r}"))
    return words, counts


def _numbered(words: list[str], alphabet: Iterable[str]) -> tuple[list[str], dict[str, int], list[list[int]]]:
    """``(vocab, ids, sequences)``: the alphabet sorted by code point, each symbol's id, each word as ids."""
    vocab = sorted(set("".join(words)) | set(alphabet))
    ids = {symbol: i for i, symbol in enumerate(vocab)}
    return vocab, ids, [[ids[c] for c in word] for word in words]


def _learn(vocab: list[str], ids: dict[str, int], merges: list, pair: tuple[int, int]) -> int:
    """Record the merge of ``pair``; return the id of its result, a new symbol unless it already is one."""
    merged = vocab[pair[0]] + vocab[pair[1]]
    if merged not in ids:
        ids[merged] = len(vocab)
        vocab.append(merged)
    merges.append((vocab[pair[0]], vocab[pair[1]]))
    return ids[merged]


def check_word_ids(words, counts) -> None:
    """Raise unless ``words`` is a list of lists (or tuples) of int ids, ``counts`` as many positive ints. Chapter 7."""
    if not isinstance(words, (list, tuple)) or not all(
            isinstance(w, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in w)
            for w in words):
        raise TypeError("words must be a list of words, each a list (or tuple) of int symbol ids")
    if not isinstance(counts, (list, tuple)) or len(counts) != len(words):
        raise ValueError(f"counts must hold one count per word, {len(words)}, got {counts!r}")
    for count in counts:
        checks.positive_int(count, "every count")


def most_frequent_pair(words, counts):
    """The most frequent pair of adjacent symbols in a table of words, or ``None``: one step of learning BPE.

    Every pair of adjacent symbols inside a word counts once per occurrence (``"aaa"`` holds
    ``(a, a)`` twice), weighted by its word's count: ``count(l, r) = sum_w counts[w] * #(l, r in w)``.
    Pairs never cross from one word to the next. The pair of largest count wins; a tie goes to the
    smallest pair, left id first, then right id (``min`` over ``(-count, pair)``), the rule of
    :func:`train_bpe`. The arguments are not modified. Chapter 7, exercise of ps07.

    Args:
        words: ``N`` words, each a list (or tuple) of symbol ids (ints).
        counts: ``N`` positive ints, the count of each word.

    Returns:
        ``(left, right)``, a tuple of two symbol ids; ``None`` when no word has two symbols.
    """
    check_word_ids(words, counts)
    ### BEGIN SOLUTION
    totals = {}
    for word, count in zip(words, counts):
        for i in range(len(word) - 1):
            pair = (word[i], word[i + 1])
            totals[pair] = totals.get(pair, 0) + count
    if not totals:
        return None
    return min(totals, key=lambda pair: (-totals[pair], pair))
    ### END SOLUTION


def train_bpe_plain(word_counts: Mapping[str, int], vocab_size: int, alphabet: Iterable[str] = (),
                    pair_fn=most_frequent_pair):
    """Learn :func:`train_bpe`'s merges the plain way, counting every pair again before each merge.

    Chapter 7. Sennrich et al.'s loop as written: ``pair_fn`` (:func:`most_frequent_pair`) finds
    the most frequent pair over the whole table, every word has it merged (left to right), and
    again, until the vocabulary holds ``vocab_size`` symbols or no word has two symbols left. The
    numbering, the tie rule and the reuse of a result that is already a symbol are
    :func:`train_bpe`'s, so it returns the same ``(vocab, merges)``. Cost: each merge recounts all
    ``N`` symbols of the table, ``O(merges x N)`` in all, where :func:`train_bpe` pays only for the
    words a merge changes: use it on hand-sized tables (or to run a student's ``pair_fn``).

    Args:
        word_counts: ``{word: count}``, as for :func:`train_bpe`.
        vocab_size: ``V``, the size of the vocabulary to learn (the alphabet included).
        alphabet: characters to include even if no word holds them.
        pair_fn: ``(words, counts) -> (left, right)`` ids of the pair to merge, or ``None``.

    Returns:
        ``(vocab, merges)`` as :func:`train_bpe` returns them.
    """
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    words, counts = _checked_table(word_counts)
    vocab, ids, sequences = _numbered(words, alphabet)
    merges = []
    while len(vocab) < vocab_size:
        pair = pair_fn(sequences, counts)  # a pass over the whole table
        if pair is None:
            break
        pair = (int(pair[0]), int(pair[1]))
        new = _learn(vocab, ids, merges, pair)
        sequences = [_merge_word(sequence, pair, new) for sequence in sequences]
    return vocab, merges


def train_bpe(word_counts: Mapping[str, int], vocab_size: int, alphabet: Iterable[str] = ()):
    """Learn BPE merges from a table of words and their counts, until the vocabulary holds ``vocab_size`` symbols.

    Chapter 7. The algorithm, the tie rule and the cost are in this module's docstring.
    Stops early when no pair is left to merge. :func:`train_bpe_plain` learns the same merges by
    recounting every pair at every merge.

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
    words, counts = _checked_table(word_counts)
    vocab, ids, sequences = _numbered(words, alphabet)
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
        new, touched = _learn(vocab, ids, merges, pair), set()
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
        for fresh in touched:
            if pair_counts[fresh] > 0:
                heapq.heappush(heap, (-pair_counts[fresh], fresh))
    return vocab, merges


def apply_merges(symbols, ranks):
    """A word's symbols after the learned merges, lowest rank first and leftmost first: BPE applied to one word.

    Among the adjacent pairs ``(symbols[i], symbols[i + 1])`` that are learned merges, take the
    one of lowest rank (learned first); if it occurs more than once, its leftmost occurrence; join
    its two symbols into one. Repeat until no adjacent pair has a rank. A merge can create a pair
    that an earlier merge (lower rank) joins next, so one pass per rank is not enough. The
    arguments are not modified. Chapter 7, exercise of ps07.

    Args:
        symbols: one word's symbols, a list of str (its characters, at first).
        ranks: ``{(left, right): rank}``, each learned pair of symbols and its rank (0 for the first).

    Returns:
        a new list of str, the word's subword symbols.
    """
    if not isinstance(symbols, (list, tuple)) or not all(isinstance(s, str) for s in symbols):
        raise TypeError(f"symbols must be a list of str, got {symbols!r}")
    if not isinstance(ranks, dict):
        raise TypeError(f"ranks must be a dict {{(left, right): rank}}, got {type(ranks).__name__}")
    ### BEGIN SOLUTION
    merged = list(symbols)
    while True:
        found = [(ranks[pair], i) for i, pair in enumerate(zip(merged, merged[1:])) if pair in ranks]
        if not found:
            return merged
        _, i = min(found)  # the lowest rank, then the leftmost
        merged[i:i + 2] = [merged[i] + merged[i + 1]]
    ### END SOLUTION


class BPETokenizer:
    """Apply learned merges: words to subword symbols and ids, and back. Chapter 7.

    Args:
        vocab: the symbols, the index of each its id (as :func:`train_bpe` returns).
        merges: the learned pairs of symbols in the order they were learned.
        byte_level: cut text with :data:`GPT2_SPLIT` and encode its bytes (:func:`byte_level_words`);
            otherwise text is cut at white space and must use only the vocabulary's characters.
        merge_fn: ``(symbols, ranks) -> symbols``, applies the merges to one word (:func:`apply_merges`).
    """

    def __init__(self, vocab: list[str], merges: list[tuple[str, str]], byte_level: bool = True,
                 merge_fn=apply_merges):
        self.vocab, self.byte_level, self.merge_fn = list(vocab), byte_level, merge_fn
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
        """:meth:`split_word` without the memory: ``merge_fn`` on the word's characters."""
        return self.merge_fn(list(word), self.ranks)

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
