"""Byte-pair encoding (course_lib.gpt.bpe) against the ``tokenizers`` library's BPE trainer and model.

From the same words (the course's text cut by ``tokenizers``' own Whitespace pre-tokenizer, or by GPT-2's
byte-level rule), ``train_bpe`` must learn the very merges and vocabulary of ``BpeTrainer``, and
``BPETokenizer`` must cut text into the very tokens of its BPE model, on the Lee articles and on hard text
(Unicode, emoji, runs of white space, numbers, merges whose result is already a symbol). The incremental
trainer must equal the plain one that recounts every pair before every merge (``train_bpe_plain``), ps07's
exercises (``most_frequent_pair``, ``apply_merges``, which the tokenizer runs) must follow the rules by
hand, and the byte level must give back any text exactly.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from course_lib.gpt import bpe
from course_lib.text import corpus

HARD = ["Hello  world!!  ", "naïve café Ångström 東京タワー 🤖🎉 x² ½", "1234567 3.14159\n\n\ttabs   and  spaces",
        "don't I'll we've they'd", "abc abc ab c a bc bca cab", "aaaa aaa aa a aaaaaaa", "  leading and trailing  ",
        "emoji 👩‍👩‍👧 flags 🇫🇷 and combining e\u0301"]


def reference(texts, vocab_size: int, byte_level: bool):
    """``(vocab, merges, tokenizer)`` learned by ``tokenizers``' BpeTrainer (no special tokens, no min frequency)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False) if byte_level
                               else pre_tokenizers.Whitespace())
    extra = dict(initial_alphabet=pre_tokenizers.ByteLevel.alphabet()) if byte_level else {}
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **extra))
    model = json.loads(tokenizer.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return sorted(model["vocab"], key=model["vocab"].get), merges, tokenizer


def word_counts(texts, byte_level: bool) -> Counter:
    counts = Counter()
    for text in texts:
        counts.update(bpe.byte_level_words(text) if byte_level
                      else [w for w, _ in pre_tokenizers.Whitespace().pre_tokenize_str(text)])
    return counts


@pytest.fixture(scope="module")
def lee():
    return list(corpus.lee_documents())


@pytest.mark.parametrize("byte_level", [False, True], ids=["whitespace", "byte level"])
@pytest.mark.parametrize("vocab_size", [300, 1000])
def test_merges_and_vocabulary_equal_tokenizers_bpe_trainer(lee, byte_level, vocab_size):
    texts = lee + HARD
    vocab, merges, _ = reference(texts, vocab_size, byte_level)
    ours = bpe.train_bpe(word_counts(texts, byte_level), vocab_size,
                         bpe.byte_alphabet().values() if byte_level else ())
    assert ours[1] == merges
    assert ours[0] == vocab and len(vocab) == vocab_size


def test_encodings_equal_tokenizers_bpe_model_on_hard_and_random_text(lee):
    vocab, merges, theirs = reference(lee, 1000, byte_level=True)
    ours = bpe.BPETokenizer(vocab, merges)
    rng = random.Random(0)
    randoms = ["".join(chr(rng.choice([rng.randrange(32, 0x250), rng.randrange(0x250, 0xD800),
                                       rng.randrange(0xE000, 0x110000)])) for _ in range(40)) for _ in range(50)]
    for text in HARD + lee[:40] + randoms:
        assert ours.tokenize(text) == theirs.encode(text).tokens, text
        assert ours.encode(text) == theirs.encode(text).ids, text


def test_byte_level_gives_back_any_text(lee):
    vocab, merges = bpe.train_bpe(word_counts(lee[:20], True), 400, bpe.byte_alphabet().values())
    tokenizer = bpe.BPETokenizer(vocab, merges)
    rng = random.Random(1)
    for _ in range(300):  # any Unicode scalar value: every plane, but no lone surrogates (not text)
        text = "".join(chr(rng.choice([rng.randrange(0, 0xD800), rng.randrange(0xE000, 0x110000)]))
                       for _ in range(rng.randrange(0, 30)))
        assert tokenizer.decode(tokenizer.encode(text)) == text
    alphabet = bpe.byte_alphabet()
    assert len(set(alphabet.values())) == 256 and all(s.isprintable() and not s.isspace() for s in alphabet.values())


@pytest.mark.parametrize("seed", range(6))
def test_the_incremental_trainer_equals_the_plain_one_that_recounts_every_pair(seed):
    rng = random.Random(seed)
    table = {"".join(rng.choice("aabbc") for _ in range(rng.randrange(1, 9))): rng.randrange(1, 6)
             for _ in range(40)}
    assert bpe.train_bpe(table, 40) == bpe.train_bpe_plain(table, 40)
    assert bpe.train_bpe(table, 12, "xa") == bpe.train_bpe_plain(table, 12, "xa")  # an alphabet, and early stops


def test_the_plain_trainer_runs_the_pair_function_it_is_given():
    calls = []

    def last_pair_of_the_first_word(words, counts):  # another rule: the plain trainer must follow it
        calls.append(len(words))
        return None if len(words[0]) < 2 else tuple(words[0][-2:])

    vocab, merges = bpe.train_bpe_plain({"abcd": 1, "dd": 9}, 10, pair_fn=last_pair_of_the_first_word)
    assert merges == [("c", "d"), ("b", "cd"), ("a", "bcd")] and vocab == list("abcd") + ["cd", "bcd", "abcd"]
    assert calls == [2, 2, 2, 2]  # called before each merge, and once more to learn that nothing is left


def _as_ids(table):
    """``(vocab, words, counts)``: the words of ``table`` as lists of ids of its sorted alphabet."""
    vocab = sorted(set("".join(table)))
    return vocab, [[vocab.index(c) for c in word] for word in table], list(table.values())


def test_most_frequent_pair_by_hand():
    vocab, words, counts = _as_ids({"low": 5, "lower": 2, "newest": 6, "widest": 3})
    assert bpe.most_frequent_pair(words, counts) == (vocab.index("e"), vocab.index("s"))  # (e, s) and (s, t): 9
    assert bpe.most_frequent_pair([[0, 0, 0], [1, 2]], [1, 1]) == (0, 0)  # "aaa" holds (a, a) twice
    assert bpe.most_frequent_pair([[0, 0, 0], [1, 2]], [1, 3]) == (1, 2)  # counts weigh the pairs
    assert bpe.most_frequent_pair([[0, 0, 0], [1, 2]], [1, 2]) == (0, 0)  # a tie: the smaller pair
    assert bpe.most_frequent_pair([[3, 4], [2, 9]], [1, 1]) == (2, 9)  # by left id, then right id
    assert bpe.most_frequent_pair([(5, 1), (2,), (1,), (2, 0)], [1, 1, 1, 1]) == (2, 0)  # (1, 2) crosses words only
    assert bpe.most_frequent_pair([[7], [3], []], [4, 1, 2]) is None
    words, counts = [[1, 2, 3], [3, 2]], [2, 1]
    assert bpe.most_frequent_pair(words, counts) == (1, 2) and words == [[1, 2, 3], [3, 2]] and counts == [2, 1]


@pytest.mark.parametrize("seed", range(4))
def test_most_frequent_pair_is_the_first_merge_of_train_bpe(seed):
    rng = random.Random(seed)
    table = {"".join(rng.choice("abcde") for _ in range(rng.randrange(1, 7))): rng.randrange(1, 4) for _ in range(30)}
    vocab, words, counts = _as_ids(table)
    left, right = bpe.most_frequent_pair(words, counts)
    assert [(vocab[left], vocab[right])] == bpe.train_bpe(table, len(vocab) + 1)[1]


def test_apply_merges_by_hand():
    ranks = {("e", "s"): 0, ("es", "t"): 1, ("l", "o"): 2, ("lo", "w"): 3}
    word = list("lowest")
    assert bpe.apply_merges(word, ranks) == ["low", "est"] and word == list("lowest")
    # lowest rank first, not leftmost first: (b, c) before (a, b), and then (a, bc) is no merge
    assert bpe.apply_merges(list("abc"), {("a", "b"): 1, ("b", "c"): 0}) == ["a", "bc"]
    # the leftmost learned pair (b, a) is not the lowest rank: a b first, then b ab
    assert bpe.apply_merges(list("bab"), {("a", "b"): 0, ("b", "ab"): 1, ("b", "a"): 2}) == ["bab"]
    # a merge creates a pair of lower rank, which applies next: one pass per rank is not enough
    assert bpe.apply_merges(list("abc"), {("a", "bc"): 0, ("b", "c"): 1}) == ["abc"]
    assert bpe.apply_merges(list("aaaa"), {("a", "a"): 0}) == ["aa", "aa"]  # leftmost first: not a, aa, a
    assert bpe.apply_merges(list("aaa"), {("a", "a"): 0, ("aa", "a"): 1}) == ["aaa"]
    assert bpe.apply_merges(["x"], {("x", "x"): 0}) == ["x"] and bpe.apply_merges([], {}) == []
    word = list("abc")
    same = bpe.apply_merges(word, {})
    assert same == word and same is not word  # a new list


def test_the_tokenizer_applies_the_merges_with_its_merge_fn():
    vocab, merges = bpe.train_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 14)
    seen = []

    def characters(symbols, ranks):  # no merge at all
        seen.append("".join(symbols))
        return list(symbols)

    tokenizer = bpe.BPETokenizer(vocab, merges, byte_level=False, merge_fn=characters)
    assert tokenizer.tokenize("lowest low") == list("lowest") + list("low") and seen == ["lowest", "low"]


def test_a_hand_worked_table():
    """low x5, lower x2, newest x6, widest x3 (Sennrich et al.'s example, without an end-of-word mark). Pair counts:
    e s 9, s t 9, w e 8, l o 7, o w 7, ...; e s and s t tie, and (e, s) has the smaller ids (d e i l n o r s t w),
    so "es" comes first; then es t (9); then l o and o w tie at 7: "lo", then lo w (7)."""
    vocab, merges = bpe.train_bpe({"low": 5, "lower": 2, "newest": 6, "widest": 3}, 14)
    assert vocab == list("deilnorstw") + ["es", "est", "lo", "low"]
    assert merges == [("e", "s"), ("es", "t"), ("l", "o"), ("lo", "w")]
    tokenizer = bpe.BPETokenizer(vocab, merges, byte_level=False)
    assert tokenizer.tokenize("lowest newer") == ["low", "est", "n", "e", "w", "e", "r"]


@pytest.mark.parametrize("table, size, error", [({"": 1}, 10, ValueError), ({"ab": 0}, 10, ValueError),
                                                ({"ab": 1}, 0, ValueError), ({"ab": 1.5}, 10, ValueError)])
def test_bad_tables_get_a_clear_error(table, size, error):
    with pytest.raises(error):
        bpe.train_bpe(table, size)


def test_a_character_outside_a_plain_vocabulary_is_named():
    vocab, merges = bpe.train_bpe({"abc": 3}, 5)
    with pytest.raises(KeyError, match="'z' is not in the vocabulary"):
        bpe.BPETokenizer(vocab, merges, byte_level=False).encode("abz")
