"""One step of AdamW, Adam with decoupled weight decay, written out for one parameter tensor. Chapter 9.

Adam (Kingma and Ba, 2015) keeps two running averages per weight, of the gradient ``m``
and of its square ``v``, and moves each weight by the bias-corrected ratio
``m_hat / (sqrt(v_hat) + eps)``: about ``lr`` per step whatever the gradient's scale.
AdamW (Loshchilov and Hutter, 2019) shrinks the weight itself by ``lr * lambda`` first,
instead of adding ``lambda theta`` to the gradient (which Adam would then rescale). It is
the optimiser BERT and GPT were fine-tuned with, and the one
:func:`course_lib.transfer.fine_tuning.fine_tune_loop` steps with by default.
See :doc:`/chapters/ch09_after_bert`. Tested against ``torch.optim.AdamW``, step for step.
"""

from __future__ import annotations

import math

import torch

from course_lib import checks


def _number(value, name: str, low: float, high: float = math.inf, closed_low: bool = True) -> float:
    """``value`` as a float, raising unless it is a finite number in ``[low, high)`` (``(low, high)`` if not ``closed_low``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (low <= value if closed_low else low < value) or not value < high:
        bounds = f"{'[' if closed_low else '('}{low}, {high})"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")
    return float(value)


def check_adamw_args(param, grad, exp_avg, exp_avg_sq, step, lr, betas, eps, weight_decay) -> tuple:
    """Raise unless the arguments of :func:`adamw_step` fit; return ``(step, lr, beta1, beta2, eps, weight_decay)``. Chapter 9.

    ``param``, ``grad``, ``exp_avg`` and ``exp_avg_sq`` are float tensors of one shape (any shape);
    ``step >= 1`` an int; ``lr >= 0``; ``betas`` two numbers in ``[0, 1)``; ``eps > 0``; ``weight_decay >= 0``.
    """
    if not isinstance(param, torch.Tensor) or not param.is_floating_point():
        raise TypeError(f"param must be a float tensor, got {getattr(param, 'dtype', type(param).__name__)}")
    shape = tuple(param.shape)
    for name, tensor in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        checks.expect_tensor(tensor, name, shape, "the shape of param")
        if tensor.dtype != param.dtype:
            raise TypeError(f"{name} must have param's dtype {param.dtype}, got {tensor.dtype}")
    step = checks.positive_int(step, "step")
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    beta1, beta2 = (_number(b, f"betas[{i}]", 0.0, 1.0) for i, b in enumerate(betas))
    return (step, _number(lr, "lr", 0.0), beta1, beta2, _number(eps, "eps", 0.0, closed_low=False),
            _number(weight_decay, "weight_decay", 0.0))


def adamw_step(param, grad, exp_avg, exp_avg_sq, step: int, lr: float, betas: tuple = (0.9, 0.999),
               eps: float = 1e-8, weight_decay: float = 0.01) -> tuple:
    """One AdamW update of one parameter tensor: the new parameter and the two new running averages. Chapter 9.

    With ``g`` the gradient, ``t`` the step (1 at the first update) and ``lambda`` the weight decay:

    - ``theta <- theta - lr * lambda * theta`` (decoupled weight decay: on the weight, not the gradient);
    - ``m <- beta1 m + (1 - beta1) g`` and ``v <- beta2 v + (1 - beta2) g^2`` (``m`` and ``v`` start at 0);
    - ``m_hat = m / (1 - beta1^t)`` and ``v_hat = v / (1 - beta2^t)`` (they undo the pull towards the zeros
      the averages started from);
    - ``theta <- theta - lr * m_hat / (sqrt(v_hat) + eps)``.

    Computed without gradients (in ``torch.no_grad()``); the arguments are not modified. Exercise of ps09.

    Args:
        param: ``(...)`` the parameter ``theta``, any shape, float.
        grad: ``(...)`` its gradient ``g``.
        exp_avg: ``(...)`` ``m`` after the previous step (zeros before the first).
        exp_avg_sq: ``(...)`` ``v`` after the previous step (zeros before the first).
        step: ``t >= 1``, the number of this update.
        lr: the learning rate. betas: ``(beta1, beta2)``. eps: added to ``sqrt(v_hat)``.
        weight_decay: ``lambda``.

    Returns:
        ``(param, exp_avg, exp_avg_sq)``, three new ``(...)`` tensors of ``param``'s dtype.
    """
    step, lr, beta1, beta2, eps, weight_decay = check_adamw_args(param, grad, exp_avg, exp_avg_sq, step, lr,
                                                                 betas, eps, weight_decay)
    with torch.no_grad():
        ### BEGIN SOLUTION
        decayed = param * (1 - lr * weight_decay)
        m = beta1 * exp_avg + (1 - beta1) * grad
        v = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
        m_hat = m / (1 - beta1 ** step)
        v_hat = v / (1 - beta2 ** step)
        return decayed - lr * m_hat / (v_hat.sqrt() + eps), m, v
        ### END SOLUTION
