"""course_lib.bert's pre-training, fine-tuning and analysis modules against transformers, hand computations and known answers.

Pre-training: ``BertForPreTraining`` against ``transformers.BertForPreTraining`` built
from the same random config with copied weights (MLM logits at the chosen positions,
NSP logits, both losses, gradients), the MLM loss against a cross-entropy written out
over all positions, the tied decoder; sentence splitting, ``nsp_pairs`` (IsNext is the
following sentence of the same document, NotNext comes from another, lengths, the
share of NotNext), ``collate_pairs`` (segments, padding), the compact vocabulary (ids
round trip, ``[UNK]`` for dropped pieces, batches), ``pretrain`` (the loss falls, the
same seed repeats the run, ``mask_fn`` is used), the schedule and ``fill_mask``.
Fine-tuning: cached states give the logits of the full model whatever the padding,
``train_layers=k`` leaves the lower layers untouched and equals a hand-written loop
that runs the full model with them frozen, a separable toy task is learned, shapes and
errors. Analysis: probes on separable and random features, anisotropy (identical,
random, offset, centred), ``head_similarity`` against scipy's Jensen-Shannon distance,
``attention_patterns`` on hand-made attention, linear CKA (rotation and scale), word
positions and vectors, and the "bank" senses with all-MiniLM-L6-v2.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from course_lib import seeds
from course_lib.bert import analysis, attention_heads, classifier, encoding, pretraining, pretraining_data
from course_lib.bert.masking import IGNORE, mlm_mask
from course_lib.bert.model import BertConfig, BertModel
from course_lib.bert.pretrained import minilm_directory
from course_lib.bert.wordpiece import WordPieceTokenizer
from course_lib.training import torch_seed

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "was", "is", "very", "film", "movie", "plot", "actor",
         "good", "great", "fine", "bad", "awful", "poor", "river", "bank", "money", ".", ",", "un", "##like", "##ly"]
TOY_VOCAB = {t: i for i, t in enumerate(list(WordPieceTokenizer.SPECIAL) + WORDS)}


@pytest.fixture(scope="module")
def toy_tokenizer():
    return WordPieceTokenizer(TOY_VOCAB)


@pytest.fixture(scope="module")
def full_tokenizer():
    return WordPieceTokenizer.from_file(minilm_directory() / "vocab.txt")


def tiny_config(vocab_size=len(TOY_VOCAB), **kwargs):
    return BertConfig(**{**dict(vocab_size=vocab_size, width=16, num_heads=2, layers=2, context=40, dropout=0.0,
                                attention_dropout=0.0), **kwargs})


def perturb(module, seed: int, scale: float = 0.3):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return module


def toy_batch(seed: int = 0):
    """A (3, 12) batch of a pair with padding: ids, segments, padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, len(TOY_VOCAB), (3, 12), generator=g)
    ids[:, 0], ids[:, 6], ids[:, -1] = 2, 3, 3
    ids[2, 8:] = 0
    ids[2, 7] = 3
    segments = torch.zeros_like(ids)
    segments[:, 7:] = 1
    segments[2, 8:] = 0
    return ids, segments, ids != 0


# ---------------------------------------------------------------- pre-training heads


def test_pretraining_model_equals_transformers_with_copied_weights():
    with torch_seed(0):
        ours = perturb(pretraining.BertForPreTraining(tiny_config()), 1).eval()
    hf = transformers.BertForPreTraining(transformers.BertConfig(**ours.config.hf_config_kwargs())).eval()
    missing, unexpected = hf.load_state_dict(pretraining.to_hf_pretraining_state_dict(ours), strict=False)
    assert not unexpected and all("position_ids" in name for name in missing)
    ids, segments, padding = toy_batch()
    inputs, labels = mlm_mask(ids, range(5), 4, len(TOY_VOCAB), 0.5, torch.Generator().manual_seed(2))
    assert (labels != IGNORE).sum() >= 5
    nsp = torch.tensor([0, 1, 1])
    out = ours(inputs, segments, padding, labels, nsp)
    ref = hf(input_ids=inputs, token_type_ids=segments, attention_mask=padding.long(), labels=labels,
             next_sentence_label=nsp)
    chosen = labels != IGNORE
    torch.testing.assert_close(out.mlm_logits, ref.prediction_logits[chosen], rtol=0, atol=1e-5)
    torch.testing.assert_close(out.nsp_logits, ref.seq_relationship_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.loss, ref.loss, rtol=0, atol=1e-5)
    out.loss.backward()
    ref.loss.backward()
    ours_grad = ours.bert.embeddings.token_embedding.weight.grad  # decoder and embedding gradients, added
    torch.testing.assert_close(ours_grad, hf.bert.embeddings.word_embeddings.weight.grad, rtol=0, atol=1e-5)
    torch.testing.assert_close(ours.mlm.dense.weight.grad, hf.cls.predictions.transform.dense.weight.grad,
                               rtol=0, atol=1e-5)


def test_mlm_loss_is_the_cross_entropy_at_the_chosen_positions_and_the_decoder_is_tied():
    with torch_seed(0):
        model = perturb(pretraining.BertForPreTraining(tiny_config()), 3).eval()
    ids, segments, padding = toy_batch(1)
    labels = torch.full_like(ids, IGNORE)
    labels[0, 3], labels[1, 5], labels[2, 2] = 7, 9, 11
    out = model(ids, segments, padding, labels, torch.tensor([0, 0, 1]))
    every = model(ids, segments, padding).mlm_logits  # (B, T, V)
    assert every.shape == (3, 12, len(TOY_VOCAB))
    picked = [(0, 3, 7), (1, 5, 9), (2, 2, 11)]
    manual = sum(-torch.log_softmax(every[b, t], -1)[y] for b, t, y in picked) / 3
    torch.testing.assert_close(out.mlm_loss, manual, rtol=0, atol=1e-6)
    nsp_manual = F.cross_entropy(out.nsp_logits, torch.tensor([0, 0, 1]))
    torch.testing.assert_close(out.loss, manual + nsp_manual, rtol=0, atol=1e-6)
    hidden = model.bert(ids, segments, padding).last
    head = model.mlm
    expected = F.layer_norm(F.gelu(hidden @ head.dense.weight.T + head.dense.bias), (16,), head.norm.weight,
                            head.norm.bias, 1e-12) @ model.bert.embeddings.token_embedding.weight.T + head.bias
    torch.testing.assert_close(every, expected, rtol=0, atol=1e-5)
    assert not any("decoder" in name for name in model.state_dict())  # one (V, D) matrix embeds and predicts
    with torch.no_grad():
        model.bert.embeddings.token_embedding.weight[9] += 1.0  # changes the prediction of token 9 everywhere
    assert not torch.allclose(model(ids, segments, padding).mlm_logits[0, 3, 9], every[0, 3, 9])


def test_no_chosen_position_gives_a_zero_mlm_loss_and_bad_labels_are_refused():
    model = pretraining.BertForPreTraining(tiny_config())
    ids, segments, padding = toy_batch()
    out = model(ids, segments, padding, torch.full_like(ids, IGNORE), torch.zeros(3, dtype=torch.int64))
    assert out.mlm_loss.item() == 0.0 and out.mlm_logits.shape == (0, len(TOY_VOCAB))
    with pytest.raises(ValueError, match="labels"):
        model(ids, segments, padding, torch.full((3, 5), IGNORE))
    with pytest.raises(ValueError, match="nsp_labels"):
        model(ids, segments, padding, None, torch.zeros(2, dtype=torch.int64))


def test_linear_warmup_decay():
    f = pretraining.linear_warmup_decay(10, 110)
    assert [f(s) for s in (1, 5, 10, 60, 110)] == pytest.approx([0.1, 0.5, 1.0, 0.5, 0.0])
    assert pretraining.linear_warmup_decay(0, 4)(1) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="warmup"):
        pretraining.linear_warmup_decay(11, 10)


# ---------------------------------------------------------------- pre-training data


def test_split_sentences():
    text = ("The fire spread quickly. Crews arrived at 4 pm! Was it \"arson?\" Nobody knows why.\n"
            "== History ==\n* a list item here\nIt was ''very'' dry in 2001. 2002 was wetter.")
    assert pretraining_data.split_sentences(text) == [
        "The fire spread quickly.", "Crews arrived at 4 pm!", "Was it \"arson?\"", "Nobody knows why.",
        "It was very dry in 2001.", "2002 was wetter."]
    assert pretraining_data.split_sentences("Too short. Keep this one please.") == ["Keep this one please."]
    assert pretraining_data.split_sentences("Too short.", min_words=1) == ["Too short."]
    with pytest.raises(TypeError):
        pretraining_data.split_sentences(["a list"])


def _numbered_documents():
    """Document d, sentence s has ids [1000 d + 10 s + k for k < length]: every id tells where it came from."""
    lengths = [[3, 5, 2, 4, 6], [4, 4, 4], [7, 2, 3, 3], [5, 5]]
    return [[[1000 * d + 10 * s + k for k in range(n)] for s, n in enumerate(doc)] for d, doc in enumerate(lengths)]


def test_nsp_pairs_take_the_next_sentence_or_one_from_another_document():
    documents = _numbered_documents()
    pairs = pretraining_data.nsp_pairs(documents, np.random.default_rng(0), max_tokens=16)
    labels = [p.label for p in pairs]
    assert set(labels) == {0, 1}
    for pair in pairs:
        assert len(pair.a) + len(pair.b) + 3 <= 16
        doc_a, last_a = pair.a[-1] // 1000, (pair.a[-1] % 1000) // 10
        assert all(i // 1000 == doc_a for i in pair.a)
        if pair.label == pretraining_data.IS_NEXT:
            assert pair.b[0] == 1000 * doc_a + 10 * (last_a + 1)  # the sentence right after a's last
        else:
            assert pair.b[0] // 1000 != doc_a and pair.b[0] % 10 == 0  # a sentence of another document
    many = pretraining_data.nsp_pairs(documents * 50, np.random.default_rng(1), max_tokens=16)
    share = np.mean([p.label for p in many])
    assert abs(share - 0.5) < 5 * math.sqrt(0.25 / len(many))
    assert all(p.label == 0 for p in pretraining_data.nsp_pairs(documents, np.random.default_rng(0), 16, not_next=0))
    short = pretraining_data.nsp_pairs(documents, np.random.default_rng(0), max_tokens=8)
    assert all(len(p.a) + len(p.b) <= 5 and p.a and p.b for p in short)
    with pytest.raises(ValueError, match="two non-empty documents"):
        pretraining_data.nsp_pairs(documents[:1], np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        pretraining_data.nsp_pairs(documents, 0)


def test_collate_pairs_segments_and_padding(toy_tokenizer):
    pairs = [pretraining_data.SentencePair([5, 6], [7], 0), pretraining_data.SentencePair([8], [9, 10, 11], 1)]
    batch, labels = pretraining_data.collate_pairs(pairs, toy_tokenizer)
    assert batch.ids.tolist() == [[2, 5, 6, 3, 7, 3, 0], [2, 8, 3, 9, 10, 11, 3]]
    assert batch.segments.tolist() == [[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]]
    assert batch.padding.tolist() == [[True] * 6 + [False], [True] * 7]
    assert labels.tolist() == [0, 1]


def test_compact_tokenizer_round_trips_ids_and_drops_rare_pieces(full_tokenizer):
    texts = ["The cat sat on the mat.", "The dog sat on the cat.", "A zebra!"]
    tokens = [full_tokenizer.tokenize(t) for t in texts]
    compact = pretraining_data.CompactTokenizer.from_corpus(full_tokenizer, tokens, min_count=2)
    assert [compact.tokens[i] for i in range(5)] == list(WordPieceTokenizer.SPECIAL)
    assert compact.tokens[5] == "the" and set(compact.vocab) == set(WordPieceTokenizer.SPECIAL) | {
        "the", "cat", "sat", "on", "."}
    ids = compact.convert_tokens_to_ids(full_tokenizer.tokenize("the zebra sat"))
    assert [compact.tokens[i] for i in ids] == ["the", "[UNK]", "sat"]
    full_ids = torch.tensor(full_tokenizer.convert_tokens_to_ids(["the", "cat", "zebra", "[MASK]"]))
    back = compact.to_full(compact.to_compact(full_ids))
    assert back.tolist() == full_ids.tolist()[:2] + [full_tokenizer.unk_id, full_tokenizer.mask_id]
    assert compact.decode(compact.to_compact(full_ids)) == "the cat"
    from course_lib.bert.inputs import encode_batch
    batch = encode_batch(compact, ["the cat sat", "on the mat ."])
    assert batch.ids[0, :5].tolist() == [compact.cls_id, 5, compact.vocab["cat"], compact.vocab["sat"], compact.sep_id]
    with pytest.raises(ValueError, match="not in the full vocabulary"):
        pretraining_data.CompactTokenizer(full_tokenizer, ["qwzx"])


def test_pretraining_corpus(full_tokenizer):
    docs = ["The cat sat on the mat today. The dog sat on the mat too. The cat ran away fast.",
            "One sentence only here.", "A dog and a cat met. The mat was red today."]
    compact, ids = pretraining_data.pretraining_corpus(full_tokenizer, docs, min_count=2)
    assert len(ids) == 2 and [len(d) for d in ids] == [3, 2]  # the one-sentence document is dropped
    assert [compact.tokens[i] for i in ids[0][1]] == ["the", "dog", "sat", "on", "the", "mat", "[UNK]", "."]
    with pytest.raises(ValueError, match="two documents"):
        pretraining_data.pretraining_corpus(full_tokenizer, docs[:2])


# ---------------------------------------------------------------- pre-training loop and fill-mask


@pytest.fixture(scope="module")
def small_corpus(full_tokenizer):
    from course_lib.text.corpus import lee_documents

    compact, ids = pretraining_data.pretraining_corpus(full_tokenizer, lee_documents()[:40], min_count=3)
    pairs = pretraining_data.nsp_pairs(ids, np.random.default_rng(0), max_tokens=24)
    return compact, pairs


def _pretrain(compact, pairs, steps=40, seed=0, **kwargs):
    with torch_seed(0):
        model = pretraining.BertForPreTraining(tiny_config(len(compact), width=32, context=24))
    history = pretraining.pretrain(model, compact, pairs[40:], steps, batch_size=16, lr=3e-3,
                                   valid_pairs=pairs[:40], eval_every=20, seed=seed, progress=False, **kwargs)
    return model, history


def test_pretrain_lowers_the_loss_and_repeats_with_the_seed(small_corpus):
    compact, pairs = small_corpus
    model, history = _pretrain(compact, pairs)
    for name in ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm", "lr"):
        assert history[name].shape == (40,)
    assert history["valid_step"].tolist() == [20, 40]
    assert history["loss"][-10:].mean() < history["loss"][:5].mean() - 0.5
    assert history["valid_mlm_loss"][-1] < math.log(len(compact))  # better than uniform
    assert 0 <= history["valid_mlm_accuracy"][-1] <= 1 and 0 <= history["valid_nsp_accuracy"][-1] <= 1
    np.testing.assert_allclose(history["loss"], history["mlm_loss"] + history["nsp_loss"], rtol=1e-5)
    _, again = _pretrain(compact, pairs)
    np.testing.assert_array_equal(again["loss"], history["loss"])
    _, other = _pretrain(compact, pairs, seed=1)
    assert not np.array_equal(other["loss"], history["loss"])


def test_pretrain_uses_mask_fn(small_corpus):
    compact, pairs = small_corpus
    calls = []

    def first_real_token(ids, special_ids, mask_id, vocab_size, probability, generator):
        calls.append((tuple(special_ids), mask_id, vocab_size, probability))
        labels = torch.full_like(ids, IGNORE)
        labels[:, 1] = ids[:, 1]
        inputs = ids.clone()
        inputs[:, 1] = mask_id
        return inputs, labels

    _, history = _pretrain(compact, pairs, steps=3, mask_fn=first_real_token, probability=0.3)
    assert calls[-1] == (compact.special_ids, compact.mask_id, len(compact), 0.3)
    assert len(calls) == 3 + math.ceil(40 / 64)  # one per step, one per validation batch


def test_pretrain_refuses_a_tokenizer_of_another_size(small_corpus, toy_tokenizer):
    compact, pairs = small_corpus
    model = pretraining.BertForPreTraining(tiny_config())
    with pytest.raises(ValueError, match="vocabulary"):
        pretraining.pretrain(model, compact, pairs, 1, progress=False)


def test_fill_mask(toy_tokenizer):
    with torch_seed(0):
        model = perturb(pretraining.BertForPreTraining(tiny_config()), 5)
    found = pretraining.fill_mask(model, toy_tokenizer, "the [MASK] sat on the [MASK] .", k=3)
    assert len(found) == 2 and all(len(row) == 3 for row in found)
    v = toy_tokenizer.vocab
    ids = torch.tensor([[2, v["the"], 4, v["sat"], v["on"], v["the"], 4, v["."], 3]])
    logits = model.eval()(ids).mlm_logits[0, [2, 6]]
    logits[:, :5] = -math.inf
    probs = logits.softmax(-1)
    for row, position_probs in zip(found, probs):
        best = position_probs.topk(3)
        assert [t for t, _ in row] == [toy_tokenizer.tokens[int(i)] for i in best.indices]
        assert [p for _, p in row] == pytest.approx(best.values.tolist(), abs=1e-6)
        assert all(t not in WordPieceTokenizer.SPECIAL for t, _ in row)
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        pretraining.fill_mask(model, toy_tokenizer, "the cat sat")


# ---------------------------------------------------------------- encoding and fine-tuning


TOY_TEXTS = ["the cat sat on the mat", "a dog", "the very good film was great", "un", "the bad movie",
             "a fine actor is very fine .", "the plot was awful , awful", "poor dog", "the river bank",
             "money , money , money ."]


def test_length_batches():
    lengths = np.array([5, 2, 9, 2, 7, 1, 5])
    assert [b.tolist() for b in encoding.length_batches(lengths, 3)] == [[5, 1, 3], [0, 6, 4], [2]]
    shuffled = encoding.length_batches(lengths, 2, np.random.default_rng(0))
    assert sorted(np.concatenate(shuffled).tolist()) == list(range(7))
    ranges = [(lengths[b].min(), lengths[b].max()) for b in shuffled]  # runs of the sorted lengths: no overlap
    assert all(high1 <= low2 or high2 <= low1 for i, (low1, high1) in enumerate(ranges)
               for low2, high2 in ranges[i + 1:])
    assert [b.tolist() for b in shuffled] != [b.tolist() for b in encoding.length_batches(lengths, 2)]
    with pytest.raises(ValueError, match="batch_size"):
        encoding.length_batches(lengths, 0)


def test_encode_layers_equals_the_model_run_on_each_text(toy_tokenizer):
    with torch_seed(0):
        bert = perturb(BertModel(tiny_config()), 6).eval()
    found = encoding.encode_layers(bert, toy_tokenizer, TOY_TEXTS, keep=(0, 2), batch_size=3)
    assert found.features.shape == (3, len(TOY_TEXTS), 16)
    for n, text in enumerate(TOY_TEXTS):
        ids = torch.tensor([encoding.encode_ids(toy_tokenizer, [text])[0]])
        hidden = bert(ids).hidden_states
        for layer in range(3):
            torch.testing.assert_close(found.features[layer, n], hidden[layer][0].mean(0), rtol=0, atol=1e-5)
        for layer in (0, 2):
            torch.testing.assert_close(found.states[layer][n], hidden[layer][0], rtol=0, atol=1e-5)
    partial = encoding.encode_layers(bert, toy_tokenizer, TOY_TEXTS, keep=(1,), features=False)
    assert partial.features is None and set(partial.states) == {1}
    with pytest.raises(ValueError, match="keep"):
        encoding.encode_layers(bert, toy_tokenizer, TOY_TEXTS, keep=(3,))
    vectors = analysis.token_vectors(bert, toy_tokenizer, TOY_TEXTS[:2])
    assert vectors.shape == (3, 6 + 2, 16)  # "the cat sat on the mat" and "a dog", without [CLS] and [SEP]
    for layer in (0, 2):
        torch.testing.assert_close(vectors[layer, :6], found.states[layer][0][1:-1], rtol=0, atol=1e-5)
        torch.testing.assert_close(vectors[layer, 6:], found.states[layer][1][1:-1], rtol=0, atol=1e-5)


def _toy_classifier(layers=3, pooling="cls", dropout=0.0, seed=0):
    with torch_seed(seed):
        return classifier.BertClassifier(perturb(BertModel(tiny_config(layers=layers)), seed + 10, 0.1), 2,
                                         pooling=pooling, dropout=dropout)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_cached_states_give_the_logits_of_the_full_model(toy_tokenizer, pooling):
    model = _toy_classifier(pooling=pooling).eval()
    states = encoding.encode_layers(model.bert, toy_tokenizer, TOY_TEXTS, keep=(2,), features=False).states[2]
    full_labels, full_probs = classifier.predict(model, toy_tokenizer, TOY_TEXTS, batch_size=4)
    for batch_size in (1, 3, 10):  # other companions, other padding
        labels, probs = classifier.predict(model, toy_tokenizer, TOY_TEXTS, batch_size=batch_size, states=states,
                                           layer=2)
        np.testing.assert_allclose(probs, full_probs, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(labels, full_labels)
    assert full_probs.shape == (len(TOY_TEXTS), 2) and full_labels.shape == (len(TOY_TEXTS),)
    np.testing.assert_allclose(full_probs.sum(1), 1, rtol=1e-6)


def _reference_fine_tune(model, tokenizer, texts, labels, epochs, batch_size, lr, train_layers, seed=0):
    """The full model run on every batch, its lower layers frozen: what the cached fine-tuning must equal."""
    lower = [model.bert.embeddings, *model.bert.encoder.layers[:model.bert.config.layers - train_layers]]
    for module in lower:
        module.requires_grad_(False)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    no_decay = [p for n, p in params if n.endswith("bias") or "norm" in n]
    decay = [p for n, p in params if not (n.endswith("bias") or "norm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=lr)
    id_lists = encoding.encode_ids(tokenizer, texts, 64)
    lengths = np.array([len(i) for i in id_lists])
    rng = np.random.default_rng(seed)
    per_epoch = math.ceil(len(texts) / batch_size)
    total, step, losses = epochs * per_epoch, 0, []
    model.train()
    for _ in range(epochs):
        for index in encoding.length_batches(lengths, batch_size, rng):
            step += 1
            warm = int(0.1 * total)
            factor = step / warm if step <= warm else (total - step) / (total - warm)
            for group in optimizer.param_groups:
                group["lr"] = lr * factor
            batch = encoding.pad_ids([id_lists[i] for i in index], tokenizer.pad_id)
            loss = F.cross_entropy(model(batch.ids, batch.segments, batch.padding), torch.as_tensor(labels)[index])
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
            optimizer.step()
            losses.append(loss.item())
    return np.array(losses)


def test_fine_tuning_the_top_layer_from_the_cache_equals_the_full_model_with_frozen_lower_layers(toy_tokenizer):
    labels = np.array([0, 1, 1, 0, 0, 1, 0, 0, 1, 1])
    model = _toy_classifier()
    before = copy.deepcopy(model.state_dict())
    reference = copy.deepcopy(model)
    history = classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS, labels, epochs=3, batch_size=4, lr=1e-2,
                                   train_layers=1, progress=False)
    expected = _reference_fine_tune(reference, toy_tokenizer, TOY_TEXTS, labels, 3, 4, 1e-2, 1)
    np.testing.assert_allclose(history["loss"], expected, rtol=0, atol=1e-5)
    after = model.state_dict()
    for name, value in before.items():
        frozen = name.startswith(("bert.embeddings.", "bert.encoder.layers.0.", "bert.encoder.layers.1."))
        assert torch.equal(after[name], value) == frozen, name
        # Adam divides by the root of tiny second moments: after 9 steps at lr 1e-2 a weight of 0.02 moved
        # 1.7e-5 between two machines' roundings; a layer trained or frozen wrongly moves by about lr.
        torch.testing.assert_close(after[name], reference.state_dict()[name], rtol=1e-3, atol=1e-4)
    assert history["loss"].shape == history["lr"].shape == history["grad_norm"].shape == (9,)
    assert history["train_accuracy"].shape == (3,) and "valid_accuracy" not in history


def test_fine_tune_learns_a_separable_task_and_repeats_with_the_seed(toy_tokenizer):
    rng = np.random.default_rng(0)
    neutral = ["the", "a", "film", "movie", "plot", "actor", "was", "is", "very"]

    def texts(words, n):
        return [" ".join(rng.choice(neutral, 3).tolist() + [rng.choice(words)] + rng.choice(neutral, 2).tolist())
                for _ in range(n)]

    train = texts(["good", "great", "fine"], 24) + texts(["bad", "awful", "poor"], 24)
    valid = texts(["good", "great", "fine"], 10) + texts(["bad", "awful", "poor"], 10)
    labels, valid_labels = [1] * 24 + [0] * 24, [1] * 10 + [0] * 10
    runs = []
    for _ in range(2):
        model = _toy_classifier(layers=2, pooling="mean", dropout=0.1)
        runs.append(classifier.fine_tune(model, toy_tokenizer, train, labels, epochs=12, batch_size=8, lr=5e-3,
                                         valid=(valid, valid_labels), progress=False))
    history = runs[0]
    assert history["valid_accuracy"].shape == (12,) and history["valid_accuracy"][-1] == 1.0
    assert history["train_accuracy"][-1] >= 0.95
    np.testing.assert_array_equal(runs[0]["loss"], runs[1]["loss"])
    predicted, probs = classifier.predict(model, toy_tokenizer, valid)
    np.testing.assert_array_equal(predicted, valid_labels)
    assert probs.shape == (20, 2)


def test_validation_from_cached_states_equals_predict_and_the_heads_are_bert_s(toy_tokenizer):
    labels = [0, 1, 1, 0, 0, 1, 0, 0, 1, 1]
    model = _toy_classifier(pooling="cls")
    history = classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS[:6], labels[:6], epochs=2, batch_size=3, lr=1e-2,
                                   train_layers=2, valid=(TOY_TEXTS[4:], labels[4:]), progress=False)
    predicted, _ = classifier.predict(model, toy_tokenizer, TOY_TEXTS[4:])
    assert history["valid_accuracy"][-1] == pytest.approx(np.mean(predicted == np.array(labels[4:])))
    ids, segments, padding = toy_batch()
    model.eval()
    last = model.bert(ids, segments, padding).last
    expected = model.head(torch.tanh(model.bert.pooler(last[:, 0])))
    torch.testing.assert_close(model(ids, segments, padding), expected, rtol=0, atol=1e-6)
    model.pooling = "mean"
    mean = (last * padding[..., None]).sum(1) / padding.sum(1, keepdim=True)
    torch.testing.assert_close(model(ids, segments, padding), model.head(mean), rtol=0, atol=1e-6)


def test_keep_best_ends_with_the_parameters_of_the_best_validation_epoch(toy_tokenizer):
    labels = [0, 1, 1, 0, 0, 1, 0, 0, 1, 1]
    valid = (TOY_TEXTS[4:], labels[4:])
    runs = {}
    for keep_best in (False, True):
        model = _toy_classifier(pooling="mean")
        history = classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS[:6], labels[:6], epochs=5, batch_size=2,
                                       lr=5e-2, train_layers=1, valid=valid, progress=False, keep_best=keep_best)
        runs[keep_best] = (model, history)
    (plain, plain_history), (kept, kept_history) = runs[False], runs[True]
    np.testing.assert_array_equal(plain_history["loss"], kept_history["loss"])  # the same training either way
    np.testing.assert_array_equal(plain_history["valid_accuracy"], kept_history["valid_accuracy"])
    scores = kept_history["valid_accuracy"]
    best = int(np.argmax(scores))  # the first epoch with the highest accuracy
    predicted, _ = classifier.predict(kept, toy_tokenizer, valid[0])
    assert np.mean(predicted == np.array(valid[1])) == pytest.approx(scores[best])
    same = [torch.equal(a, b) for a, b in zip(kept.parameters(), plain.parameters())]
    assert all(same) == (best == len(scores) - 1), (best, scores)  # restored unless the last epoch was the best
    with pytest.raises(ValueError, match="keep_best"):
        classifier.fine_tune(_toy_classifier(), toy_tokenizer, TOY_TEXTS, labels, keep_best=True, progress=False)


def test_paired_difference_matches_the_normal_approximation_and_cancels_shared_outcomes():
    rng = np.random.default_rng(0)
    n = 4000
    a = rng.random(n) < 0.75
    b = np.where(rng.random(n) < 0.8, a, rng.random(n) < 0.7)  # agrees with a on most texts
    found = seeds.paired_difference(a, b, resamples=4000, seed=1)
    d = a.astype(float) - b.astype(float)
    assert found.values.tolist() == [d.mean()] and found.low < d.mean() < found.high
    half = 1.96 * d.std(ddof=1) / np.sqrt(n)  # the interval of a mean of n paired differences
    assert found.high - found.low == pytest.approx(2 * half, rel=0.1)
    wilson = seeds.proportion(int(a.sum()), n)
    assert found.high - found.low < wilson.high - wilson.low  # pairing removes the texts both get right or wrong
    same = seeds.paired_difference(a, a)
    assert (same.mean, same.low, same.high) == (0.0, 0.0, 0.0)
    np.testing.assert_array_equal(seeds.paired_difference(a, b, seed=3).values, found.values)
    with pytest.raises(ValueError, match="same length"):
        seeds.paired_difference(a, b[:-1])
    with pytest.raises(ValueError, match="0/1"):
        seeds.paired_difference(a * 2, b)


def test_pairwise_cosines_against_sklearn():
    from sklearn.metrics.pairwise import cosine_similarity

    x = np.random.default_rng(0).normal(size=(2, 5, 3))
    found = analysis.pairwise_cosines(torch.tensor(x))
    assert found.shape == (2, 5, 5)
    for i in range(2):
        np.testing.assert_allclose(found[i].numpy(), cosine_similarity(x[i]), rtol=0, atol=1e-12)


def test_classifier_errors(toy_tokenizer):
    model = _toy_classifier()
    with pytest.raises(ValueError, match="pooling"):
        classifier.BertClassifier(model.bert, 2, pooling="max")
    with pytest.raises(TypeError, match="BertModel"):
        classifier.BertClassifier(model, 2)
    with pytest.raises(ValueError, match="train_layers"):
        classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS, [0] * 10, train_layers=4, progress=False)
    with pytest.raises(ValueError, match="labels for"):
        classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS, [0] * 9, progress=False)
    with pytest.raises(ValueError, match="labels"):
        classifier.fine_tune(model, toy_tokenizer, TOY_TEXTS, [0] * 9 + [2], progress=False)
    with pytest.raises(ValueError, match="states must hold"):
        classifier.predict(model, toy_tokenizer, TOY_TEXTS, states=[torch.zeros(3, 16)], layer=1)
    with pytest.raises(ValueError, match="non-empty"):
        classifier.predict(model, toy_tokenizer, "one string")


# ---------------------------------------------------------------- analysis


def test_probe_layers_on_separable_and_random_features():
    rng = np.random.default_rng(0)
    labels = rng.integers(2, size=200)
    noise = rng.normal(size=(2, 200, 5))
    separable = noise[1].copy()
    separable[:, 0] += 6 * labels - 3
    scores = analysis.probe_layers(np.stack([noise[0], separable]), labels, np.arange(150), np.arange(150, 200))
    assert scores.shape == (2,) and scores[1] == 1.0 and scores[0] < 0.75
    with pytest.raises(ValueError, match="labels"):
        analysis.probe_layers(noise, labels[:10], np.arange(5), np.arange(5, 10))
    with pytest.raises(ValueError, match="L \\+ 1, N, D"):
        analysis.probe_layers(noise[0], labels, np.arange(5), np.arange(5, 10))


def test_anisotropy():
    rng = np.random.default_rng(0)
    same = np.tile(rng.normal(size=(1, 8)), (50, 1))
    assert analysis.anisotropy(same) == pytest.approx(1.0)
    random = rng.normal(size=(2000, 64))
    assert abs(analysis.anisotropy(random, pairs=4000)) < 0.02
    offset = random + 5.0  # a common direction shared by every vector
    assert analysis.anisotropy(offset) > 0.9
    assert abs(analysis.anisotropy(offset, centre=True, pairs=4000)) < 0.02
    two = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert analysis.anisotropy(two) == 0.0  # a vector is never paired with itself
    with pytest.raises(ValueError, match="N >= 2"):
        analysis.anisotropy(two[:1])


def test_linear_cka_and_layer_similarity():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 6))
    rotation, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert analysis.linear_cka(x, 3.0 * x @ rotation + 1.0) == pytest.approx(1.0)
    assert analysis.linear_cka(x, rng.normal(size=(100, 4))) < 0.2
    assert analysis.linear_cka(x, x[:, :3]) == pytest.approx(analysis.linear_cka(x[:, :3], x))
    hidden = torch.tensor(rng.normal(size=(3, 2, 5, 6)))
    hidden[2] = 2 * hidden[0]
    padding = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    hidden[1, 1, 3:] = 1e6  # padding must not count
    sim = analysis.layer_similarity(hidden, padding)
    assert sim.shape == (3, 3) and np.allclose(sim, sim.T) and np.allclose(np.diag(sim), 1)
    assert sim[0, 2] == pytest.approx(1.0)
    assert sim[0, 1] == pytest.approx(analysis.linear_cka(hidden[0][padding], hidden[1][padding]))


def test_head_similarity_against_scipy():
    from scipy.spatial.distance import jensenshannon

    g = torch.Generator().manual_seed(0)
    weights = torch.rand(2, 2, 3, 5, 5, generator=g).softmax(-1)  # (L, B, nh, T, T)
    padding = torch.tensor([[True] * 3 + [False] * 2, [True] * 5])  # padded queries before real ones
    weights[:, 0, :, :, 3:] = 0
    weights = weights / weights.sum(-1, keepdim=True)
    weights[1, :, 2] = weights[0, :, 0]  # head 2 of layer 1 copies head 0 of layer 0
    sim = attention_heads.head_similarity(list(weights), padding)
    assert sim.shape == (6, 6) and np.allclose(sim, sim.T) and np.allclose(np.diag(sim), 0)
    assert sim[0, 5] == pytest.approx(0.0, abs=1e-12)
    rows = [(b, q) for b in range(2) for q in range(5) if padding[b, q]]
    expected = np.mean([jensenshannon(weights[0, b, 1, q].numpy(), weights[1, b, 0, q].numpy()) ** 2
                        for b, q in rows])
    assert sim[1, 3] == pytest.approx(expected, rel=1e-6)
    assert attention_heads.js_divergence(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) == pytest.approx(
        math.log(2))


def test_head_divergence_by_sentence_against_scipy_and_head_similarity():
    from scipy.spatial.distance import jensenshannon

    g = torch.Generator().manual_seed(1)
    weights = torch.rand(2, 3, 2, 5, 5, generator=g).softmax(-1)  # (L, B, nh, T, T)
    padding = torch.tensor([[True] * 3 + [False] * 2, [True] * 5, [True] * 2 + [False] * 3])
    by_sentence = attention_heads.head_divergence_by_sentence(list(weights), padding)
    assert by_sentence.shape == (3, 4, 4)
    for b in range(3):
        real = [q for q in range(5) if padding[b, q]]
        head_1, head_3 = weights[0, b, 1].double().numpy(), weights[1, b, 1].double().numpy()  # (T, T) each
        expected = np.mean([jensenshannon(head_1[q], head_3[q]) ** 2 for q in real])
        assert by_sentence[b, 1, 3] == pytest.approx(expected, rel=1e-6) == by_sentence[b, 3, 1]
        # one sentence alone gives head_similarity of that sentence
        alone = attention_heads.head_similarity([w[b:b + 1] for w in weights], padding[b:b + 1])
        np.testing.assert_allclose(by_sentence[b], alone, rtol=0, atol=1e-12)
    whole = attention_heads.head_similarity(list(weights), padding)
    weighted = np.average(by_sentence, axis=0, weights=padding.sum(1).numpy())
    np.testing.assert_allclose(weighted, whole, rtol=0, atol=1e-12)


def test_attention_patterns_on_hand_made_heads(toy_tokenizer):
    ids = torch.tensor([[2, 10, 11, 12, 3, 13, 14, 3], [2, 15, 16, 3, 0, 0, 0, 0]])
    padding = ids != 0  # the counted queries: positions 1, 2, 3, 5, 6 of row 0 and 1, 2 of row 1
    steps = ids.shape[1]
    previous, following = torch.zeros(steps, steps), torch.zeros(steps, steps)
    for q in range(steps):
        previous[q, max(q - 1, 0)] = 1.0
        following[q, min(q + 1, steps - 1)] = 1.0
    on_cls = torch.zeros(steps, steps)
    on_cls[:, 0] = 1.0
    heads = torch.stack([previous, following, torch.eye(steps), on_cls])  # (nh, T, T)
    weights = heads[None, None].repeat(2, 2, 1, 1, 1)  # (L, B, nh, T, T)
    weights[1, 1, 3] = 0.0
    weights[1, 1, 3, :, 3] = 1.0  # layer 1, second row, head 3: everything on that row's [SEP]
    found = attention_heads.attention_patterns(list(weights), ids, padding, toy_tokenizer)
    assert set(found) == set(attention_heads.PATTERNS) and found["cls"].shape == (2, 4)
    assert found["previous"][:, 0] == pytest.approx([1.0, 1.0])
    assert found["next"][:, 1] == pytest.approx([1.0, 1.0])
    assert found["self"][:, 2] == pytest.approx([1.0, 1.0])
    assert found["cls"][:, 3] == pytest.approx([1.0, 5 / 7]) and found["sep"][:, 3] == pytest.approx([0.0, 2 / 7])
    assert found["cls"][0, :3] == pytest.approx([2 / 7, 0, 0])  # the previous token of 1 and 1 is [CLS]
    assert found["sep"][0, :3] == pytest.approx([1 / 7, 3 / 7, 0])  # after [SEP]: 5; before [SEP]: 3, 6 and 2
    assert found["self"][0, :2] == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="padding"):
        attention_heads.attention_patterns(list(weights), ids, padding[:, :5], toy_tokenizer)


def test_word_positions_and_sense_similarity(toy_tokenizer):
    assert analysis.word_positions(toy_tokenizer, "The cat was unlikely , the dog", "unlikely") == [4, 5, 6]
    assert analysis.word_positions(toy_tokenizer, "a bank , the bank", "Bank") == [2]
    with pytest.raises(ValueError, match="does not occur"):
        analysis.word_positions(toy_tokenizer, "the river", "bank")
    with pytest.raises(ValueError, match="one word"):
        analysis.word_positions(toy_tokenizer, "the river", "the river")
    vectors = torch.tensor([[[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]]] * 2)  # (L + 1, N, D)
    same, different = analysis.sense_similarity(vectors, ["a", "a", "b"])
    assert same == pytest.approx([np.cos(np.arctan(0.1))] * 2)
    assert different == pytest.approx([(0.0 + 0.1 / np.hypot(1, 0.1)) / 2] * 2)
    with pytest.raises(ValueError, match="at least one pair"):
        analysis.sense_similarity(vectors, ["a", "a", "a"])


def test_word_vectors_take_the_mean_of_the_pieces(toy_tokenizer):
    with torch_seed(0):
        bert = perturb(BertModel(tiny_config()), 7).eval()
    sentences = ["the cat was unlikely", "unlikely , the dog was"]
    vectors = analysis.word_vectors(bert, toy_tokenizer, sentences, "unlikely")
    assert vectors.shape == (3, 2, 16)
    from course_lib.bert.inputs import encode

    first = bert(torch.tensor([encode(toy_tokenizer, sentences[0])[0]])).hidden_states
    torch.testing.assert_close(vectors[:, 0], torch.stack(first)[:, 0, 4:7].mean(1), rtol=0, atol=1e-5)


def test_bank_senses_with_minilm():
    from course_lib.bert.pretrained import load_pretrained

    model, tokenizer = load_pretrained()
    sentences = ["She sat on the bank of the river.", "The river bank was muddy after the rain.",
                 "He deposited the money at the bank.", "The bank approved her loan."]
    vectors = analysis.word_vectors(model, tokenizer, sentences, "bank")
    assert vectors.shape == (7, 4, 384)
    same, different = analysis.sense_similarity(vectors, ["river", "river", "money", "money"])
    assert (same[1:] > different[1:]).all()  # context separates the senses in every layer
    assert different[0] > 0.9  # the embeddings differ only by position
