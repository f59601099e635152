"""Padding masks and the softmax over the real positions of a padded source. Chapter 5.

A batch of sources of different lengths is padded to a common length ``Tk``; the
mask says which positions hold a real token, and attention must give the
padding a weight of exactly zero. See :doc:`/chapters/ch05_attention`.
Tested against a loop over the rows, softmax over each row's real positions only.
"""

from __future__ import annotations

import torch

from course_lib import checks


def padding_mask(lengths, steps: int) -> torch.Tensor:
    """The ``(B, Tk)`` boolean mask of a padded batch: ``mask[b, i]`` is ``i < lengths[b]``. Chapter 5.

    Args:
        lengths: ``(B,)`` lengths in ``[1, Tk]``.
        steps: ``Tk``, the padded length.

    Returns:
        ``(B, Tk)`` bool tensor, True on real tokens.
    """
    lengths = checks.sequence_lengths(lengths, len(lengths), checks.positive_int(steps, "steps"))
    return torch.arange(steps)[None, :] < lengths[:, None]


def check_scores_and_mask(scores, mask) -> None:
    """Raise unless ``scores`` is ``(B, Tq, Tk)`` float and ``mask`` ``(B, Tk)`` bool with a True per row. Chapter 5."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 3 or not scores.is_floating_point():
        raise ValueError(f"scores must be a (B, Tq, Tk) float tensor, got "
                         f"{getattr(scores, 'shape', type(scores).__name__)}")
    batch, _, keys = scores.shape
    checks.expect_tensor(mask, "mask", (batch, keys), "(B, Tk)")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True on real tokens), got dtype {mask.dtype}")
    empty = (~mask.any(dim=1)).nonzero()
    if len(empty):
        raise ValueError(f"mask row {int(empty[0, 0])} has no True entry: a source needs at least one real token")


def masked_softmax(scores, mask):
    """Attention weights: the softmax of the scores over each source's real positions only.

    ``a_{b,q,i} = exp(e_{b,q,i}) / sum_{j: mask[b,j]} exp(e_{b,q,j})`` where ``mask[b, i]``
    is True, and exactly ``0`` where it is False (padding). Every row of weights sums
    to 1. Scores of any size give finite weights (the largest real score is
    subtracted before ``exp``); the arguments are not modified; autograd gives the
    gradient with respect to ``scores``. Chapter 5, exercise of ps05.

    Args:
        scores: ``(B, Tq, Tk)`` float tensor ``e``, one score per query and source position.
        mask: ``(B, Tk)`` bool tensor, True on real source tokens; each row has at least one True.

    Returns:
        ``(B, Tq, Tk)`` tensor of weights ``a``, of the dtype of ``scores``.
    """
    check_scores_and_mask(scores, mask)
    ### BEGIN SOLUTION
    keep = mask[:, None, :]  # (B, 1, Tk), broadcast over the queries
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1)
    ### END SOLUTION
