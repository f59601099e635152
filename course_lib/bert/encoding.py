"""Running a frozen BERT once over many texts: batches of similar length, every layer's features, cached token states. Chapter 8.

A batch is padded to its longest input, so batches of texts of mixed lengths spend
much of their time on padding. Sorting the texts by length before cutting them into
batches (:func:`length_batches`) roughly halves the work on the review sentences.

One pass of a frozen model gives everything later steps need (:func:`encode_layers`):
the mean-pooled vector of every layer of every text (for per-layer probes and for
frozen features), and, for chosen layers, the token vectors of every text (real tokens
only). Fine-tuning only the top ``k`` layers starts from the cached states of layer
``L - k``: the frozen layers below never run again (:mod:`course_lib.bert.classifier`).
See :doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from course_lib import checks
from course_lib.bert.inputs import BertBatch, encode
from course_lib.bert.pooling import mean_pool
from course_lib.progress import progress_bar
from course_lib.training import eval_mode


def length_batches(lengths, batch_size: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Index arrays of at most ``batch_size`` items each, grouped by length. Chapter 8.

    The ``N`` items are sorted by ``lengths`` ``(N,)`` and cut into consecutive
    batches. With ``rng``, items of equal length are ordered at random and the order of
    the batches is shuffled (a new draw for every epoch); without, the batches run from
    the shortest items to the longest.

    Returns:
        a list of int64 arrays ``(B,)`` that together hold every index ``0 .. N - 1`` once.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be (N,), got shape {lengths.shape}")
    batch_size = checks.positive_int(batch_size, "batch_size")
    if rng is None:
        order = np.argsort(lengths, kind="stable")
    else:
        order = np.lexsort((checks.generator(rng).random(len(lengths)), lengths))
    batches = [order[i:i + batch_size].astype(np.int64) for i in range(0, len(order), batch_size)]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def pad_ids(id_lists: Sequence[Sequence[int]], pad_id: int) -> BertBatch:
    """A :class:`~course_lib.bert.inputs.BertBatch` of single-segment inputs: three ``(B, T)`` tensors, ``T`` the longest. Chapter 8."""
    if not len(id_lists):
        raise ValueError("no inputs to pad")
    steps = max(len(ids) for ids in id_lists)
    ids = torch.full((len(id_lists), steps), pad_id, dtype=torch.int64)
    padding = torch.zeros((len(id_lists), steps), dtype=torch.bool)
    for row, row_ids in enumerate(id_lists):
        ids[row, :len(row_ids)] = torch.as_tensor(list(row_ids), dtype=torch.int64)
        padding[row, :len(row_ids)] = True
    return BertBatch(ids, torch.zeros_like(ids), padding)


def pad_states(states: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token vectors of ``B`` texts, each ``(T, D)`` with its own ``T``, as one zero-padded ``(B, T, D)`` tensor and its ``(B, T)`` padding mask. Chapter 8."""
    if not len(states):
        raise ValueError("no states to pad")
    hidden = torch.nn.utils.rnn.pad_sequence(list(states), batch_first=True)  # (B, T, D)
    lengths = torch.tensor([len(s) for s in states])
    return hidden, torch.arange(hidden.shape[1])[None, :] < lengths[:, None]


class EncodedTexts(NamedTuple):
    """One frozen pass over ``N`` texts: ``features`` ``(L + 1, N, D)`` (mean-pooled, ``None`` if not asked), ``states`` (layer -> ``N`` tensors ``(T, D)``, each text's own ``T``) and ``lengths`` ``(N,)``. Chapter 8."""

    features: torch.Tensor | None
    states: dict
    lengths: np.ndarray


def encode_ids(tokenizer, texts: Sequence[str], max_length: int | None = 64) -> list[list[int]]:
    """The ids ``[CLS] text [SEP]`` of each of ``N`` texts, cut to ``max_length`` tokens. Chapter 8."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    return [encode(tokenizer, text, max_length=max_length)[0] for text in texts]


@torch.no_grad()
def encode_layers(model, tokenizer, texts: Sequence[str], keep: Sequence[int] = (), features: bool = True,
                  batch_size: int = 64, max_length: int | None = 64, progress: bool = False) -> EncodedTexts:
    """Every layer's mean-pooled vector and the token states of the layers in ``keep``, for ``N`` texts, in one pass. Chapter 8.

    The texts are encoded as ``[CLS] text [SEP]``, sorted by length into batches
    (:func:`length_batches`) and run through ``model`` in evaluation mode without
    gradients; results come back in the order of ``texts``. Layer ``0`` is the
    embeddings, layer ``L`` the last block. With ``features=False`` the pass stops
    at the highest layer in ``keep``.

    Args:
        model: a :class:`~course_lib.bert.model.BertModel`.
        tokenizer: its tokenizer.
        texts: ``N`` strings.
        keep: layers ``0 .. L`` whose token vectors to keep (real tokens only, ``[CLS]`` and ``[SEP]`` included).
        features: compute the ``(L + 1, N, D)`` mean-pooled features.
        batch_size, max_length, progress: batching, truncation, a progress bar.

    Returns:
        an :class:`EncodedTexts`.
    """
    layers = model.config.layers
    keep = sorted({int(layer) for layer in keep})
    if any(not 0 <= layer <= layers for layer in keep):
        raise ValueError(f"keep must hold layers in 0..{layers}, got {keep}")
    if not features and not keep:
        raise ValueError("nothing to compute: features=False and keep is empty")
    id_lists = encode_ids(tokenizer, texts, max_length)
    lengths = np.array([len(ids) for ids in id_lists])
    top = layers if features else max(keep)
    pooled = torch.zeros(layers + 1, len(texts), model.config.width) if features else None
    states = {layer: [None] * len(texts) for layer in keep}
    with eval_mode(model), progress_bar(len(texts), "encoding", progress, "text") as bar:
        for index in length_batches(lengths, batch_size):
            batch = pad_ids([id_lists[i] for i in index], tokenizer.pad_id)
            x = model.embeddings(batch.ids, batch.segments)  # (B, T, D)
            for layer in range(top + 1):
                if layer:
                    x = model.encoder.layers[layer - 1](x, batch.padding)
                if features:
                    pooled[layer, index] = mean_pool(x, batch.padding)
                if layer in states:
                    for row, i in enumerate(index):
                        states[layer][i] = x[row, :lengths[i]].clone()
            bar.update(len(index))
    return EncodedTexts(pooled, states, lengths)
