"""What BERT's layers hold: a probe per layer, a word's vector in context, anisotropy, layers compared by CKA. Chapter 8.

- A *probe* (as chapter 4 did for ELMo) trains a logistic regression on the frozen,
  mean-pooled vectors of one layer; its held-out accuracy says how easily a task can be
  read from that layer (:func:`layer_features`, :func:`probe_layers`).
- A contextual model gives a word a different vector in every sentence:
  :func:`word_vectors` and :func:`sense_similarity` compare the vectors of "bank" by the
  river and "bank" with money, layer by layer.
- *Anisotropy* (Ethayarajh, 2019): the average cosine between the vectors of random
  tokens. Vectors spread evenly in all directions give about 0; BERT's upper layers give
  much more, because all vectors share a common direction. Subtracting the mean vector
  (centring) removes most of it (:func:`anisotropy`, :func:`token_vectors`).
- Linear CKA (Kornblith et al., 2019) compares the token vectors of two layers,
  insensitive to rotations and scale (:func:`linear_cka`, :func:`layer_similarity`).

Attention heads are in :mod:`course_lib.bert.attention_heads`. See :doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from course_lib import checks
from course_lib.bert.encoding import encode_ids, encode_layers, pad_ids
from course_lib.bert.wordpiece import basic_tokenize
from course_lib.training import eval_mode


def layer_features(model, tokenizer, texts: Sequence[str], batch_size: int = 64, max_length: int | None = 64,
                   progress: bool = False):
    """The mean-pooled vector of every layer for ``N`` texts, ``(L + 1, N, D)``, from one length-sorted pass. Chapter 8.

    Layer 0 is the embeddings. See :func:`~course_lib.bert.encoding.encode_layers`.
    """
    return encode_layers(model, tokenizer, texts, batch_size=batch_size, max_length=max_length,
                         progress=progress).features


def probe_layers(features, labels, train_idx, test_idx, C: float = 1.0, max_iter: int = 1000) -> np.ndarray:
    """The held-out accuracy of a logistic-regression probe on each layer's features, ``(L + 1,)``. Chapter 8.

    For each layer, every vector of ``features`` ``(L + 1, N, D)`` is scaled to unit length
    (the layers' scales differ a lot, and all-MiniLM-L6-v2's sentence vectors are used
    this way), then scikit-learn's ``LogisticRegression`` (L2 penalty, inverse strength
    ``C``, lbfgs) is fitted on the rows ``train_idx`` and scored on ``test_idx``.

    Args:
        features: ``(L + 1, N, D)`` array or tensor. labels: ``(N,)`` class ids.
        train_idx, test_idx: ``(M,)`` index arrays into the ``N`` rows.
        C, max_iter: the regression's inverse regularisation and iteration limit.
    """
    from sklearn.linear_model import LogisticRegression

    features = np.asarray(features.detach() if isinstance(features, torch.Tensor) else features, dtype=np.float64)
    if features.ndim != 3:
        raise ValueError(f"features must have shape (L + 1, N, D), got {features.shape}")
    labels = np.asarray(labels)
    if labels.shape != (features.shape[1],):
        raise ValueError(checks.shape_message("labels", "(N,)", (features.shape[1],), labels.shape))
    train_idx, test_idx = np.asarray(train_idx), np.asarray(test_idx)
    if not len(train_idx) or not len(test_idx):
        raise ValueError("train_idx and test_idx must both be non-empty")
    scores = []
    for layer in features:
        x = layer / np.maximum(np.linalg.norm(layer, axis=1, keepdims=True), 1e-12)
        probe = LogisticRegression(C=C, max_iter=max_iter).fit(x[train_idx], labels[train_idx])
        scores.append(probe.score(x[test_idx], labels[test_idx]))
    return np.array(scores)


def word_positions(tokenizer, text: str, word: str) -> list[int]:
    """The positions in ``[CLS] text [SEP]`` of the WordPieces of the first occurrence of ``word``. Chapter 8.

    ``word`` is matched against the words of :func:`~course_lib.bert.wordpiece.basic_tokenize`
    (so "Bank" matches "bank" in an uncased model); a ``ValueError`` names the text if it is absent.
    """
    target = basic_tokenize(word, tokenizer.lowercase)
    if len(target) != 1:
        raise ValueError(f"word must be one word, got {word!r}")
    position = 1  # after [CLS]
    for token in basic_tokenize(text, tokenizer.lowercase):
        pieces = len(tokenizer.tokenize(token))
        if token == target[0]:
            return list(range(position, position + pieces))
        position += pieces
    raise ValueError(f"{word!r} does not occur in {text!r}")


@torch.no_grad()
def word_vectors(model, tokenizer, sentences: Sequence[str], word: str):
    """The vector of ``word`` in each of ``N`` sentences at every layer, ``(L + 1, N, D)``. Chapter 8.

    The vector is the mean of the word's WordPieces, at its first occurrence in the
    sentence (see :func:`word_positions`). The sentences run as one padded batch.
    """
    if isinstance(sentences, str) or not len(sentences):
        raise ValueError("sentences must be a non-empty sequence of strings")
    positions = [word_positions(tokenizer, s, word) for s in sentences]
    batch = pad_ids(encode_ids(tokenizer, sentences, max_length=None), tokenizer.pad_id)
    with eval_mode(model):
        hidden = torch.stack(model(batch.ids, batch.segments, batch.padding).hidden_states)  # (L + 1, N, T, D)
    return torch.stack([hidden[:, n, pos].mean(1) for n, pos in enumerate(positions)], dim=1)


def pairwise_cosines(vectors):
    """The cosine of every pair of vectors: ``(..., N, D) -> (..., N, N)``. Chapter 8."""
    vectors = torch.as_tensor(vectors).detach()
    if vectors.dim() < 2:
        raise ValueError(f"vectors must have shape (..., N, D), got {tuple(vectors.shape)}")
    unit = torch.nn.functional.normalize(vectors.double(), dim=-1)
    return unit @ unit.transpose(-1, -2)


def sense_similarity(vectors, senses) -> tuple[np.ndarray, np.ndarray]:
    """Mean cosine of the pairs with the same sense and of the pairs with different senses, per layer. Chapter 8.

    Args:
        vectors: ``(L + 1, N, D)`` from :func:`word_vectors`.
        senses: ``(N,)`` a label per sentence (e.g. ``"river"``, ``"money"``); both kinds of pair must exist.

    Returns:
        ``(same (L + 1,), different (L + 1,))``, over the pairs ``i < j``.
    """
    cosines = pairwise_cosines(vectors).numpy()  # (L + 1, N, N)
    senses = np.asarray(senses)
    if cosines.ndim != 3 or senses.shape != cosines.shape[1:2]:
        raise ValueError(f"vectors must be (L + 1, N, D) with N = len(senses) = {len(senses)}")
    upper = np.triu(np.ones(cosines.shape[1:], dtype=bool), k=1)
    same = (senses[:, None] == senses[None, :]) & upper
    different = (senses[:, None] != senses[None, :]) & upper
    if not same.any() or not different.any():
        raise ValueError("senses must give at least one pair with the same and one with different senses")
    return cosines[:, same].mean(1), cosines[:, different].mean(1)


def token_vectors(model, tokenizer, texts: Sequence[str], batch_size: int = 64, max_length: int | None = 64):
    """Every layer's vector of every real token of ``texts`` but ``[CLS]`` and ``[SEP]``: ``(L + 1, N, D)``. Chapter 8.

    ``N`` is the number of such tokens in all texts, in order.
    """
    layers = range(model.config.layers + 1)
    states = encode_layers(model, tokenizer, texts, keep=layers, features=False, batch_size=batch_size,
                           max_length=max_length).states
    return torch.stack([torch.cat([s[1:-1] for s in states[layer]]) for layer in layers])


def anisotropy(vectors, centre: bool = False, pairs: int = 2000, seed: int = 0) -> float:
    """The mean cosine between ``pairs`` random pairs of distinct vectors of ``(N, D)`` (Ethayarajh, 2019). Chapter 8.

    With ``centre``, the mean vector is subtracted from every vector first. Random
    directions give about 0; identical vectors give 1. Pairs ``(i, j)``, ``i != j``, are
    drawn with ``numpy.random.default_rng(seed)``.
    """
    vectors = torch.as_tensor(vectors).detach().double()
    if vectors.dim() != 2 or len(vectors) < 2:
        raise ValueError(f"vectors must have shape (N, D) with N >= 2, got {tuple(vectors.shape)}")
    pairs = checks.positive_int(pairs, "pairs")
    if centre:
        vectors = vectors - vectors.mean(0)
    rng = np.random.default_rng(seed)
    first = rng.integers(len(vectors), size=pairs)
    second = (first + rng.integers(1, len(vectors), size=pairs)) % len(vectors)  # never the same
    a, b = vectors[torch.as_tensor(first)], vectors[torch.as_tensor(second)]
    return float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean())


def linear_cka(x, y) -> float:
    """Linear CKA of two representations of the same ``N`` items, ``(N, D)`` and ``(N, M)``: 1 when they agree up to rotation and scale. Chapter 8.

    ``CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` with the columns of ``X`` and ``Y``
    centred (Kornblith et al., 2019).
    """
    x, y = torch.as_tensor(x).detach().double(), torch.as_tensor(y).detach().double()
    if x.dim() != 2 or y.dim() != 2 or len(x) != len(y):
        raise ValueError(f"x and y must be (N, D) and (N, M) with the same N, got {tuple(x.shape)}, {tuple(y.shape)}")
    x, y = x - x.mean(0), y - y.mean(0)
    return float((y.T @ x).square().sum() / ((x.T @ x).norm() * (y.T @ y).norm()))


def layer_similarity(hidden_states, padding) -> np.ndarray:
    """Linear CKA between every two layers' token vectors, over the real tokens of a batch: ``(L + 1, L + 1)``. Chapter 8.

    Args:
        hidden_states: ``L + 1`` tensors ``(B, T, D)`` (``BertOutput.hidden_states``) or one ``(L + 1, B, T, D)``.
        padding: ``(B, T)`` bool, True on real tokens.
    """
    hidden = (hidden_states if isinstance(hidden_states, torch.Tensor) else torch.stack(list(hidden_states))).detach()
    if hidden.dim() != 4:
        raise ValueError(f"hidden_states must be (L + 1, B, T, D), got {tuple(hidden.shape)}")
    checks.expect_tensor(padding, "padding", tuple(hidden.shape[1:3]), "(B, T)")
    tokens = hidden[:, padding]  # (L + 1, N, D)
    count = len(tokens)
    out = np.ones((count, count))
    for i in range(count):
        for j in range(i + 1, count):
            out[i, j] = out[j, i] = linear_cka(tokens[i], tokens[j])
    return out
