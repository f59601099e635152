"""Sentence vectors from BERT's token vectors: the mean over real tokens, or the ``[CLS]`` vector. Chapter 8.

Mean pooling, ``s_b = sum_t m[b, t] h[b, t] / sum_t m[b, t]`` with ``m`` the padding
mask, is how all-MiniLM-L6-v2 was trained to give sentence embeddings (Reimers and
Gurevych, 2019); the cosine of two such vectors measures how alike two sentences are.
See :doc:`/chapters/ch08_bert`. Tested against ``sentence-transformers`` loading the
same packaged files.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from course_lib import checks
from course_lib.bert.inputs import encode_batch
from course_lib.progress import progress_bar
from course_lib.training import eval_mode


def mean_pool(hidden, padding):
    """The mean of each sequence's vectors over its real tokens: ``sum_t m_t h_t / sum_t m_t``.

    Padding positions (``padding`` False) count for nothing, whatever their vectors
    hold. Written with torch operations; the arguments are not modified.
    Chapter 8, exercise of ps08.

    Args:
        hidden: ``(B, T, D)`` token vectors.
        padding: ``(B, T)`` bool, True on real tokens; every row has at least one.

    Returns:
        ``(B, D)`` tensor of the dtype of ``hidden``.
    """
    checks.sequence_batch(hidden, "hidden")
    checks.expect_tensor(padding, "padding", tuple(hidden.shape[:2]), "(B, T)")
    if padding.dtype != torch.bool:
        raise ValueError(f"padding must be a bool tensor (True on real tokens), got {padding.dtype}")
    if not padding.any(dim=1).all():
        raise ValueError("every sequence needs at least one real token (a row of padding is all False)")
    ### BEGIN SOLUTION
    weights = padding.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1)
    ### END SOLUTION


def cls_pool(hidden, padding=None):
    """The first (``[CLS]``) vector of each sequence, ``(B, T, D) -> (B, D)``. Chapter 8."""
    checks.sequence_batch(hidden, "hidden")
    return hidden[:, 0]


def encode_sentences(model, tokenizer, texts: Sequence[str], batch_size: int = 64, pooling: Callable = mean_pool,
                     layer: int = -1, normalize: bool = True, max_length: int = 256, progress: bool = False):
    """Sentence vectors ``(N, D)`` for ``N`` texts: the model's layer ``layer`` pooled, optionally of unit length. Chapter 8.

    Args:
        model: a :class:`~course_lib.bert.model.BertModel` (run in evaluation mode, without gradients).
        tokenizer: its :class:`~course_lib.bert.wordpiece.WordPieceTokenizer`.
        texts: the ``N`` sentences.
        batch_size: sentences per forward pass.
        pooling: ``(hidden (B, T, D), padding (B, T)) -> (B, D)``; :func:`mean_pool` or :func:`cls_pool`.
        layer: which hidden state, ``0`` the embeddings, ``-1`` the last layer.
        normalize: divide each vector by its length (as all-MiniLM-L6-v2's last module).
        max_length: longer inputs are truncated.
        progress: show a progress bar.

    Returns:
        ``(N, D)`` float32.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    vectors = []
    with eval_mode(model), torch.no_grad(), progress_bar(len(texts), "encoding", progress, "sentence") as bar:
        for start in range(0, len(texts), checks.positive_int(batch_size, "batch_size")):
            batch = encode_batch(tokenizer, texts[start:start + batch_size], max_length=max_length)
            out = model(batch.ids, batch.segments, batch.padding)
            vectors.append(pooling(out.hidden_states[layer], batch.padding))
            bar.update(len(batch.ids))
    vectors = torch.cat(vectors) if vectors else torch.zeros(0, model.config.width)
    return torch.nn.functional.normalize(vectors, dim=-1) if normalize else vectors
