"""Pre-training BERT: the masked-language-model and next-sentence heads, the training loop, filling in ``[MASK]``. Chapter 8.

On top of the encoder sit two heads (Devlin et al., 2019):

- the MLM head reads the final vector ``h`` of every chosen position:
  ``z = LN(GELU(W_t h + b_t))``, then ``logits = E_tok z + b_V``, where ``E_tok`` is the
  token embedding table itself (*tied* weights: one ``(V, D)`` matrix embeds and
  predicts) and ``b_V`` a bias ``(V,)``;
- the NSP head is ``W_n pooled + b_n``, two logits from the pooled ``[CLS]`` vector.

The loss is ``L = L_MLM + L_NSP``: the mean cross-entropy of the original tokens at the
positions :func:`~course_lib.bert.masking.mlm_mask` chose, plus that of the pair's label.
The logits are computed at the chosen positions only (15 % of the tokens), which saves
most of the ``(V, D)`` product. Parameter names map one to one onto
``transformers.BertForPreTraining`` (:func:`to_hf_pretraining_state_dict`). See
:doc:`/chapters/ch08_bert`. Tested against ``transformers.BertForPreTraining`` with the
same weights.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.bert.masking import IGNORE, mlm_mask
from course_lib.bert.model import BertConfig, BertModel
from course_lib.bert.pretrained import to_bert_state_dict
from course_lib.bert.pretraining_data import SentencePair, collate_pairs
from course_lib.bert.wordpiece import WordPieceTokenizer
from course_lib.progress import progress_bar
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed
from course_lib.transformer.layer_norm import LayerNorm


class MLMHead(nn.Module):
    """BERT's masked-LM head: ``LN(GELU(W_t h + b_t))`` times the tied token embeddings, plus a bias. Chapter 8.

    Parameters ``dense`` (``W_t``, ``b_t``), ``norm`` and ``bias`` ``(V,)``; the decoder
    weight is not a parameter of the head but passed in: the encoder's token embedding.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.width, config.width)
        self.norm = LayerNorm(config.width, config.eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden, token_weight):
        """Logits ``(..., V)`` of vectors ``(..., D)``, with the ``(V, D)`` token embedding as the decoder."""
        return self.norm(F.gelu(self.dense(hidden))) @ token_weight.T + self.bias


class PreTrainingOutput(NamedTuple):
    """What :class:`BertForPreTraining` returns: MLM logits ``(N, V)`` at chosen positions (or ``(B, T, V)``), NSP logits ``(B, 2)`` and the losses. Chapter 8."""

    mlm_logits: torch.Tensor
    nsp_logits: torch.Tensor
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    loss: torch.Tensor | None


class BertForPreTraining(nn.Module):
    """A :class:`~course_lib.bert.model.BertModel` (``.bert``) with the MLM head (``.mlm``) and the NSP head (``.nsp``). Chapter 8.

    Args:
        config: the :class:`~course_lib.bert.model.BertConfig`.
        model_kwargs: passed to :class:`~course_lib.bert.model.BertModel` (``embed_fn``, ``attention_fn``).
    """

    def __init__(self, config: BertConfig, **model_kwargs):
        super().__init__()
        self.bert = BertModel(config, **model_kwargs)
        self.config = config
        self.mlm = MLMHead(config)
        self.nsp = nn.Linear(config.width, 2)
        with torch.no_grad():
            for layer in (self.mlm.dense, self.nsp):
                layer.weight.normal_(0.0, 0.02)
                layer.bias.zero_()

    def forward(self, ids, segments=None, padding=None, labels=None, nsp_labels=None) -> PreTrainingOutput:
        """Logits and losses of a ``(B, T)`` batch; ``labels`` ``(B, T)`` (``-100`` = not chosen), ``nsp_labels`` ``(B,)``.

        With ``labels``, the MLM logits are ``(N, V)`` for the ``N`` chosen positions in
        row-major order and ``mlm_loss`` is their mean cross-entropy; without, they are
        ``(B, T, V)`` for every position. ``loss`` is ``mlm_loss + nsp_loss`` when both
        labels are given.
        """
        out = self.bert(ids, segments, padding)
        nsp_logits = self.nsp(out.pooled)  # (B, 2)
        weight = self.bert.embeddings.token_embedding.weight  # tied: (V, D)
        mlm_loss = nsp_loss = loss = None
        if labels is None:
            mlm_logits = self.mlm(out.last, weight)  # (B, T, V)
        else:
            checks.expect_tensor(labels, "labels", tuple(ids.shape), "(B, T)")
            chosen = labels != IGNORE
            mlm_logits = self.mlm(out.last[chosen], weight)  # (N, V)
            mlm_loss = (F.cross_entropy(mlm_logits, labels[chosen]) if len(mlm_logits)
                        else mlm_logits.sum() * 0.0)
        if nsp_labels is not None:
            checks.expect_tensor(nsp_labels, "nsp_labels", (ids.shape[0],), "(B,)")
            nsp_loss = F.cross_entropy(nsp_logits, nsp_labels)
        if mlm_loss is not None and nsp_loss is not None:
            loss = mlm_loss + nsp_loss
        return PreTrainingOutput(mlm_logits, nsp_logits, mlm_loss, nsp_loss, loss)


@torch.no_grad()
def set_unigram_bias(model: BertForPreTraining, documents) -> torch.Tensor:
    """Start the MLM output bias at the log frequency of every token in ``documents``; return it, ``(V,)``. Chapter 8.

    ``b_V[v] = log((n_v + 1) / (N + V))`` with ``n_v`` the count of token ``v`` among the
    ``N`` tokens. A fresh model then predicts the unigram distribution from its first
    step, instead of spending a short run's first hundreds of steps learning how common
    each token is (as one starts a classifier's bias at the log prior).

    Args:
        model: the model; its ``mlm.bias`` is overwritten.
        documents: documents of sentences of ids (from
            :func:`~course_lib.bert.pretraining_data.pretraining_corpus`).
    """
    vocab = model.config.vocab_size
    ids = torch.tensor([i for doc in documents for sentence in doc for i in sentence], dtype=torch.int64)
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"documents hold ids outside the vocabulary [0, {vocab})")
    counts = torch.bincount(ids, minlength=vocab).double() + 1.0  # (V,)
    model.mlm.bias.copy_((counts / counts.sum()).log())
    return model.mlm.bias.detach().clone()


def to_hf_pretraining_state_dict(model: BertForPreTraining) -> dict[str, torch.Tensor]:
    """The weights of ``model`` under ``transformers.BertForPreTraining``'s names (tensors of any shape). Chapter 8."""
    state = {"bert." + name: value for name, value in to_bert_state_dict(model.bert).items()}
    prefix = "cls.predictions."
    state |= {prefix + "transform.dense.weight": model.mlm.dense.weight, prefix + "transform.dense.bias": model.mlm.dense.bias,
              prefix + "transform.LayerNorm.weight": model.mlm.norm.weight,
              prefix + "transform.LayerNorm.bias": model.mlm.norm.bias, prefix + "bias": model.mlm.bias,
              prefix + "decoder.weight": model.bert.embeddings.token_embedding.weight,
              prefix + "decoder.bias": model.mlm.bias,
              "cls.seq_relationship.weight": model.nsp.weight, "cls.seq_relationship.bias": model.nsp.bias}
    return {name: value.detach().clone() for name, value in state.items()}


def linear_warmup_decay(warmup: int, steps: int) -> Callable[[int], float]:
    """BERT's learning-rate factor of step ``s``: ``s / warmup`` up to ``warmup``, then linear down to 0 at ``steps``. Chapter 8.

    Returns a function ``step -> factor`` for steps ``1 .. steps``.
    """
    warmup, steps = checks.nonnegative_int(warmup, "warmup"), checks.positive_int(steps, "steps")
    if warmup > steps:
        raise ValueError(f"warmup = {warmup} must not exceed the run of {steps} steps")

    def factor(step: int) -> float:
        if step <= warmup:
            return step / warmup
        return max(0.0, (steps - step) / max(1, steps - warmup))
    return factor


def bert_adamw(model: nn.Module, lr: float, weight_decay: float, params=None) -> torch.optim.AdamW:
    """AdamW as BERT was trained with it: weight decay on the weights, none on biases and LayerNorms. Chapter 8.

    ``params`` (default: every parameter of ``model``) are the parameters to train; each is
    placed by its name in ``model``: a name ending in ``bias`` or holding ``norm`` gets no
    decay. Used by chapter 8's pre-training and fine-tuning and chapter 9's pre-training.
    Takes a model and returns its optimiser, no array.
    """
    chosen = None if params is None else {id(p) for p in params}
    named = [(n, p) for n, p in model.named_parameters() if chosen is None or id(p) in chosen]
    if chosen is not None and len(named) != len(chosen):
        raise ValueError("params must be parameters of model")
    plain = [p for n, p in named if n.endswith("bias") or "norm" in n]
    decayed = [p for n, p in named if not (n.endswith("bias") or "norm" in n)]
    return torch.optim.AdamW([{"params": decayed, "weight_decay": weight_decay},
                              {"params": plain, "weight_decay": 0.0}], lr=lr)


def _masked_batch(pairs, tokenizer, mask_fn, probability, generator):
    batch, nsp_labels = collate_pairs(pairs, tokenizer)
    inputs, labels = mask_fn(batch.ids, tokenizer.special_ids, tokenizer.mask_id, len(tokenizer), probability,
                             generator)
    return inputs, batch.segments, batch.padding, labels, nsp_labels


def _scores(out, labels, nsp_labels) -> tuple[float, float, int, float]:
    """(summed MLM cross-entropy, MLM correct, chosen positions, NSP correct) of one batch."""
    target = labels[labels != IGNORE]
    mlm_sum = float(F.cross_entropy(out.mlm_logits, target, reduction="sum")) if len(target) else 0.0
    return (mlm_sum, float((out.mlm_logits.argmax(-1) == target).sum()), len(target),
            float((out.nsp_logits.argmax(-1) == nsp_labels).sum()))


def pretrain(model: BertForPreTraining, tokenizer: WordPieceTokenizer, pairs: Sequence[SentencePair], steps: int,
             batch_size: int = 32, lr: float = 1e-3, warmup: int | None = None, weight_decay: float = 0.01,
             max_norm: float | None = 1.0, valid_pairs: Sequence[SentencePair] | None = None, eval_every: int = 50,
             probability: float = 0.15, seed: int = 0, progress: bool = True,
             mask_fn: Callable = mlm_mask) -> TrainingHistory:
    """Pre-train a :class:`BertForPreTraining` on sentence pairs with MLM + NSP, AdamW and warm-up then linear decay. Chapter 8.

    Each step draws ``batch_size`` pairs at random, pads them
    (:func:`~course_lib.bert.pretraining_data.collate_pairs`), corrupts them with
    ``mask_fn`` and takes one AdamW step on ``L_MLM + L_NSP`` with the learning rate
    ``lr * f(s)`` of :func:`linear_warmup_decay` and the gradient norm clipped to
    ``max_norm``. Biases and LayerNorm weights get no weight decay, as in BERT. Every
    ``eval_every`` steps and at the end, the model is scored on ``valid_pairs``, masked
    once (with ``seed + 1``) so that every evaluation sees the same positions.

    Args:
        model: the model, trained in place.
        tokenizer: gives the special ids, ``[MASK]`` and ``V``.
        pairs: training :class:`~course_lib.bert.pretraining_data.SentencePair` s
            (from :func:`~course_lib.bert.pretraining_data.nsp_pairs`).
        steps, batch_size, lr: optimizer steps, pairs per step, peak learning rate.
        warmup: warm-up steps (default: a tenth of ``steps``).
        weight_decay, max_norm: AdamW's decoupled weight decay; clipping (``None``: none).
        valid_pairs: held-out pairs (``None``: no evaluation). eval_every: steps between evaluations.
        probability: the share of tokens chosen for prediction.
        seed: seeds the batches, the masks and dropout.
        progress: show a progress bar.
        mask_fn: ``(ids (B, T), special_ids, mask_id, vocab_size, probability, generator) -> (inputs, labels)``.

    Returns:
        a :class:`~course_lib.training.TrainingHistory`: per step ``"loss"``, ``"mlm_loss"``,
        ``"nsp_loss"``, ``"mlm_accuracy"`` (of the training batch), ``"grad_norm"``, ``"lr"``,
        each ``(steps,)``; per evaluation ``"valid_step"``, ``"valid_mlm_loss"``,
        ``"valid_mlm_accuracy"`` (the original token predicted at chosen positions) and
        ``"valid_nsp_accuracy"``, each ``(n_eval,)``.
    """
    steps = checks.positive_int(steps, "steps")
    batch_size = checks.positive_int(batch_size, "batch_size")
    eval_every = checks.positive_int(eval_every, "eval_every")
    if len(pairs) < 1:
        raise ValueError("pairs is empty")
    if len(tokenizer) != model.config.vocab_size:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens, the model's vocabulary {model.config.vocab_size}")
    schedule = linear_warmup_decay(max(1, steps // 10) if warmup is None else warmup, steps)
    optimizer = bert_adamw(model, lr, weight_decay)
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    valid = []
    if valid_pairs is not None and len(valid_pairs):
        fixed = torch.Generator().manual_seed(seed + 1)
        valid = [_masked_batch(valid_pairs[i:i + 64], tokenizer, mask_fn, probability, fixed)
                 for i in range(0, len(valid_pairs), 64)]
    names = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "grad_norm", "lr", "valid_step", "valid_mlm_loss",
             "valid_mlm_accuracy", "valid_nsp_accuracy")
    history = {name: [] for name in names}

    def evaluate(step):
        totals = np.zeros(4)
        with eval_mode(model), torch.no_grad():
            for inputs, segments, padding, labels, nsp_labels in valid:
                totals += _scores(model(inputs, segments, padding, labels), labels, nsp_labels)
        history["valid_step"].append(step)
        history["valid_mlm_loss"].append(totals[0] / max(totals[2], 1))
        history["valid_mlm_accuracy"].append(totals[1] / max(totals[2], 1))
        history["valid_nsp_accuracy"].append(totals[3] / len(valid_pairs))

    model.train()
    with torch_seed(seed), progress_bar(steps, "pre-training", progress) as bar:
        for step in range(1, steps + 1):
            chosen = rng.integers(len(pairs), size=batch_size)
            inputs, segments, padding, labels, nsp_labels = _masked_batch(
                [pairs[i] for i in chosen], tokenizer, mask_fn, probability, generator)
            for group in optimizer.param_groups:
                group["lr"] = lr * schedule(step)
            out = model(inputs, segments, padding, labels, nsp_labels)
            history["grad_norm"].append(optimizer_step(model, optimizer, out.loss, max_norm))
            target = labels[labels != IGNORE]
            history["mlm_accuracy"].append(float((out.mlm_logits.argmax(-1) == target).float().mean())
                                           if len(target) else math.nan)
            for name in ("loss", "mlm_loss", "nsp_loss"):
                history[name].append(getattr(out, name).item())
            history["lr"].append(lr * schedule(step))
            if valid and (step % eval_every == 0 or step == steps):
                evaluate(step)
            bar.update(1)
    return TrainingHistory(history)


@torch.no_grad()
def fill_mask(model: BertForPreTraining, tokenizer: WordPieceTokenizer, text: str, k: int = 5) -> list:
    """The ``k`` likeliest tokens and their probabilities for every ``[MASK]`` in ``text``. Chapter 8.

    ``text`` is written with the literal ``[MASK]`` (e.g. ``"the cat sat on the [MASK] ."``);
    the pieces around it are tokenized as usual and the input is ``[CLS] ... [SEP]``.
    Special tokens are never proposed.

    Returns:
        one list per ``[MASK]``, in order, of ``k`` ``(token, probability)`` pairs, likeliest first.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    k = checks.positive_int(k, "k")
    parts = text.split("[MASK]")
    if len(parts) < 2:
        raise ValueError(f"text has no [MASK]: {text!r}")
    ids = [tokenizer.cls_id]
    for number, part in enumerate(parts):
        if number:
            ids.append(tokenizer.mask_id)
        ids += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(part))
    ids = torch.tensor([ids + [tokenizer.sep_id]])  # (1, T)
    if ids.shape[1] > model.config.context:
        raise ValueError(f"{ids.shape[1]} tokens exceed the model's {model.config.context} positions")
    with eval_mode(model):
        logits = model(ids).mlm_logits[0, ids[0] == tokenizer.mask_id]  # (N, V)
    logits[:, list(tokenizer.special_ids)] = -math.inf
    probs, best = logits.softmax(-1).topk(min(k, logits.shape[1]), dim=-1)  # (N, k)
    return [[(tokenizer.tokens[int(i)], float(p)) for i, p in zip(row_ids, row_probs)]
            for row_ids, row_probs in zip(best, probs)]
