"""Fine-tuning BERT to classify texts: a linear head on the pooled vector, trained with the encoder's top layers. Chapter 8.

The classifier reads one vector per text, the pooler's ``tanh(W_p h_L[CLS] + b_p)``
(BERT's choice, Devlin et al., 2019) or the mean of the last layer's token vectors,
and computes ``logits = W_c dropout(pooled) + b_c``. Fine-tuning minimises the
cross-entropy of the labels with AdamW (weight decay 0.01, none on biases and
LayerNorms) and BERT's learning rate, a linear warm-up then a linear decay to 0.

On a CPU, training all layers is slow. With ``train_layers=k`` only the top ``k``
blocks, the pooler and the head learn; the embeddings and the ``L - k`` blocks below are
frozen, so they are run once over the texts and their outputs cached
(:func:`~course_lib.bert.encoding.encode_layers`), and every epoch starts from the
cache. The frozen layers run without dropout. Two classifiers scored on the same test
texts are compared by :func:`course_lib.seeds.paired_difference`. See :doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.bert.encoding import encode_ids, encode_layers, length_batches, pad_ids, pad_states
from course_lib.bert.model import BertModel
from course_lib.bert.pooling import mean_pool
from course_lib.bert.pretraining import bert_adamw, linear_warmup_decay
from course_lib.progress import progress_bar
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed

POOLINGS = ("cls", "mean")


class BertClassifier(nn.Module):
    """A :class:`~course_lib.bert.model.BertModel` (``.bert``) with a linear head (``.head``) on one vector per text. Chapter 8.

    Args:
        bert: the encoder, e.g. from :func:`~course_lib.bert.pretrained.load_pretrained` (trained in place).
        num_classes: the number of classes.
        pooling: ``"cls"``, the pooler's output (BERT), or ``"mean"``, the mean of the
            last layer over real tokens (how all-MiniLM-L6-v2 was trained).
        dropout: on the pooled vector.
    """

    def __init__(self, bert: BertModel, num_classes: int, pooling: str = "cls", dropout: float = 0.1):
        super().__init__()
        if not isinstance(bert, BertModel):
            raise TypeError(f"bert must be a BertModel, got {type(bert).__name__}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.bert, self.pooling = bert, pooling
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(bert.config.width, checks.positive_int(num_classes, "num_classes"))
        with torch.no_grad():
            self.head.weight.normal_(0.0, 0.02)
            self.head.bias.zero_()

    def forward(self, ids, segments=None, padding=None):
        """Logits, one row per text and one column per class, of a ``(B, T)`` batch of ids, segment ids and padding mask."""
        checks.token_batch(ids, "ids")
        if padding is None:
            padding = torch.ones_like(ids, dtype=torch.bool)
        checks.expect_tensor(padding, "padding", tuple(ids.shape), "(B, T)")
        return self.forward_from(self.bert.embeddings(ids, segments), padding, 0)

    def forward_from(self, hidden, padding, layer: int):
        """Logits, one row per text, from the states ``(B, T, D)`` of layer ``layer`` (0: embeddings): the blocks above, pooling, head."""
        checks.sequence_batch(hidden, "hidden")
        if not 0 <= layer <= self.bert.config.layers:
            raise ValueError(f"layer must lie in 0..{self.bert.config.layers}, got {layer}")
        x = hidden
        for block in self.bert.encoder.layers[layer:]:
            x = block(x, padding)
        pooled = torch.tanh(self.bert.pooler(x[:, 0])) if self.pooling == "cls" else mean_pool(x, padding)
        return self.head(self.dropout(pooled))  # (B, classes)

    def trained_parameters(self, train_layers: int | None = None) -> list:
        """The parameters fine-tuning updates: all, or the top ``train_layers`` blocks, the pooler and the head."""
        if train_layers is None:
            return list(self.parameters())
        blocks = self.bert.encoder.layers[self.bert.config.layers - train_layers:]
        return [p for module in (*blocks, self.bert.pooler, self.head) for p in module.parameters()]


def _check_texts(texts, labels=None, num_classes=None):
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty sequence of strings")
    if labels is None:
        return None
    labels = torch.as_tensor(checks.token_ids(labels, num_classes, "labels"))
    if len(labels) != len(texts):
        raise ValueError(f"{len(labels)} labels for {len(texts)} texts")
    return labels


class _Inputs:
    """Texts ready for batches: cached states of a frozen layer, or ids for the full model."""

    def __init__(self, model, tokenizer, texts, start, states, max_length, batch_size):
        self.start = start
        if start == 0:
            self.ids = encode_ids(tokenizer, texts, max_length)
            self.lengths = np.array([len(i) for i in self.ids])
            self.pad_id = tokenizer.pad_id
            return
        if states is None:
            states = encode_layers(model.bert, tokenizer, texts, keep=(start,), features=False,
                                   batch_size=batch_size, max_length=max_length).states[start]
        if len(states) != len(texts) or any(s.dim() != 2 or s.shape[1] != model.bert.config.width for s in states):
            raise ValueError(f"states must hold {len(texts)} tensors (T, D) with D = {model.bert.config.width}")
        self.states, self.lengths = [s.detach() for s in states], np.array([len(s) for s in states])

    def logits(self, model, index):
        if self.start == 0:
            batch = pad_ids([self.ids[i] for i in index], self.pad_id)
            return model(batch.ids, batch.segments, batch.padding)
        hidden, padding = pad_states([self.states[i] for i in index])
        return model.forward_from(hidden, padding, self.start)


@torch.no_grad()
def _predict(model, inputs, batch_size):
    probs = torch.zeros(len(inputs.lengths), model.head.out_features)
    with eval_mode(model):
        for index in length_batches(inputs.lengths, batch_size):
            probs[index] = inputs.logits(model, index).softmax(-1)
    return probs


def fine_tune(model: BertClassifier, tokenizer, texts: Sequence[str], labels, epochs: int = 3, batch_size: int = 32,
              lr: float = 5e-5, warmup: float = 0.1, weight_decay: float = 0.01, max_length: int = 64,
              train_layers: int | None = None, valid: tuple | None = None, states=None, valid_states=None,
              max_norm: float | None = 1.0, seed: int = 0, progress: bool = True,
              keep_best: bool = False) -> TrainingHistory:
    """Fine-tune a :class:`BertClassifier` on labelled texts: AdamW, linear warm-up and decay, length-sorted batches. Chapter 8.

    Every epoch visits the ``N`` texts once in batches of similar length
    (:func:`~course_lib.bert.encoding.length_batches`, a new order per epoch). With
    ``train_layers=k < L`` only the top ``k`` blocks, the pooler and the head are
    trained: the texts' states at layer ``L - k`` are computed once (or taken from
    ``states``) and the lower layers never run again; ``model`` then returns the same
    logits as if it had run them. After each epoch, ``valid`` is scored; with
    ``keep_best`` the model ends with the trained parameters of the epoch that scored
    highest on ``valid`` (the first such epoch), *early stopping* chosen on validation.

    Args:
        model: the classifier, trained in place.
        tokenizer: the encoder's tokenizer.
        texts: ``N`` strings; labels: ``(N,)`` class ids in ``[0, num_classes)`` (the head's outputs).
        epochs, batch_size: passes over the data, texts per step.
        lr: the peak learning rate. warmup: the share of the steps spent warming up.
        weight_decay, max_norm: AdamW's weight decay (not on biases and LayerNorms); gradient clipping.
        max_length: longer texts are cut.
        train_layers: ``None`` (every parameter) or ``k`` in ``1 .. L``.
        valid: ``None`` or ``(texts, labels)`` scored after every epoch.
        states, valid_states: optional cached states of layer ``L - k``: ``N`` tensors ``(T, D)``, ``T``
            the length of each text (from :func:`~course_lib.bert.encoding.encode_layers` with ``max_length``).
        seed: seeds the head's dropout and the batch order. progress: a progress bar.
        keep_best: restore the best validation epoch's parameters at the end (needs ``valid``).

    Returns:
        a :class:`~course_lib.training.TrainingHistory`: ``"loss"``, ``"grad_norm"``, ``"lr"``
        per step ``(steps,)``; ``"train_accuracy"`` (of the batches as trained) and
        ``"valid_accuracy"`` (if ``valid``) per epoch ``(epochs,)``.
    """
    num_classes = model.head.out_features
    labels = _check_texts(texts, labels, num_classes)
    epochs, batch_size = checks.positive_int(epochs, "epochs"), checks.positive_int(batch_size, "batch_size")
    layers = model.bert.config.layers
    if train_layers is not None and not 1 <= checks.positive_int(train_layers, "train_layers") <= layers:
        raise ValueError(f"train_layers must lie in 1..{layers} or be None, got {train_layers}")
    if keep_best and valid is None:
        raise ValueError("keep_best chooses an epoch on valid: pass valid=(texts, labels)")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup is a share of the steps in [0, 1), got {warmup!r}")
    start = 0 if train_layers is None else layers - train_layers
    inputs = _Inputs(model, tokenizer, texts, start, states, max_length, batch_size)
    if valid is not None:
        valid_labels = _check_texts(valid[0], valid[1], num_classes)
        valid_inputs = _Inputs(model, tokenizer, valid[0], start, valid_states, max_length, batch_size)
    params = model.trained_parameters(train_layers)
    optimizer = bert_adamw(model, lr, weight_decay, params)
    rng = np.random.default_rng(seed)
    per_epoch = len(length_batches(inputs.lengths, batch_size))
    schedule = linear_warmup_decay(int(warmup * epochs * per_epoch), epochs * per_epoch)
    history = {name: [] for name in ("loss", "grad_norm", "lr", "train_accuracy", "valid_accuracy")}
    step, best, best_state = 0, -1.0, None
    with torch_seed(seed), progress_bar(epochs * per_epoch, "fine-tuning", progress) as bar:
        for _ in range(epochs):
            model.train()
            correct = 0
            for index in length_batches(inputs.lengths, batch_size, rng):
                step += 1
                for group in optimizer.param_groups:
                    group["lr"] = lr * schedule(step)
                logits = inputs.logits(model, index)
                loss = F.cross_entropy(logits, labels[index])
                history["grad_norm"].append(optimizer_step(model, optimizer, loss, max_norm))
                history["loss"].append(loss.item())
                history["lr"].append(lr * schedule(step))
                correct += int((logits.argmax(-1) == labels[index]).sum())
                bar.update(1)
            history["train_accuracy"].append(correct / len(texts))
            if valid is not None:
                predicted = _predict(model, valid_inputs, 2 * batch_size).argmax(-1)
                history["valid_accuracy"].append(float((predicted == valid_labels).float().mean()))
                if keep_best and history["valid_accuracy"][-1] > best:
                    best, best_state = history["valid_accuracy"][-1], [p.detach().clone() for p in params]
    if keep_best:
        with torch.no_grad():
            for p, kept in zip(params, best_state):
                p.copy_(kept)
    if valid is None:
        del history["valid_accuracy"]
    return TrainingHistory(history)


def predict(model: BertClassifier, tokenizer, texts: Sequence[str], batch_size: int = 64, max_length: int = 64,
            states=None, layer: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The predicted class ``(N,)`` and the class probabilities ``(N, M)`` of ``N`` texts, ``M`` classes. Chapter 8.

    Runs in evaluation mode without gradients, in length-sorted batches. ``states``
    (``N`` tensors ``(T, D)`` of layer ``layer``, as cached for fine-tuning) skip the
    layers below ``layer``.
    """
    _check_texts(texts)
    inputs = _Inputs(model, tokenizer, texts, layer, states, max_length, batch_size)
    probs = _predict(model, inputs, checks.positive_int(batch_size, "batch_size"))
    return probs.argmax(-1).numpy(), probs.numpy()

