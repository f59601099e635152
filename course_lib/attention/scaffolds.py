"""Scaffolds of chapter 5: independent implementations of exercises that other exercises call, for grading.

When a function that calls another exercise of its assignment is graded, the grader puts the
scaffold in place of the student's version of that other exercise (``course_tools.grading.scaffolds``),
so that one mistake costs one function's points. A scaffold computes what the exercise's
docstring promises, written independently of the exercise's answer. The attention scaffolds
of chapters 6 and 7 (:class:`course_lib.testing.PlainScaledAttention`) serve test cases too. See :doc:`/chapters/ch05_attention`.
"""

from __future__ import annotations


def plain_masked_softmax(scores, mask):
    """Softmax of attention scores over the real source positions, for testing code that calls one. Chapter 5 on.

    ``a_{b,q,i} = exp(e_{b,q,i}) / sum_{j: mask[b,j]} exp(e_{b,q,j})``, 0 at padding, as
    :func:`course_lib.attention.masking.masked_softmax` computes, but written independently of
    that exercise (an additive bias of ``-inf`` at padding), so that grading an attention that
    calls a softmax does not depend on the student's own softmax: one mistake costs one
    function's points.

    Args:
        scores: ``(B, Tq, Tk)`` float tensor of scores ``e``.
        mask: ``(B, Tk)`` bool tensor, True on real source positions.

    Returns:
        ``(B, Tq, Tk)`` weights of the dtype of ``scores``; each row sums to 1.
    """
    import torch

    bias = torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(mask.logical_not(), -float("inf"))  # (B, Tk)
    return (scores + bias.unsqueeze(1)).softmax(dim=-1)  # (B, Tq, Tk)
