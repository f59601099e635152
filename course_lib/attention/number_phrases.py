"""A parallel corpus that ships offline: English number phrases and their German translations. Chapter 5.

Source: the number-spelling rules of ``num2words`` (version 0.5.14, LGPL-2.1,
https://github.com/savoirfairelinux/num2words), whose English and German
modules write out any integer: ``num2words(324, lang="de")`` is
``"dreihundertvierundzwanzig"``. Nothing is downloaded; the phrases are
generated on the spot, the same ones for the same seed.

The pair is a real translation task with reordering: German says the units
before the tens (*twenty-four* is *vier und zwanzig*, "four and twenty"), has
no *and* after *hundred*, and writes a whole number below a million as one
word, which :func:`german_tokens` cuts into its parts (*drei hundert vier und
zwanzig*). Both sides are lower-cased; English hyphens and commas become word
breaks. See :doc:`/chapters/ch05_attention`.

**The splits.** :func:`load_number_translation`: every number below 1000 is in the training set (the words of
the language); the validation and test sets hold numbers from 1000 to
999 999 999 that appear nowhere else, so a correct test translation cannot be
remembered, only composed. :func:`load_length_split` tests more: it trains on short
phrases only and tests on longer ones, at positions no training sentence reached.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from course_lib import checks
from course_lib.text.vocabulary import Vocabulary, with_specials

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
"""The special tokens: padding (id 0 of every vocabulary), start and end of a sentence."""

_GERMAN_PARTS = sorted(["eins", "ein", "eine", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun",
                        "zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
                        "achtzehn", "neunzehn", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig",
                        "achtzig", "neunzig", "hundert", "tausend", "und", "million", "millionen"],
                       key=len, reverse=True)
_GERMAN_PART = re.compile("|".join(_GERMAN_PARTS))
LARGEST = 999_999_999
"""The largest number in the corpus."""


def english_tokens(n: int) -> list[str]:
    """The English words of the integer ``n`` (1 to :data:`LARGEST`), lower-cased: 21 -> ``["twenty", "one"]``.

    Chapter 5. British usage as num2words writes it (*one hundred and one*); hyphens and commas
    separate words and are dropped.
    """
    from num2words import num2words

    return num2words(_number(n), lang="en").replace("-", " ").replace(",", " ").lower().split()


def german_tokens(n: int) -> list[str]:
    """The German words of ``n`` (1 to :data:`LARGEST`), each compound cut into its parts. Chapter 5.

    324 -> ``["drei", "hundert", "vier", "und", "zwanzig"]``. The cut is the longest
    match against the list of German number parts, so joining the parts gives back the
    word. One num2words slip is corrected: it writes *einstausend* for the thousands of
    101 000 (German says *eintausend*, as in 1000). Another is refused: for 101, 201, ...
    million it writes *einhunderteins Millionen*, which is not German; those numbers raise
    a ``ValueError`` (the corpus leaves them out).
    """
    from num2words import num2words

    if not _in_corpus(_number(n)):
        raise ValueError(f"num2words does not write {n} in correct German (*...eins Millionen*); "
                         f"the corpus leaves such numbers out")
    out = []
    for word in num2words(_number(n), lang="de").lower().replace("einstausend", "eintausend").split():
        parts = _GERMAN_PART.findall(word)
        if "".join(parts) != word:
            raise ValueError(f"cannot cut the German word {word!r} of {n} into number parts")
        out.extend(parts)
    return out


def _number(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= LARGEST:
        raise ValueError(f"n must be an integer from 1 to {LARGEST}, got {n!r}")
    return int(n)


def _in_corpus(n: int) -> bool:
    """num2words gives *einhunderteins Millionen* for 101 million (not German): leave such numbers out."""
    millions = n // 1_000_000
    return not (millions > 1 and millions % 100 == 1)


@dataclass(frozen=True)
class NumberTranslation:
    """The English-to-German number corpus, split and encoded. Chapter 5.

    Attributes:
        numbers: split name (``"train"``, ``"valid"``, ``"test"``, and ``"long"`` for
            :func:`load_length_split`) -> ``(N,)`` int64 arrays of the numbers of each split.
        source: the same keys -> lists of English token lists.
        target: the same keys -> lists of German token lists.
        source_vocab, target_vocab: vocabularies with ``<pad>`` as id 0, then ``<bos>`` and ``<eos>``.
    """

    numbers: dict
    source: dict
    target: dict
    source_vocab: Vocabulary
    target_vocab: Vocabulary

    def ids(self, split: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The split's sentences as ids: English without specials, German framed by ``<bos>`` and ``<eos>``.

        Returns:
            two lists of ``(T_d,)`` int64 arrays, one per sentence: source ids and target ids.
        """
        if split not in self.numbers:
            raise ValueError(f"split must be one of {sorted(self.numbers)}, got {split!r}")
        for side, vocab in (("source", self.source_vocab), ("target", self.target_vocab)):
            for sentence in getattr(self, side)[split]:
                missing = [w for w in sentence if w not in vocab]
                if missing:
                    raise ValueError(f"the {side} of split {split!r} holds {missing[0]!r}, outside the training "
                                     f"vocabulary; use a larger n_train")
        src = [self.source_vocab.encode(s) for s in self.source[split]]
        tgt = [self.target_vocab.encode([BOS, *t, EOS]) for t in self.target[split]]
        return src, tgt


def _vocabulary(sentences) -> Vocabulary:
    words = Vocabulary.build(sentences)
    ordered = with_specials(Vocabulary([], np.zeros(0, dtype=np.int64)), PAD, BOS, EOS)
    return Vocabulary(ordered.words + words.words, np.concatenate([ordered.counts, words.counts]))


def _draw(rng: np.random.Generator, count: int, exclude: set, keep=None) -> list[int]:
    """``count`` distinct numbers from 1000 up, not in ``exclude``, their digit counts (4 to 9) uniform.

    ``keep(n)``, if given, must also hold (a number that fails it is drawn again)."""
    out: list[int] = []
    taken = set(exclude)
    while len(out) < count:
        digits = int(rng.integers(4, 10))
        n = int(rng.integers(10 ** (digits - 1), 10 ** digits))
        if n not in taken and _in_corpus(n) and (keep is None or keep(n)):
            taken.add(n)
            out.append(n)
    return out


@functools.lru_cache(maxsize=8)
def load_number_translation(n_train: int = 20000, n_valid: int = 500, n_test: int = 2000,
                            seed: int = 0) -> NumberTranslation:
    """English number phrases and their German translations, split so that no test number is seen. Chapter 5.

    The training set holds every number from 1 to 999 and ``n_train - 999`` numbers
    from 1000 up; validation and test hold ``n_valid`` and ``n_test`` other numbers
    from 1000 up. Numbers from 1000 up are drawn with a uniform number of digits
    (4 to 9), so short and long phrases are equally common. The three sets of numbers
    are disjoint, hence so are their sentences. Source and licence: see the module
    (num2words, LGPL-2.1).

    Args:
        n_train, n_valid, n_test: the sizes of the splits (``n_train`` at least 1000).
        seed: seeds the draw; the same seed gives the same corpus.

    Returns:
        a :class:`NumberTranslation`. The vocabularies are built from the training set.
    """
    if checks.positive_int(n_train, "n_train") < 1000:
        raise ValueError(f"n_train must be at least 1000 (every number below 1000, then more), got {n_train}")
    checks.positive_int(n_valid, "n_valid")
    checks.positive_int(n_test, "n_test")
    rng = np.random.default_rng(seed)
    small = list(range(1, 1000))
    test = _draw(rng, n_test, set())
    valid = _draw(rng, n_valid, set(test))
    train = small + _draw(rng, n_train - len(small), set(test) | set(valid))
    rng.shuffle(train)
    numbers = {"train": np.array(train), "valid": np.array(valid), "test": np.array(test)}
    source = {k: [english_tokens(n) for n in v] for k, v in numbers.items()}
    target = {k: [german_tokens(n) for n in v] for k, v in numbers.items()}
    return NumberTranslation(numbers, source, target, _vocabulary(source["train"]), _vocabulary(target["train"]))


@functools.lru_cache(maxsize=8)
def load_length_split(max_train_words: int = 10, min_long_words: int = 13, n_train: int = 20000,
                      n_valid: int = 500, n_test: int = 1000, n_long: int = 1000,
                      seed: int = 0) -> NumberTranslation:
    """Number phrases split by length: train on short English phrases, test on longer ones too. Chapters 5-6.

    A model that has learned to translate number phrases, rather than the phrases of the
    lengths it saw, keeps translating when they grow longer. The splits:

    - ``"train"``: every number below 1000 and ``n_train - 999`` numbers from 1000 up whose
      English phrase has at most ``max_train_words`` words;
    - ``"valid"`` and ``"test"``: ``n_valid`` and ``n_test`` other numbers of those lengths
      (unseen numbers, seen lengths);
    - ``"long"``: ``n_long`` other numbers whose English phrase has at least ``min_long_words``
      words (unseen numbers and unseen lengths: nearly all their German targets are longer than
      every training target, so the decoder must write at positions it never reached in training).

    Every word of the long phrases occurs in the short ones (the vocabularies are built from
    ``"train"``). The sets of numbers are disjoint. Source and licence: see the module
    (num2words, LGPL-2.1).

    Args:
        max_train_words: the longest English phrase of train, valid and test (at least 5).
        min_long_words: the shortest English phrase of ``"long"``, more than ``max_train_words``
            and at most 17 (the longest phrase of the corpus).
        n_train, n_valid, n_test, n_long: the sizes of the splits (``n_train`` at least 1000).
        seed: seeds the draw; the same arguments give the same corpus.

    Returns:
        a :class:`NumberTranslation` with splits ``"train"``, ``"valid"``, ``"test"`` and ``"long"``.
    """
    if checks.positive_int(max_train_words, "max_train_words") < 5:
        raise ValueError(f"max_train_words must be at least 5 (every number below 1000 has up to 5 words), "
                         f"got {max_train_words}")
    if not max_train_words < checks.positive_int(min_long_words, "min_long_words") <= 17:
        raise ValueError(f"min_long_words must be more than max_train_words ({max_train_words}) and at most 17, "
                         f"got {min_long_words}")
    if checks.positive_int(n_train, "n_train") < 1000:
        raise ValueError(f"n_train must be at least 1000 (every number below 1000, then more), got {n_train}")
    for value, name in ((n_valid, "n_valid"), (n_test, "n_test"), (n_long, "n_long")):
        checks.positive_int(value, name)
    rng = np.random.default_rng(seed)
    english: dict[int, list[str]] = {}  # each number is written out once

    def words(n):
        if n not in english:
            english[n] = english_tokens(n)
        return len(english[n])

    def short(n):
        return words(n) <= max_train_words

    def long(n):
        return words(n) >= min_long_words

    long_numbers = _draw(rng, n_long, set(), long)
    test = _draw(rng, n_test, set(long_numbers), short)
    valid = _draw(rng, n_valid, set(long_numbers) | set(test), short)
    train = list(range(1, 1000)) + _draw(rng, n_train - 999, set(long_numbers) | set(test) | set(valid), short)
    rng.shuffle(train)
    numbers = {"train": np.array(train), "valid": np.array(valid), "test": np.array(test),
               "long": np.array(long_numbers)}
    source = {k: [english[n] if n in english else english_tokens(n) for n in v] for k, v in numbers.items()}
    target = {k: [german_tokens(n) for n in v] for k, v in numbers.items()}
    return NumberTranslation(numbers, source, target, _vocabulary(source["train"]), _vocabulary(target["train"]))
