"""course_lib.recurrent.language_model, gradient_flow, elmo and plotting.gradient_norms on tiny models.

References: ``torch.nn.functional.cross_entropy`` over the whole stream for the
perplexity (carrying the state through a chunked loop must change nothing), a
uniform model whose perplexity is exactly ``V``, hand-written sums for ELMo's
scalar mix, orthogonal recurrent matrices of known spectral radius for the
gradient norms, and, for the trainers, real text from the course's corpus
(Lee's news articles) that a working model must learn something from.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from course_lib import plotting
from course_lib.recurrent import elmo
from course_lib.text import corpus, vocabulary
from course_lib.recurrent.gradient_flow import gradient_norms_through_time
from course_lib.recurrent.language_model import (RecurrentLanguageModel, batchify, evaluate_perplexity, generate,
                                                train_language_model)
from course_lib.training import optimizer_step
from course_lib.text.vocabulary import stream_ids, with_specials

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)

SPECIALS = ("<unk>", "<eos>")


def tiny_vocab(*words: str) -> vocabulary.Vocabulary:
    return vocabulary.Vocabulary(list(words), np.ones(len(words), dtype=np.int64))


# ---------------------------------------------------------------- batchify, stream_ids, with_specials

@pytest.mark.parametrize("ids", [np.arange(23), list(range(23)), np.arange(23, dtype=np.int32)])
def test_batchify_cuts_consecutive_rows_and_drops_the_rest(ids):
    rows = batchify(ids, 4)
    assert rows.dtype == torch.int64 and rows.shape == (4, 5)
    for b in range(4):
        assert rows[b].tolist() == list(range(5 * b, 5 * b + 5))


@pytest.mark.parametrize("ids, batch_size, match", [
    (np.zeros((2, 6), dtype=np.int64), 2, "1-D"),
    (np.arange(10.0), 2, "integer"),
    (np.arange(10), 0, "batch_size"),
    (np.arange(10), 6, "too few"),
])
def test_batchify_rejects(ids, batch_size, match):
    with pytest.raises(ValueError, match=match):
        batchify(ids, batch_size)


def test_stream_ids_maps_unknown_tokens_and_ends_every_document():
    vocab = tiny_vocab("a", "b", *SPECIALS)
    ids = stream_ids([["a", "x", "b"], ["b"], []], vocab)
    assert ids.dtype == np.int64
    assert vocab.decode(ids) == ["a", "<unk>", "b", "<eos>", "b", "<eos>", "<eos>"]
    assert vocab.decode(stream_ids([["a", "x"]], vocab, separator=None)) == ["a", "<unk>"]
    assert vocab.decode(stream_ids([["a"]], tiny_vocab("a", "<unk>"))) == ["a"], "no separator in vocab: none added"


def test_stream_ids_reads_strings_as_characters():
    vocab = tiny_vocab("a", "b", *SPECIALS)
    assert vocab.decode(stream_ids(["ab", "bz"], vocab)) == ["a", "b", "<eos>", "b", "<unk>", "<eos>"]


def test_stream_ids_needs_the_unknown_token():
    with pytest.raises(KeyError, match="<unk>"):
        stream_ids([["a"]], tiny_vocab("a", "<eos>"))


def test_with_specials_appends_new_tokens_with_zero_counts():
    vocab = vocabulary.Vocabulary(["the", "<eos>", "cat"], np.array([5, 3, 2]))
    extended = with_specials(vocab, "<unk>", "<eos>", "<pad>")
    assert extended.words == ["the", "<eos>", "cat", "<unk>", "<pad>"]
    assert extended.counts.tolist() == [5, 3, 2, 0, 0]
    assert vocab.words == ["the", "<eos>", "cat"], "the original vocabulary must not change"


# ---------------------------------------------------------------- evaluate_perplexity

@pytest.mark.parametrize("mode", ["rnn", "lstm", "gru"])
def test_evaluate_perplexity_equals_cross_entropy_over_the_whole_stream(mode):
    torch.manual_seed(0)
    model = RecurrentLanguageModel(7, 4, 5, mode=mode)
    ids = np.random.default_rng(0).integers(0, 7, size=103)
    rows = batchify(ids, 3)  # (3, 34): 33 predictions per row, in chunks of 4, 4, ..., 1
    with torch.no_grad():
        logits, _ = model(rows[:, :-1])  # one pass over each whole row: what carrying the state must give
    expected = math.exp(F.cross_entropy(logits.reshape(-1, 7), rows[:, 1:].reshape(-1), reduction="mean").item())
    assert evaluate_perplexity(model, ids, seq_len=4, batch_size=3) == pytest.approx(expected, rel=1e-5)
    assert model.training, "evaluate_perplexity must leave the model in the mode it found it"


def test_uniform_model_has_perplexity_vocab_size():
    model = RecurrentLanguageModel(13, 4, 5)
    with torch.no_grad():
        model.readout.weight.zero_()
        model.readout.bias.zero_()
    ids = np.random.default_rng(1).integers(0, 13, size=200)
    assert evaluate_perplexity(model, ids, seq_len=7, batch_size=4) == pytest.approx(13, rel=1e-6)


# ---------------------------------------------------------------- training on real text

@pytest.fixture(scope="module")
def characters():
    """The first 60 Lee articles as characters for training, the next 6 for validation."""
    documents = corpus.lee_documents()
    vocab = with_specials(vocabulary.Vocabulary.build([list(d) for d in documents[:60]]), *SPECIALS)
    return vocab, stream_ids(documents[:60], vocab), stream_ids(documents[60:66], vocab)


def char_model(vocab, seed: int = 0, dropout: float = 0.0) -> RecurrentLanguageModel:
    torch.manual_seed(seed)
    return RecurrentLanguageModel(len(vocab), 16, 64, mode="lstm", dropout=dropout)


TRAINING = {"seq_len": 32, "batch_size": 16, "lr": 1e-2, "progress": False}


@pytest.fixture(scope="module")
def trained(characters):
    vocab, ids, valid = characters
    model = char_model(vocab)
    history = train_language_model(model, ids, steps=150, valid_ids=valid, eval_every=60, **TRAINING)
    return model, history


def test_training_loss_falls_well_below_log_v(characters, trained):
    vocab, _, _ = characters
    _, history = trained
    uniform = math.log(len(vocab))
    assert history["loss"].shape == history["grad_norm"].shape == (150,)
    assert abs(history["loss"][:3].mean() - uniform) < 0.3, "an untrained model predicts nearly uniformly"
    assert history["loss"][-20:].mean() < 0.65 * uniform, "150 steps on 64 000 characters must learn something"
    assert np.all(np.isfinite(history["grad_norm"])) and np.all(history["grad_norm"] > 0)


def test_validation_perplexity_is_recorded_every_eval_every_steps_and_at_the_end(characters, trained):
    vocab, _, _ = characters
    _, history = trained
    assert history["valid_step"].tolist() == [60, 120, 150]
    perplexity = history["valid_perplexity"]
    assert np.all(np.isfinite(perplexity)) and perplexity[-1] < perplexity[0] < len(vocab)


def test_training_with_the_same_seed_repeats_exactly(characters):
    vocab, ids, _ = characters
    runs = [train_language_model(char_model(vocab, dropout=0.2), ids, steps=8, seed=seed, **TRAINING)
            for seed in (3, 3, 4)]
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    assert not np.array_equal(runs[0]["loss"], runs[2]["loss"]), "the seed drives dropout"


def test_training_wraps_around_short_streams():
    torch.manual_seed(0)
    model = RecurrentLanguageModel(5, 4, 6)
    ids = np.random.default_rng(0).integers(0, 5, size=60)  # 2 rows of 30: a new pass every 2 steps
    history = train_language_model(model, ids, steps=7, seq_len=10, batch_size=2, progress=False)
    assert np.all(np.isfinite(history["loss"])) and len(history["loss"]) == 7
    with pytest.raises(ValueError, match="seq_len"):
        train_language_model(model, ids, steps=1, seq_len=30, batch_size=2, progress=False)


def test_max_norm_none_does_not_clip_and_a_small_one_does(characters):
    vocab, ids, _ = characters
    runs = {norm: train_language_model(char_model(vocab), ids, steps=6, max_norm=norm, **TRAINING)
            for norm in (None, 1e12, 0.05)}
    np.testing.assert_array_equal(runs[None]["loss"], runs[1e12]["loss"])
    assert not np.array_equal(runs[None]["loss"], runs[0.05]["loss"]), "clipping to 0.05 must change the steps"
    for history in runs.values():
        assert np.all(np.isfinite(history["grad_norm"]))
    assert np.all(runs[0.05]["grad_norm"] > 0.05), "the recorded norm is the one before clipping"


@pytest.mark.parametrize("max_norm", [None, 1e-3])
def test_optimizer_step_clips_the_global_norm_and_returns_it_unclipped(max_norm):
    torch.manual_seed(0)
    model = RecurrentLanguageModel(6, 3, 4)
    logits, _ = model(torch.randint(0, 6, (2, 5)))
    loss = F.cross_entropy(logits.reshape(-1, 6), torch.randint(0, 6, (10,)))
    grads = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
    norm = torch.cat([g.reshape(-1) for g in grads]).norm().item()
    returned = optimizer_step(model, torch.optim.SGD(model.parameters(), lr=0.0), loss, max_norm)
    assert returned == pytest.approx(norm, rel=1e-5)
    after = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm().item()
    assert after == pytest.approx(norm if max_norm is None else max_norm, rel=1e-4)


def test_generate_repeats_with_a_seed_and_starts_with_the_prompt(characters, trained):
    vocab, _, _ = characters
    model, _ = trained
    prompt = list("The ")
    text = generate(model, vocab, prompt, 40, seed=1)
    assert text.startswith("The ") and len(text) >= 44
    assert generate(model, vocab, prompt, 40, seed=1) == text
    assert generate(model, vocab, prompt, 40, seed=2) != text
    assert generate(model, vocab, prompt, 0) == "The "


def test_generate_rejects_unknown_and_empty_prompts(characters, trained):
    vocab, _, _ = characters
    model, _ = trained
    with pytest.raises(KeyError, match="not in the vocabulary"):
        generate(model, vocab, ["\N{SNOWMAN}"], 5)
    with pytest.raises(ValueError, match="prompt"):
        generate(model, vocab, [], 5)


def test_language_model_rejects_float_ids():
    with pytest.raises(ValueError, match=r"ids must be a \(B, T\) int64"):
        RecurrentLanguageModel(5, 3, 4)(torch.zeros(2, 3))


# ---------------------------------------------------------------- gradient_norms_through_time

def elman_model(radius: float, input_scale: float, seed: int = 0) -> RecurrentLanguageModel:
    """An untrained Elman language model whose ``weight_hh`` is ``radius`` times an orthogonal matrix.

    Every singular value of ``U`` is then ``radius``; with small inputs tanh stays nearly linear and
    ``||dL/dh_t||`` scales by about ``radius`` per step back.
    """
    torch.manual_seed(seed)
    model = RecurrentLanguageModel(10, 8, 16, mode="rnn")
    cell = model.network.layers[0][0].cell
    orthogonal, _ = torch.linalg.qr(torch.randn(16, 16))
    with torch.no_grad():
        cell.weight_hh.copy_(radius * orthogonal)
        cell.weight_ih.mul_(input_scale)
        cell.bias_ih.zero_()
        cell.bias_hh.zero_()
    return model


IDS_13 = torch.randint(0, 10, (4, 13), generator=torch.Generator().manual_seed(0))  # 12 steps, then the target


@pytest.mark.parametrize("mode", ["rnn", "lstm", "gru"])
def test_gradient_norms_have_one_finite_entry_per_step(mode):
    torch.manual_seed(0)
    model = RecurrentLanguageModel(10, 4, 6, mode=mode)
    norms = gradient_norms_through_time(model, IDS_13)
    assert norms.shape == (12,) and norms.dtype == np.float64
    assert np.all(np.isfinite(norms)) and np.all(norms >= 0) and norms[-1] > 0
    assert model.training, "the model must be left in the mode it was in"


def test_gradient_norms_vanish_geometrically_for_a_small_spectral_radius():
    norms = gradient_norms_through_time(elman_model(0.3, 1.0), IDS_13)
    assert np.all(np.diff(norms) > 0), "each step back multiplies the gradient by at most 0.3"
    assert norms[0] / norms[-1] < 0.3 ** 11 * 1.01


def test_gradient_norms_do_not_vanish_for_a_large_spectral_radius():
    norms = gradient_norms_through_time(elman_model(3.0, 1e-4), IDS_13)
    assert norms[0] / norms[-1] > 1e3, "near the linear regime each step back multiplies the norm by about 3"
    norms = gradient_norms_through_time(elman_model(1.0, 1e-4), IDS_13)
    np.testing.assert_allclose(norms, norms[-1], rtol=1e-3, err_msg="an orthogonal U keeps the norm")


@pytest.mark.parametrize("model, ids, match", [
    (RecurrentLanguageModel(10, 4, 6, num_layers=2), IDS_13, "one-layer"),
    (torch.nn.Linear(3, 3), IDS_13, "RecurrentLanguageModel"),
    (RecurrentLanguageModel(10, 4, 6), IDS_13.float(), "int64"),
    (RecurrentLanguageModel(10, 4, 6), IDS_13[:, :1], r"T \+ 1"),
])
def test_gradient_norms_reject(model, ids, match):
    with pytest.raises(ValueError, match=match):
        gradient_norms_through_time(model, ids)


# ---------------------------------------------------------------- ELMo: scalar_mix and ScalarMix

def mix_by_hand(layers, weights, gamma):
    """``gamma * sum_j softmax(w)_j layers[j]`` with an explicit loop and exponentials."""
    exps = [torch.exp(w) for w in weights]
    total = sum(exps)
    return gamma.reshape(()) * sum(e / total * layer for e, layer in zip(exps, layers))


@pytest.mark.parametrize("gamma_shape", [(), (1,)])
@pytest.mark.parametrize("shape", [(3, 5), (3, 2, 4, 5)])
def test_scalar_mix_matches_a_hand_written_sum_with_gradients(shape, gamma_shape):
    torch.manual_seed(0)
    leaves = [torch.randn(*shape, dtype=torch.float64), torch.randn(shape[0], dtype=torch.float64),
              torch.full(gamma_shape, 1.7, dtype=torch.float64)]
    leaves = [t.requires_grad_() for t in leaves]
    mixed, expected = elmo.scalar_mix(*leaves), mix_by_hand(*leaves)
    assert mixed.shape == shape[1:]
    torch.testing.assert_close(mixed, expected, rtol=0, atol=1e-12)
    probe = torch.randn(shape[1:], dtype=torch.float64)
    grads = torch.autograd.grad((mixed * probe).sum(), leaves)
    for name, got, want in zip(("layers", "weights", "gamma"), grads,
                               torch.autograd.grad((expected * probe).sum(), leaves)):
        assert got.abs().sum() > 0, f"no gradient reaches {name}"
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12, msg=lambda m, name=name: f"gradient of {name}: {m}")


@pytest.mark.parametrize("weights, gamma, match", [
    (torch.zeros(2), torch.ones(()), r"weights must have shape \(3,\)"),
    (torch.zeros(3, 1), torch.ones(()), r"weights must have shape \(3,\)"),
    (torch.zeros(3), torch.ones(2), "gamma must be a single number"),
])
def test_scalar_mix_rejects(weights, gamma, match):
    with pytest.raises(ValueError, match=match):
        elmo.scalar_mix(torch.randn(3, 4, 5), weights, gamma)


def test_scalar_mix_module_starts_as_an_equal_mix():
    mix = elmo.ScalarMix(4)
    np.testing.assert_allclose(mix.layer_weights(), 0.25)
    assert mix.gamma.item() == 1.0
    layers = torch.randn(4, 3, 6)
    torch.testing.assert_close(mix(layers), layers.mean(dim=0))


# ---------------------------------------------------------------- ELMo: the biLM

def small_bilm(vocab_size: int = 20, seed: int = 0) -> elmo.BiLanguageModel:
    torch.manual_seed(seed)
    return elmo.BiLanguageModel(vocab_size, 6, num_layers=2, dropout=0.0).eval()


def test_bilm_layers_shape_and_layer_zero_is_the_embedding_twice():
    model = small_bilm()
    ids = torch.randint(0, 20, (3, 7), generator=torch.Generator().manual_seed(0))
    layers = model.layers(ids)
    assert layers.shape == (3, 3, 7, 12)
    embedded = model.embedding(ids)
    torch.testing.assert_close(layers[0], torch.cat([embedded, embedded], dim=-1), rtol=0, atol=0)


@pytest.mark.parametrize("position", [0, 3, 7])
def test_bilm_forward_half_reads_only_the_past_and_backward_half_only_the_future(position):
    model = small_bilm()
    ids = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[:, position] = (changed[:, position] + 1) % 20
    with torch.no_grad():
        before, after = model.layers(ids)[1:], model.layers(changed)[1:]  # (L, B, T, 2H)
    moved = (before - after).abs().amax(dim=(0, 1))  # (T, 2H): how much each position changed
    forward_moved, backward_moved = moved[:, :6].amax(dim=1), moved[:, 6:].amax(dim=1)  # (T,)
    t = torch.arange(8)
    assert torch.all(forward_moved[t < position] == 0) and torch.all(forward_moved[t >= position] > 0)
    assert torch.all(backward_moved[t > position] == 0) and torch.all(backward_moved[t <= position] > 0)


def test_bilm_ignores_tokens_past_each_length():
    model = small_bilm()
    ids = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([5, 8])
    other = ids.clone()
    other[0, 5:] = (other[0, 5:] + 1) % 20
    with torch.no_grad():
        a, b = model.layers(ids, lengths), model.layers(other, lengths)
    torch.testing.assert_close(a[1:, :, :], b[1:, :, :], rtol=0, atol=0)


@pytest.fixture(scope="module")
def words():
    """The first 80 documents of the course's English text, a 300-word vocabulary and <unk>, <eos>."""
    documents = corpus.english_documents()[:80]
    vocab = with_specials(vocabulary.Vocabulary.build(documents, max_size=300), *SPECIALS)
    return vocab, stream_ids(documents, vocab)


@pytest.fixture(scope="module")
def trained_bilm(words):
    vocab, ids = words
    torch.manual_seed(0)
    model = elmo.BiLanguageModel(len(vocab), 16, num_layers=2, dropout=0.0)
    history = elmo.train_bilm(model, ids, steps=100, seq_len=16, batch_size=16, lr=1e-2, progress=False)
    return model, history


def test_train_bilm_lowers_both_losses(words, trained_bilm):
    vocab, _ = words
    _, history = trained_bilm
    for key in ("forward_loss", "backward_loss"):
        loss = history[key]
        assert loss.shape == (100,) and np.all(np.isfinite(loss))
        assert abs(loss[:3].mean() - math.log(len(vocab))) < 0.3, f"{key} starts near log V"
        assert loss[-10:].mean() < loss[:5].mean() - 1.0, f"{key} must fall"
    assert np.all(np.isfinite(history["grad_norm"]))


def test_bilm_perplexities_are_finite_and_above_one(words, trained_bilm):
    vocab, ids = words
    model, _ = trained_bilm
    perplexities = elmo.bilm_perplexities(model, ids[-2000:], seq_len=16)
    assert len(perplexities) == 2
    for p in perplexities:
        assert np.isfinite(p) and 1 < p < len(vocab)


def test_contextual_vectors_share_layer_zero_and_differ_above(words, trained_bilm):
    vocab, _ = words
    model, _ = trained_bilm
    word = vocab.words[12]
    sentences = [[vocab.words[3], word, vocab.words[40], vocab.words[7]],
                 [vocab.words[50], "qwertyuiop", vocab.words[9], vocab.words[2], word]]  # with an unknown token
    vectors = elmo.contextual_vectors(model, vocab, sentences, word)
    assert vectors.shape == (2, 3, 32)
    torch.testing.assert_close(vectors[0, 0], vectors[1, 0], rtol=0, atol=0)
    for layer in (1, 2):
        assert not torch.allclose(vectors[0, layer], vectors[1, layer]), f"layer {layer} must depend on the context"
    with pytest.raises(KeyError, match="not in the vocabulary"):
        elmo.contextual_vectors(model, vocab, sentences, "qwertyuiop")
    with pytest.raises(ValueError, match="does not occur"):
        elmo.contextual_vectors(model, vocab, [[vocab.words[3]]], word)


def test_contextual_vectors_need_no_unknown_token_when_every_token_is_known():
    model = small_bilm(vocab_size=3)
    vocab = tiny_vocab("a", "b", "c")
    assert elmo.contextual_vectors(model, vocab, [["a", "b", "c"]], "b").shape == (1, 3, 12)


def test_fit_scalar_mix_puts_weight_on_the_informative_layer():
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (200,), generator=generator)
    layers = torch.randn(3, 200, 8, generator=generator)  # noise everywhere ...
    layers[1, :, 0] += 3.0 * (2 * labels - 1)  # ... but layer 1 carries the label
    mix, classifier, history = elmo.fit_scalar_mix(layers, labels.numpy(), num_classes=2)
    weights = mix.layer_weights()
    assert weights.shape == (3,) and weights.sum() == pytest.approx(1.0)
    assert weights[1] > 0.8, f"the informative layer 1 should dominate, got weights {weights}"
    assert history["loss"][-1] < 0.1 * history["loss"][0]
    accuracy = (classifier(mix(layers)).argmax(dim=1) == labels).float().mean().item()
    assert accuracy > 0.95


# ---------------------------------------------------------------- plotting.gradient_norms

def test_gradient_norms_plot_draws_one_labelled_line_per_model():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    norms = {"RNN": 10.0 ** -np.arange(6)[::-1], "LSTM": np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])}
    ax = plotting.gradient_norms(norms)
    try:
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == ["RNN", "LSTM"]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["RNN", "LSTM"]
        np.testing.assert_array_equal(lines[0].get_xdata(), [5, 4, 3, 2, 1, 0])  # the last entry is 0 steps back
        drawn = np.asarray(lines[1].get_ydata(), dtype=np.float64)
        np.testing.assert_allclose(drawn[1:], norms["LSTM"][1:])
        assert not drawn[0] <= 0, "a norm of 0 has no logarithm: a gap (nan) or a positive floor, never 0"
        assert ax.get_yscale() == "log" and ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    finally:
        plt.close(ax.figure)


def test_gradient_norms_plot_rejects_a_2d_array():
    import matplotlib

    matplotlib.use("Agg")
    with pytest.raises(ValueError, match="1-D"):
        plotting.gradient_norms({"RNN": np.ones((3, 4))})
