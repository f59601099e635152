"""Chapter 9's span-corruption pre-training and its comparison with chapter 8's masked LM.

``course_lib.transfer.span_batches``: the batched masks against T5's one-text
``noise_mask`` (the same set of masks, equally likely: chi-square; the counts of
``span_counts``; kept first and dropped last unless rolled; offsets of the roll uniform), the
batched corruption against ``corrupt_spans`` row by row, the batch reassembling to its
sentences, sentinels unique and in order, padding. ``course_lib.transfer.span_pretraining``:
both losses against cross-entropy computed by hand (uniform logits: ``log V``) and directly
from the model's logits; the blank-filling inputs (blanks of one and two tokens) built by
hand and fed to the models directly; models whose answer is set by their output bias; tied embeddings; both models'
loops reading the same sentences in the same order; training lowers each loss and fills
the blanks of a tiny corpus; bad inputs.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch.nn import functional as F

from course_lib.bert.masking import IGNORE
from course_lib.bert.model import BertConfig
from course_lib.bert.pretraining import BertForPreTraining, linear_warmup_decay
from course_lib.bert.wordpiece import WordPieceTokenizer
from course_lib.training import torch_seed
from course_lib.transfer import span_batches as sb
from course_lib.transfer import span_pretraining as sp
from course_lib.transfer.span_corruption import corrupt_spans, noise_mask, span_counts
from course_lib.transformer.translator import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one torch thread (conftest.py)

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "log", "."]


def tokenizer() -> WordPieceTokenizer:
    """A tokenizer of the five special tokens and nine words: ids 5 .. 13."""
    return WordPieceTokenizer({t: i for i, t in enumerate(list(WordPieceTokenizer.SPECIAL) + WORDS)})


def tiny_corpus(tok) -> list[list[int]]:
    """Sentences with a rule to learn: "the cat sat on the mat ." and "the dog ran on the log ."."""
    one = tok.convert_tokens_to_ids("the cat sat on the mat .".split())
    two = tok.convert_tokens_to_ids("the dog ran on the log .".split())
    return [one, two] * 20


def reassemble(inputs: list[int], targets: list[int], sentinels: set[int]) -> list[int]:
    """The text back from T5's inputs and targets: each sentinel in the inputs replaced by its span."""
    spans, current = {}, None
    for token in targets:
        if token in sentinels:
            current = token
            spans[current] = []
        else:
            spans[current].append(token)
    return [t for token in inputs for t in (spans[token] if token in sentinels else [token])]


def tiny_transformer(vocab: int, seed: int = 0) -> Transformer:
    with torch_seed(seed):
        model = Transformer(vocab, vocab, width=16, num_heads=2, ff_size=32, layers=1, positions="learned",
                            norm_first=False, max_len=16)
    sp.tie_embeddings(model)
    return model


def tiny_bert(vocab: int, seed: int = 0) -> BertForPreTraining:
    with torch_seed(seed):
        return BertForPreTraining(BertConfig(vocab, width=16, num_heads=2, layers=1, context=16, dropout=0.0,
                                             attention_dropout=0.0))


# -- the batches ---------------------------------------------------------------------------------

def test_sentinel_ids_follow_the_vocabulary_and_cover_one_span_more():
    assert span_counts(14)[1] == 1 and sb.sentinel_ids(100, 14) == [100, 101]
    assert span_counts(40) == (6, 2) and sb.sentinel_ids(100, 40) == [100, 101, 102]


def test_unrolled_masks_are_t5s_masks_each_equally_likely():
    # 8 tokens, 3 dropped in 2 spans: 4 ways to split the 5 kept tokens, 2 the 3 dropped ones.
    assert span_counts(8, 0.375, 1.5) == (3, 2)
    generator = torch.Generator().manual_seed(0)
    masks = torch.cat([sb.batch_noise_masks(torch.full((400,), 8), 0.375, 1.5, roll=False, generator=generator)
                       for _ in range(10)])
    counts = collections.Counter(tuple(row.tolist()) for row in masks)
    reference = {tuple(noise_mask(8, 0.375, 1.5, generator).tolist()) for _ in range(500)}
    assert set(counts) == reference and len(reference) == 8
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


@pytest.mark.parametrize("roll", [False, True])
def test_masks_drop_span_counts_tokens_in_rows_of_any_length(roll):
    generator = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 60, (300,), generator=generator)
    masks = sb.batch_noise_masks(lengths, 0.15, 3.0, roll=roll, generator=generator)
    assert masks.shape == (300, int(lengths.max()))
    for row, n in zip(masks, lengths.tolist()):
        noise, spans = span_counts(n)
        assert not row[n:].any() and int(row.sum()) == noise
        starts = int((row[:n] & ~torch.cat([torch.tensor([False]), row[:n - 1]])).sum())
        if roll:  # a span cut by the end becomes two
            assert starts in (spans, spans + 1)
        else:
            assert starts == spans and not row[0] and row[n - 1]


def test_rolled_masks_put_a_span_anywhere():
    # One 2-token span in a 10-token sentence: each of the 10 positions dropped 2 times in 10.
    generator = torch.Generator().manual_seed(2)
    masks = sb.batch_noise_masks(torch.full((5000,), 10), 0.2, 3.0, generator=generator)
    share = masks.float().mean(0)
    assert torch.allclose(share, torch.full((10,), 0.2), atol=0.025)


def test_corrupt_batch_equals_corrupt_spans_row_by_row():
    generator = torch.Generator().manual_seed(3)
    sentinels = list(range(100, 140))
    for trial in range(40):
        lengths = torch.randint(1, 30, (6,), generator=generator)
        ids = torch.randint(5, 90, (6, int(lengths.max())), generator=generator)
        real = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        mask = (torch.rand(ids.shape, generator=generator) < 0.4) & real  # any mask, even all dropped
        inputs, input_lengths, targets = sb.corrupt_batch(ids, lengths, mask, sentinels)
        for row, n in enumerate(lengths.tolist()):
            want_in, want_out = corrupt_spans(ids[row, :n], mask[row, :n], sentinels)
            assert inputs[row, :input_lengths[row]].tolist() == want_in.tolist()
            assert (inputs[row, input_lengths[row]:] == 0).all()
            kept = targets[row][targets[row] != IGNORE]
            assert kept.tolist() == want_out.tolist()
            assert (targets[row, len(kept):] == IGNORE).all()


def test_span_batch_reassembles_its_sentences_with_unique_sentinels_and_padding():
    generator = torch.Generator().manual_seed(4)
    sentences = [list(range(5, 5 + n)) for n in (2, 3, 7, 14, 30, 45)]
    sentinels = sb.sentinel_ids(60, 45, 0.3, 2.0)
    batch = sb.span_batch(sentences, sentinels, start_id=2, generator=generator, noise_density=0.3,
                          mean_span_length=2.0)
    for row, sentence in enumerate(sentences):
        inputs = batch.source[row, :batch.lengths[row]].tolist()
        targets = batch.target_out[row][batch.target_out[row] != IGNORE].tolist()
        used = [t for t in inputs if t in sentinels]
        assert used == sentinels[:len(used)]  # each sentinel once, in order
        assert [t for t in targets if t in sentinels][:len(used)] == used
        assert reassemble(inputs, targets, set(sentinels)) == sentence
        assert (batch.source[row, batch.lengths[row]:] == 0).all()
        assert batch.target_in[row, 0] == 2  # the start, then the targets shifted right
        assert batch.target_in[row, 1:len(targets)].tolist() == targets[:-1]
        assert (batch.target_in[row, len(targets):] == 0).all()


def test_the_same_generator_seed_gives_the_same_batch():
    sentences = [list(range(5, 5 + n)) for n in (4, 9, 14)]
    one = sb.span_batch(sentences, [50, 51], 2, torch.Generator().manual_seed(7))
    two = sb.span_batch(sentences, [50, 51], 2, torch.Generator().manual_seed(7))
    assert all(torch.equal(a, b) for a, b in zip(one, two))


# -- the losses ----------------------------------------------------------------------------------

class UniformModel(torch.nn.Module):
    """A stand-in whose logits are all 0: every cross-entropy is log V."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, source, lengths, target_in):
        return torch.zeros(*target_in.shape, self.vocab), None


def test_span_loss_of_uniform_logits_is_log_v():
    batch = sb.span_batch([[5, 6, 7, 8], [5, 6, 7, 8, 9, 10, 11]], [20, 21], 2, torch.Generator().manual_seed(0))
    assert sp.span_loss(UniformModel(22), batch).item() == pytest.approx(math.log(22))


def test_span_loss_is_the_cross_entropy_of_the_target_tokens_only():
    sentences = [list(range(5, 5 + n)) for n in (3, 8, 14)]
    batch = sb.span_batch(sentences, [30, 31], 2, torch.Generator().manual_seed(1))
    model = tiny_transformer(32)
    logits, _ = model(batch.source, batch.lengths, batch.target_in)
    terms = [-F.log_softmax(logits[b, t], -1)[batch.target_out[b, t]]
             for b in range(len(sentences)) for t in range(batch.target_out.shape[1])
             if batch.target_out[b, t] != IGNORE]
    assert sp.span_loss(model, batch).item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-6)


def test_mlm_loss_is_the_cross_entropy_at_the_chosen_positions():
    tok = tokenizer()
    inputs, padding, labels = sp.mlm_batch(tiny_corpus(tok)[:6], tok, torch.Generator().manual_seed(0), 0.4)
    assert (inputs[:, 0] == tok.cls_id).all() and (padding.sum(1) == 9).all()
    model = tiny_bert(len(tok))
    full = model(inputs, None, padding).mlm_logits  # (B, T, V)
    chosen = labels != IGNORE
    want = F.cross_entropy(full[chosen], labels[chosen])
    assert sp.mlm_loss(model, (inputs, padding, labels)).item() == pytest.approx(want.item(), rel=1e-5)


# -- the blank to fill ---------------------------------------------------------------------------

def test_blank_positions_avoid_special_tokens():
    positions = sp.blank_positions([[1, 5, 1], [6, 1, 1, 1]] * 50, special_ids=[0, 1],
                                   generator=torch.Generator().manual_seed(0))
    assert set(positions[0::2].tolist()) == {1} and set(positions[1::2].tolist()) == {0}


def test_blanks_of_two_tokens_start_where_both_fit():
    positions = sp.blank_positions([[5, 6, 7], [1, 6, 7, 8]] * 50, special_ids=[0, 1],
                                   generator=torch.Generator().manual_seed(1), width=2)
    assert set(positions[0::2].tolist()) == {0, 1} and set(positions[1::2].tolist()) == {1, 2}


def test_blanks_of_two_tokens_are_two_masks_for_bert_and_one_sentinel_for_t5():
    tok = tokenizer()
    bert, ed = tiny_bert(len(tok)), tiny_transformer(len(tok) + 2)
    sentences, positions = [[5, 6, 7, 8], [9, 10, 11]], torch.tensor([1, 0])
    got = sp.mlm_blank_logits(bert, tok, sentences, positions, width=2)
    ids = torch.tensor([[2, 5, 4, 4, 8, 3], [2, 4, 4, 11, 3, 0]])
    want = bert(ids, None, ids != 0).mlm_logits
    torch.testing.assert_close(got, torch.stack([want[0, 2], want[1, 1]]))
    got = sp.span_blank_logits(ed, sentences, positions, sentinel=14, start_id=2, width=2)
    ed.eval()
    want, _ = ed(torch.tensor([[5, 14, 8], [14, 11, 0]]), torch.tensor([3, 2]), torch.tensor([[2, 14], [2, 14]]))
    torch.testing.assert_close(got, want[:, 1])


def test_span_blank_logits_read_the_sentence_with_one_sentinel():
    model = tiny_transformer(32)
    sentences, positions = [[5, 6, 7, 8], [9, 10, 11]], torch.tensor([2, 0])
    got = sp.span_blank_logits(model, sentences, positions, sentinel=30, start_id=2)
    source = torch.tensor([[5, 6, 30, 8], [30, 10, 11, 0]])
    model.eval()
    want, _ = model(source, torch.tensor([4, 3]), torch.tensor([[2, 30], [2, 30]]))
    torch.testing.assert_close(got, want[:, 1])


def test_mlm_blank_logits_read_mask_where_the_blank_is():
    tok = tokenizer()
    model = tiny_bert(len(tok))
    got = sp.mlm_blank_logits(model, tok, [[5, 6, 7], [8, 9]], torch.tensor([1, 0]))
    ids = torch.tensor([[2, 5, 4, 7, 3], [2, 4, 9, 3, 0]])
    want = model(ids, None, ids != 0).mlm_logits  # (B, T, V)
    torch.testing.assert_close(got, torch.stack([want[0, 2], want[1, 1]]))


def test_models_answer_what_their_output_bias_says():
    tok, sentences = tokenizer(), [[5, 6, 7], [8, 6, 13], [6, 6, 6]]
    positions = torch.tensor([1, 2, 0])
    answers = torch.tensor([s[p] for s, p in zip(sentences, positions.tolist())])  # 6, 13, 6
    bert = tiny_bert(len(tok))
    with torch.no_grad():
        bert.mlm.bias.zero_()
        bert.mlm.bias[6] = 50.0
        bert.mlm.bias[tok.mask_id] = 100.0  # special: never an answer
    scores = sp.blank_scores(sp.mlm_blank_logits(bert, tok, sentences, positions), answers, tok.special_ids)
    assert scores["accuracy"] == pytest.approx(2 / 3)
    ed = tiny_transformer(len(tok) + 2)
    with torch.no_grad():
        ed.output.bias.zero_()
        ed.output.bias[13] = 50.0
    logits = sp.span_blank_logits(ed, sentences, positions, sentinel=len(tok), start_id=2)
    assert sp.blank_scores(logits[:, :len(tok)], answers, tok.special_ids)["accuracy"] == pytest.approx(1 / 3)


def test_blank_scores_by_hand():
    logits = torch.tensor([[0.0, 2.0, 1.0, 0.0], [5.0, 0.0, 1.0, 0.5]])
    scores = sp.blank_scores(logits, torch.tensor([2, 2]), excluded=[0])
    log_z0, log_z1 = math.log(math.exp(2) + math.exp(1) + 1), math.log(1 + math.e + math.exp(0.5))
    assert scores["accuracy"] == pytest.approx(0.5)  # row 0 guesses 1; row 1 would guess 0, excluded, so 2
    assert scores["loss"] == pytest.approx(((log_z0 - 1.0) + (log_z1 - 1.0)) / 2)


# -- the models and the loop ---------------------------------------------------------------------

def test_tied_embeddings_share_one_table():
    model = Transformer(20, 20, width=8, num_heads=2, ff_size=16, layers=1, max_len=8)
    before = sum(p.numel() for p in model.parameters())
    assert sp.tie_embeddings(model) == 20 * 8
    assert sum(p.numel() for p in model.parameters()) == before - 2 * 20 * 8
    table = model.source_embedding.embedding.weight
    assert model.target_embedding.embedding.weight is table and model.output.weight is table


def test_output_bias_is_the_log_frequency():
    bias = torch.zeros(5)
    sp.set_output_bias(bias, [[1, 2, 2], [2, 3]])
    counts = torch.tensor([0, 1, 3, 1, 0]) + 1.0
    torch.testing.assert_close(bias, (counts / counts.sum()).log())


def test_both_loops_read_the_same_sentences_with_chapter_8s_schedule():
    seen = {"a": [], "b": []}

    def spy(name):
        def batch_fn(sentences, generator):
            seen[name].append([tuple(s) for s in sentences])
            return sentences
        return batch_fn

    def loss_fn(model, batch):
        return (model.weight ** 2).sum()

    sentences = [[i, i + 1] for i in range(50)]
    for name in seen:
        history = sp.pretrain_objective(torch.nn.Linear(2, 2), loss_fn, spy(name), sentences, steps=10,
                                        batch_size=4, lr=1e-2, seed=5)
    assert seen["a"] == seen["b"] and len(seen["a"]) == 10 and len(set(map(tuple, seen["a"]))) > 1
    factor = linear_warmup_decay(1, 10)
    np.testing.assert_allclose(history["lr"], [1e-2 * factor(s) for s in range(1, 11)])


def test_training_lowers_the_span_loss_and_fills_the_blanks_of_a_tiny_corpus():
    tok = tokenizer()
    sentences = tiny_corpus(tok)
    sentinels = sb.sentinel_ids(len(tok), 7)
    model = tiny_transformer(len(tok) + len(sentinels))
    batch = sb.span_batch(sentences, sentinels, tok.cls_id, torch.Generator().manual_seed(9))
    before = sp.span_loss(model, batch).item()
    history = sp.pretrain_objective(model, sp.span_loss,
                                    lambda s, g: sb.span_batch(s, sentinels, tok.cls_id, g),
                                    sentences, steps=150, batch_size=16, lr=1e-2, seed=0)
    assert np.mean(history["loss"][-10:]) < 0.5 * np.mean(history["loss"][:10])
    with torch.no_grad():
        assert sp.span_loss(model.eval(), batch).item() < 0.5 * before
    # "the cat sat on the [blank] ." must be "mat": the sentence says which.
    positions = torch.full((len(sentences),), 5)
    answers = torch.tensor([s[5] for s in sentences])
    logits = sp.span_blank_logits(model, sentences, positions, sentinels[0], tok.cls_id)[:, :len(tok)]
    assert sp.blank_scores(logits, answers, tok.special_ids)["accuracy"] == 1.0


def test_training_lowers_the_masked_lm_loss_of_a_tiny_corpus():
    tok = tokenizer()
    sentences = tiny_corpus(tok)
    model = tiny_bert(len(tok))
    history = sp.pretrain_objective(model, sp.mlm_loss, lambda s, g: sp.mlm_batch(s, tok, g, 0.3), sentences,
                                    steps=60, batch_size=16, lr=1e-2, seed=0)
    assert np.mean(history["loss"][-10:]) < 0.5 * np.mean(history["loss"][:10])


# -- bad inputs ----------------------------------------------------------------------------------

def test_bad_inputs_get_clear_errors():
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="at least 2"):
        sb.span_batch([[5, 6], [7]], [20, 21], 2, generator)
    with pytest.raises(ValueError, match="non-empty list"):
        sb.span_batch([], [20], 2, generator)
    with pytest.raises(ValueError, match="sentinels"):
        sb.corrupt_batch(torch.tensor([[5, 6, 7, 8, 9]]), [5], torch.tensor([[True, False, True, False, False]]), [20])
    with pytest.raises(TypeError, match="bool"):
        sb.corrupt_batch(torch.tensor([[5, 6]]), [2], torch.tensor([[1, 0]]), [20, 21])
    with pytest.raises(ValueError, match="past the end"):
        sb.corrupt_batch(torch.tensor([[5, 6, 0]]), [2], torch.tensor([[False, False, True]]), [20, 21])
    with pytest.raises(TypeError, match="SpanBatch"):
        sp.span_loss(UniformModel(5), (torch.zeros(1, 2), torch.ones(1)))
    with pytest.raises(ValueError, match="one vocabulary"):
        sp.tie_embeddings(Transformer(20, 30, width=8, num_heads=2, ff_size=16, layers=1))
    with pytest.raises(ValueError, match="excluded"):
        sp.blank_scores(torch.zeros(2, 4), torch.tensor([0, 1]), excluded=[0])
    with pytest.raises(ValueError, match="no token that is not special"):
        sp.blank_positions([[1, 1]], special_ids=[0, 1])
    with pytest.raises(ValueError, match="inside its sentence"):
        sp.span_blank_logits(tiny_transformer(32), [[5, 6]], torch.tensor([2]), 30, 2)
    with pytest.raises(ValueError, match="inside its sentence"):
        sp.mlm_blank_logits(tiny_bert(14), tokenizer(), [[5, 6]], torch.tensor([1]), width=2)
    with pytest.raises(ValueError, match=r"\(N,\)"):
        sp.mlm_blank_logits(tiny_bert(14), tokenizer(), [[5, 6]], torch.tensor([0, 1]))
