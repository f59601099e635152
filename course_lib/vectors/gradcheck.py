"""Checking hand-written gradients against finite differences. Chapter 2 on.

A hand-derived gradient is easy to get subtly wrong. The central difference

``df/dx_i ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)``

has error of order ``eps**2``, so comparing it with the analytic gradient
entry by entry catches almost every mistake. See :doc:`/chapters/ch02_word2vec`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def numerical_gradient(f, x, eps=1e-6):
    """The gradient of a scalar function by central differences.

    ``grad[i] = (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` for every entry
    ``i`` of ``x`` (any shape). ``x`` is restored after each probe, so the caller
    sees it unchanged. Chapter 2, exercise of ps02.

    Args:
        f: a function of ``x`` alone returning a float; it may read ``x`` in place.
        x: float64 numpy array of any shape, the point to differentiate at.
        eps: the step.

    Returns:
        float64 array of the shape of ``x``.
    """
    if not isinstance(x, np.ndarray) or x.dtype != np.float64:
        raise TypeError("x must be a float64 numpy array (finite differences need double precision)")
    ### BEGIN SOLUTION
    grad = np.zeros(x.shape)  # float64, the shape of x
    for index in np.ndindex(x.shape):  # x[index] is x's own entry (x.reshape(-1) copies a transposed x)
        saved = x[index]
        x[index] = saved + eps
        plus = f(x)
        x[index] = saved - eps
        minus = f(x)
        x[index] = saved
        grad[index] = (plus - minus) / (2 * eps)
    return grad
    ### END SOLUTION


class SmoothLoss:
    """A smooth scalar function for gradient checks, ``f(w) = sum(a * w ** 2 + c * w ** 3 + w ** 4 / 4)``. Chapter 2.

    Called with an array ``w`` (any shape, broadcasting with ``a``), it returns ``f(w)``. Made
    with ``weights``, it ignores its argument and reads ``weights`` in place, as a model's loss
    reads its own parameters: ``numerical_gradient(loss, loss.weights)`` must perturb that very
    array (a perturbed copy leaves the loss unchanged). The exact gradient is
    ``2 a w + 3 c w ** 2 + w ** 3``. Only products and sums (no ``tanh``, whose last bit
    varies with the CPU's vector instructions), so its values are the same on every machine.

    Args:
        a: array (any shape) or number; c: a number.
        weights: ``None``, or the array (any shape) read whatever the loss is called with.
    """

    def __init__(self, a, c=0.0, weights=None):
        self.a, self.c, self.weights = a, c, weights

    def __call__(self, w) -> float:
        """``f`` of ``self.weights`` if the loss holds weights, else of ``w`` (any shape): a float."""
        w = w if self.weights is None else self.weights
        return float(np.sum(w * w * (self.a + self.c * w + w * w / 4)))


def relative_error(analytic, numerical) -> float:
    """``max |a - n| / max(1e-8, |a| + |n|)`` over the entries: below about 1e-6 means the gradients agree.

    Chapter 2.

    Args:
        analytic, numerical: two arrays of the same shape, any shape.

    Returns:
        the largest relative error over the entries, a float.
    """
    analytic, numerical = np.asarray(analytic, dtype=np.float64), np.asarray(numerical, dtype=np.float64)
    if analytic.shape != numerical.shape:
        raise ValueError(f"shapes differ: {analytic.shape} and {numerical.shape}")
    return float(np.max(np.abs(analytic - numerical) / np.maximum(1e-8, np.abs(analytic) + np.abs(numerical))))


def check_gradient(f: Callable, x: np.ndarray, analytic, eps: float = 1e-6,
                   numerical_fn: Callable = numerical_gradient) -> float:
    """Relative error between an analytic gradient and the finite-difference one. Chapter 2.

    Args:
        f: scalar function of ``x``.
        x: the point, a float64 array of any shape.
        analytic: the claimed gradient of ``f`` at ``x``, same shape as ``x``.
        eps: finite-difference step.
        numerical_fn: the finite-difference function (the assignment passes its own).

    Returns:
        :func:`relative_error` of the two gradients.
    """
    return relative_error(analytic, numerical_fn(f, x, eps))
