"""Shaping the next-token distribution before sampling: temperature, top-k, nucleus (top-p) and repetition penalties. Chapter 7.

Each function takes logits ``(..., V)`` and returns new logits of the same shape;
a token removed from the choice gets ``-inf``, so ``softmax`` gives it probability 0
and renormalises the rest. The order in :func:`course_lib.gpt.generation.generate` is
that of ``transformers``: penalties, temperature, top-k, top-p. Where tokens tie at the
edge of the kept set, all of them are kept, so the result never depends on the order
of equal logits. See :doc:`/chapters/ch07_gpt`. Tested against ``transformers``'
``TopKLogitsWarper``, ``TopPLogitsWarper`` and ``RepetitionPenaltyLogitsProcessor``.
"""

from __future__ import annotations

import torch

from course_lib import checks


def check_logits(logits, name: str = "logits"):
    """Return ``logits``, raising unless it is a float tensor ``(..., V)`` with ``V >= 1``. Chapter 7."""
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or logits.shape[-1] < 1 \
            or not logits.is_floating_point():
        raise ValueError(f"{name} must be a float tensor of shape (..., V), got "
                         f"{getattr(logits, 'shape', type(logits).__name__)}")
    return logits


def temperature_top_k(logits, temperature: float = 1.0, k: int | None = None):
    """Divide the logits by a temperature and keep only the ``k`` largest: ``z'_v = z_v / tau`` or ``-inf``.

    ``z'_v = z_v / tau`` when ``z_v`` is at least the ``k``-th largest logit of its row, and
    ``-inf`` otherwise; a token tied with the ``k``-th largest is kept, so more than ``k``
    may remain. ``k = None`` (or ``k >= V``) keeps every token. ``tau < 1`` sharpens the
    distribution ``softmax(z / tau)``, ``tau > 1`` flattens it. Works on every row of any
    leading axes; the input is not modified. Chapter 7, exercise of ps07.

    Args:
        logits: ``(..., V)`` float tensor.
        temperature: ``tau > 0``.
        k: a positive int, or ``None``.

    Returns:
        ``(..., V)`` float tensor of the dtype of ``logits``.
    """
    check_logits(logits)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if k is not None:
        k = checks.positive_int(k, "k")
    ### BEGIN SOLUTION
    scaled = logits / temperature
    if k is None or k >= logits.shape[-1]:
        return scaled
    kth = scaled.topk(k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest of each row
    return scaled.masked_fill(scaled < kth, float("-inf"))
    ### END SOLUTION


def top_p_filter(logits, p: float):
    """Nucleus filtering: keep the most probable tokens whose probabilities add up to ``p``, set the rest to ``-inf``.

    With ``q = softmax(z)`` over each row, token ``v`` is kept when the tokens strictly more
    probable than it hold less than ``p`` of the mass, ``sum_{u: q_u > q_v} q_u < p``:
    the smallest set of most probable tokens whose total reaches ``p``, plus every token
    tied with its least probable member. The most probable token is always kept, and
    ``p = 1`` keeps every token but those whose probability is lost in rounding (below
    about ``1e-16`` of the rest, whose sum then rounds to 1). Kept logits are returned
    unchanged (Holtzman et al., 2020). Works on every row of any leading axes; the input
    is not modified. Chapter 7, exercise of ps07.

    Args:
        logits: ``(..., V)`` float tensor.
        p: the mass to keep, ``0 < p <= 1``.

    Returns:
        ``(..., V)`` float tensor of the dtype of ``logits``.
    """
    check_logits(logits)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"p must be a number in (0, 1], got {p!r}")
    ### BEGIN SOLUTION
    probs = torch.softmax(logits.double(), dim=-1)  # (..., V)
    ordered = probs.sort(dim=-1, descending=True).values
    before = ordered.cumsum(dim=-1) - ordered  # (..., V) the mass ahead of each sorted token
    kept = (before < p).sum(dim=-1, keepdim=True)  # (..., 1) how many sorted tokens are needed, >= 1
    smallest = ordered.gather(-1, kept - 1)  # (..., 1) the least probable kept probability
    return logits.masked_fill(probs < smallest, float("-inf"))
    ### END SOLUTION


def repetition_penalty(logits, previous, penalty: float):
    """Penalise tokens that already occurred: ``z_v / theta`` if ``z_v > 0``, else ``z_v * theta``. Chapter 7.

    The rule of Keskar et al. (2019), as ``transformers`` applies it: every token of
    ``previous`` (once, however often it occurred) has its logit moved towards less
    likely by the factor ``theta = penalty``; ``theta = 1`` changes nothing.

    Args:
        logits: ``(B, V)`` float tensor, the next-token scores of ``B`` sequences.
        previous: ``(B, T)`` int64 ids already in each sequence.
        penalty: ``theta >= 1`` usually.

    Returns:
        ``(B, V)`` float tensor; the input is not modified.
    """
    check_logits(logits)
    checks.expect_tensor(previous, "previous", (logits.shape[0], None), "(B, T)")
    if not penalty > 0:
        raise ValueError(f"penalty must be positive, got {penalty!r}")
    seen = logits.gather(1, previous)  # (B, T)
    return logits.scatter(1, previous, torch.where(seen > 0, seen / penalty, seen * penalty))


def frequency_penalty(logits, previous, frequency: float = 0.0, presence: float = 0.0):
    """Subtract a penalty per occurrence and one per distinct token: ``z_v - a c_v - b [c_v > 0]``. Chapter 7.

    ``c_v`` counts token ``v`` in ``previous``; ``a = frequency`` grows with every repetition,
    ``b = presence`` is paid once. Unlike :func:`repetition_penalty`, the change does not
    depend on the sign of the logit.

    Args:
        logits: ``(B, V)`` float tensor.
        previous: ``(B, T)`` int64 ids already in each sequence.
        frequency, presence: ``a`` and ``b``.

    Returns:
        ``(B, V)`` float tensor.
    """
    check_logits(logits)
    checks.expect_tensor(previous, "previous", (logits.shape[0], None), "(B, T)")
    counts = torch.zeros_like(logits).scatter_add(1, previous, torch.ones_like(previous, dtype=logits.dtype))
    return logits - frequency * counts - presence * (counts > 0).to(logits.dtype)
