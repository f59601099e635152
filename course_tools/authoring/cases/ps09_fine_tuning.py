"""Hidden cases of ps09_fine_tuning: a LoRA layer, one AdamW step, early stopping and the fine-tuning loop (chapter 9).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import functools

import numpy as np

from .common import key_mask


def lora_linear(rng):
    # (leading axes of x, D_in, D_out, R, bias, scale, dtype): no leading axis, one, two and three; R = 1; no bias
    # (None); scale 1, 0, an int and large; D_in = D_out = R (square: A and B swapped or transposed still have shapes
    # that fit, so only the values tell); float32. B is never zero here (it starts at zero only in a fresh layer),
    # so every part of the update shows.
    for leading, d_in, d_out, rank, bias, scale, dtype in [
            ((), 5, 3, 2, True, 2.0, np.float64), ((4,), 6, 4, 2, True, 0.5, np.float64),
            ((2, 3), 8, 5, 3, False, 4.0, np.float64), ((3,), 7, 7, 1, True, 16.0, np.float64),
            ((2, 4), 6, 9, 4, True, 1.0, np.float64), ((5,), 10, 3, 2, False, 0.25, np.float64),
            ((1, 2, 3), 4, 6, 2, True, 3.0, np.float64), ((3,), 4, 4, 4, True, 2.0, np.float64),
            ((2, 2), 3, 3, 3, False, 0.5, np.float64), ((6,), 5, 8, 1, True, 2, np.float64),
            ((4,), 6, 5, 2, True, 0.0, np.float64), ((3, 4), 8, 6, 2, True, 2.0, np.float32),
            ((4,), 5, 5, 5, False, 0.5, np.float32), ((2,), 6, 3, 1, True, 8.0, np.float32)]:
        x = rng.normal(size=(*leading, d_in))
        weight = rng.normal(size=(d_out, d_in)) / np.sqrt(d_in)
        lora_a = rng.normal(size=(rank, d_in)) / np.sqrt(d_in)
        lora_b = rng.normal(size=(d_out, rank)) * 0.5
        b = rng.normal(size=d_out).astype(dtype) if bias else None
        yield (x.astype(dtype), weight.astype(dtype), b, lora_a.astype(dtype), lora_b.astype(dtype), scale), {}


def adamw_step(rng):
    # (shape, step, lr, betas, eps, weight_decay, gradient scale, averages, dtype): the first step with zero averages
    # (the bias correction makes it about lr times the sign of the gradient); later steps (2, 5, 10, 100, 1000) with
    # averages of earlier steps; no weight decay and a large one (decoupled: on the weight, before the update);
    # learning rates up to 0.5 (a decay after the update differs by lr ** 2 lambda); lr = 0; small gradients with a
    # large eps (eps added to sqrt(v_hat), not under the root); betas far apart and as a list; a 0-d parameter;
    # float32
    for shape, step, lr, betas, eps, decay, scale, averages, dtype in [
            ((3,), 1, 1e-3, (0.9, 0.999), 1e-8, 0.01, 1.0, "zero", np.float64),
            ((2, 3), 1, 0.1, (0.9, 0.999), 1e-8, 0.0, 1.0, "zero", np.float64),
            ((4,), 2, 0.1, (0.9, 0.999), 1e-8, 0.1, 1.0, "earlier", np.float64),
            ((3, 2), 5, 0.5, (0.8, 0.99), 1e-8, 0.5, 1.0, "earlier", np.float64),
            ((5,), 10, 0.01, (0.9, 0.999), 1e-8, 0.01, 3.0, "earlier", np.float64),
            ((2, 2, 2), 100, 0.05, (0.5, 0.9), 1e-6, 0.2, 1.0, "earlier", np.float64),
            ((6,), 1000, 0.2, (0.9, 0.999), 1e-8, 0.1, 1.0, "earlier", np.float64),
            ((4,), 3, 0.1, (0.9, 0.999), 1e-2, 0.0, 1e-2, "earlier", np.float64),
            ((3,), 1, 0.1, (0.9, 0.999), 0.05, 0.3, 1e-2, "zero", np.float64),
            ((), 4, 0.3, [0.7, 0.95], 1e-8, 0.25, 1.0, "earlier", np.float64),
            ((3, 3), 7, 0.0, (0.9, 0.999), 1e-8, 0.5, 1.0, "earlier", np.float64),
            ((2, 5), 1, 0.02, (0.0, 0.5), 1e-8, 1.0, 5.0, "zero", np.float64),
            ((4, 3), 3, 0.1, (0.9, 0.999), 1e-8, 0.1, 1.0, "earlier", np.float32),
            ((5,), 1, 0.05, (0.8, 0.99), 1e-4, 0.5, 0.1, "zero", np.float32)]:
        param = rng.normal(size=shape) * 2.0
        grad = rng.normal(size=shape) * scale
        if averages == "zero":
            m, v = np.zeros(shape), np.zeros(shape)
        else:  # running averages as earlier gradients of this scale would leave them (v > 0)
            m = rng.normal(size=shape) * scale * 0.5
            v = (rng.normal(size=shape) * scale) ** 2 * 0.5 + (scale * 0.1) ** 2
        args = tuple(np.asarray(a, dtype=dtype) for a in (param, grad, m, v))  # 0-d arrays stay arrays
        yield (*args, step, lr, betas, eps, decay), {}


def early_stopping(rng):
    # (losses, patience, min_delta): one epoch; going down; going up from the start (stop once N - 1 - best reaches
    # patience, not exceeds it); ties (the first of equal losses stays the best); a gain of exactly min_delta (1.0
    # then 0.75 with min_delta 0.25: no improvement; all are exact in binary); slow steady gains each below min_delta
    # but adding up past it against the best (min_delta is measured from the best, not the previous epoch); the lowest
    # loss not the best under min_delta; patience 1, 3, 5; ints and a tuple
    fixed = [
        ([1.0], 2, 0.0), ([1.0], 1, 0.0), ([3.0, 2.0, 1.0], 2, 0.0), ([1.0, 2.0, 3.0], 2, 0.0),
        ([1.0, 2.0, 3.0], 3, 0.0), ([1.0, 2.0], 1, 0.0), ([1.0, 1.0, 1.0], 2, 0.0), ([1.0, 1.0, 1.0], 3, 0.0),
        ([2.0, 1.0, 1.0, 0.5], 2, 0.0), ([1.0, 0.5, 0.5, 0.7], 2, 0.0), ([1.0, 0.5, 0.5, 0.5], 3, 0.0),
        ([1.0, 0.75, 0.5], 2, 0.25), ([1.0, 0.75, 0.75], 2, 0.25), ([1.0, 0.94, 0.88, 0.82, 0.76], 2, 0.1),
        ([1.0, 0.94, 0.88, 0.82, 0.76, 0.7], 5, 0.1), ([1.0, 0.95, 0.97], 2, 0.1), ([1.0, 0.95, 0.97], 1, 0.1),
        ([0.9, 0.7, 0.65, 0.66, 0.64], 2, 0.02), ([0.9, 0.7, 0.65, 0.66, 0.64], 3, 0.0), ([5, 4, 4, 6], 2, 0),
        ((0.8, 0.6, 0.7, 0.9), 2, 0.0), ([0.5, 0.6, 0.4, 0.45, 0.41, 0.7], 3, 0.05), ([2.0, 2.0], 1, 0.0),
    ]
    for losses, patience, min_delta in fixed:
        yield (losses, patience, min_delta), {}
    # Noisy validation curves (a fall, then a slow rise): random lengths, patience and min_delta, some rounded to two
    # decimals so that ties occur
    for _ in range(12):
        n = int(rng.integers(2, 16))
        curve = 1.0 / (1 + np.arange(n)) + 0.03 * np.arange(n) + rng.normal(size=n) * 0.04
        if rng.random() < 0.5:
            curve = np.round(curve, 2)
        min_delta = float(rng.choice([0.0, 0.0, 0.01, 0.05]))
        yield ([float(v) for v in curve], int(rng.integers(1, 5)), min_delta), {}
    yield ([0.7, 0.6, 0.65],), {}  # the defaults: patience 2, min_delta 0
    yield ([0.7, 0.6, 0.65, 0.61],), {"min_delta": 0.0}


# The fine-tuning loop. Models are small float64 torch modules drawn from the case's rng (no exercise inside): a
# two-layer perceptron; the same with a BatchNorm1d after its first layer (which then has no bias: its gradient
# would be zero up to rounding), where a validation in training mode uses the validation batch's own statistics
# and so gives another loss; and a tiny BERT classifier read from its layer 1 (chapter 9's FromLayer):
# its embeddings and lower block are frozen, so is the top block's first feed-forward layer (which the loss does
# reach: it gets no gradient because it does not require one), and its pooler, unused by the mean pooling, gets no
# gradient although it requires one (neither may be stepped nor decayed).
def _drawn(rng, module, scale=0.5):
    """``module`` in float64 with every parameter drawn from ``rng`` (normal times ``scale``; norm gains around 1)."""
    import torch

    module = module.double()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            drawn = rng.normal(size=tuple(parameter.shape)) * scale
            if "norm" in name and name.endswith("weight"):
                drawn = drawn + 1.0
            parameter.copy_(torch.from_numpy(drawn))
    return module


def _perceptron(rng, d_in, hidden, classes, batch_norm=False):
    import torch
    from torch import nn

    from course_lib.training import torch_seed

    with torch_seed(0):  # the modules' own initialisation draws are overwritten; torch's global state is kept
        layers = [nn.Linear(d_in, hidden, bias=not batch_norm)] + ([nn.BatchNorm1d(hidden)] if batch_norm else []) + \
            [nn.Tanh(), nn.Linear(hidden, classes)]
        model = nn.Sequential(*layers)
    model = _drawn(rng, model, 0.7)
    if batch_norm:
        with torch.no_grad():
            model[1].weight.copy_(torch.from_numpy(1.0 + 0.2 * rng.normal(size=hidden)))
    return model


def _tiny_bert(rng, width, classes):
    """A 2-layer float64 BERT classifier read from the states of its layer 1: the top block, mean pooling, the head."""
    from course_lib.bert.classifier import BertClassifier
    from course_lib.bert.model import BertConfig, BertModel
    from course_lib.training import torch_seed
    from course_lib.transfer.fine_tuning import FromLayer

    with torch_seed(0):
        config = BertConfig(vocab_size=11, width=width, num_heads=2, layers=2, ff_size=2 * width, context=16,
                            dropout=0.0, attention_dropout=0.0)
        classifier = BertClassifier(BertModel(config), num_classes=classes, pooling="mean", dropout=0.0)
    classifier = _drawn(rng, classifier, 0.4)
    classifier.bert.embeddings.requires_grad_(False)
    classifier.bert.encoder.layers[0].requires_grad_(False)
    classifier.bert.encoder.layers[1].linear1.requires_grad_(False)  # frozen, yet on the loss's path
    # the key bias's gradient is zero in exact arithmetic (softmax ignores a shift shared by every key): Adam's step
    # would turn its rounding noise (~1e-17, different on every CPU) into ~1e-9 changes, so it is frozen too
    classifier.bert.encoder.layers[1].self_attn.key.bias.requires_grad_(False)
    return FromLayer(classifier, 1)


def _labels(rng, n, classes, inputs=None, weights=None, noise=1.0):
    """``(n,)`` int64 class ids: random, or the argmax of a random linear map of ``inputs`` plus noise."""
    import torch

    if inputs is None:
        return torch.from_numpy(rng.integers(0, classes, size=n).astype(np.int64))
    scores = inputs @ weights + rng.normal(size=(n, classes)) * noise
    return torch.from_numpy(scores.argmax(axis=1).astype(np.int64))


def _table_split(rng, sizes, d_in, classes, learnable):
    """Batches ``[((x,), labels), ...]`` of the given sizes and a validation pair, for the perceptrons."""
    import torch

    weights = rng.normal(size=(d_in, classes)) * 2
    parts = []
    for n in sizes:
        x = rng.normal(size=(n, d_in))
        labels = _labels(rng, n, classes, x if learnable else None, weights)
        parts.append(((torch.from_numpy(x),), labels))
    return parts[:-1], parts[-1]


def _state_split(rng, sizes, width, steps, classes):
    """Batches ``[((hidden, padding), labels), ...]`` of token states ``(B, T, D)`` for the tiny BERT, and a validation pair."""
    import torch

    parts = []
    for n in sizes:
        hidden = torch.from_numpy(rng.normal(size=(n, steps, width)))
        padding = torch.from_numpy(key_mask(rng, n, steps))
        parts.append(((hidden, padding), _labels(rng, n, classes)))
    return parts[:-1], parts[-1]


def fine_tune_loop(rng):
    from course_lib.transfer.scaffolds import patience_counter, sgd_step, torch_adamw_step

    # (model, batch sizes (the last: validation), D_in, classes, learnable labels, epochs, lr, kwargs):
    # several batches (the last smaller: the loss is the mean of each batch); one batch; one epoch; labels that a
    # model can learn (the validation loss falls) and random ones (it falls, then rises: early stopping stops and the
    # best epoch is not the last); lr = 0 (nothing changes: every validation loss is the same, the first epoch stays
    # the best and training stops after `patience` epochs); patience 1 and 3; weight decay 0 and 0.1; other betas
    # and eps; step_fn and stop_fn given (course_lib's test doubles: torch.optim.AdamW, a patience counter, one with
    # a min_delta that decides when to stop, and plain gradient descent)
    for kind, sizes, d_in, classes, learnable, epochs, lr, kwargs in [
            ("mlp", (8, 8, 5, 12), 4, 3, True, 4, 0.05, {}),
            ("mlp", (6, 6, 6, 10), 3, 2, False, 8, 0.2, {"patience": 2}),
            ("mlp", (10, 12), 5, 3, True, 3, 0.1, {"weight_decay": 0.1}),
            ("mlp", (7, 7, 9), 4, 4, True, 1, 0.05, {}),
            ("mlp", (5, 5, 5, 5, 8), 3, 2, False, 10, 0.3, {"patience": 1, "betas": (0.8, 0.99), "eps": 1e-6}),
            ("mlp", (6, 4, 10), 4, 3, True, 5, 0.0, {"patience": 2}),
            ("mlp", (8, 8, 12), 4, 3, False, 9, 0.25, {"patience": 3, "weight_decay": 0.0}),
            ("bn", (8, 8, 6, 12), 4, 3, True, 3, 0.05, {}),
            ("bn", (6, 6, 10), 3, 2, False, 8, 0.3, {"patience": 2, "weight_decay": 0.05}),
            ("bn", (10, 12), 5, 2, True, 2, 0.1, {"patience": 1}),
            ("bert", (4, 4, 3, 6), 8, 2, False, 4, 0.05, {}),
            ("bert", (5, 5, 6), 8, 3, False, 7, 0.2, {"patience": 2, "weight_decay": 0.1}),
            ("bert", (6, 6), 6, 2, False, 2, 0.02, {"weight_decay": 0.5}),
            ("mlp", (6, 6, 6, 10), 4, 3, True, 4, 0.05, {"step_fn": torch_adamw_step, "stop_fn": patience_counter}),
            ("mlp", (8, 8, 12), 4, 3, True, 6, 0.02,
             {"stop_fn": functools.partial(patience_counter, min_delta=0.2), "patience": 1}),
            ("bert", (4, 4, 6), 8, 2, False, 5, 0.1, {"step_fn": torch_adamw_step, "patience": 1}),
            # plain gradient descent as step_fn: a loop that steps with an optimiser of its own gets other numbers
            ("mlp", (6, 6, 6, 10), 4, 3, True, 4, 0.5, {"step_fn": sgd_step}),
            ("mlp", (8, 8, 12), 4, 3, False, 5, 1.0, {"step_fn": sgd_step, "patience": 2})]:
        if kind == "bert":
            model = _tiny_bert(rng, d_in, classes)
            batches, valid = _state_split(rng, sizes, d_in, 5, classes)
        else:
            model = _perceptron(rng, d_in, 6, classes, batch_norm=kind == "bn")
            batches, valid = _table_split(rng, sizes, d_in, classes, learnable)
        yield (model, batches, valid, epochs, lr), dict(kwargs)


GENERATORS = {
    "transfer.lora.lora_linear": lora_linear,
    "transfer.adamw.adamw_step": adamw_step,
    "transfer.early_stopping.early_stopping": early_stopping,
    "transfer.fine_tuning.fine_tune_loop": fine_tune_loop,
}

GRADIENTS = {
    "transfer.lora.lora_linear": (0, 3, 4),  # x, A and B: what training differentiates (W and b are frozen)
}

HINTS: dict[str, str] = {
    "transfer.lora.lora_linear":
        "Compute x @ weight.T, add scale times (x @ lora_a.T) @ lora_b.T (the scale on the low-rank path only, A "
        "before B) and add the bias once if it is not None, with torch operations on new tensors.",
    "transfer.adamw.adamw_step":
        "Shrink the parameter by (1 - lr * weight_decay) before the update (not lambda * theta added to the gradient), "
        "update m with beta1 and v with beta2, divide them by 1 - beta1 ** step and 1 - beta2 ** step with step "
        "counted from 1, and add eps to sqrt(v_hat) (not under the root), in new tensors of param's dtype.",
    "transfer.early_stopping.early_stopping":
        "Keep the first epoch as the best and replace it only when a loss is below the best loss so far minus "
        "min_delta (strictly: a tie is no improvement), then stop when len(losses) - 1 - best >= patience.",
    "transfer.fine_tuning.fine_tune_loop":
        "Zero the gradients before each batch's backward pass, count the steps across epochs from 1, step only the "
        "parameters that require gradients and got one, score the validation split in eval mode without gradients, "
        "and keep (and restore at the end) a cloned copy of the parameters of the best epoch.",
}

TORCH = {"transfer.lora.lora_linear",
         "transfer.adamw.adamw_step"}
