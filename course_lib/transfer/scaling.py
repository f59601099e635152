"""Scaling laws: a power law fitted to losses measured at several sizes, with an interval for its exponent.

Kaplan et al. (2020) found that a language model's test loss falls as a power of its number of
parameters ``N`` (given enough data), ``L(N) = (N_c / N)^alpha``, and likewise in data and compute;
training compute is about ``C = 6 N T`` operations for ``T`` tokens (two per parameter for the
forward pass, four for the backward; the papers write ``D`` for the tokens, the book's width).
Hoffmann et al. (2022) added an irreducible loss, ``L(N, T) = E + A / N^alpha + B / T^beta``. On a log-log plot a pure power law is a straight line,
``log L = log a - alpha log N``, so :func:`fit_power_law` fits that line by least squares and gives
the slope's Student-t interval. See :doc:`/chapters/ch09_after_bert`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class PowerLaw:
    """``y = coefficient * x^(-exponent)``, fitted on a log-log scale. Chapter 9.

    Attributes:
        coefficient: ``a``, the value at ``x = 1``.
        exponent: ``alpha``, how fast ``y`` falls: doubling ``x`` multiplies ``y`` by ``2^(-alpha)``.
        low, high: the exponent's 95 % interval (Student's t with ``N - 2`` degrees of freedom).
        n: ``N``, the number of points fitted.
    """

    coefficient: float
    exponent: float
    low: float
    high: float
    n: int

    def __call__(self, x):
        """The law at ``x`` (a number or an array of positive numbers)."""
        return self.coefficient * np.asarray(x, dtype=np.float64) ** -self.exponent


def fit_power_law(x, y, confidence: float = 0.95) -> PowerLaw:
    """Fit ``y = a x^(-alpha)`` by least squares on ``log y = log a - alpha log x``. Chapter 9.

    With ``u = log x`` and ``v = log y``, the slope is ``b = S_uv / S_uu`` and ``alpha = -b``; its
    standard error is ``sqrt(SSE / (N - 2) / S_uu)``, and the interval ``alpha ± t_{(1+c)/2, N-2} se``.

    Args:
        x: ``(N,)`` positive sizes (parameters, tokens or operations), at least two distinct, ``N >= 3``.
        y: ``(N,)`` positive losses.
        confidence: the interval's coverage, in ``(0, 1)``.

    Returns:
        a :class:`PowerLaw`.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 3:
        raise ValueError(f"x and y must be two flat arrays of the same length, at least 3 points; "
                         f"got shapes {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0) and np.all(y > 0)):
        raise ValueError("x and y must be finite and positive (their logarithms are fitted)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    u, v = np.log(x), np.log(y)
    s_uu = float(((u - u.mean()) ** 2).sum())
    if s_uu == 0:
        raise ValueError("x must hold at least two different sizes")
    slope = float(((u - u.mean()) * (v - v.mean())).sum()) / s_uu
    intercept = float(v.mean() - slope * u.mean())
    residuals = v - (intercept + slope * u)
    se = math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2) / s_uu)
    half = float(stats.t.ppf((1 + confidence) / 2, len(x) - 2)) * se
    return PowerLaw(math.exp(intercept), -slope, -slope - half, -slope + half, len(x))


def training_flops(parameters, tokens):
    """The operations of training: ``C = 6 N T`` for ``N`` parameters and ``T`` tokens (Kaplan et al., 2020). Chapter 9.

    Takes numbers, or arrays of any shape that broadcast together (sizes of several models).

    Args:
        parameters: the model's parameters (without the embeddings, in Kaplan et al.'s count).
        tokens: the tokens it is trained on.

    Returns:
        ``6 * parameters * tokens``, a float64 array of the broadcast shape (0-d for numbers).
    """
    return 6.0 * np.asarray(parameters, dtype=np.float64) * np.asarray(tokens, dtype=np.float64)
