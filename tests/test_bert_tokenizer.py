"""course_lib.bert's WordPiece tokenizer and BERT inputs against the ``tokenizers`` library and ``transformers``.

The reference is the model's own ``tokenizer.json`` (all-MiniLM-L6-v2, BERT's uncased
vocabulary) read by the ``tokenizers`` library (Rust: ``BertNormalizer``,
``BertPreTokenizer``, ``WordPiece``), without padding, truncation or special tokens;
``transformers.AutoTokenizer`` (in transformers 5 the same Rust backend) for
``[CLS]``/``[SEP]``, segments, padding and truncation; and ``BertTokenizerLegacy`` (the
pure-Python tokenizer) on the hard cases.

Compared, tokens and ids: every Lee news article (one line each), every review
sentence of ``movie_review_sentences``, every paragraph (line) of the Wikipedia
articles up to a budget of 1,000,000 characters (a third; the rest passes too, but
costs 3 s); a list of hard cases (accents, CJK, punctuation of every
kind, control and white-space characters, words of 100 and 101 characters, emoji,
other scripts, digits glued to letters, ...); and every character assigned in Unicode
3.2 (the whole Basic Multilingual Plane, a sample of the other planes) between two
letters. Known differences, each tested on its own:

* the Rust library's Unicode tables are older than Python's: characters assigned
  later count for it neither as punctuation nor as accents, and four characters
  changed category since Unicode 3.2; so the sweep uses Unicode 3.2's characters and
  leaves those four out;
* the Rust library treats U+2B820..U+2B91F (CJK Extension E) as ordinary letters
  (its range starts at U+2B920); course_lib follows Google's BERT (each is a word);
* ``BertTokenizerLegacy`` lower-cases with ``str.lower``, which writes a final capital
  sigma as ``ς``; the model's tokenizer (and course_lib) lower-cases character by
  character (``σ``).

``basic_tokenize`` (which applies its per-character rules with ``str.translate`` tables
and splits once at the end) equals the five steps written one character at a time on
every assigned character of Python's tables (the BMP, a sample of the other planes),
cased and uncased. Then ``wordpiece_word`` on hand-made vocabularies (longest match first,
``##`` only on continuations, ``[UNK]`` for the whole word, ``max_chars``), ``read_vocab``,
the tokenizer's attributes and ``decode``; the tokenizer's memory of cut words (each
distinct word cut once, bounded by ``cache_size``, the same tokens as ``wordpiece_word``
on every word of the Lee articles and review sentences, with and without it);
``truncate_pair``, ``encode`` / ``encode_batch`` against ``AutoTokenizer.__call__``
(pairs, padding, ``truncation="longest_first"``, ``max_length``) and the argument errors.
"""

from __future__ import annotations

import unicodedata

import pytest
import torch

from course_lib.bert.inputs import BertBatch, encode, encode_batch, truncate_pair
from course_lib.bert.pretrained import minilm_directory
from course_lib.bert.wordpiece import WordPieceTokenizer, basic_tokenize, read_vocab, strip_accents, wordpiece_word
from course_lib.text.corpus import lee_documents, wikipedia_articles
from course_lib.text.movie_reviews import movie_review_sentences

tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


@pytest.fixture(scope="module")
def ours() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(minilm_directory() / "vocab.txt")


@pytest.fixture(scope="module")
def rust():
    """The model's ``tokenizer.json``; it pads to 128 unless told not to."""
    tokenizer = tokenizers.Tokenizer.from_file(str(minilm_directory() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@pytest.fixture(scope="module")
def hf():
    return transformers.AutoTokenizer.from_pretrained(str(minilm_directory()))


def assert_same_as_rust(ours: WordPieceTokenizer, rust, texts, what: str):
    """Tokens and ids of every text equal the Rust tokenizer's (without special tokens)."""
    texts = list(texts)
    theirs = rust.encode_batch(texts, add_special_tokens=False)
    for number, (text, expected) in enumerate(zip(texts, theirs)):
        tokens = ours.tokenize(text)
        if tokens != expected.tokens:
            first = next((i for i, (a, b) in enumerate(zip(tokens, expected.tokens)) if a != b),
                         min(len(tokens), len(expected.tokens)))
            pytest.fail(f"{what} {number} ({text[:60]!r}...): tokens differ from token {first}: "
                        f"ours {tokens[max(first - 3, 0):first + 4]}, tokenizers "
                        f"{expected.tokens[max(first - 3, 0):first + 4]}")
        assert ours.convert_tokens_to_ids(tokens) == expected.ids, f"{what} {number}: ids differ"


# ---------------------------------------------------------------- basic tokenization by hand

@pytest.mark.parametrize("text, words", [
    ("Don't stop!", ["don", "'", "t", "stop", "!"]),
    ("Café naïve ÅNGSTRÖM", ["cafe", "naive", "angstrom"]),
    ("U.S.A. $5.00", ["u", ".", "s", ".", "a", ".", "$", "5", ".", "00"]),
    ("a\tb\nc\u00a0d\u3000e", ["a", "b", "c", "d", "e"]),
    ("x\x00y\ufffdz\x07w", ["xyzw"]),
    ("北京abc大学", ["北", "京", "abc", "大", "学"]),
    ("e\u0301te\u0301", ["ete"]),
    ("«Ja» — sí…", ["«", "ja", "»", "—", "si", "…"]),
    ("ΟΔΟΣ", ["οδοσ"]),
    ("", []),
    ("   \t\n ", []),
], ids=lambda v: repr(v)[:24] if isinstance(v, str) else None)
def test_basic_tokenize_examples(text, words):
    assert basic_tokenize(text) == words


def test_basic_tokenize_cased_keeps_case_and_accents():
    assert basic_tokenize("Café, DON'T", lowercase=False) == ["Café", ",", "DON", "'", "T"]
    assert strip_accents("Ångström façade Dvořák") == "Angstrom facade Dvorak"
    with pytest.raises(TypeError, match="text must be a str"):
        basic_tokenize(b"bytes")


def _basic_tokenize_step_by_step(text: str, lowercase: bool = True) -> list[str]:
    """The five steps of basic tokenization as the chapter lists them, one character at a time (no tables)."""
    cleaned = ""
    for char in text:  # 1. white space -> a space, controls dropped
        if char in "\t\n\r" or unicodedata.category(char) == "Zs":
            cleaned += " "
        elif not (ord(char) in (0, 0xFFFD) or unicodedata.category(char).startswith("C")):
            cleaned += char
    cjk = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
    spaced = "".join(f" {c} " if any(low <= ord(c) <= high for low, high in cjk) else c for c in cleaned)  # 2.
    words = []
    for word in spaced.split():  # 3.
        if lowercase:  # 4.
            word = "".join(c.lower() for c in word)
            word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
        piece = ""
        for char in word:  # 5.
            code = ord(char)
            if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126 \
                    or unicodedata.category(char).startswith("P"):
                words += [piece, char] if piece else [char]
                piece = ""
            else:
                piece += char
        if piece:
            words.append(piece)
    return words


def test_basic_tokenize_equals_the_steps_one_character_at_a_time():
    """Every assigned code point of Python's Unicode tables in the Basic Multilingual Plane (a sample of the
    other planes), between letters, next to marks and punctuation, cased and uncased, and texts that mix
    capital sigmas, marks and white space."""
    codes = [c for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs")
             and (c < 0x10000 or c % 61 == 0)]
    assert len(codes) > 60_000
    texts = [" ".join(f"a{chr(c)}b" for c in codes[i:i + 500]) for i in range(0, len(codes), 500)]
    texts += ["".join(chr(c) + "\u0301." for c in codes[i:i + 500]) for i in range(0, len(codes), 500)]
    texts += ["ΟΔΟΣ ΣΑΣ Σ, σΣ.Σ", "İSTANBUL \u1fef`\u037e", "e\u0301\u0301 \u0301 a\u2028b\u2029c\x1cd\x85e",
              "x\u3000y\u00a0z\u2000w", "东京\uf900\U0002f800", *HARD_CASES]
    for lowercase in (True, False):
        for text in texts:
            assert basic_tokenize(text, lowercase) == _basic_tokenize_step_by_step(text, lowercase), \
                (lowercase, text[:40])


def test_the_character_tables_remember_a_bounded_number_of_characters():
    from course_lib.bert.wordpiece import _CharacterTable

    asked = []
    table = _CharacterTable(lambda char: asked.append(char) or char.upper(), size=3)
    assert "abcdefab".translate(table) == "ABCDEFAB" and sorted(table) == [97, 98, 99]
    assert "defabc".translate(table) == "DEFABC" and asked == list("abcdef") + list("def"), \
        "remembered characters are not asked again; the others are, every time"


# ---------------------------------------------------------------- wordpiece_word on hand-made vocabularies

TOY = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "una", "##ff", "##aff",
                                   "##able", "##a", "##b", "a", "b", "ab", "##ffable", "x"])}


@pytest.mark.parametrize("word, pieces", [
    ("unaffable", ["una", "##ffable"]),      # longest first: "una" beats "un", then "##ffable" beats "##ff"
    ("un", ["un"]),
    ("ab", ["ab"]),                         # the whole word, not "a" + "##b"
    ("aba", ["ab", "##a"]),
    ("ba", ["b", "##a"]),                   # "##" only on the continuation
    ("bx", ["[UNK]"]),                      # "##x" is not in the vocabulary: the whole word is unknown
    ("xa", ["x", "##a"]),
    ("unq", ["[UNK]"]),
    ("", []),
])
def test_wordpiece_word_longest_match_first(word, pieces):
    assert wordpiece_word(word, TOY) == pieces


def test_wordpiece_word_max_chars_and_unk_token():
    assert wordpiece_word("a" * 100, TOY) == ["a"] + ["##a"] * 99
    assert wordpiece_word("a" * 101, TOY) == ["[UNK]"]
    assert wordpiece_word("aaa", TOY, max_chars=3) == ["a", "##a", "##a"]
    assert wordpiece_word("aaaa", TOY, unk_token="<?>", max_chars=3) == ["<?>"]
    assert wordpiece_word("q", TOY, unk_token="<?>") == ["<?>"]
    with pytest.raises(TypeError, match="word must be a str"):
        wordpiece_word(["a"], TOY)


def test_read_vocab_and_the_tokenizer_attributes(tmp_path, ours, rust):
    path = tmp_path / "vocab.txt"
    path.write_bytes("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n##s\r\n".encode())
    assert read_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, "##s": 6}
    small = WordPieceTokenizer.from_file(path)
    assert len(small) == 7 and small.tokens[6] == "##s" and small.special_ids == (0, 1, 2, 3, 4)
    assert small.tokenize("Hellos, hello!") == ["hello", "##s", "[UNK]", "hello", "[UNK]"]
    path.write_text("[PAD]\na\nb\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'a' on line 4 already on line 2"):
        read_vocab(path)
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        WordPieceTokenizer({"[PAD]": 0, "[UNK]": 1})

    vocab = rust.get_vocab()
    assert ours.vocab == vocab and len(ours) == rust.get_vocab_size() == 30522
    assert all(ours.tokens[i] == t for t, i in vocab.items())
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == \
        tuple(vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")) == ours.special_ids
    assert ours.convert_tokens_to_ids(["the", "not-a-token"]) == [vocab["the"], ours.unk_id]


def test_decode_joins_pieces_and_skips_special_tokens(ours, hf):
    text = "The unaffable Café's owner said: ok."
    ids, _ = encode(ours, text)
    assert ours.decode(ids) == "the unaffable cafe ' s owner said : ok ."
    assert ours.decode(ids, skip_special=False).startswith("[CLS] the") and ours.decode(ids, skip_special=False) \
        .endswith(". [SEP]")
    assert ours.decode(ids).replace(" ", "") == hf.decode(ids, skip_special_tokens=True).replace(" ", "")


def test_a_plugged_in_wordpiece_function_is_used(ours):
    calls = []

    def recording(word, vocab, unk, max_chars):
        calls.append((word, unk, max_chars))
        return wordpiece_word(word, vocab, unk, max_chars)

    plugged = WordPieceTokenizer(ours.vocab, max_chars=7, wordpiece_fn=recording)
    assert plugged.tokenize("Hello, world") == ["hello", ",", "world"]
    assert calls == [("hello", "[UNK]", 7), (",", "[UNK]", 7), ("world", "[UNK]", 7)]
    assert plugged.tokenize("extraordinary") == ["[UNK]"]  # 13 characters > max_chars


def test_the_tokenizer_cuts_each_distinct_word_once_and_gives_the_same_tokens(ours):
    calls = []

    def recording(word, vocab, unk, max_chars):
        calls.append(word)
        return wordpiece_word(word, vocab, unk, max_chars)

    text = "The cat saw the other cat; the cat ran."
    remembering = WordPieceTokenizer(ours.vocab, wordpiece_fn=recording)
    expected = [piece for word in basic_tokenize(text) for piece in wordpiece_word(word, ours.vocab)]
    assert remembering.tokenize(text) == expected
    assert calls == ["the", "cat", "saw", "other", ";", "ran", "."], "each distinct word cut once"
    tokens = remembering.tokenize(text)
    assert tokens == expected and len(calls) == 7, "a second text of known words cuts nothing"
    tokens.append("mutated")
    assert remembering.tokenize("the cat") == ["the", "cat"], "the returned list is the caller's own"

    calls.clear()
    forgetting = WordPieceTokenizer(ours.vocab, wordpiece_fn=recording, cache_size=0)
    assert forgetting.tokenize(text) == expected and len(calls) == len(basic_tokenize(text))

    calls.clear()
    small = WordPieceTokenizer(ours.vocab, wordpiece_fn=recording, cache_size=2)
    reviews = movie_review_sentences().texts[:200]
    assert [small.tokenize(t) for t in reviews] == [ours.tokenize(t) for t in reviews]
    assert len(small._pieces) <= 2 and len(calls) > len({w for t in reviews for w in basic_tokenize(t)})
    for wrong in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="cache_size must be a non-negative integer"):
            WordPieceTokenizer(ours.vocab, cache_size=wrong)


def test_the_tokenizer_equals_wordpiece_word_on_every_word_with_and_without_its_memory(ours):
    """Words of the Lee articles and the review sentences, and words that are [UNK] or too long."""
    texts = list(lee_documents()) + list(movie_review_sentences().texts) + HARD_CASES
    words = sorted({w for t in texts for w in basic_tokenize(t)})
    assert len(words) > 15_000 and any(wordpiece_word(w, ours.vocab) == ["[UNK]"] for w in words)
    fresh = WordPieceTokenizer(ours.vocab, cache_size=0)
    for word in words:
        expected = wordpiece_word(word, ours.vocab)
        assert ours.tokenize(word) == fresh.tokenize(word) == expected, word
    assert ours.tokenize(" ".join(words)) == [p for w in words for p in wordpiece_word(w, ours.vocab)]


# ---------------------------------------------------------------- against the model's tokenizer.json

WIKIPEDIA_BUDGET = 1_000_000  # characters: the first third of the Wikipedia text; all of it takes 3 s more


def test_every_text_of_the_course_corpus_tokenizes_as_the_tokenizers_library(ours, rust):
    """Every one of the 300 news articles and 4,866 review sentences, and every line of the
    Wikipedia articles, in order, until ``WIKIPEDIA_BUDGET`` characters (about 450,000
    WordPieces in all; the whole of Wikipedia passes too, in 3 s more)."""
    assert_same_as_rust(ours, rust, lee_documents(), "Lee article")
    assert_same_as_rust(ours, rust, movie_review_sentences().texts, "review sentence")
    lines, size = [], 0
    for line in (line for _, text in wikipedia_articles() for line in text.split("\n") if line.strip()):
        if size + len(line) > WIKIPEDIA_BUDGET:
            break
        lines.append(line)
        size += len(line)
    assert len(lines) > 3_000 and size > 0.99 * WIKIPEDIA_BUDGET
    assert_same_as_rust(ours, rust, lines, "Wikipedia line")


HARD_CASES = [
    "Café naïve Ångström Zürich façade Dvořák résumé coöperate",
    "CAFÉ ÅNGSTRÖM ZÜRICH Ελληνικά ΟΔΟΣ ΑΧΙΛΛΕΥΣ i.e. Σ σ ς",
    "東京タワー is in Tokyo; 北京大学 and 서울 and ｶﾀｶﾅ mixed with Latin漢字text",
    "don't U.S.A. -- ... $5.00 #hashtag @user 50% a&b a_b (x) [y] {z} <w> ~ ^ ` | \\ / * + = ; :",
    "“quoted” ‘single’ «guillemets» — – ‐ ‑ ‒ ― … ‹ › „low“ ¿qué? ¡sí! ·•",
    "control\x00char\x01s\x07\x1b[0m \ufffd replaced \u200b zero\u200dwidth \ufeffbom \u00adsoft",
    "tabs\tand\nnew\r\nlines\u00a0non-breaking\u2003em\u3000ideographic\u2028line\u2029para\x0bvt\x0cff",
    "a" * 100,
    "b" * 101,
    "x" * 100 + " " + "y" * 101 + " " + "é" * 100 + " " + "é" * 101,
    "antidisestablishmentarianism supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "hyperpolyunderoverdisestablishmentarianismesquenessfulnesslessly " * 3,
    "zxqv qqqqq ʘʘʘ ꙮ 𓀀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ｆｕｌｌｗｉｄｔｈ",
    "emoji 😀👍🏽🇫🇷👨‍👩‍👧 ❤️ ☃ ✓ and a heart ♥",
    "",
    "     ",
    "\t\n \u00a0",
    "e\u0301 n\u0303 a\u0308\u0304 combining\u0327 marks\u20dd",
    "Ελληνικά: Ἀτλαντὶς θάλασσα; Русский текст: Ёжик в тумане; العربية: مرحبا بالعالم; עברית; हिन्दी",
    "3rd 1990s COVID19 4x4 mp3 B2B 10km 2.5GHz v1.2.3 x86_64 1,000,000 -5 +3 1e-12",
    "İstanbul ǅemal ŉ ß ẞ Ω K Å ﬁ ﬂ ǈ ῼ",
]


@pytest.mark.parametrize("text", HARD_CASES, ids=lambda t: repr(t[:20]))
def test_hard_cases_tokenize_as_the_tokenizers_library(text, ours, rust, hf):
    assert_same_as_rust(ours, rust, [text], "hard case")
    assert ours.tokenize(text) == hf.tokenize(text)


def test_hard_cases_tokenize_as_the_pure_python_tokenizer_except_the_final_sigma(ours):
    legacy = transformers.BertTokenizerLegacy.from_pretrained(str(minilm_directory()))
    for text in HARD_CASES:
        if "Σ" not in text:
            assert ours.tokenize(text) == legacy.tokenize(text), repr(text[:30])
    # str.lower writes a capital sigma at the end of a word as "ς"; the model's tokenizer.json (and we) as "σ".
    assert legacy.tokenize("ΟΔΟΣ ΣΑΣ") == ["ο", "##δ", "##ος", "σ", "##α", "##ς"]
    assert ours.tokenize("ΟΔΟΣ ΣΑΣ") == ["ο", "##δ", "##ο", "##σ", "σ", "##α", "##σ"]
    assert ours.tokenize("οδος") == legacy.tokenize("οδος") == ["ο", "##δ", "##ος"]  # a written "ς" stays


def test_every_character_of_unicode_3_2_tokenizes_as_the_tokenizers_library(ours, rust):
    """Each character between two letters, ``a?b``: punctuation splits, controls vanish, accents go."""
    old = unicodedata.ucd_3_2_0
    changed = {0x166D, 0x1734, 0x1885, 0x1886}  # their category changed after Unicode 3.2
    codes = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and old.category(chr(c)) != "Cn"
             and c not in changed and (c < 0x10000 or c % 61 == 0)]
    assert len(codes) > 55_000
    texts = [" ".join(f"a{chr(c)}b" for c in codes[i:i + 200]) for i in range(0, len(codes), 200)]
    assert_same_as_rust(ours, rust, texts, "block of 200 characters")


def test_the_known_differences_from_the_tokenizers_library(ours, rust):
    # CJK Extension E: a word per character in Google's BERT and here; the Rust library's range starts at U+2B920.
    for code in (0x2B820, 0x2B8FF, 0x2B91F):
        assert ours.tokenize(f"a{chr(code)}b") == ["a", "[UNK]", "b"]
        assert rust.encode(f"a{chr(code)}b", add_special_tokens=False).tokens == ["[UNK]"]
    for code in (0x2B740, 0x2B920, 0x2CEA1):  # the neighbouring ranges agree
        assert ours.tokenize(f"a{chr(code)}b") == rust.encode(f"a{chr(code)}b", add_special_tokens=False).tokens
    # A punctuation mark newer than the Rust library's tables (U+2E4F, Unicode 11) splits words here only.
    assert ours.tokenize("a\u2e4fb") == ["a", "[UNK]", "b"]
    assert rust.encode("a\u2e4fb", add_special_tokens=False).tokens == ["[UNK]"]
    # Special tokens written in a text are words and punctuation here; the libraries match them as tokens.
    assert ours.tokenize("a [MASK] b") == ["a", "[", "mask", "]", "b"]
    assert rust.encode("a [MASK] b", add_special_tokens=False).tokens == ["a", "[MASK]", "b"]


# ---------------------------------------------------------------- inputs against transformers

def test_truncate_pair_drops_from_the_longer_list_the_second_on_a_tie():
    first, second = [1, 2, 3, 4, 5], [6, 7, 8]
    assert truncate_pair(first, second, 8) == ([1, 2, 3, 4, 5], [6, 7, 8])
    assert truncate_pair(first, second, 6) == ([1, 2, 3], [6, 7, 8])
    assert truncate_pair(first, second, 5) == ([1, 2, 3], [6, 7])
    assert truncate_pair(first, second, 4) == ([1, 2], [6, 7])
    assert truncate_pair(first, second, 0) == ([], [])
    assert truncate_pair([1, 2], [3, 4], 3) == ([1, 2], [3])
    assert first == [1, 2, 3, 4, 5] and second == [6, 7, 8], "the inputs must not be modified"


SENTENCES = ["The film is a charming, funny romp.", "Dull.", "An overlong, self-indulgent mess of a movie "
             "that never quite figures out what it wants to be, despite a fine cast.", "Café society, 1990s style!"]
PAIRS = ["Is it any good?", "A tedious, badly written and badly acted film with a plot that makes no sense at all.",
         "Yes.", "Maybe."]


def hf_batch(tokenizer, texts, pairs=None, max_length=None):
    kwargs = dict(truncation="longest_first", max_length=max_length) if max_length else {}
    out = tokenizer(list(texts), None if pairs is None else list(pairs), padding=True, return_tensors="pt",
                    return_token_type_ids=True, **kwargs)
    return out["input_ids"], out["token_type_ids"], out["attention_mask"]


def assert_inputs_match(ours, reference, texts, pairs, max_length):
    """``encode`` of each text (and pair) and ``encode_batch`` of all equal ``reference.__call__``'s."""
    for i, text in enumerate(texts):
        pair = None if pairs is None else pairs[i]
        kwargs = dict(truncation="longest_first", max_length=max_length) if max_length else {}
        expected = reference(text, pair, return_token_type_ids=True, **kwargs)
        assert encode(ours, text, pair, max_length) == (expected["input_ids"], expected["token_type_ids"]), \
            (text, pair, max_length)
    batch = encode_batch(ours, texts, pairs, max_length=max_length)
    ids, segments, mask = hf_batch(reference, texts, pairs, max_length)
    assert isinstance(batch, BertBatch)
    assert batch.ids.dtype == batch.segments.dtype == torch.int64 and batch.padding.dtype == torch.bool
    assert torch.equal(batch.ids, ids), (max_length, pairs is None)
    assert torch.equal(batch.segments, segments)
    assert torch.equal(batch.padding, mask.bool())


@pytest.mark.parametrize("max_length", [None, 512, 40, 24, 12, 7, 5, 3])
def test_encode_and_encode_batch_match_transformers(max_length, ours, hf):
    """Single texts at every ``max_length``; pairs when they fit (``None``, 512), as the model's tokenizer."""
    reviews = movie_review_sentences().texts[:40]
    assert_inputs_match(ours, hf, SENTENCES, None, max_length)
    assert_inputs_match(ours, hf, reviews, None, max_length)
    if max_length in (None, 512):
        assert_inputs_match(ours, hf, SENTENCES, PAIRS, max_length)
        assert_inputs_match(ours, hf, reviews[:20], reviews[20:], max_length)


@pytest.mark.parametrize("max_length", [40, 25, 24, 13, 12, 7, 5])
def test_truncated_pairs_match_the_pure_python_tokenizer(max_length, ours):
    """Google's BERT rule, one token at a time from the longer text (the second on a tie), as ``BertTokenizerLegacy``.

    The Rust tokenizer differs when both texts must be cut to an odd budget: it gives
    the extra token to the text that was longer (see the next test).
    """
    legacy = transformers.BertTokenizerLegacy.from_pretrained(str(minilm_directory()))
    reviews = movie_review_sentences().texts[:40]
    assert_inputs_match(ours, legacy, SENTENCES, PAIRS, max_length)
    assert_inputs_match(ours, legacy, reviews[:20], reviews[20:], max_length)


def test_truncation_of_pairs_differs_from_the_rust_tokenizer_only_at_a_tie(ours, hf):
    words = {t: ours.vocab[t] for t in "abcdefghij"}
    a, b = "a b c d", "e f g h i j"  # 4 and 6 tokens, budget 10 - 3 = 7
    assert encode(ours, a, b, max_length=10)[0] == [ours.cls_id, *(words[t] for t in "abcd"), ours.sep_id,
                                                    *(words[t] for t in "efg"), ours.sep_id]
    assert hf(a, b, truncation="longest_first", max_length=10)["input_ids"] == \
        [ours.cls_id, *(words[t] for t in "abc"), ours.sep_id, *(words[t] for t in "efgh"), ours.sep_id]
    assert encode(ours, a, b, max_length=11)[0] == hf(a, b, truncation="longest_first", max_length=11)["input_ids"]


def test_encode_layout_by_hand(ours):
    ids, segments = encode(ours, "hello world", "good bye")
    tokens = [ours.tokens[i] for i in ids]
    assert tokens == ["[CLS]", "hello", "world", "[SEP]", "good", "bye", "[SEP]"]
    assert segments == [0, 0, 0, 0, 1, 1, 1]
    assert encode(ours, "") == ([ours.cls_id, ours.sep_id], [0, 0])
    assert encode(ours, "", "") == ([ours.cls_id, ours.sep_id, ours.sep_id], [0, 0, 1])
    assert encode(ours, "a b c d", max_length=4)[0] == [ours.cls_id, ours.vocab["a"], ours.vocab["b"], ours.sep_id]
    assert encode(ours, "a b c", "d e", max_length=3) == ([ours.cls_id, ours.sep_id, ours.sep_id], [0, 0, 1])
    batch = encode_batch(ours, ["a b c", "d"], ["e", "f g h i"])
    assert batch.ids.shape == (2, 8)
    assert batch.padding.sum(dim=1).tolist() == [7, 8]
    assert batch.ids[0, 7].item() == ours.pad_id and batch.segments[0, 7].item() == 0


def test_input_errors(ours):
    with pytest.raises(ValueError, match="leaves no room for the 3 special tokens"):
        encode(ours, "a", "b", max_length=2)
    with pytest.raises(ValueError, match="leaves no room for the 2 special tokens"):
        encode(ours, "a", max_length=1)
    with pytest.raises(ValueError, match="max_length"):
        encode(ours, "a", max_length=0)
    with pytest.raises(TypeError, match="not one string"):
        encode_batch(ours, "one string")
    with pytest.raises(ValueError, match="texts is empty"):
        encode_batch(ours, [])
    with pytest.raises(ValueError, match=r"one entry per text \(2\), got 1"):
        encode_batch(ours, ["a", "b"], ["c"])
