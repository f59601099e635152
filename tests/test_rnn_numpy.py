"""The numpy half of chapter 3 against the industry's implementations.

``torch.nn.RNN`` (float64) for the Elman step and forward pass, PyTorch autograd
for backpropagation through time and for the whole language model's gradients,
``torch.nn.functional.cross_entropy`` for the loss and perplexity,
``torch.nn.utils.clip_grad_norm_`` for clipping, finite differences from
course_lib.vectors.gradcheck, and, for the trainer, a character-level language model
that must learn something from the course's real English text.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import activations
from course_lib.text import corpus, vocabulary
from course_lib.vectors import gradcheck, word2vec
from course_lib.recurrent.clipping import clip_gradients, global_norm
from course_lib.recurrent.perplexity import bits_per_token, perplexity
from course_lib.recurrent.elman import rnn_backward, rnn_forward, rnn_step
from course_lib.recurrent.elman_lm import (PARAM_NAMES, init_lm_params, lm_loss_and_grads, lm_next_logits,
                                          softmax_cross_entropy, train_rnn_lm_numpy)
from course_lib.recurrent.sampling import sample

SHAPES = [(1, 1, 1, 1), (1, 5, 3, 4), (4, 1, 3, 2), (3, 7, 5, 6), (8, 12, 4, 16)]  # (B, T, I, H)
SHAPE_IDS = [f"B{b}-T{t}-D{d}-H{h}" for b, t, d, h in SHAPES]


def random_rnn(seed, batch, steps, dim, hidden):
    """Inputs, initial states and weights of an RNN, with weights large enough to reach tanh's curved part."""
    rng = np.random.default_rng(seed)
    return {"xs": rng.standard_normal((batch, steps, dim)), "h0": rng.uniform(-0.9, 0.9, (batch, hidden)),
            "W": rng.standard_normal((hidden, dim)), "U": rng.standard_normal((hidden, hidden)) / math.sqrt(hidden),
            "b": 0.5 * rng.standard_normal(hidden)}


def torch_rnn(W, U, b):
    """``torch.nn.RNN`` in float64 holding our weights: W -> weight_ih, U -> weight_hh, b -> bias_ih, bias_hh = 0."""
    hidden, dim = W.shape
    rnn = torch.nn.RNN(dim, hidden, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.from_numpy(W))
        rnn.weight_hh_l0.copy_(torch.from_numpy(U))
        rnn.bias_ih_l0.copy_(torch.from_numpy(b))
        rnn.bias_hh_l0.zero_()
    return rnn


def tensor(x, grad=False):
    return torch.tensor(x, dtype=torch.float64, requires_grad=grad)


# ---------------------------------------------------------------- the Elman RNN

@pytest.mark.parametrize("batch, steps, dim, hidden", SHAPES, ids=SHAPE_IDS)
def test_rnn_step_and_forward_match_torch_rnn(batch, steps, dim, hidden):
    a = random_rnn(batch + steps, batch, steps, dim, hidden)
    rnn = torch_rnn(a["W"], a["U"], a["b"])
    with torch.no_grad():
        expected, last = rnn(tensor(a["xs"]), tensor(a["h0"])[None])  # (B, T, H), (1, B, H)
    h1 = rnn_step(a["xs"][:, 0], a["h0"], a["W"], a["U"], a["b"])
    assert h1.shape == (batch, hidden)
    np.testing.assert_allclose(h1, expected[:, 0].numpy(), rtol=1e-10, atol=1e-12)
    hs = rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"])
    assert hs.shape == (batch, steps, hidden)
    np.testing.assert_allclose(hs, expected.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hs[:, -1], last[0].numpy(), rtol=1e-10, atol=1e-12)


def test_rnn_forward_calls_the_given_step_once_per_time_step():
    a = random_rnn(0, 2, 6, 3, 4)
    calls = []

    def step(x, h, W, U, b):
        calls.append(x.shape)
        return rnn_step(x, h, W, U, b)

    np.testing.assert_array_equal(rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"], step_fn=step),
                                  rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"]))
    assert calls == [(2, 3)] * 6


@pytest.mark.parametrize("batch, steps, dim, hidden", SHAPES, ids=SHAPE_IDS)
def test_rnn_backward_matches_torch_autograd(batch, steps, dim, hidden):
    a = random_rnn(10 + batch * steps, batch, steps, dim, hidden)
    dhs = np.random.default_rng(1).standard_normal((batch, steps, hidden))
    hs = rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"])
    before = {k: v.copy() for k, v in a.items()}
    out = rnn_backward(dhs, a["xs"], hs, a["h0"], a["W"], a["U"])
    assert all(np.array_equal(a[k], before[k]) for k in a), "rnn_backward modified its inputs"

    rnn = torch_rnn(a["W"], a["U"], a["b"])
    xs, h0 = tensor(a["xs"], grad=True), tensor(a["h0"], grad=True)
    torch_hs, _ = rnn(xs, h0[None])
    (tensor(dhs) * torch_hs).sum().backward()  # L = sum(dhs * hs): dL/dh_t through the outputs is dhs[:, t]
    expected = [xs.grad, h0.grad, rnn.weight_ih_l0.grad, rnn.weight_hh_l0.grad, rnn.bias_ih_l0.grad]
    assert isinstance(out, tuple) and len(out) == 5
    for name, ours, theirs in zip(["dxs", "dh0", "dW", "dU", "db"], out, expected):
        assert ours.shape == tuple(theirs.shape), f"{name}: shape {ours.shape}, expected {tuple(theirs.shape)}"
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("index, name", list(enumerate(["xs", "h0", "W", "U", "b"])))
def test_rnn_backward_matches_finite_differences(index, name):
    a = random_rnn(3, 2, 4, 3, 5)
    dhs = np.random.default_rng(4).standard_normal((2, 4, 5))

    def loss(_probed):  # numerical_gradient changes a[name] in place
        return float(np.sum(dhs * rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"])))

    hs = rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"])
    analytic = rnn_backward(dhs, a["xs"], hs, a["h0"], a["W"], a["U"])[index]
    assert gradcheck.check_gradient(loss, a[name], analytic) < 1e-6


# ---------------------------------------------------------------- the language model

def torch_lm(params, inputs, targets, h0):
    """Embedding, torch.nn.RNN, linear, cross_entropy in float64: loss, grads by autograd, last state."""
    E, V, c = (tensor(params[k], grad=True) for k in ("E", "V", "c"))
    rnn = torch_rnn(params["W"], params["U"], params["b"])
    hs, last = rnn(F.embedding(torch.as_tensor(inputs), E), tensor(h0)[None])  # (B, T, H), (1, B, H)
    logits = F.linear(hs, V, c)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, len(params["E"])), torch.as_tensor(targets).reshape(-1))
    loss.backward()
    grads = {"E": E.grad, "W": rnn.weight_ih_l0.grad, "U": rnn.weight_hh_l0.grad, "b": rnn.bias_ih_l0.grad,
             "V": V.grad, "c": c.grad}
    return loss.item(), {k: g.numpy() for k, g in grads.items()}, last[0].detach().numpy()


@pytest.mark.parametrize("batch, steps, vocab, dim, hidden", [(1, 1, 3, 2, 4), (3, 6, 5, 4, 7), (4, 10, 12, 6, 9)])
@pytest.mark.parametrize("zero_state", [True, False])
def test_lm_loss_and_grads_match_torch_autograd(batch, steps, vocab, dim, hidden, zero_state):
    rng = np.random.default_rng(batch * steps)
    params = init_lm_params(vocab, dim, hidden, rng)
    params["b"], params["c"] = rng.standard_normal(hidden), rng.standard_normal(vocab)  # not just zeros
    inputs = rng.integers(0, vocab, (batch, steps))  # small vocabularies: ids repeat, E rows add up
    targets = rng.integers(0, vocab, (batch, steps))
    h0 = np.zeros((batch, hidden)) if zero_state else rng.uniform(-0.5, 0.5, (batch, hidden))
    loss, grads, h_last = lm_loss_and_grads(params, inputs, targets, None if zero_state else h0)
    ref_loss, ref_grads, ref_last = torch_lm(params, inputs, targets, h0)
    assert isinstance(loss, float)
    assert math.isclose(loss, ref_loss, rel_tol=1e-12)
    assert set(grads) == set(PARAM_NAMES)
    for name in PARAM_NAMES:
        assert grads[name].shape == params[name].shape, name
        np.testing.assert_allclose(grads[name], ref_grads[name], rtol=1e-10, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(h_last, ref_last, rtol=1e-10, atol=1e-12)


def test_lm_chunks_carrying_the_state_give_the_loss_of_the_whole_sequence():
    """Truncated BPTT changes the gradients, not the forward pass: two chunks with h carried = one long chunk."""
    rng = np.random.default_rng(0)
    params = init_lm_params(7, 3, 5, rng)
    ids = rng.integers(0, 7, (2, 13))
    whole, _, h_whole = lm_loss_and_grads(params, ids[:, :12], ids[:, 1:])
    first, _, h = lm_loss_and_grads(params, ids[:, :6], ids[:, 1:7])
    second, _, h = lm_loss_and_grads(params, ids[:, 6:12], ids[:, 7:], h)
    assert math.isclose(whole, (first + second) / 2, rel_tol=1e-12)
    np.testing.assert_allclose(h, h_whole, rtol=1e-12)


def test_init_lm_params_shapes_and_orthogonal_recurrence():
    params = init_lm_params(11, 4, 6, np.random.default_rng(0))
    shapes = {"E": (11, 4), "W": (6, 4), "U": (6, 6), "b": (6,), "V": (11, 6), "c": (11,)}
    assert {k: v.shape for k, v in params.items()} == shapes
    np.testing.assert_allclose(params["U"] @ params["U"].T, np.eye(6), atol=1e-12)
    again = init_lm_params(11, 4, 6, np.random.default_rng(0))
    assert all(np.array_equal(params[k], again[k]) for k in PARAM_NAMES)


def test_lm_next_logits_reproduces_the_forward_pass():
    rng = np.random.default_rng(2)
    params = init_lm_params(9, 3, 5, rng)
    ids = rng.integers(0, 9, 8)
    hs = rnn_forward(params["E"][ids][None], np.zeros((1, 5)), params["W"], params["U"], params["b"])  # (1, T, H)
    step, h = lm_next_logits(params), None
    for t, token in enumerate(ids):
        logits, h = step(int(token), h)
        assert logits.shape == (9,) and h.shape == (1, 5)
        np.testing.assert_allclose(logits, params["V"] @ hs[0, t] + params["c"], rtol=1e-12)


# ---------------------------------------------------------------- losses and perplexity

def torch_cross_entropy(logits, targets):
    vocab = np.shape(logits)[-1]
    return F.cross_entropy(tensor(logits).reshape(-1, vocab), torch.as_tensor(targets).reshape(-1)).item()


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_softmax_cross_entropy_matches_torch(scale):
    rng = np.random.default_rng(0)
    logits, targets = scale * rng.standard_normal((6, 5)), rng.integers(0, 5, 6)
    loss, dlogits = softmax_cross_entropy(logits, targets)
    z = tensor(logits, grad=True)
    expected = F.cross_entropy(z, torch.as_tensor(targets))
    expected.backward()
    assert math.isclose(loss, expected.item(), rel_tol=1e-12)
    np.testing.assert_allclose(dlogits, z.grad.numpy(), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("shape", [(7,), (2, 3), (2, 3, 4)], ids=["1 position axis", "(B, T)", "3 leading axes"])
@pytest.mark.parametrize("offset", [0.0, 1000.0, -1000.0, "+-1000"])
def test_perplexity_and_bits_match_torch_cross_entropy(shape, offset):
    """Softmax ignores a constant added to a position's scores; exp(+-1000) must never be computed."""
    rng = np.random.default_rng(len(shape))
    vocab = 6
    if offset == "+-1000":
        offset = 1000.0 * rng.choice([-1.0, 1.0], shape)[..., None]  # a different sign at each position
    logits, targets = 3.0 * rng.standard_normal(shape + (vocab,)) + offset, rng.integers(0, vocab, shape)
    nll = torch_cross_entropy(logits, targets)
    with np.errstate(all="raise"):  # no overflow, no underflow
        pp, bits = perplexity(logits, targets), bits_per_token(logits, targets)
    assert isinstance(pp, float) and isinstance(bits, float)
    assert math.isclose(pp, math.exp(nll), rel_tol=1e-10)
    assert math.isclose(bits, nll / math.log(2), rel_tol=1e-10)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size_and_of_a_sure_model_is_one():
    targets = np.array([[0, 3], [2, 1]])
    assert math.isclose(perplexity(np.zeros((2, 2, 5)), targets), 5.0, rel_tol=1e-12)
    assert math.isclose(bits_per_token(np.zeros((2, 2, 5)), targets), math.log2(5), rel_tol=1e-12)
    sure = 1000.0 * np.eye(5)[targets]  # (2, 2, 5), all mass on the targets
    assert perplexity(sure, targets) == 1.0 and bits_per_token(sure, targets) == 0.0


# ---------------------------------------------------------------- clipping

@pytest.mark.parametrize("max_norm", [0.5, 3.0, 1e6], ids=["clipped hard", "clipped a little", "not clipped"])
def test_clip_gradients_matches_torch_clip_grad_norm(max_norm):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5), rng.standard_normal((2, 2, 2))]
    before = [g.copy() for g in grads]
    clipped, norm = clip_gradients(grads, max_norm)
    params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = tensor(g)
    expected_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    assert isinstance(norm, float) and math.isclose(norm, expected_norm.item(), rel_tol=1e-12)
    assert math.isclose(norm, global_norm(grads), rel_tol=1e-12)
    assert isinstance(clipped, list) and len(clipped) == 3
    for ours, p, g, old in zip(clipped, params, grads, before):
        np.testing.assert_allclose(ours, p.grad.numpy(), rtol=1e-12)
        np.testing.assert_array_equal(g, old)  # inputs unchanged
        assert ours is not g
    assert global_norm(clipped) <= max_norm * (1 + 1e-9)


def test_clip_gradients_leaves_zero_gradients_at_zero():
    clipped, norm = clip_gradients([np.zeros(3)], 1.0)
    assert norm == 0.0 and np.array_equal(clipped[0], np.zeros(3))


# ---------------------------------------------------------------- activations

@pytest.mark.parametrize("name, torch_fn", [("logistic", torch.sigmoid), ("tanh", torch.tanh), ("relu", torch.relu)])
def test_activations_and_derivatives_match_torch_autograd(name, torch_fn):
    fn, derivative = activations.ACTIVATIONS[name]
    x = np.concatenate([np.linspace(-6, 6, 41), [0.0, -30.0, 30.0]])  # 0 twice: once in the grid, once alone
    t = tensor(x, grad=True)
    y = torch_fn(t)
    y.sum().backward()
    np.testing.assert_allclose(fn(x), y.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(derivative(x), t.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_logistic_is_stable_and_still_word2vecs_sigmoid():
    assert word2vec.sigmoid is activations.logistic
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(activations.logistic(np.array([-1000.0, 0.0, 1000.0])), [0.0, 0.5, 1.0])


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_log_softmax_matches_torch(scale):
    z = scale * np.random.default_rng(0).standard_normal((3, 4, 5))
    for axis in (0, -1):
        np.testing.assert_allclose(activations.log_softmax(z, axis=axis),
                                   torch.log_softmax(tensor(z), dim=axis).numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- training on real text

@pytest.fixture(scope="module")
def lee_chars():
    text = "\n".join(corpus.lee_documents())[:200_000]
    vocab = vocabulary.Vocabulary.build([list(text)], min_count=5)
    return vocab.encode(list(text)), len(vocab)


TRAIN = {"embed_dim": 16, "hidden_size": 64, "seq_len": 25, "batch_size": 16, "lr": 5e-3, "progress": False}


@pytest.fixture(scope="module")
def trained(lee_chars):
    ids, vocab = lee_chars
    return train_rnn_lm_numpy(ids, vocab, steps=300, **TRAIN)


def test_training_on_real_text_learns_well_below_the_uniform_loss(lee_chars, trained):
    _ids, vocab = lee_chars
    params, history = trained
    assert set(history) == {"loss", "grad_norm"}
    assert history["loss"].shape == history["grad_norm"].shape == (300,)
    assert np.all(np.isfinite(history["grad_norm"])) and np.all(history["grad_norm"] > 0)
    first, last = history["loss"][:10].mean(), history["loss"][-20:].mean()
    assert first > 0.8 * math.log(vocab), f"the first steps should be near the uniform loss log V; got {first:.3f}"
    assert last < math.log(vocab) - 1.5, f"loss {last:.3f} after 300 steps; uniform is {math.log(vocab):.3f}"
    assert last < first - 1.0
    assert {k: v.shape for k, v in params.items()} == {k: v.shape for k, v in
                                                       init_lm_params(vocab, 16, 64, np.random.default_rng(0)).items()}


def test_training_is_reproducible_from_its_seed(lee_chars, trained):
    ids, vocab = lee_chars
    _params, again = train_rnn_lm_numpy(ids, vocab, steps=12, **TRAIN)
    np.testing.assert_array_equal(again["loss"], trained[1]["loss"][:12])
    np.testing.assert_array_equal(again["grad_norm"], trained[1]["grad_norm"][:12])
    _params, other = train_rnn_lm_numpy(ids, vocab, steps=12, seed=1, **TRAIN)
    assert not np.array_equal(other["loss"], again["loss"])


def test_training_clips_every_gradient_to_max_norm(lee_chars):
    ids, vocab = lee_chars
    seen_in, seen_out = [], []

    def recording_clip(grads, max_norm):
        clipped, norm = clip_gradients(grads, max_norm)
        seen_in.append(global_norm(grads))
        seen_out.append(global_norm(clipped))
        return clipped, norm

    _params, history = train_rnn_lm_numpy(ids, vocab, steps=8, max_norm=0.05, clip_fn=recording_clip, **TRAIN)
    np.testing.assert_allclose(history["grad_norm"], seen_in, rtol=1e-12)
    assert min(seen_in) > 0.05, "the threshold should be below the raw norms for this test to mean anything"
    np.testing.assert_allclose(seen_out, 0.05, rtol=1e-4)  # s = max_norm / (norm + 1e-6)
    assert max(seen_out) <= 0.05


def test_training_rejects_a_stream_too_short_for_one_chunk():
    with pytest.raises(ValueError, match="ids is too short"):
        train_rnn_lm_numpy(np.arange(20) % 5, 5, seq_len=10, batch_size=2, steps=1, progress=False)


# ---------------------------------------------------------------- sampling

def fixed_logits_step(logits):
    def step(token_id, state):
        return np.asarray(logits, dtype=np.float64), (state or 0) + 1
    return step


def test_sampling_is_reproducible_and_in_range(trained):
    params, _history = trained
    step = lm_next_logits(params)
    vocab = len(params["E"])
    first = sample(step, 0, 50, np.random.default_rng(7))
    assert first.shape == (50,) and first.dtype == np.int64
    assert first.min() >= 0 and first.max() < vocab
    np.testing.assert_array_equal(first, sample(step, 0, 50, np.random.default_rng(7)))
    assert not np.array_equal(first, sample(step, 0, 50, np.random.default_rng(8)))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_sampling_puts_all_draws_on_a_certain_token(temperature):
    logits = np.full(6, -1e9)
    logits[4] = 0.0
    np.testing.assert_array_equal(sample(fixed_logits_step(logits), 0, 20, np.random.default_rng(0), temperature),
                                  np.full(20, 4))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sampling_frequencies_follow_the_tempered_softmax(temperature):
    logits = np.array([0.0, 1.0, 2.0])
    ids = sample(fixed_logits_step(logits), 0, 20_000, np.random.default_rng(0), temperature)
    expected = torch.softmax(tensor(logits) / temperature, dim=0).numpy()
    np.testing.assert_allclose(np.bincount(ids, minlength=3) / len(ids), expected, atol=0.015)


def test_sampling_accepts_torch_logits_and_passes_the_state_along():
    states = []

    def step(token_id, state):
        states.append(state)
        return torch.tensor([0.0, 50.0, 0.0], requires_grad=True), token_id

    np.testing.assert_array_equal(sample(step, 2, 3, np.random.default_rng(0), state="start"), [1, 1, 1])
    assert states == ["start", 2, 1]


@pytest.mark.parametrize("temperature", [0.0, -1.0])
def test_sampling_rejects_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        sample(fixed_logits_step([0.0, 1.0]), 0, 5, np.random.default_rng(0), temperature)


# ---------------------------------------------------------------- bad input

def call_with(fn, names, changes):
    """Call ``fn`` on a small valid RNN case, with some arguments replaced."""
    a = random_rnn(0, 2, 3, 4, 5)
    hs = rnn_forward(a["xs"], a["h0"], a["W"], a["U"], a["b"])
    a.update(x=a["xs"][:, 0], h_prev=a["h0"], hs=hs, dhs=np.ones_like(hs))
    a.update(changes)
    return fn(*[a[n] for n in names])


STEP_ARGS, BACKWARD_ARGS = ["x", "h_prev", "W", "U", "b"], ["dhs", "xs", "hs", "h0", "W", "U"]


@pytest.mark.parametrize("fn, names, changes, match", [
    (rnn_step, STEP_ARGS, {"h_prev": np.zeros((2, 4))}, r"h_prev must have shape \(B, H\) = \(2, 5\), got \(2, 4\)"),
    (rnn_step, STEP_ARGS, {"x": np.zeros(4)}, "x must be a 2-D"),
    (rnn_step, STEP_ARGS, {"W": np.zeros((5, 3))}, r"W must have shape \(H, I\)"),
    (rnn_step, STEP_ARGS, {"U": np.zeros((5, 4))}, r"U must have shape \(H, H\)"),
    (rnn_step, STEP_ARGS, {"b": np.zeros((1, 5))}, r"b must have shape \(H,\)"),
    (rnn_backward, BACKWARD_ARGS, {"dhs": np.zeros((2, 3, 4))}, r"dhs must have shape \(B, T, H\)"),
    (rnn_backward, BACKWARD_ARGS, {"hs": np.zeros((2, 4, 5))}, r"hs must have shape \(B, T, H\)"),
    (rnn_backward, BACKWARD_ARGS, {"h0": np.zeros((3, 5))}, r"h0 must have shape \(B, H\)"),
    (rnn_backward, BACKWARD_ARGS, {"xs": np.zeros((2, 4))}, r"xs must have shape \(B, T, I\)"),
], ids=["step h_prev", "step x 1-D", "step W", "step U", "step b", "backward dhs", "backward hs", "backward h0",
        "backward xs 2-D"])
def test_rnn_functions_name_the_argument_with_a_wrong_shape(fn, names, changes, match):
    with pytest.raises(ValueError, match=match):
        call_with(fn, names, changes)


@pytest.mark.parametrize("fn", [perplexity, bits_per_token])
@pytest.mark.parametrize("logits, targets, match", [
    (np.zeros((2, 3, 5)), np.zeros((2, 4), dtype=int), r"targets must have shape \(2, 3\)"),
    (np.zeros((2, 5)), np.array([0, 5]), r"targets holds id 5, outside the vocabulary \[0, 5\)"),
    (np.zeros((2, 0)), np.array([0, 0]), "logits must have shape"),
    (np.zeros((2, 5)), np.array([0.0, 1.0]), "targets must hold integer"),
])
def test_perplexity_names_the_bad_argument(fn, logits, targets, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fn(logits, targets)


@pytest.mark.parametrize("grads, max_norm, error, match", [
    ([], 1.0, ValueError, "grads must hold at least one array"),
    (np.ones(3), 1.0, TypeError, "grads must be a list or tuple"),
    ([np.ones(3), np.array(["a"])], 1.0, TypeError, r"grads\[1\] must be a numeric array"),
    ([np.ones(3)], 0.0, ValueError, "max_norm must be a positive number"),
    ([np.ones(3)], -1, ValueError, "max_norm must be a positive number"),
    ([np.ones(3)], math.inf, ValueError, "max_norm must be a positive number"),
])
def test_clip_gradients_rejects_bad_arguments(grads, max_norm, error, match):
    with pytest.raises(error, match=match):
        clip_gradients(grads, max_norm)


def test_lm_loss_and_grads_rejects_ids_outside_the_vocabulary():
    params = init_lm_params(4, 2, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="inputs holds id 4"):
        lm_loss_and_grads(params, np.array([[0, 4]]), np.array([[1, 2]]))
    with pytest.raises(ValueError, match="targets holds id 9"):
        lm_loss_and_grads(params, np.array([[0, 1]]), np.array([[1, 9]]))
