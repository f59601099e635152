"""course_lib.transfer's fine-tuning loop and its parts against PyTorch's optimiser and a counter rule.

``adamw_step`` equals ``torch.optim.AdamW`` step for step over several steps (float64 and
float32, with and without weight decay, several betas), reduces to Adam's first step
``theta - lr sign(g)`` (about), leaves its arguments unmodified and refuses wrong shapes,
dtypes and values. ``early_stopping`` is checked on hand-made loss curves (ties, ``min_delta``,
patience) and against the counter rule of ``scaffolds.patience_counter`` on random curves.
``fine_tune_loop`` equals the same loop written with ``torch.optim.AdamW`` and
``loss.backward()``: losses, validation losses, the epoch kept, the restored parameters;
frozen parameters never move, a parameter without a gradient is not stepped, it stops
early when told and returns the parameters of the best epoch. ``cached_batches`` and
``FromLayer`` give a BERT classifier's logits from cached states equal to the full model's.
The scaffolds ``scaffolds.torch_adamw_step`` and ``scaffolds.patience_counter`` equal the
library's answers.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_lib.transfer import scaffolds
from course_lib.bert.classifier import BertClassifier
from course_lib.bert.encoding import encode_ids, encode_layers, pad_ids
from course_lib.bert.model import BertConfig, BertModel
from course_lib.bert.wordpiece import WordPieceTokenizer
from course_lib.training import torch_seed
from course_lib.transfer.adamw import adamw_step
from course_lib.transfer.early_stopping import early_stopping
from course_lib.transfer.fine_tuning import FromLayer, cached_batches, fine_tune_loop

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one torch thread


# ---------------------------------------------------------------- adamw_step

@pytest.mark.parametrize("dtype, weight_decay, betas", [(torch.float64, 0.01, (0.9, 0.999)),
                                                        (torch.float64, 0.0, (0.8, 0.99)),
                                                        (torch.float64, 0.3, (0.0, 0.5)),
                                                        (torch.float32, 0.01, (0.9, 0.999))])
def test_adamw_step_equals_torch_adamw_step_for_step(dtype, weight_decay, betas):
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(4, 3, generator=generator, dtype=dtype)
    reference = start.clone().requires_grad_(True)
    optimizer = torch.optim.AdamW([reference], lr=0.05, betas=betas, eps=1e-6, weight_decay=weight_decay)
    param, m, v = start.clone(), torch.zeros_like(start), torch.zeros_like(start)
    for step in range(1, 8):
        grad = torch.randn(4, 3, generator=generator, dtype=dtype) * step  # growing gradients
        reference.grad = grad.clone()
        optimizer.step()
        param, m, v = adamw_step(param, grad, m, v, step, 0.05, betas, 1e-6, weight_decay)
        tolerance = dict(rtol=1e-12, atol=1e-14) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(param, reference.detach(), **tolerance)
        torch.testing.assert_close(m, optimizer.state[reference]["exp_avg"], **tolerance)
        torch.testing.assert_close(v, optimizer.state[reference]["exp_avg_sq"], **tolerance)
        assert param.dtype == m.dtype == v.dtype == dtype


def test_adamw_first_step_moves_each_weight_by_about_lr_and_decays_it():
    param = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    grad = torch.tensor([1e-3, -50.0, 0.0], dtype=torch.float64)
    zeros = torch.zeros(3, dtype=torch.float64)
    new, m, v = adamw_step(param, grad, zeros, zeros, 1, lr=0.1, eps=1e-12, weight_decay=0.0)
    # m_hat = g and v_hat = g^2 at step 1: theta - lr g / |g|, whatever the gradient's size
    torch.testing.assert_close(new, torch.tensor([0.9, -1.9, 3.0], dtype=torch.float64), rtol=0, atol=1e-9)
    torch.testing.assert_close(m, 0.1 * grad)
    torch.testing.assert_close(v, 0.001 * grad ** 2)
    decayed, _, _ = adamw_step(param, torch.zeros(3, dtype=torch.float64), zeros, zeros, 1, lr=0.1, weight_decay=0.5)
    torch.testing.assert_close(decayed, param * (1 - 0.1 * 0.5))  # decay on the weight, none through the ratio


def test_adamw_step_leaves_its_arguments_and_computes_no_graph():
    param = torch.randn(5, dtype=torch.float64, requires_grad=True)
    grad, m, v = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64), torch.rand(5, dtype=torch.float64)
    before = [t.detach().clone() for t in (param, grad, m, v)]
    new, new_m, new_v = adamw_step(param, grad, m, v, 3, 0.01)
    for was, now in zip(before, (param, grad, m, v)):
        assert torch.equal(was, now.detach())
    assert not new.requires_grad and not new_m.requires_grad and not new_v.requires_grad


@pytest.mark.parametrize("change, message", [
    (dict(grad=torch.zeros(4)), "grad"), (dict(exp_avg=torch.zeros(3, dtype=torch.float32)), "exp_avg"),
    (dict(step=0), "step"), (dict(lr=-1.0), "lr"), (dict(betas=(0.9,)), "betas"), (dict(betas=(1.0, 0.9)), "betas"),
    (dict(eps=0.0), "eps"), (dict(weight_decay=float("nan")), "weight_decay"),
    (dict(param=torch.zeros(3, dtype=torch.int64)), "param")])
def test_adamw_step_refuses_bad_arguments(change, message):
    args = dict(param=torch.zeros(3, dtype=torch.float64), grad=torch.zeros(3, dtype=torch.float64),
                exp_avg=torch.zeros(3, dtype=torch.float64), exp_avg_sq=torch.zeros(3, dtype=torch.float64),
                step=1, lr=0.1)
    args.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        adamw_step(**args)


def test_torch_adamw_step_scaffold_equals_adamw_step():
    generator = torch.Generator().manual_seed(1)
    param = torch.randn(2, 3, generator=generator, dtype=torch.float64)
    ours = theirs = (param, torch.zeros_like(param), torch.zeros_like(param))
    for step in range(1, 5):
        grad = torch.randn(2, 3, generator=generator, dtype=torch.float64)
        ours = adamw_step(*ours[:1], grad, *ours[1:], step, 0.1, (0.9, 0.99), 1e-8, 0.1)
        theirs = scaffolds.torch_adamw_step(*theirs[:1], grad, *theirs[1:], step, 0.1, (0.9, 0.99), 1e-8, 0.1)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- early_stopping

@pytest.mark.parametrize("losses, patience, min_delta, expected", [
    ([1.0], 1, 0.0, (0, False)),
    ([1.0, 0.8, 0.9], 1, 0.0, (1, True)),
    ([1.0, 0.8, 0.9], 2, 0.0, (1, False)),
    ([1.0, 0.8, 0.8, 0.8], 2, 0.0, (1, True)),  # a tie is no improvement: the earlier epoch stays
    ([1.0, 0.95, 0.92, 0.91], 3, 0.1, (0, True)),  # gains of at most 0.09 never beat min_delta = 0.1
    ([1.0, 0.95, 0.89, 0.85], 3, 0.1, (2, False)),  # 0.89 < 1.0 - 0.1
    ([3, 2, 1], 1, 0, (2, False)),  # ints are numbers too
    ([0.5, 0.7, 0.6, 0.4, 0.45], 2, 0.0, (3, False)),
])
def test_early_stopping_on_hand_made_curves(losses, patience, min_delta, expected):
    assert early_stopping(losses, patience, min_delta) == expected
    best, stop = early_stopping(losses, patience, min_delta)
    assert type(best) is int and type(stop) is bool


def test_early_stopping_agrees_with_a_patience_counter_on_random_curves():
    rng = np.random.default_rng(0)
    for _ in range(500):
        losses = list(np.round(rng.uniform(0, 1, size=rng.integers(1, 12)), 1))  # rounded: many ties
        patience, min_delta = int(rng.integers(1, 4)), float(rng.choice([0.0, 0.05, 0.2]))
        assert early_stopping(losses, patience, min_delta) == scaffolds.patience_counter(losses, patience, min_delta)


@pytest.mark.parametrize("losses, patience, min_delta, message", [
    ([], 1, 0.0, "non-empty"), ("0.5", 1, 0.0, "non-empty"), ([0.5, float("nan")], 1, 0.0, "NaN"),
    ([0.5], 0, 0.0, "patience"), ([0.5], 1, -0.1, "min_delta"), ([0.5, "x"], 1, 0.0, "losses")])
def test_early_stopping_refuses_bad_arguments(losses, patience, min_delta, message):
    with pytest.raises((ValueError, TypeError), match=message):
        early_stopping(losses, patience, min_delta)


# ---------------------------------------------------------------- fine_tune_loop

def toy_problem(seed=0, n=48, features=5, classes=3):
    """A float64 linear classifier with a frozen first layer, its batches and a validation pair."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=generator, dtype=torch.float64)
    labels = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    with torch_seed(seed):
        model = nn.Sequential(nn.Linear(features, 4), nn.Tanh(), nn.Linear(4, classes)).double()
    model[0].requires_grad_(False)  # frozen: must never move
    batches = [((x[i:i + 12],), labels[i:i + 12]) for i in range(0, 36, 12)]
    return model, batches, ((x[36:],), labels[36:])


def torch_loop(model, batches, valid, epochs, lr, weight_decay, patience):
    """The same loop with torch.optim.AdamW and the counter rule: what fine_tune_loop must equal."""
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=lr, weight_decay=weight_decay)
    losses, valid_losses, kept = [], [], None
    for epoch in range(epochs):
        model.train()
        for inputs, labels in batches:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(*inputs), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            valid_losses.append(F.cross_entropy(model(*valid[0]), valid[1]).item())
        best, stop = scaffolds.patience_counter(valid_losses, patience)
        if best == epoch:
            kept = [p.detach().clone() for p in trained]
        if stop:
            break
    return losses, valid_losses, best, kept


@pytest.mark.parametrize("lr, epochs, patience", [(0.05, 6, 2), (0.5, 12, 1), (0.01, 3, 3)])
def test_fine_tune_loop_equals_the_loop_with_torch_adamw(lr, epochs, patience):
    model, batches, valid = toy_problem()
    twin = copy.deepcopy(model)
    frozen = model[0].weight.detach().clone()
    history = fine_tune_loop(model, batches, valid, epochs, lr, weight_decay=0.02, patience=patience)
    losses, valid_losses, best, kept = torch_loop(twin, batches, valid, epochs, lr, 0.02, patience)
    np.testing.assert_allclose(history["loss"], losses, rtol=1e-10)
    np.testing.assert_allclose(history["valid_loss"], valid_losses, rtol=1e-10)
    assert history["best_epoch"] == best and isinstance(history["best_epoch"], int)
    assert list(history["best_state"]) == ["2.weight", "2.bias"]  # the trained parameters, in order
    for ours, theirs, state in zip([model[2].weight, model[2].bias], kept, history["best_state"].values()):
        torch.testing.assert_close(ours.detach(), theirs, rtol=1e-10, atol=1e-12)  # the best epoch restored
        torch.testing.assert_close(state, theirs, rtol=1e-10, atol=1e-12)
    assert torch.equal(model[0].weight, frozen) and not model.training
    assert len(history["loss"]) == len(history["valid_loss"]) * len(batches)


def test_fine_tune_loop_stops_early_and_restores_the_best_epoch():
    model, batches, valid = toy_problem(seed=3)
    history = fine_tune_loop(model, batches, valid, epochs=200, lr=1.0, weight_decay=0.0, patience=1)
    assert len(history["valid_loss"]) < 200  # a large rate overfits the 36 examples: it stopped
    assert history["best_epoch"] == len(history["valid_loss"]) - 2  # one epoch of patience after the best
    with torch.no_grad():
        restored = F.cross_entropy(model(*valid[0]), valid[1]).item()
    assert restored == pytest.approx(history["valid_loss"][history["best_epoch"]], rel=1e-12)
    assert restored == pytest.approx(min(history["valid_loss"]), rel=1e-12)


def test_fine_tune_loop_runs_its_step_and_stop_functions():
    model, batches, valid = toy_problem()
    seen = []

    def stop_after_two(losses, patience):
        seen.append(list(losses))
        return len(losses) - 1, len(losses) == 2  # the last epoch is best; stop at two

    history = fine_tune_loop(model, batches, valid, epochs=5, lr=0.1, step_fn=scaffolds.torch_adamw_step,
                             stop_fn=stop_after_two)
    assert [len(s) for s in seen] == [1, 2] and history["best_epoch"] == 1
    twin_model, _, _ = toy_problem()
    twin = fine_tune_loop(twin_model, batches, valid, epochs=2, lr=0.1, patience=5)
    np.testing.assert_allclose(history["loss"], twin["loss"], rtol=1e-12)  # PyTorch's step gives the same


def test_fine_tune_loop_steps_with_the_step_fn_it_is_given():
    model, batches, valid = toy_problem()
    twin = copy.deepcopy(model)
    history = fine_tune_loop(model, batches, valid, epochs=1, lr=0.5, step_fn=scaffolds.sgd_step)
    trained = [twin[2].weight, twin[2].bias]
    for inputs, labels in batches:  # plain gradient descent, by hand
        grads = torch.autograd.grad(F.cross_entropy(twin(*inputs), labels), trained)
        with torch.no_grad():
            for p, g in zip(trained, grads):
                p -= 0.5 * g
    torch.testing.assert_close(model[2].weight, twin[2].weight, rtol=1e-12, atol=1e-14)
    assert len(history["loss"]) == len(batches)
    m, v = torch.ones(2), torch.full((2,), 2.0)
    new, m2, v2 = scaffolds.sgd_step(torch.zeros(2), torch.ones(2), m, v, 1, 0.1)
    assert torch.equal(new, torch.full((2,), -0.1)) and torch.equal(m2, m) and m2 is not m and torch.equal(v2, v)


def test_fine_tune_loop_leaves_a_parameter_without_gradient_alone():
    model, batches, valid = toy_problem()
    model.unused = nn.Parameter(torch.ones(3, dtype=torch.float64))  # trainable, but no loss reaches it
    history = fine_tune_loop(model, batches, valid, epochs=2, lr=0.1, weight_decay=0.5)
    assert torch.equal(model.unused.detach(), torch.ones(3, dtype=torch.float64))  # not even decayed
    assert "unused" in history["best_state"]


@pytest.mark.parametrize("change, message", [
    (dict(model="a model"), "nn.Module"), (dict(batches=[]), "non-empty"), (dict(epochs=0), "epochs"),
    (dict(lr=float("inf")), "lr"), (dict(patience=0), "patience"), (dict(frozen=True), "nothing to train"),
    (dict(one_pair=True), "one pair"), (dict(float_labels=True), "int64")])
def test_fine_tune_loop_refuses_bad_arguments(change, message):
    model, batches, valid = toy_problem()
    if change.pop("frozen", False):
        model.requires_grad_(False)
    if change.pop("one_pair", False):
        change["batches"] = batches[0]
    if change.pop("float_labels", False):
        change["batches"] = [(batches[0][0], batches[0][1].double())]
    args = dict(model=model, batches=batches, valid=valid, epochs=2, lr=0.1, patience=1)
    args.update(change)
    with pytest.raises((ValueError, TypeError), match=message):
        fine_tune_loop(**args)


# ---------------------------------------------------------------- cached states

def tiny_classifier():
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good",
                                                 "bad", "film", "very", "plot"])}
    tokenizer = WordPieceTokenizer(vocab)
    config = BertConfig(vocab_size=len(vocab), width=8, layers=2, num_heads=2, ff_size=16, context=16,
                        dropout=0.0, attention_dropout=0.0)
    with torch_seed(0):
        return BertClassifier(BertModel(config).double(), num_classes=2, pooling="mean", dropout=0.0).double(), \
            tokenizer


def test_cached_batches_and_from_layer_give_the_full_models_logits():
    model, tokenizer = tiny_classifier()
    texts = ["a good film", "very bad plot", "a film", "good", "bad bad film very", "plot"]
    labels = [1, 0, 1, 1, 0, 0]
    states = encode_layers(model.bert, tokenizer, texts, keep=(1,), features=False).states[1]
    batches = cached_batches(states, labels, batch_size=4)
    assert sorted(len(b[1]) for b in batches) == [2, 4]
    top = FromLayer(model, 1)
    model.eval()
    with torch.no_grad():
        for (hidden, padding), batch_labels in batches:
            index = [next(i for i, s in enumerate(states) if s.shape == h[m].shape and torch.equal(s, h[m]))
                     for h, m in zip(hidden, padding)]
            full = pad_ids(encode_ids(tokenizer, [texts[i] for i in index]), tokenizer.pad_id)
            torch.testing.assert_close(top(hidden, padding), model(full.ids, full.segments, full.padding),
                                       rtol=1e-10, atol=1e-12)
            assert batch_labels.tolist() == [labels[i] for i in index]
    with pytest.raises(ValueError, match="labels"):
        cached_batches(states, labels[:-1], 2)
    with pytest.raises(ValueError, match="layer"):
        FromLayer(model, 3)
