"""The fine-tuning loop: cross-entropy, an optimiser step per batch, a validation score per epoch, early stopping. Chapter 9.

:func:`fine_tune_loop` trains the parameters of a model that require gradients (a head,
LoRA's matrices, or every weight) on labelled batches, steps each with
:func:`~course_lib.transfer.adamw.adamw_step`, scores the validation split after every epoch,
asks :func:`~course_lib.transfer.early_stopping.early_stopping` which epoch to keep and
whether to stop, and ends with the kept epoch's parameters. It is the loop of problem set 9,
and the one chapter 9 compares a frozen encoder, fine-tuning and LoRA with.
:class:`FromLayer` and :func:`cached_batches` let it train the top blocks of a BERT classifier
from the states of the frozen layers below, computed once. See :doc:`/chapters/ch09_after_bert`.
Tested against the same loop written with ``torch.optim.AdamW``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.bert.classifier import BertClassifier
from course_lib.bert.encoding import length_batches, pad_states
from course_lib.transfer.adamw import adamw_step
from course_lib.transfer.early_stopping import early_stopping


def _check_batch(batch, name: str) -> None:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2 or not isinstance(batch[0], (tuple, list)):
        raise ValueError(f"{name} must be a pair (inputs, labels) with inputs a tuple of the model's arguments")
    labels = batch[1]
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.dtype != torch.int64:
        raise ValueError(f"the labels of {name} must be an int64 tensor (B,), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)} {tuple(getattr(labels, 'shape', ()))}")


def check_loop_args(model, batches, valid, epochs, lr, patience) -> list:
    """Raise unless the arguments of :func:`fine_tune_loop` fit; return the parameters that will be trained. Chapter 9.

    ``model`` an ``nn.Module`` with at least one parameter that requires gradients; ``batches``
    a non-empty sequence of ``(inputs, labels)`` pairs and ``valid`` one such pair, ``inputs``
    a tuple of the model's arguments and ``labels`` an int64 tensor ``(B,)``; ``epochs`` and
    ``patience`` ints ``>= 1``; ``lr`` a number ``>= 0``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    trained = [p for p in model.parameters() if p.requires_grad]
    if not trained:
        raise ValueError("the model has no parameter that requires gradients: nothing to train")
    if isinstance(batches, (tuple, list)) and len(batches) == 2 and isinstance(batches[1], torch.Tensor):
        raise ValueError("batches must be a sequence of (inputs, labels) pairs, not one pair: wrap it in a list")
    if not isinstance(batches, Sequence) or not len(batches):
        raise ValueError("batches must be a non-empty sequence of (inputs, labels) pairs")
    for i, batch in enumerate(batches):
        _check_batch(batch, f"batches[{i}]")
    _check_batch(valid, "valid")
    checks.positive_int(epochs, "epochs")
    checks.positive_int(patience, "patience")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 <= lr < float("inf"):
        raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
    return trained


def fine_tune_loop(model, batches, valid, epochs: int, lr: float, weight_decay: float = 0.01, patience: int = 2,
                   betas: tuple = (0.9, 0.999), eps: float = 1e-8, step_fn: Callable = adamw_step,
                   stop_fn: Callable = early_stopping) -> dict:
    """Train a classifier's trainable parameters with cross-entropy and AdamW; keep the best validation epoch. Chapter 9.

    The trained parameters are those of ``model.named_parameters()`` with ``requires_grad``
    (frozen ones never change). Each has two running averages, zeros at first. For each
    epoch ``e = 0, 1, ...`` up to ``epochs - 1``:

    1. in training mode, for each ``(inputs, labels)`` of ``batches`` in order, count the step
       ``t`` (1, 2, ... across epochs), compute ``loss = cross_entropy(model(*inputs), labels)``
       (the mean over the batch) and its gradients, and replace every trained parameter
       that got a gradient by ``step_fn(param, grad, exp_avg, exp_avg_sq, t, lr, betas, eps,
       weight_decay)``'s new parameter, keeping its new averages (a parameter without a
       gradient is not touched, as ``torch.optim`` does);
    2. in evaluation mode and without gradients, the validation loss, the cross-entropy of
       ``model(*valid_inputs)`` against ``valid_labels``;
    3. ``best, stop = stop_fn(validation losses so far, patience)``; when ``best == e``, a copy
       of the trained parameters is kept; when ``stop``, no further epoch is run.

    At the end the kept copy is loaded into the model, which is left in evaluation mode.
    Exercise of ps09.

    Args:
        model: an ``nn.Module`` mapping ``*inputs`` to logits ``(B, M)`` (``M`` classes), trained in place.
        batches: the training batches, a sequence of ``(inputs, labels)``: ``inputs`` a tuple of the
            model's arguments, ``labels`` int64 ``(B,)``; the same batches in the same order every epoch.
        valid: the validation split, one ``(inputs, labels)`` pair.
        epochs: the most epochs to run. lr, weight_decay, betas, eps: AdamW's.
        patience: passed to ``stop_fn``.
        step_fn: an optimiser step with :func:`~course_lib.transfer.adamw.adamw_step`'s arguments and results.
        stop_fn: a rule with :func:`~course_lib.transfer.early_stopping.early_stopping`'s arguments and results.

    Returns:
        a dict: ``"loss"``, the training losses, one float per step ``(steps,)``; ``"valid_loss"``,
        one float per epoch run; ``"best_epoch"``, an int; ``"best_state"``, the kept parameters,
        ``name -> tensor`` for the trained parameters in ``named_parameters()`` order.
    """
    check_loop_args(model, batches, valid, epochs, lr, patience)
    ### BEGIN SOLUTION
    trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
    averages = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in trained.items()}
    losses, valid_losses, best, kept, step = [], [], 0, None, 0
    for epoch in range(epochs):  # at most epochs: stop_fn may end it sooner
        model.train()
        for inputs, labels in batches:
            step += 1
            for p in trained.values():
                p.grad = None
            loss = F.cross_entropy(model(*inputs), labels)
            loss.backward()
            with torch.no_grad():  # the update is not part of the graph
                for name, p in trained.items():
                    if p.grad is not None:
                        new, m, v = step_fn(p, p.grad, *averages[name], step, lr, betas, eps, weight_decay)
                        p.copy_(new)
                        averages[name] = (m, v)
            losses.append(loss.item())  # the batch's mean loss
        model.eval()
        with torch.no_grad():  # scored without a graph
            valid_losses.append(F.cross_entropy(model(*valid[0]), valid[1]).item())
        best, stop = stop_fn(valid_losses, patience)
        if best == epoch:
            kept = {name: p.detach().clone() for name, p in trained.items()}
        if stop:
            break
    with torch.no_grad():  # the kept copy back into the model
        for name, p in trained.items():
            p.copy_(kept[name])
            p.grad = None
    model.eval()
    return {"loss": losses, "valid_loss": valid_losses, "best_epoch": best, "best_state": kept}
    ### END SOLUTION


class FromLayer(nn.Module):
    """A :class:`~course_lib.bert.classifier.BertClassifier` read from the states of layer ``layer``: logits ``(B, M)``. Chapter 9.

    ``forward(hidden (B, T, D), padding (B, T))`` runs the blocks above ``layer``, the pooling
    and the head (:meth:`~course_lib.bert.classifier.BertClassifier.forward_from`), so that
    :func:`fine_tune_loop` can train the top blocks from states of the frozen ones cached once.
    Its parameters are the classifier's.
    """

    def __init__(self, classifier: BertClassifier, layer: int):
        super().__init__()
        if not isinstance(classifier, BertClassifier):
            raise TypeError(f"classifier must be a BertClassifier, got {type(classifier).__name__}")
        if not 0 <= layer <= classifier.bert.config.layers:
            raise ValueError(f"layer must lie in 0..{classifier.bert.config.layers}, got {layer}")
        self.classifier, self.layer = classifier, int(layer)

    def forward(self, hidden, padding):
        """``(B, T, D)`` states of layer ``layer`` and their ``(B, T)`` mask -> ``(B, M)`` logits."""
        return self.classifier.forward_from(hidden, padding, self.layer)


def cached_batches(states: Sequence[torch.Tensor], labels, batch_size: int, rng: np.random.Generator | None = None
                   ) -> list[tuple[tuple, torch.Tensor]]:
    """Batches for :func:`fine_tune_loop` from cached token states: ``((hidden (B, T, D), padding (B, T)), labels (B,))``. Chapter 9.

    ``states`` holds ``N`` tensors ``(T, D)``, one per text (``T`` its length); texts of similar
    length share a batch (:func:`~course_lib.bert.encoding.length_batches`, batches in a random
    order with ``rng``); ``labels`` ``(N,)`` class ids.
    """
    labels = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
    if labels.dim() != 1 or len(labels) != len(states) or not len(states):
        raise ValueError(f"labels must be (N,) for the N = {len(states)} states, got {tuple(labels.shape)}")
    lengths = np.array([len(s) for s in states])
    return [(pad_states([states[i] for i in index]), labels[index])
            for index in length_batches(lengths, batch_size, rng)]
