"""Chapter 3, recurrent neural networks: the activation functions and their derivatives.

A recurrent network squashes its state through an elementwise nonlinearity at
every step, and backpropagation through time multiplies by that function's
derivative once per step. How large the derivative can be (1/4 for the
logistic function, 1 for tanh and ReLU) is what chapter 3's plots compare.

Everything here is elementwise: ``x`` may have any shape and the result has
the same shape, in float64. See :doc:`/chapters/ch03_rnn`; chapter 2 imports
the logistic function (:doc:`/chapters/ch02_word2vec`).
"""

from __future__ import annotations

import numpy as np


def logistic(x):
    """The logistic function ``sigma(x) = 1 / (1 + exp(-x))``, without overflow for large ``|x|``.

    Computed as ``sigma(x) = (1 + tanh(x / 2)) / 2``, an identity that never
    evaluates ``exp`` of a large number. Chapter 3 (chapter 2 imports it as
    ``word2vec.sigmoid``).

    Args:
        x: array of any shape.

    Returns:
        float64 array of the shape of ``x``, in ``[0, 1]``.
    """
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def logistic_derivative(x):
    """The derivative of the logistic function, ``sigma'(x) = sigma(x) (1 - sigma(x))``.

    At most 1/4 (at ``x = 0``). Chapter 3.

    Args:
        x: array of any shape.

    Returns:
        float64 array of the shape of ``x``, in ``[0, 1/4]``.
    """
    s = logistic(x)
    return s * (1.0 - s)


def tanh_derivative(x):
    """The derivative of the hyperbolic tangent, ``tanh'(x) = 1 - tanh(x)^2``.

    At most 1 (at ``x = 0``). Chapter 3.

    Args:
        x: array of any shape.

    Returns:
        float64 array of the shape of ``x``, in ``[0, 1]``.
    """
    return 1.0 - np.tanh(np.asarray(x, dtype=np.float64)) ** 2


def relu(x):
    """The rectified linear unit, ``relu(x) = max(0, x)``. Chapter 3.

    Args:
        x: array of any shape.

    Returns:
        float64 array of the shape of ``x``.
    """
    return np.maximum(0.0, np.asarray(x, dtype=np.float64))


def relu_derivative(x):
    """The derivative of the ReLU: 1 where ``x > 0``, else 0.

    At ``x = 0``, where the ReLU has no derivative, it returns 0, the value
    PyTorch's autograd uses. Chapter 3.

    Args:
        x: array of any shape.

    Returns:
        float64 array of the shape of ``x``, of zeros and ones.
    """
    return (np.asarray(x) > 0).astype(np.float64)


def log_softmax(z, axis: int = -1):
    """The logarithm of the softmax, ``log softmax(z)_v = z_v - log sum_u exp(z_u)``, computed stably.

    The maximum ``m`` is subtracted first, ``z_v - m - log sum_u exp(z_u - m)``,
    so scores of +-1000 neither overflow nor lose the small probabilities.
    ``exp`` of the result is the softmax. Chapter 3, for language models'
    output distributions.

    Args:
        z: array of scores, any shape; ``axis`` holds the ``V`` scores of one distribution.
        axis: the axis to normalize over.

    Returns:
        float64 array of the shape of ``z``: log-probabilities, their ``exp`` summing to 1 along ``axis``.
    """
    z = np.asarray(z, dtype=np.float64)
    shifted = z - z.max(axis=axis, keepdims=True)  # largest score 0: exp cannot overflow
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


ACTIVATIONS = {
    "logistic": (logistic, logistic_derivative),
    "tanh": (np.tanh, tanh_derivative),
    "relu": (relu, relu_derivative),
}
"""Name -> ``(function, derivative)`` of each activation, for the plots of chapter 3."""
