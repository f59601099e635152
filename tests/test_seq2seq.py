"""course_lib.attention.seq2seq, teacher_forcing and the translation side of decoding against references.

The encoder against ``torch.nn.GRU`` run on each unpadded sentence alone; the
teacher-forced forward pass against the decoder stepped by hand, one sentence at a
time, with the attention written out for each kind over the real source positions
only; padding that does not leak (source ids past a length, later target words);
``plain_decoder_step`` that ignores the memory; a decoder with
``course_lib.testing.TorchDotAttention`` against one with ``Attention("dot")``.
``sequence_loss`` against a loop over sentences, ``train_seq2seq`` (the loss falls,
the same seed gives the same history, torch's generator is restored), and
``greedy_translate`` against ``greedy_decode`` and width-1 ``beam_search`` through
``translation_step_fn``, sentence by sentence, its weights against the teacher-forced
pass on its own outputs.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_lib.attention.decoding import beam_search, greedy_decode, greedy_translate, translation_step_fn
from course_lib.attention.number_phrases import load_number_translation
from course_lib.attention.scores import Attention
from course_lib.attention.seq2seq import (Decoder, Encoder, Seq2Seq, attention_decoder_step, check_step_args,
                                          plain_decoder_step)
from course_lib.attention.teacher_forcing import evaluate_loss, pad_batch, sequence_loss, train_seq2seq
from course_lib.testing import TorchDotAttention

KINDS = ["additive", "general", "dot", None]
KIND_IDS = ["additive", "general", "dot", "plain"]
ALL_KINDS = pytest.mark.parametrize("kind", KINDS, ids=KIND_IDS)
SRC_V, TGT_V, EMBED, HIDDEN = 11, 9, 5, 6
BOS, EOS = 1, 2


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float = 1e-12):
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def tiny_model(kind, seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(SRC_V, TGT_V, embed_dim=EMBED, hidden_size=HIDDEN, attention=kind).double()


def random_batch(seed: int = 0, lengths=(5, 2, 7, 1), target_steps: int = 4):
    """A padded source batch (ids >= 3 on real positions, 0 after) and teacher-forcing inputs from <bos>."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    source = torch.randint(3, SRC_V, (len(lengths), int(lengths.max())), generator=generator)
    source[torch.arange(source.shape[1])[None, :] >= lengths[:, None]] = 0
    target_in = torch.randint(3, TGT_V, (len(lengths), target_steps), generator=generator)
    target_in[:, 0] = BOS
    return source, lengths, target_in


# ---------------------------------------------------------------- shapes

@ALL_KINDS
def test_shapes(kind):
    model = tiny_model(kind)
    source, lengths, target_in = random_batch()
    memory, state, mask = model.encode(source, lengths)
    assert memory.shape == (4, 7, HIDDEN) and state.shape == (4, HIDDEN) and mask.shape == (4, 7)
    assert mask.dtype == torch.bool and mask.sum(1).tolist() == lengths.tolist()
    logits, weights = model(source, lengths, target_in)
    assert logits.shape == (4, 4, TGT_V) and logits.dtype == torch.float64
    if kind is None:
        assert weights is None and model.decoder.attention is None
        assert model.decoder.cell.input_size == EMBED and model.decoder.readout.in_features == HIDDEN
    else:
        assert weights.shape == (4, 4, 7)
        assert_close(weights.sum(-1), torch.ones(4, 4, dtype=torch.float64), "weights sum to 1", 1e-12)
        assert isinstance(model.decoder.attention, Attention) and model.decoder.attention.kind == kind
        assert model.decoder.cell.input_size == EMBED + HIDDEN and model.decoder.readout.in_features == 2 * HIDDEN


# ---------------------------------------------------------------- the encoder against torch.nn.GRU

def test_encoder_matches_torch_gru_on_each_sentence_alone():
    torch.manual_seed(1)
    encoder = Encoder(SRC_V, EMBED, HIDDEN).double()
    reference = nn.GRU(EMBED, HIDDEN, batch_first=True).double()
    reference.load_state_dict(encoder.rnn.state_dict())
    source, lengths, _ = random_batch(seed=2, lengths=(6, 1, 3, 6, 2))
    states, final = encoder(source, lengths)
    assert states.shape == (5, 6, HIDDEN) and final.shape == (5, HIDDEN)
    for b, length in enumerate(lengths.tolist()):
        embedded = F.embedding(source[b:b + 1, :length], encoder.embedding.weight)  # (1, L, E), no padding
        outputs, h_n = reference(embedded)
        assert_close(final[b], h_n[0, 0], f"final state of sentence {b} (length {length})")
        assert_close(states[b, :length], outputs[0], f"states of sentence {b}")


def test_encoder_embedding_pads_with_zeros():
    encoder = Encoder(SRC_V, EMBED, HIDDEN)
    assert encoder.embedding.padding_idx == 0 and not encoder.embedding.weight[0].any()


# ---------------------------------------------------------------- teacher forcing against the decoder stepped by hand

def attend_by_hand(attention: Attention, query, keys):
    """Weights and context of one query ``(H,)`` over the real keys ``(L, H)`` of one sentence, no mask."""
    if attention.kind == "dot":
        e = keys @ query
    elif attention.kind == "general":
        e = keys @ (query @ attention.weight)  # q^T W k_i
    else:
        e = torch.tanh(keys @ attention.weight_key.T + attention.weight_query @ query) @ attention.v
    a = torch.softmax(e, dim=0)
    return a @ keys, a


@ALL_KINDS
def test_forward_equals_the_decoder_stepped_by_hand(kind):
    model = tiny_model(kind, seed=3)
    source, lengths, target_in = random_batch(seed=4, lengths=(3, 7, 1, 5), target_steps=5)
    logits, weights = model(source, lengths, target_in)
    decoder = model.decoder
    for b, length in enumerate(lengths.tolist()):
        embedded = F.embedding(source[b, :length], model.encoder.embedding.weight)
        keys, _ = model.encoder.rnn(embedded[None])  # (1, L, H): this sentence alone, unpadded
        keys = keys[0]
        state = keys[-1]
        for t in range(target_in.shape[1]):
            word = decoder.embedding.weight[target_in[b, t]]
            if kind is None:
                state = decoder.cell(word[None], state[None])[0]
                expected = decoder.readout(state)
            else:
                context, a = attend_by_hand(decoder.attention, state, keys)  # query: the previous state
                state = decoder.cell(torch.cat([word, context])[None], state[None])[0]
                expected = decoder.readout(torch.cat([state, context]))
                assert_close(weights[b, t, :length], a, f"{kind}: weights of sentence {b}, step {t}")
                assert not weights[b, t, length:].any(), "padding gets weight 0"
            assert_close(logits[b, t], expected, f"{kind}: logits of sentence {b}, step {t}")


@ALL_KINDS
def test_padding_does_not_leak(kind):
    model = tiny_model(kind, seed=5)
    source, lengths, target_in = random_batch(seed=6, lengths=(2, 6, 4))
    logits, weights = model(source, lengths, target_in)
    noisy = source.clone()
    padding = torch.arange(source.shape[1])[None, :] >= lengths[:, None]
    noisy[padding] = torch.randint(3, SRC_V, (int(padding.sum()),), generator=torch.Generator().manual_seed(7))
    assert not torch.equal(noisy, source)
    other_logits, other_weights = model(noisy, lengths, target_in)
    assert_close(other_logits, logits, f"{kind}: logits with other ids on the source padding")
    if kind is not None:
        assert_close(other_weights, weights, f"{kind}: weights with other ids on the source padding")
    later = target_in.clone()
    later[:, 2:] = (later[:, 2:] + 1) % TGT_V  # words after step 1 cannot change steps 0 and 1
    assert_close(model(source, lengths, later)[0][:, :2], logits[:, :2], f"{kind}: later target words leak")


def test_plain_decoder_step_ignores_memory():
    torch.manual_seed(8)
    decoder = Decoder(TGT_V, EMBED, HIDDEN).double()
    assert decoder.step_fn is plain_decoder_step
    y_prev, s_prev = torch.tensor([1, 4, 8]), torch.randn(3, HIDDEN, dtype=torch.float64)
    logits, state, weights = decoder.step(y_prev, s_prev, torch.randn(3, 5, HIDDEN, dtype=torch.float64),
                                          torch.ones(3, 5, dtype=torch.bool))
    other = plain_decoder_step(decoder, y_prev, s_prev, torch.randn(3, 2, HIDDEN, dtype=torch.float64),
                               torch.ones(3, 2, dtype=torch.bool))
    assert weights is None and other[2] is None
    assert_close(other[0], logits, "logits with other memory")
    cell = nn.GRUCell(EMBED, HIDDEN).double()
    cell.load_state_dict(decoder.cell.state_dict())
    expected_state = cell(F.embedding(y_prev, decoder.embedding.weight), s_prev)
    assert_close(state, expected_state, "s_t = GRUCell(embed(y), s)")
    assert_close(logits, expected_state @ decoder.readout.weight.T + decoder.readout.bias, "W_o s_t + b_o")


def test_decoder_with_torch_dot_attention_equals_decoder_with_attention_dot():
    torch.manual_seed(9)
    ours = Decoder(TGT_V, EMBED, HIDDEN, attention=Attention("dot", HIDDEN)).double()
    reference = Decoder(TGT_V, EMBED, HIDDEN, attention=TorchDotAttention()).double()
    reference.load_state_dict(ours.state_dict())
    assert ours.step_fn is attention_decoder_step and reference.step_fn is attention_decoder_step
    generator = torch.Generator().manual_seed(10)
    y_prev = torch.tensor([3, 1, 7, 2])
    s_prev = torch.randn(4, HIDDEN, generator=generator, dtype=torch.float64)
    memory = torch.randn(4, 5, HIDDEN, generator=generator, dtype=torch.float64)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 1, 3, 4])[:, None]
    mine, theirs = ours.step(y_prev, s_prev, memory, mask), reference.step(y_prev, s_prev, memory, mask)
    assert mine[0].shape == (4, TGT_V) and mine[1].shape == (4, HIDDEN) and mine[2].shape == (4, 5)
    for a, b, name in zip(mine, theirs, ("logits", "state", "weights")):
        assert_close(a, b, f"{name}, Attention('dot') against TorchDotAttention")
    for b in range(4):  # and against the step written out for each sentence
        length = int(mask[b].sum())
        context, a = attend_by_hand(Attention("dot", HIDDEN), s_prev[b], memory[b, :length])
        state = reference.cell(torch.cat([reference.embedding.weight[y_prev[b]], context])[None], s_prev[b:b + 1])[0]
        assert_close(theirs[1][b], state, f"state of sentence {b}")
        assert_close(theirs[0][b], reference.readout(torch.cat([state, context])), f"logits of sentence {b}")
        assert_close(theirs[2][b, :length], a, f"weights of sentence {b}")


def test_step_fn_and_attention_fn_are_plugged_in():
    calls = {"step": 0, "attention": 0}

    def step(decoder, *args):
        calls["step"] += 1
        return attention_decoder_step(decoder, *args)

    def attention(query, keys, mask, *params):
        calls["attention"] += 1
        return TorchDotAttention()(query, keys, mask)

    torch.manual_seed(11)
    model = Seq2Seq(SRC_V, TGT_V, EMBED, HIDDEN, attention="dot", attention_fn=attention, step_fn=step)
    source, lengths, target_in = random_batch(seed=12, target_steps=3)
    model(source.clone(), lengths, target_in)
    assert calls == {"step": 3, "attention": 3}


STEP_ERRORS = {
    "not a Decoder": (lambda d: check_step_args(object(), torch.tensor([1, 2]), torch.zeros(2, HIDDEN),
                                                torch.zeros(2, 3, HIDDEN), torch.ones(2, 3, dtype=torch.bool)),
                      TypeError, r"decoder must be a course_lib.attention.seq2seq.Decoder, got object"),
    "float y_prev": (lambda d: d.step(torch.tensor([1.0, 2.0]), torch.zeros(2, HIDDEN), torch.zeros(2, 3, HIDDEN),
                                      torch.ones(2, 3, dtype=torch.bool)),
                     ValueError, r"y_prev must be a \(B,\) int64"),
    "y_prev (B, 1)": (lambda d: d.step(torch.tensor([[1], [2]]), torch.zeros(2, HIDDEN), torch.zeros(2, 3, HIDDEN),
                                       torch.ones(2, 3, dtype=torch.bool)), ValueError, r"y_prev must be a \(B,\)"),
    "s_prev of other H": (lambda d: d.step(torch.tensor([1, 2]), torch.zeros(2, HIDDEN + 1),
                                           torch.zeros(2, 3, HIDDEN), torch.ones(2, 3, dtype=torch.bool)),
                          ValueError, rf"s_prev must have shape \(B, H\) = \(2, {HIDDEN}\), got \(2, {HIDDEN + 1}\)"),
    "s_prev of other B": (lambda d: d.step(torch.tensor([1, 2]), torch.zeros(3, HIDDEN), torch.zeros(2, 3, HIDDEN),
                                           torch.ones(2, 3, dtype=torch.bool)), ValueError, r"s_prev must have shape"),
    "memory of other H": (lambda d: d.step(torch.tensor([1, 2]), torch.zeros(2, HIDDEN), torch.zeros(2, 3, 4),
                                           torch.ones(2, 3, dtype=torch.bool)),
                          ValueError, rf"memory must have shape \(B, Tk, H\) = \(2, \?, {HIDDEN}\), got \(2, 3, 4\)"),
    "mask of other Tk": (lambda d: d.step(torch.tensor([1, 2]), torch.zeros(2, HIDDEN), torch.zeros(2, 3, HIDDEN),
                                          torch.ones(2, 4, dtype=torch.bool)),
                         ValueError, r"mask must have shape \(B, Tk\) = \(2, 3\), got \(2, 4\)"),
    "memory not a tensor": (lambda d: d.step(torch.tensor([1, 2]), torch.zeros(2, HIDDEN), None,
                                             torch.ones(2, 3, dtype=torch.bool)),
                            TypeError, r"memory must be a torch.Tensor"),
}


@pytest.mark.parametrize("call, error, match", list(STEP_ERRORS.values()), ids=list(STEP_ERRORS))
def test_check_step_args_errors(call, error, match):
    torch.manual_seed(13)
    decoder = Decoder(TGT_V, EMBED, HIDDEN, attention=TorchDotAttention())
    with pytest.raises(error, match=match):
        call(decoder)


def test_check_step_args_accepts_good_arguments():
    decoder = Decoder(TGT_V, EMBED, HIDDEN, attention=TorchDotAttention())
    assert check_step_args(decoder, torch.tensor([1, 2]), torch.zeros(2, HIDDEN), torch.zeros(2, 3, HIDDEN),
                           torch.ones(2, 3, dtype=torch.bool)) is None


MODEL_ERRORS = {
    "float source": (lambda m: m(torch.zeros(2, 3), torch.tensor([3, 1]), torch.ones(2, 2, dtype=torch.int64)),
                     r"source must be a \(B, T\) int64 tensor"),
    "float target_in": (lambda m: m(torch.ones(2, 3, dtype=torch.int64), torch.tensor([3, 1]), torch.ones(2, 2)),
                        r"target_in must be a \(B, T\) int64 tensor"),
    "length 0": (lambda m: m.encode(torch.ones(2, 3, dtype=torch.int64), torch.tensor([3, 0])),
                 r"lengths must lie in \[1, 3\]"),
    "too few lengths": (lambda m: m.encode(torch.ones(2, 3, dtype=torch.int64), torch.tensor([3])),
                        r"lengths must be 2 integers"),
    "attention kind": (lambda m: Seq2Seq(SRC_V, TGT_V, attention="cosine"), r"kind must be one of"),
}


@pytest.mark.parametrize("call, match", list(MODEL_ERRORS.values()), ids=list(MODEL_ERRORS))
def test_model_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call(Seq2Seq(SRC_V, TGT_V, EMBED, HIDDEN))


@pytest.mark.parametrize("kind", ["dot", None], ids=["dot", "plain"])
@pytest.mark.parametrize("shape", [(4, 0), (3, 2)], ids=["no steps", "other batch"])
def test_forward_checks_target_in(kind, shape):
    """A wrong ``target_in`` fails at the call with a message naming it (CONTRIBUTING: checks first), not
    inside ``torch.stack`` or ``GRUCell``."""
    model = tiny_model(kind)
    source, lengths, _ = random_batch()
    with pytest.raises(ValueError, match=r"target_in"):
        model(source, lengths, torch.ones(*shape, dtype=torch.int64))


# ---------------------------------------------------------------- teacher forcing: pad_batch and the loss

def test_pad_batch():
    ids, lengths = pad_batch([np.array([4, 5, 6]), [7], (8, 9)])
    assert ids.dtype == torch.int64 and lengths.dtype == torch.int64
    assert ids.tolist() == [[4, 5, 6], [7, 0, 0], [8, 9, 0]] and lengths.tolist() == [3, 1, 2]
    for bad in ([], [[1], []]):
        with pytest.raises(ValueError, match=r"pad_batch needs at least one sequence, each at least one id long"):
            pad_batch(bad)


def sentence_pairs(count: int, seed: int):
    rng = np.random.default_rng(seed)
    sources = [rng.integers(3, SRC_V, size=int(rng.integers(1, 8))) for _ in range(count)]
    targets = [np.array([BOS, *rng.integers(3, TGT_V, size=int(rng.integers(1, 6))), EOS]) for _ in range(count)]
    return sources, targets


@pytest.mark.parametrize("kind", ["additive", None], ids=["additive", "plain"])
def test_sequence_loss_is_the_mean_over_real_target_words(kind):
    model = tiny_model(kind, seed=14)
    sources, targets = sentence_pairs(6, seed=15)
    source, lengths = pad_batch(sources)
    target, _ = pad_batch(targets)
    loss = sequence_loss(model, source, lengths, target)
    total, words = 0.0, 0
    with torch.no_grad():
        for src, tgt in zip(sources, targets):  # each sentence alone: no padding anywhere
            src, tgt = torch.as_tensor(src)[None], torch.as_tensor(tgt)[None]
            logits, _ = model(src, torch.tensor([src.shape[1]]), tgt[:, :-1])
            log_probs = F.log_softmax(logits[0], dim=-1)
            total -= float(log_probs[torch.arange(tgt.shape[1] - 1), tgt[0, 1:]].sum())
            words += tgt.shape[1] - 1
    assert loss.dim() == 0
    assert loss.item() == pytest.approx(total / words, abs=1e-10)
    model.train()
    assert evaluate_loss(model, sources, targets, batch_size=4) == pytest.approx(total / words, abs=1e-10)
    assert model.training, "evaluate_loss restores the training mode"


# ---------------------------------------------------------------- training

@pytest.fixture(scope="module")
def corpus():
    return load_number_translation(n_train=2000, n_valid=100, n_test=200)


def small_model(corpus, kind="additive", seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    return Seq2Seq(len(corpus.source_vocab), len(corpus.target_vocab), embed_dim=16, hidden_size=32, attention=kind)


@pytest.fixture(scope="module")
def trained(corpus):
    """An attention model after 60 steps on 300 training pairs, and its history."""
    sources, targets = corpus.ids("train")
    valid = tuple(s[:50] for s in corpus.ids("valid"))
    model = small_model(corpus)
    history = train_seq2seq(model, sources[:300], targets[:300], steps=60, batch_size=16, lr=1e-2,
                            valid=valid, eval_every=20, progress=False)
    return model, history, valid


def test_train_seq2seq_loss_falls(trained):
    model, history, valid = trained
    assert history["loss"].shape == (60,) and history["grad_norm"].shape == (60,)
    assert np.isfinite(history["loss"]).all() and (history["grad_norm"] > 0).all()
    assert history["valid_step"].tolist() == [20, 40, 60]
    first, last = history["loss"][:5].mean(), history["loss"][-10:].mean()
    assert last < 0.6 * first, f"the training loss should fall: {first:.3f} -> {last:.3f}"
    assert history["valid_loss"][-1] < history["valid_loss"][0]
    assert history["valid_loss"][-1] == pytest.approx(evaluate_loss(model, *valid), rel=1e-6)


def test_train_seq2seq_same_seed_same_history_and_global_rng_restored(corpus):
    sources, targets = (s[:100] for s in corpus.ids("train"))
    base = small_model(corpus, "dot", seed=1)
    runs = []
    for seed in (3, 3, 4):
        model = copy.deepcopy(base)
        torch.manual_seed(123)
        before = torch.get_rng_state()
        history = train_seq2seq(model, sources, targets, steps=8, batch_size=8, seed=seed, progress=False)
        assert torch.equal(torch.get_rng_state(), before), "train_seq2seq must restore torch's global generator"
        runs.append((history, model))
    (first, model_a), (second, model_b), (other, _) = runs
    assert np.array_equal(first["loss"], second["loss"]) and np.array_equal(first["grad_norm"], second["grad_norm"])
    assert all(torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters()))
    assert not np.array_equal(first["loss"], other["loss"]), "another seed draws other batches"
    assert first["valid_step"].shape == (0,) and first["valid_loss"].shape == (0,)



def test_train_seq2seq_schedule_scales_each_steps_learning_rate(corpus):
    """``schedule(step)`` multiplies Adam's rate at each step: a factor of 0 leaves every weight as it was, a factor
    of 1 is the constant rate, and a factor of 0 after step 4 leaves the weights of step 4 unchanged."""
    sources, targets = (s[:100] for s in corpus.ids("train"))
    base = small_model(corpus, "dot", seed=1)
    def trained(steps, schedule):
        model = copy.deepcopy(base)
        history = train_seq2seq(model, sources, targets, steps=steps, batch_size=8, lr=1e-2, seed=2,
                                progress=False, schedule=schedule)
        return model, history
    frozen, _ = trained(6, lambda step: 0.0)
    assert all(torch.equal(a, b) for a, b in zip(frozen.parameters(), base.parameters()))
    constant, history = trained(6, None)
    ones, same = trained(6, lambda step: 1.0)
    assert np.array_equal(history["loss"], same["loss"])
    assert all(torch.equal(a, b) for a, b in zip(constant.parameters(), ones.parameters()))
    four, _ = trained(4, None)
    stopped, _ = trained(6, lambda step: 1.0 if step <= 4 else 0.0)
    assert all(torch.allclose(a, b) for a, b in zip(four.parameters(), stopped.parameters()))


TRAIN_ERRORS = {
    "steps 0": (dict(steps=0), r"steps must be a positive integer"),
    "eval_every 0": (dict(eval_every=0), r"eval_every must be a positive integer"),
    "lengths differ": (dict(targets=[np.array([1, 3, 2])] * 2), r"sources and targets must be two non-empty lists"),
    "empty": (dict(sources=[], targets=[]), r"non-empty"),
}


@pytest.mark.parametrize("change, match", list(TRAIN_ERRORS.values()), ids=list(TRAIN_ERRORS))
def test_train_seq2seq_errors(change, match):
    arguments = dict(sources=[np.array([3, 4])] * 3, targets=[np.array([1, 3, 2])] * 3, steps=1, progress=False)
    with pytest.raises(ValueError, match=match):
        train_seq2seq(Seq2Seq(SRC_V, TGT_V, EMBED, HIDDEN), **{**arguments, **change})


# ---------------------------------------------------------------- translating: greedy, beam, step function

@pytest.fixture(scope="module")
def translator(trained, corpus):
    """The trained model in float64 (so that batched and one-by-one decoding agree to rounding) and 40 sources."""
    model = copy.deepcopy(trained[0]).double()
    sources, _ = corpus.ids("valid")
    return model, sources[:40]


def test_greedy_translate_equals_greedy_decode_sentence_by_sentence(translator, corpus):
    model, sources = translator
    bos, eos = corpus.target_vocab["<bos>"], corpus.target_vocab["<eos>"]
    assert (bos, eos) == (BOS, EOS)
    model.train()
    outputs, weights = greedy_translate(model, sources, bos, eos, max_len=20, batch_size=16)
    assert model.training, "greedy_translate restores the training mode"
    assert len(outputs) == len(weights) == len(sources)
    ended = 0
    for source, output, alignment in zip(sources, outputs, weights):
        step_fn, state = translation_step_fn(model, source)
        assert state.shape == (1, 32)
        words, _ = greedy_decode(step_fn, state, bos, eos, max_len=20)
        stopped = bool(words) and words[-1] == eos
        ended += stopped
        assert list(output) == (words[:-1] if stopped else words), "greedy_translate against greedy_decode"
        assert eos not in list(output) and bos not in list(output)
        assert alignment.shape == (len(output) + stopped, len(source))
        assert np.allclose(alignment.sum(1), 1.0)
        target_in = torch.tensor([[bos, *output]])[:, :alignment.shape[0]]
        _, forced = model(torch.as_tensor(source)[None], torch.tensor([len(source)]), target_in)
        assert np.allclose(alignment, forced[0].detach().numpy(), atol=1e-10), \
            "the weights of greedy_translate are those of the teacher-forced pass on its own output"
    assert ended > 0, "some translations should end with <eos> after 60 training steps"


def test_beam_width_1_through_translation_step_fn_equals_greedy_translate(translator, corpus):
    model, sources = translator
    outputs, _ = greedy_translate(model, sources, BOS, EOS, max_len=20)
    for source, output in zip(sources, outputs):
        words, log_prob = beam_search(*translation_step_fn(model, source), BOS, EOS, beam_width=1, max_len=20)
        assert list(output) == [w for w in words if w != EOS]
        assert log_prob <= 0


def test_translation_step_fn_runs_many_hypotheses_at_once(translator):
    model, sources = translator
    step_fn, state = translation_step_fn(model, sources[0])
    log_probs, states = step_fn(torch.tensor([BOS, 5, 7]), state.expand(3, -1))
    assert log_probs.shape == (3, model.decoder.readout.out_features) and states.shape == (3, 32)
    assert_close(torch.logsumexp(log_probs, dim=-1), torch.zeros(3, dtype=torch.float64), "rows are log-softmax")
    single, _ = step_fn(torch.tensor([5]), state)
    assert_close(log_probs[1:2], single, "one hypothesis alone", 1e-12)


def test_greedy_translate_of_the_plain_model_has_no_weights(corpus):
    model = small_model(corpus, None, seed=2)
    sources, _ = corpus.ids("valid")
    outputs, weights = greedy_translate(model, sources[:5], BOS, EOS, max_len=4)
    assert len(outputs) == 5 and weights == [None] * 5
    assert all(len(o) <= 4 for o in outputs)
