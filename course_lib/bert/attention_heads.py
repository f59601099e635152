"""What BERT's attention heads do: how alike two heads attend, and how much each attends to ``[CLS]``, ``[SEP]``, its neighbours or itself. Chapter 8.

After Clark et al. (2019), *What does BERT look at?*: the distance between two heads
is the Jensen-Shannon divergence of their attention distributions for the same query
token, averaged over tokens (:func:`head_similarity`); and simple patterns, such as
a head that puts most of its weight on the previous token or on ``[SEP]``, are
averages of the weights over the query tokens (:func:`attention_patterns`). See
:doc:`/chapters/ch08_bert`.
"""

from __future__ import annotations

import numpy as np
import torch

from course_lib import checks

PATTERNS = ("cls", "sep", "previous", "next", "self")


def _stack(attentions, padding) -> torch.Tensor:
    """``L`` tensors ``(B, nh, T, T)`` or one ``(L, B, nh, T, T)`` -> ``(L, B, nh, T, T)`` float64, checked."""
    weights = attentions if isinstance(attentions, torch.Tensor) else torch.stack(list(attentions))
    if weights.dim() != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"attentions must be L tensors (B, nh, T, T) or one (L, B, nh, T, T), got {tuple(weights.shape)}")
    checks.expect_tensor(padding, "padding", (weights.shape[1], weights.shape[3]), "(B, T)")
    if padding.dtype != torch.bool:
        raise ValueError(f"padding must be a bool tensor (True on real tokens), got {padding.dtype}")
    return weights.detach().double()


def js_divergence(p, q):
    """The Jensen-Shannon divergence of distributions over the last axis, ``(..., T)`` and ``(..., T) -> (...)``, in nats. Chapter 8.

    ``JS(p, q) = KL(p || m) / 2 + KL(q || m) / 2`` with ``m = (p + q) / 2``; it is
    symmetric, 0 for equal distributions and at most ``log 2``.
    """
    p, q = torch.as_tensor(p).double(), torch.as_tensor(q).double()
    m = (p + q) / 2
    return (torch.xlogy(p, p) - torch.xlogy(p, m) + torch.xlogy(q, q) - torch.xlogy(q, m)).sum(-1) / 2


def _divergence_sums(attentions, padding) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sentence, the sum over its real query tokens of the JS divergence of every two heads,
    ``(B, L*nh, L*nh)``, and each sentence's number of real tokens ``(B,)``."""
    weights = _stack(attentions, padding)
    layers, batch, heads = weights.shape[:3]
    sentence = torch.arange(batch)[:, None].expand_as(padding)[padding]  # (N,) the sentence of each real query
    rows = weights.permute(0, 2, 1, 3, 4)[:, :, padding]  # (L, nh, N, T): every real query token
    rows = rows.reshape(layers * heads, rows.shape[2], rows.shape[3])  # (L*nh, N, T)
    sums = torch.zeros(batch, layers * heads, layers * heads, dtype=torch.float64)
    for i in range(len(rows) - 1):
        per_token = js_divergence(rows[i][None], rows[i + 1:])  # (L*nh - i - 1, N)
        sums[:, i, i + 1:] = torch.zeros(batch, per_token.shape[0], dtype=torch.float64).index_add_(
            0, sentence, per_token.T)
    return sums + sums.transpose(1, 2), padding.sum(dim=1)


def head_similarity(attentions, padding) -> np.ndarray:
    """The mean Jensen-Shannon divergence between the attention of every two heads, ``(L*nh, L*nh)``. Chapter 8.

    Head ``i`` of layer ``l`` is row ``l * nh + i``. For every real query token of the
    batch, the two heads' distributions over the keys are compared with
    :func:`js_divergence`; the entry is the mean over those tokens (Clark et al., 2019).
    0 on the diagonal and for heads that attend alike, symmetric.

    Args:
        attentions: ``L`` tensors ``(B, nh, T, T)`` (``BertOutput.attentions``) or one ``(L, B, nh, T, T)``.
        padding: ``(B, T)`` bool, True on real tokens.
    """
    sums, counts = _divergence_sums(attentions, padding)
    return (sums.sum(0) / counts.sum()).numpy()


def head_divergence_by_sentence(attentions, padding) -> np.ndarray:
    """The mean Jensen-Shannon divergence between every two heads, sentence by sentence, ``(B, L*nh, L*nh)``. Chapter 8.

    Entry ``[b, i, j]`` is :func:`head_similarity`'s entry for heads ``i`` and ``j``
    computed on sentence ``b`` alone: the mean over the real query tokens of that
    sentence. Averaging the ``B`` matrices weighted by each sentence's number of real
    tokens gives :func:`head_similarity` of the whole batch. One value per sentence is
    what a spread over sentences needs (chapter 8 compares heads of one layer with
    heads of different layers sentence by sentence).

    Args:
        attentions: ``L`` tensors ``(B, nh, T, T)`` or one ``(L, B, nh, T, T)``.
        padding: ``(B, T)`` bool, True on real tokens; every sentence needs one.
    """
    if (padding.sum(dim=1) == 0).any():
        raise ValueError("every sentence needs at least one real token")
    sums, counts = _divergence_sums(attentions, padding)
    return (sums / counts[:, None, None]).numpy()


def attention_patterns(attentions, ids, padding, tokenizer) -> dict[str, np.ndarray]:
    """For every head, the mean weight its queries give to ``[CLS]``, to ``[SEP]``, to the previous and the next token and to themselves. Chapter 8.

    The mean is over the real query tokens that are not special tokens (so a
    previous and a next token always exist: ``[CLS]`` comes first, ``[SEP]`` last);
    ``"cls"`` and ``"sep"`` add up the weight of every such key. A head that always
    attends to the previous token scores 1 for ``"previous"`` (Clark et al., 2019).

    Args:
        attentions: ``L`` tensors ``(B, nh, T, T)`` or one ``(L, B, nh, T, T)``.
        ids: ``(B, T)`` the token ids; padding: ``(B, T)`` bool, True on real tokens.
        tokenizer: gives ``cls_id``, ``sep_id`` and ``special_ids``.

    Returns:
        ``{"cls", "sep", "previous", "next", "self"}`` -> ``(L, nh)`` arrays.
    """
    weights = _stack(attentions, padding)
    checks.expect_tensor(ids, "ids", tuple(padding.shape), "(B, T)")
    steps = weights.shape[-1]
    queries = padding & ~torch.isin(ids, torch.as_tensor(list(tokenizer.special_ids)))  # (B, T)
    if not queries.any():
        raise ValueError("the batch has no real token that is not a special token")
    keys = {"cls": (ids == tokenizer.cls_id).double(), "sep": (ids == tokenizer.sep_id).double()}  # (B, T)
    totals = {name: torch.einsum("lbhqk,bk->lbhq", weights, mask) for name, mask in keys.items()}
    diagonal = torch.diagonal(weights, dim1=-2, dim2=-1)  # (L, B, nh, T): key t for query t
    totals["self"] = diagonal
    shifted = torch.zeros_like(diagonal)
    shifted[..., 1:] = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # key t - 1 for query t
    totals["previous"] = shifted
    shifted = torch.zeros_like(diagonal)
    shifted[..., :steps - 1] = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # key t + 1 for query t
    totals["next"] = shifted
    count = queries.sum()
    return {name: (totals[name] * queries[None, :, None, :]).sum((1, 3)).div(count).numpy() for name in PATTERNS}
