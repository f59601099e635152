"""course_lib.attention.number_phrases against num2words and the promises of its split.

``german_tokens`` joined back into words gives num2words' German (lower-cased, with
*einstausend* corrected to *eintausend*) for every number below 1000 and random
larger ones, each part a German number word; ``english_tokens`` gives num2words'
English split at spaces, hyphens and commas. The corpus: special ids 0, 1, 2;
disjoint train, validation and test numbers of the sizes asked; every number below
1000 in training, every test number from 1000 up; the same seed gives the same
corpus; lengths from 1 to 17 tokens; reordering (24 -> *vier und zwanzig*); ``ids()``
frames the targets; argument errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from num2words import num2words

from course_lib.attention.number_phrases import (BOS, EOS, LARGEST, PAD, english_tokens, german_tokens,
                                                 load_number_translation)

GERMAN_PARTS = {"ein", "eine", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
                "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn",
                "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig",
                "hundert", "tausend", "und", "million", "millionen"}
SIZES = dict(n_train=2000, n_valid=100, n_test=200)


def german_reference(n: int) -> list[str]:
    return num2words(n, lang="de").lower().replace("einstausend", "eintausend").split()


def in_corpus_range(n: int) -> bool:
    """num2words writes *einhunderteins Millionen* for 101 million, which is not German: the corpus leaves those out."""
    return not (n // 1_000_000 > 1 and (n // 1_000_000) % 100 == 1)


def numbers_to_check() -> list[int]:
    rng = np.random.default_rng(0)
    larger = [int(rng.integers(10 ** (d - 1), 10 ** d)) for d in range(4, 10) for _ in range(60)]
    special = [1000, 1001, 1100, 100_000, 101_000, 201_000, 999_001, 1_000_000, 1_000_001, 1_001_000, 1_101_000,
               2_000_000, 21_000_000, 100_000_000, 777_777_777, LARGEST]
    return list(range(1, 1000)) + [n for n in larger + special if in_corpus_range(n)]


def rejoin(tokens: list[str], words: list[str]) -> bool:
    """Whether the tokens, in order, cut exactly the given words into parts (no part spans two words)."""
    position = 0
    for word in words:
        built = ""
        while built != word:
            if position == len(tokens) or not word.startswith(built + tokens[position]):
                return False
            built += tokens[position]
            position += 1
    return position == len(tokens)


@pytest.fixture(scope="module")
def corpus():
    return load_number_translation(**SIZES)


# ---------------------------------------------------------------- the phrases against num2words

def test_german_tokens_join_back_into_num2words_german():
    for n in numbers_to_check():
        tokens, words = german_tokens(n), german_reference(n)
        assert rejoin(tokens, words), f"{n}: {tokens} does not cut {words}"
        assert set(tokens) <= GERMAN_PARTS, f"{n}: {set(tokens) - GERMAN_PARTS} are not German number parts"


def test_english_tokens_are_num2words_english_split_into_words():
    for n in numbers_to_check():
        reference = num2words(n, lang="en").lower()
        tokens = english_tokens(n)
        assert " ".join(tokens) == " ".join(reference.replace("-", " ").replace(",", " ").split())
        assert all(t.isalpha() and t.islower() for t in tokens), f"{n}: {tokens}"


def test_hand_examples():
    assert english_tokens(24) == ["twenty", "four"] and german_tokens(24) == ["vier", "und", "zwanzig"]
    assert german_tokens(324) == ["drei", "hundert", "vier", "und", "zwanzig"]
    assert english_tokens(101) == ["one", "hundred", "and", "one"] and german_tokens(101) == ["ein", "hundert", "eins"]
    assert german_tokens(1) == ["eins"] and english_tokens(1) == ["one"]
    assert german_tokens(1_000_000) == ["eine", "million"] and german_tokens(2_000_000) == ["zwei", "millionen"]
    assert english_tokens(1_234_567) == ["one", "million", "two", "hundred", "and", "thirty", "four", "thousand",
                                         "five", "hundred", "and", "sixty", "seven"]
    assert german_tokens(np.int64(17)) == ["siebzehn"]


def test_einstausend_is_corrected():
    assert "einstausend" in num2words(101_000, lang="de"), "num2words' slip, which german_tokens corrects"
    assert german_tokens(101_000) == ["ein", "hundert", "ein", "tausend"]
    assert german_tokens(1000) == ["ein", "tausend"]
    assert german_tokens(1_201_000)[-4:] == ["zwei", "hundert", "ein", "tausend"]


def test_german_tokens_writes_no_eins_before_millionen():
    """num2words writes *einhunderteins Millionen* for 101 million: *eins* only ends a number. The corpus leaves
    such numbers out, but ``german_tokens`` accepts every n up to LARGEST: it must raise or give German."""
    for n in (101_000_000, 201_000_000, 301_500_000):
        try:
            tokens = german_tokens(n)
        except ValueError:
            continue
        pairs = list(zip(tokens, tokens[1:]))
        assert ("eins", "millionen") not in pairs, f"{n}: {tokens} is not German"


def test_longest_phrases_have_17_tokens():
    assert len(english_tokens(777_777_777)) == len(german_tokens(777_777_777)) == 17


@pytest.mark.parametrize("bad", [0, -5, LARGEST + 1, True, 2.0, "12", None])
@pytest.mark.parametrize("fn", [english_tokens, german_tokens], ids=["english", "german"])
def test_tokens_errors(fn, bad):
    with pytest.raises(ValueError, match=r"n must be an integer from 1 to 999999999, got"):
        fn(bad)


# ---------------------------------------------------------------- the corpus

def test_special_ids(corpus):
    for vocab in (corpus.source_vocab, corpus.target_vocab):
        assert vocab.words[:3] == [PAD, BOS, EOS] == ["<pad>", "<bos>", "<eos>"]
        assert [vocab[w] for w in (PAD, BOS, EOS)] == [0, 1, 2]
        assert len(set(vocab.words)) == len(vocab)


def test_split_sizes_disjoint_and_ranges(corpus):
    numbers = corpus.numbers
    assert set(numbers) == {"train", "valid", "test"}
    assert [len(numbers[k]) for k in ("train", "valid", "test")] == [2000, 100, 200]
    sets = {k: set(v.tolist()) for k, v in numbers.items()}
    assert all(len(sets[k]) == len(numbers[k]) for k in sets), "no number twice in a split"
    assert not sets["train"] & sets["valid"] and not sets["train"] & sets["test"] and not sets["valid"] & sets["test"]
    assert set(range(1, 1000)) <= sets["train"], "every number below 1000 is in the training set"
    for split in ("valid", "test"):
        assert numbers[split].min() >= 1000 and numbers[split].max() <= LARGEST
    assert all(in_corpus_range(n) for s in sets.values() for n in s)
    digits = {len(str(n)) for n in sets["test"]}
    assert digits == set(range(4, 10)), "test numbers have 4 to 9 digits"
    sentences = {k: {" ".join(s) for s in corpus.source[k]} for k in corpus.source}
    assert not sentences["train"] & sentences["test"] and not sentences["valid"] & sentences["test"]


def test_splits_are_disjoint_where_collisions_are_likely():
    """4-digit numbers are only 9000: with 500 drawn for training and 100 for test, a draw that did not
    exclude the test numbers would share about 5 of them."""
    numbers = load_number_translation(n_train=4000, n_valid=300, n_test=600).numbers
    train, valid, test = (set(numbers[k].tolist()) for k in ("train", "valid", "test"))
    assert len(train) == 4000 and len(valid) == 300 and len(test) == 600
    assert not train & test and not train & valid and not valid & test


def test_sentences_are_the_phrases_of_the_numbers(corpus):
    for split in ("train", "valid", "test"):
        assert len(corpus.source[split]) == len(corpus.target[split]) == len(corpus.numbers[split])
        for n, src, tgt in list(zip(corpus.numbers[split], corpus.source[split], corpus.target[split]))[:150]:
            assert src == english_tokens(int(n)) and tgt == german_tokens(int(n))


def test_lengths_range_from_1_to_17(corpus):
    for side in (corpus.source, corpus.target):
        lengths = [len(s) for split in side.values() for s in split]
        assert min(lengths) == 1 and max(lengths) <= 17
        assert max(lengths) >= 15, "long sentences are in the corpus"


def test_reordering_is_present(corpus):
    index = {int(n): i for i, n in enumerate(corpus.numbers["train"])}
    i = index[24]
    assert corpus.source["train"][i] == ["twenty", "four"] and corpus.target["train"][i] == ["vier", "und", "zwanzig"]
    reordered = sum("und" in t for t in corpus.target["train"])
    assert reordered > len(corpus.target["train"]) / 2, "most sentences put units before tens"


def test_ids_frame_the_targets(corpus):
    for split in ("train", "valid", "test"):
        src_ids, tgt_ids = corpus.ids(split)
        assert len(src_ids) == len(tgt_ids) == len(corpus.numbers[split])
        for ids, tokens in zip(src_ids, corpus.source[split]):
            assert ids.dtype == np.int64 and [corpus.source_vocab.words[i] for i in ids] == tokens
            assert ids.min() >= 3, "no special token in a source"
        for ids, tokens in zip(tgt_ids, corpus.target[split]):
            assert ids.dtype == np.int64 and ids[0] == 1 and ids[-1] == 2 and len(ids) == len(tokens) + 2
            assert [corpus.target_vocab.words[i] for i in ids[1:-1]] == tokens, \
                f"{split}: a target word missing from the vocabulary was dropped"


def test_a_small_training_set_still_encodes_every_word():
    """With n_train=1000 only one number from 1000 up is in training: *million* or *tausend* may be missing
    from the vocabularies. ``ids()`` must then raise (naming the vocabulary), not silently drop the word
    and give a shorter, wrong reference."""
    corpus = load_number_translation(n_train=1000, n_valid=10, n_test=10)
    for split in ("train", "valid", "test"):
        try:
            src_ids, tgt_ids = corpus.ids(split)
        except ValueError as error:
            assert "vocabulary" in str(error)
            continue
        for ids, tokens in zip(src_ids, corpus.source[split]):
            assert len(ids) == len(tokens), f"{split}: {tokens} lost a word in encoding"
        for ids, tokens in zip(tgt_ids, corpus.target[split]):
            assert len(ids) == len(tokens) + 2, f"{split}: {tokens} lost a word in encoding"


def test_vocabularies_are_those_of_the_training_set(corpus):
    assert set(corpus.source_vocab.words[3:]) == {w for s in corpus.source["train"] for w in s}
    assert set(corpus.target_vocab.words[3:]) == {w for s in corpus.target["train"] for w in s}
    assert set(corpus.target_vocab.words[3:]) <= GERMAN_PARTS


def test_same_seed_same_corpus():
    build = load_number_translation.__wrapped__  # around the cache
    sizes = dict(n_train=1050, n_valid=20, n_test=30)
    first, second, other = build(**sizes, seed=5), build(**sizes, seed=5), build(**sizes, seed=6)
    for split in ("train", "valid", "test"):
        assert np.array_equal(first.numbers[split], second.numbers[split])
        assert first.source[split] == second.source[split] and first.target[split] == second.target[split]
    assert first.source_vocab.words == second.source_vocab.words
    assert not np.array_equal(first.numbers["test"], other.numbers["test"])
    assert load_number_translation(**SIZES) is load_number_translation(**SIZES), "cached"


LOAD_ERRORS = {
    "n_train 999": (dict(n_train=999), r"n_train must be at least 1000"),
    "n_train 0": (dict(n_train=0), r"n_train must be a positive integer"),
    "n_valid 0": (dict(n_valid=0), r"n_valid must be a positive integer"),
    "n_test negative": (dict(n_test=-3), r"n_test must be a positive integer"),
    "n_test float": (dict(n_test=10.0), r"n_test must be a positive integer"),
}


@pytest.mark.parametrize("change, match", list(LOAD_ERRORS.values()), ids=list(LOAD_ERRORS))
def test_load_errors(change, match):
    with pytest.raises(ValueError, match=match):
        load_number_translation(**{**SIZES, **change})


def test_ids_of_an_unknown_split(corpus):
    with pytest.raises(ValueError, match=r"split must be one of \['test', 'train', 'valid'\], got 'dev'"):
        corpus.ids("dev")


@pytest.fixture(scope="module")
def length_split():
    from course_lib.attention.number_phrases import load_length_split
    return load_length_split(n_train=3000, n_valid=100, n_test=200, n_long=200)


def test_length_split_trains_short_and_tests_longer(length_split):
    words = {k: [len(s) for s in v] for k, v in length_split.source.items()}
    assert {k: len(v) for k, v in words.items()} == {"train": 3000, "valid": 100, "test": 200, "long": 200}
    assert max(words["train"] + words["valid"] + words["test"]) <= 10
    assert min(words["long"]) >= 13 and max(words["long"]) == 17
    numbers = {k: set(v.tolist()) for k, v in length_split.numbers.items()}
    assert set(range(1, 1000)) <= numbers["train"]
    for a in numbers:
        for b in numbers:
            assert a == b or not numbers[a] & numbers[b], (a, b)
    # nearly every long target is longer than every training target: the decoder reaches new positions
    longest_train = max(len(t) for t in length_split.target["train"])
    assert np.mean([len(t) > longest_train for t in length_split.target["long"]]) > 0.95
    # and yet no word of a long phrase is new
    src, tgt = length_split.ids("long")
    assert len(src) == 200 and all(t[0] == 1 and t[-1] == 2 for t in tgt)


def test_length_split_is_the_phrases_of_its_numbers_and_repeatable(length_split):
    from course_lib.attention.number_phrases import load_length_split
    for n, s, t in zip(length_split.numbers["long"][:20], length_split.source["long"], length_split.target["long"]):
        assert s == english_tokens(int(n)) and t == german_tokens(int(n))
    again = load_length_split.__wrapped__(n_train=3000, n_valid=100, n_test=200, n_long=200)
    assert all(np.array_equal(again.numbers[k], length_split.numbers[k]) for k in again.numbers)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_train_words=4), "at least 5"),
    (dict(max_train_words=10, min_long_words=10), "more than max_train_words"),
    (dict(min_long_words=18), "at most 17"),
    (dict(n_train=999), "at least 1000"),
    (dict(n_long=0), "n_long"),
])
def test_length_split_errors(kwargs, match):
    from course_lib.attention.number_phrases import load_length_split
    with pytest.raises(ValueError, match=match):
        load_length_split(**kwargs)
