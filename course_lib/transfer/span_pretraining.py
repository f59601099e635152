"""Pre-training chapter 6's encoder-decoder with T5's span corruption, against chapter 8's masked LM on the same sentences. Chapter 9.

Both models read the same sentences, drawn in the same order, for the same number of
steps, with chapter 8's optimizer and schedule (:func:`pretrain_objective`); only what is
hidden and what is predicted differ:

- BERT's masked LM (chapter 8) reads ``[CLS] sentence [SEP]`` with 15 % of the tokens
  chosen by :func:`~course_lib.bert.masking.mlm_mask` and predicts each chosen token where it
  stood (:func:`mlm_batch`, :func:`mlm_loss`; no next-sentence prediction);
- the encoder-decoder (chapter 6's :class:`~course_lib.transformer.translator.Transformer`, its
  embeddings and output tied by :func:`tie_embeddings`) reads the sentence with spans dropped,
  each replaced by a sentinel, and its decoder writes the sentinels and the spans
  (:func:`~course_lib.transfer.span_batches.span_batch`, :func:`span_loss`).

Their own losses cannot be compared: they predict different tokens. One measure scores
both, *fill one blank*: in each held-out sentence a run of ``width`` tokens (1 or 2) whose
first is not special is hidden (:func:`blank_positions`); BERT reads a ``[MASK]`` for each
(:func:`mlm_blank_logits`), the encoder-decoder one sentinel for the run, as in its
pre-training, and writes the token after it (:func:`span_blank_logits`); :func:`blank_scores`
gives the top-1 accuracy and the cross-entropy of the blank's first token. See :doc:`/chapters/ch09_after_bert`.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from course_lib import checks
from course_lib.bert.masking import IGNORE, mlm_mask
from course_lib.bert.encoding import pad_ids
from course_lib.bert.pretraining import BertForPreTraining, bert_adamw, linear_warmup_decay
from course_lib.training import TrainingHistory, eval_mode, optimizer_step, torch_seed
from course_lib.transfer.span_batches import SpanBatch
from course_lib.transformer.translator import Transformer


def _sentences(sentences, least: int = 1) -> list[list[int]]:
    if isinstance(sentences, (str, torch.Tensor)) or not len(sentences):
        raise ValueError("sentences must be a non-empty list of sentences, each a list of token ids")
    out = [list(map(int, s)) for s in sentences]
    short = [len(s) for s in out if len(s) < least]
    if short:
        raise ValueError(f"every sentence needs at least {least} tokens, got one of {short[0]}")
    return out


def span_loss(model: Transformer, batch: SpanBatch) -> torch.Tensor:
    """The span-corruption loss: the mean cross-entropy of every target token, with teacher forcing. Chapter 9.

    ``L = -(1/N) sum_t log p(y_t | y_<t, source)`` over the ``N`` target tokens that are not
    padding, the decoder reading ``target_in`` ``(B, T)`` and predicting ``target_out`` ``(B, T)``.

    Returns:
        the loss, a scalar tensor ``()``.
    """
    if not isinstance(batch, SpanBatch):
        raise TypeError(f"batch must be a SpanBatch (from span_batch), got {type(batch).__name__}")
    logits, _ = model(batch.source, batch.lengths, batch.target_in)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.target_out.flatten(), ignore_index=IGNORE)


def mlm_batch(sentences, tokenizer, generator: torch.Generator | None = None,
              probability: float = 0.15) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BERT's masked-LM inputs of ``B`` sentences: ``[CLS] sentence [SEP]``, padded, corrupted by ``mlm_mask``. Chapter 9.

    Returns:
        ``(inputs (B, T), padding (B, T) bool, True on real tokens, labels (B, T))``, ``T`` the
        longest sentence plus 2; labels are ``IGNORE`` (-100) where nothing is predicted.
    """
    rows = [[tokenizer.cls_id, *s, tokenizer.sep_id] for s in _sentences(sentences)]
    padded = pad_ids(rows, tokenizer.pad_id)  # (B, T) ids and padding mask
    inputs, labels = mlm_mask(padded.ids, tokenizer.special_ids, tokenizer.mask_id, len(tokenizer), probability,
                              generator)
    return inputs, padded.padding, labels


def mlm_loss(model: BertForPreTraining, batch) -> torch.Tensor:
    """The masked-LM loss ``L_MLM`` of a batch from :func:`mlm_batch`, without next-sentence prediction. Chapter 9.

    The mean cross-entropy of the original tokens at the chosen positions, from
    :class:`~course_lib.bert.pretraining.BertForPreTraining`'s MLM head; ``batch`` holds three
    ``(B, T)`` tensors. Returns a scalar tensor ``()``.
    """
    if not isinstance(batch, tuple) or len(batch) != 3:
        raise TypeError("batch must be the (inputs, padding, labels) of mlm_batch")
    inputs, padding, labels = batch
    return model(inputs, None, padding, labels).mlm_loss


def tie_embeddings(model: Transformer) -> int:
    """Share one ``(V, D)`` table among the source and target embeddings and the output layer, as T5; return ``V * D``. Chapter 9.

    BERT ties its token embedding to its MLM output (chapter 8); T5 shares one table among
    the encoder's input, the decoder's input and the decoder's output. Without it, chapter 6's
    :class:`~course_lib.transformer.translator.Transformer` would have three such tables and
    three times BERT's embedding parameters. The output logits become ``z = E h + b``.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a course_lib Transformer, got {type(model).__name__}")
    table = model.source_embedding.embedding.weight  # (V, D)
    if model.target_embedding.embedding.weight.shape != table.shape or model.output.weight.shape != table.shape:
        raise ValueError("tying needs one vocabulary: source and target vocabulary sizes must be equal")
    model.target_embedding.embedding.weight = table
    model.output.weight = table
    return table.numel()


@torch.no_grad()
def set_output_bias(bias: torch.Tensor, sentences) -> torch.Tensor:
    """Start an output bias ``(V,)`` at each token's log frequency in ``sentences``, as chapter 8's ``set_unigram_bias``. Chapter 9.

    ``b[v] = log((n_v + 1) / (N + V))``; ids beyond those in the sentences (the sentinels) get
    the smallest value. Overwrites ``bias`` in place and returns a copy.
    """
    checks.expect_tensor(bias, "bias", (None,), "(V,)")
    ids = torch.tensor([i for s in _sentences(sentences) for i in s], dtype=torch.int64)
    if ids.min() < 0 or ids.max() >= len(bias):
        raise ValueError(f"sentences hold ids outside the vocabulary [0, {len(bias)})")
    counts = torch.bincount(ids, minlength=len(bias)).double() + 1.0  # (V,)
    bias.copy_((counts / counts.sum()).log())
    return bias.detach().clone()


def pretrain_objective(model: torch.nn.Module, loss_fn: Callable, batch_fn: Callable, sentences, steps: int,
                       batch_size: int = 64, lr: float = 3e-3, warmup: int | None = None,
                       weight_decay: float = 0.01, max_norm: float | None = 1.0, seed: int = 0) -> TrainingHistory:
    """Pre-train ``model`` on ``loss_fn(model, batch_fn(sentences, generator))``: chapter 8's AdamW and schedule. Chapter 9.

    Each step draws ``batch_size`` sentences with ``numpy.random.default_rng(seed)`` (so two
    models trained with the same seed read the same sentences in the same order), builds the
    batch with a ``torch.Generator`` seeded with ``seed``, and takes one AdamW step at the
    learning rate ``lr * f(s)`` of :func:`~course_lib.bert.pretraining.linear_warmup_decay`
    (warm-up: a tenth of the steps by default), gradients clipped to ``max_norm``, no weight
    decay on biases and norms, as :func:`~course_lib.bert.pretraining.pretrain`.

    Args:
        model: trained in place. loss_fn: ``(model, batch) -> scalar loss``.
        batch_fn: ``(sentences, generator) -> batch``, e.g. :func:`~course_lib.transfer.span_batches.span_batch` or :func:`mlm_batch`
            with their other arguments bound.
        sentences: the training sentences, lists of ids.
        steps, batch_size, lr, warmup, weight_decay, max_norm: as in chapter 8's ``pretrain``.
        seed: seeds the batches and dropout.

    Returns:
        a :class:`~course_lib.training.TrainingHistory` with ``"loss"``, ``"lr"`` and
        ``"grad_norm"``, each ``(N,)``, ``N = steps``.
    """
    steps, batch_size = checks.positive_int(steps, "steps"), checks.positive_int(batch_size, "batch_size")
    sentences = _sentences(sentences)
    schedule = linear_warmup_decay(max(1, steps // 10) if warmup is None else warmup, steps)
    optimizer = bert_adamw(model, lr, weight_decay)  # a tied table is one parameter
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    history = {"loss": [], "lr": [], "grad_norm": []}
    model.train()
    with torch_seed(seed):
        for step in range(1, steps + 1):
            batch = batch_fn([sentences[i] for i in rng.integers(len(sentences), size=batch_size)], generator)
            for group in optimizer.param_groups:
                group["lr"] = lr * schedule(step)
            loss = loss_fn(model, batch)
            history["grad_norm"].append(optimizer_step(model, optimizer, loss, max_norm))
            history["loss"].append(loss.item())
            history["lr"].append(lr * schedule(step))
    return TrainingHistory(history)


def blank_positions(sentences, special_ids: Sequence[int], generator: torch.Generator | None = None,
                    width: int = 1) -> torch.Tensor:
    """Where each sentence's blank of ``width`` tokens starts: uniformly among the starts whose first token is not special. Chapter 9.

    The blank covers tokens ``p .. p + width - 1``; only its first token is scored, so only
    it must not be special (``[UNK]``, ...).

    Returns:
        ``(N,)`` int64, one start per sentence; a sentence without such a start gets an error.
    """
    width = checks.positive_int(width, "width")
    positions = []
    for number, ids in enumerate(_sentences(sentences)):
        allowed = [t for t, i in enumerate(ids[:len(ids) - width + 1]) if i not in set(special_ids)]
        if not allowed:
            raise ValueError(f"sentence {number} has no token that is not special to start a blank of {width}")
        positions.append(allowed[int(torch.randint(len(allowed), (1,), generator=generator))])
    return torch.tensor(positions, dtype=torch.int64)


def _check_positions(sentences, positions, width: int) -> torch.Tensor:
    checks.expect_tensor(positions, "positions", (len(sentences),), "(N,)")
    width = checks.positive_int(width, "width")
    if any(not 0 <= int(p) <= len(s) - width for s, p in zip(sentences, positions)):
        raise ValueError(f"every blank of {width} tokens must lie inside its sentence")
    return positions


@torch.no_grad()
def mlm_blank_logits(model: BertForPreTraining, tokenizer, sentences, positions, width: int = 1) -> torch.Tensor:
    """BERT's logits for the first token of each blank: ``[CLS] sentence [SEP]`` with ``width`` ``[MASK]`` s there. Chapter 9.

    Args:
        model: a :class:`~course_lib.bert.pretraining.BertForPreTraining`. tokenizer: its tokenizer.
        sentences: ``N`` sentences of ids. positions: ``(N,)`` where each blank starts (:func:`blank_positions`).
        width: the tokens in each blank, each replaced by ``[MASK]``.

    Returns:
        ``(N, V)`` float logits.
    """
    sentences = _sentences(sentences)
    positions = _check_positions(sentences, positions, width)
    rows = [[tokenizer.cls_id, *s[:p], *[tokenizer.mask_id] * width, *s[p + width:], tokenizer.sep_id]
            for s, p in zip(sentences, positions.tolist())]
    padded = pad_ids(rows, tokenizer.pad_id)  # (N, T) ids and padding mask
    ids = padded.ids
    labels = torch.full_like(ids, IGNORE)
    labels[torch.arange(len(rows)), positions + 1] = 0  # any label: it only marks where to predict
    with eval_mode(model):
        return model(ids, None, padded.padding, labels).mlm_logits


@torch.no_grad()
def span_blank_logits(model: Transformer, sentences, positions, sentinel: int, start_id: int,
                      width: int = 1) -> torch.Tensor:
    """The encoder-decoder's logits for the first token of each blank: what it writes after the sentinel. Chapter 9.

    The encoder reads the sentence with the blank's ``width`` tokens replaced by the one
    ``sentinel`` (the first, ``<extra_id_0>``), as in pre-training: it is not told how many
    tokens the sentinel hides. The decoder reads ``start_id, sentinel`` and its second output
    is the distribution of the blank's first token.

    Args:
        sentences: ``N`` sentences of ids. positions: ``(N,)`` where each blank starts.
        sentinel, start_id: the first sentinel's id and the decoder's first input.
        width: the tokens in each blank.

    Returns:
        ``(N, V)`` float logits, ``V`` with the sentinels.
    """
    sentences = _sentences(sentences)
    positions = _check_positions(sentences, positions, width)
    rows = [[*s[:p], sentinel, *s[p + width:]] for s, p in zip(sentences, positions.tolist())]
    target_in = torch.tensor([[start_id, sentinel]] * len(sentences))  # (N, 2)
    with eval_mode(model):
        logits, _ = model(pad_ids(rows, 0).ids, torch.tensor([len(r) for r in rows]), target_in)  # (N, 2, V)
    return logits[:, 1]


def blank_scores(logits, answers, excluded: Sequence[int] = ()) -> dict[str, float]:
    """Top-1 accuracy and mean cross-entropy of the blanks, over the tokens that are not ``excluded``. Chapter 9.

    The excluded ids (special tokens, sentinels) get logit ``-inf``, so neither model may
    answer with them: ``accuracy = mean(argmax z_n == y_n)``, ``loss = -mean(log softmax(z_n)[y_n])``
    over the ``N`` blanks. The logits are ``(N, V)``, the answers ``(N,)``; columns beyond
    ``V`` (sentinels of one model only) may be cut off beforehand.

    Returns:
        ``{"accuracy": float, "loss": float}``.
    """
    checks.expect_tensor(logits, "logits", (None, None), "(N, V)")
    checks.expect_tensor(answers, "answers", (logits.shape[0],), "(N,)")
    if answers.min() < 0 or answers.max() >= logits.shape[1]:
        raise ValueError(f"answers must lie in [0, {logits.shape[1]})")
    logits = logits.detach().float().clone()
    logits[:, list(excluded)] = -torch.inf
    if torch.isinf(logits[torch.arange(len(answers)), answers]).any():
        raise ValueError("an answer is among the excluded ids")
    log_probs = logits.log_softmax(-1)  # (N, V)
    return {"accuracy": float((logits.argmax(-1) == answers).float().mean()),
            "loss": float(-log_probs[torch.arange(len(answers)), answers].mean())}
