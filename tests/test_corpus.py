"""course_lib.text.corpus: tokenizing, the shipped English text, vocabularies."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from course_lib.text import corpus
from course_lib.text.tokenizers import tokenize
from course_lib.text.vocabulary import Vocabulary

# ---------------------------------------------------------------- tokenize


@pytest.mark.parametrize("text, tokens", [
    ("The cat's 2 hats!", ["the", "cat's", "hats"]),
    ("HELLO World", ["hello", "world"]),
    ("Don't STOP, won't stop.", ["don't", "stop", "won't", "stop"]),
    ("'quoted' words'", ["quoted", "words"]),      # apostrophes only inside a word
    ("abc123def 2024 3.14", ["abc", "def"]),     # digits separate tokens and are dropped
    ("e-mail, (a) [b] {c}; d/e", ["e", "mail", "a", "b", "c", "d", "e"]),
    ("line\nbreak\ttab", ["line", "break", "tab"]),
    ("... !!! 42", []),
    ("", []),
])
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_tokenize_tokens_are_lower_case_letters_with_inner_apostrophe():
    text = corpus.lee_documents()[0] + " " + corpus.wikipedia_articles()[0][1][:5000]
    tokens = tokenize(text)
    assert len(tokens) > 500
    for token in tokens:
        assert token == token.lower(), token
        assert token.count("'") <= 1 and not token.startswith("'") and not token.endswith("'"), token
        assert token.replace("'", "").isalpha(), token  # no digits, punctuation or spaces


def test_tokenize_keeps_non_ascii_letters():
    assert tokenize("Gödel visited Zürich café") == ["gödel", "visited", "zürich", "café"]


@pytest.mark.parametrize("not_text", [None, b"bytes", 3, ["a", "list"]])
def test_tokenize_rejects_non_strings(not_text):
    with pytest.raises(TypeError, match="str"):
        tokenize(not_text)


# ---------------------------------------------------------------- shipped text

def test_lee_documents():
    docs = corpus.lee_documents()
    assert len(docs) == 300
    assert all(isinstance(d, str) and d and d == d.strip() for d in docs)
    n_tokens = sum(len(tokenize(d)) for d in docs)
    assert 50_000 < n_tokens < 70_000  # "about 60 000 words"
    assert corpus.lee_documents() is docs  # cached


def test_wikipedia_articles():
    articles = corpus.wikipedia_articles()
    assert 100 <= len(articles) <= 112  # 106 in gensim 4.x
    assert articles[0][0] == "Anarchism"
    assert all(isinstance(title, str) and title and isinstance(text, str) and text.strip()
               for title, text in articles)
    titles = [title for title, _ in articles]
    assert len(set(titles)) == len(titles)
    texts = [text for _, text in articles]
    # Links, templates and references are gone; gensim's filter_wiki keeps bold/italic quotes
    # and "== headings ==", which tokenize() drops anyway.
    for markup in ("[[", "]]", "{{", "}}", "<ref", "</ref>"):
        fraction = sum(markup in text for text in texts) / len(texts)
        assert fraction == 0, f"{fraction:.0%} of the articles still contain wiki markup {markup!r}"
    assert not any(text.lstrip().lower().startswith("#redirect") for text in texts)
    assert "anarchism" in texts[0][:2000].lower()


def test_english_documents():
    docs = corpus.english_documents()
    n_lee, n_wiki = len(corpus.lee_documents()), len(corpus.wikipedia_articles())
    assert len(docs) == n_lee + n_wiki
    assert docs[0] == tokenize(corpus.lee_documents()[0])
    assert docs[n_lee] == tokenize(corpus.wikipedia_articles()[0][1])
    total = sum(len(doc) for doc in docs)
    assert 400_000 <= total <= 700_000
    assert all(isinstance(doc, list) for doc in docs)


# ---------------------------------------------------------------- Vocabulary

DOCS = [["b", "a", "c", "a"], ["b", "d", "e"], [], ["e", "f", "a", "b"]]
# counts: a 3, b 3, e 2, c 1, d 1, f 1


def test_vocabulary_sorted_by_count_ties_alphabetical():
    vocab = Vocabulary.build(DOCS)
    assert vocab.words == ["a", "b", "e", "c", "d", "f"]
    assert vocab.counts.dtype == np.int64
    np.testing.assert_array_equal(vocab.counts, [3, 3, 2, 1, 1, 1])
    assert vocab.index == {w: i for i, w in enumerate(vocab.words)}
    assert len(vocab) == 6 and "e" in vocab and "z" not in vocab
    assert vocab["e"] == 2


def test_vocabulary_is_deterministic_under_reordering():
    reference = Vocabulary.build(DOCS)
    rng = random.Random(0)
    for _ in range(5):
        docs = [rng.sample(doc, len(doc)) for doc in DOCS]
        rng.shuffle(docs)
        shuffled = Vocabulary.build(iter(docs))  # any iterable, e.g. a generator
        assert shuffled.words == reference.words
        np.testing.assert_array_equal(shuffled.counts, reference.counts)


def test_vocabulary_of_real_text_matches_counter():
    docs = [tokenize(d) for d in corpus.lee_documents()]
    vocab = Vocabulary.build(docs, min_count=3)
    counter = Counter(t for doc in docs for t in doc)
    expected = sorted((w for w, c in counter.items() if c >= 3), key=lambda w: (-counter[w], w))
    assert vocab.words == expected
    np.testing.assert_array_equal(vocab.counts, [counter[w] for w in expected])
    assert vocab.words[0] == "the"


@pytest.mark.parametrize("min_count, max_size, words", [
    (1, None, ["a", "b", "e", "c", "d", "f"]),
    (2, None, ["a", "b", "e"]),
    (3, None, ["a", "b"]),
    (4, None, []),
    (1, 4, ["a", "b", "e", "c"]),
    (1, 1, ["a"]),
    (2, 10, ["a", "b", "e"]),
    (1, 100, ["a", "b", "e", "c", "d", "f"]),
])
def test_vocabulary_min_count_and_max_size(min_count, max_size, words):
    vocab = Vocabulary.build(DOCS, min_count=min_count, max_size=max_size)
    assert vocab.words == words
    assert len(vocab.counts) == len(words)


@pytest.mark.parametrize("kwargs, name", [
    ({"min_count": 0}, "min_count"), ({"min_count": 1.5}, "min_count"),
    ({"max_size": 0}, "max_size"), ({"max_size": -2}, "max_size"),
])
def test_vocabulary_rejects_bad_limits(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Vocabulary.build(DOCS, **kwargs)


def test_encode_drops_unknown_tokens():
    vocab = Vocabulary.build(DOCS, min_count=2)  # a, b, e
    ids = vocab.encode(["e", "zebra", "a", "c", "b", "a"])
    assert ids.dtype == np.int64
    np.testing.assert_array_equal(ids, [2, 0, 1, 0])
    empty = vocab.encode([])
    assert empty.dtype == np.int64 and empty.shape == (0,)


def test_decode_round_trip():
    vocab = Vocabulary.build(DOCS)
    tokens = ["f", "a", "unknown", "c", "c", "e"]
    assert vocab.decode(vocab.encode(tokens)) == [t for t in tokens if t in vocab]
    ids = np.array([5, 0, 3, 3])
    np.testing.assert_array_equal(vocab.encode(vocab.decode(ids)), ids)
    assert vocab.decode([]) == []


def test_decode_rejects_out_of_range_ids():
    vocab = Vocabulary.build(DOCS)
    with pytest.raises(ValueError, match="6"):
        vocab.decode([0, 6])


def test_unknown_word_key_error_message():
    vocab = Vocabulary.build(DOCS)
    with pytest.raises(KeyError, match=r"'zebra' is not in the vocabulary of 6 words"):
        vocab["zebra"]


def test_strings_instead_of_tokens_raise_type_error():
    with pytest.raises(TypeError, match="tokenize"):
        Vocabulary.build(["the cat sat", "on the mat"])
    with pytest.raises(TypeError, match="tokenize"):
        Vocabulary.build([["the", "cat"], "on the mat"])
    vocab = Vocabulary.build(DOCS)
    with pytest.raises(TypeError, match="tokenize"):
        vocab.encode("a b")


def test_vocabulary_constructor_checks():
    with pytest.raises(ValueError, match="repeat"):
        Vocabulary(["a", "b", "a"], np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="counts"):
        Vocabulary(["a", "b"], np.array([1, 1, 1]))


def test_wikipedia_gallery_file_names_are_dropped():
    texts = [text for _title, text in corpus.wikipedia_articles()]
    assert not any("File:Kabylie-neige.jpg" in t for t in texts)
    assert any("The Djurdjura Range in snow" in t for t in texts)  # the caption stays
