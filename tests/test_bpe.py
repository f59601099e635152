"""Byte-pair encoding (course_lib.gpt.bpe) against the ``tokenizers`` library's BPE trainer and model.

From the same words (the course's text cut by ``tokenizers``' own Whitespace pre-tokenizer, or by GPT-2's
byte-level rule), ``train_bpe`` must learn the very merges and vocabulary of ``BpeTrainer``, and
``BPETokenizer`` must cut text into the very tokens of its BPE model, on the Lee articles and on hard text
(Unicode, emoji, runs of white space, numbers, merges whose result is already a symbol). The incremental
trainer must equal a trainer that recounts every pair after every merge, and the byte level must give
back any text exactly.
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


def recounting_trainer(word_counts, vocab_size):
    """BPE the slow way: every pair counted again after every merge (the same tie rule)."""
    vocab = sorted(set("".join(word_counts)))
    ids = {s: i for i, s in enumerate(vocab)}
    words = {tuple(ids[c] for c in w): n for w, n in word_counts.items()}
    merges = []
    while len(vocab) < vocab_size:
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        pair = min(pairs, key=lambda p: (-pairs[p], p))
        merged = vocab[pair[0]] + vocab[pair[1]]
        if merged not in ids:
            ids[merged] = len(vocab)
            vocab.append(merged)
        words = {tuple(bpe._merge_word(list(w), pair, ids[merged])): n for w, n in words.items()}
        merges.append((vocab[pair[0]], vocab[pair[1]]))
    return vocab, merges


@pytest.mark.parametrize("seed", range(6))
def test_the_incremental_trainer_equals_recounting_every_pair(seed):
    rng = random.Random(seed)
    table = {"".join(rng.choice("aabbc") for _ in range(rng.randrange(1, 9))): rng.randrange(1, 6)
             for _ in range(40)}
    assert bpe.train_bpe(table, 40) == recounting_trainer(table, 40)


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
