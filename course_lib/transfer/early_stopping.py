"""Early stopping: which epoch to keep, and whether to go on, from the validation losses so far. Chapter 9.

Fine-tuning a large model on a few hundred labelled sentences overfits within a few
epochs. Early stopping scores a validation split after every epoch, keeps the
parameters of the best epoch and stops once ``patience`` epochs in a row have not
improved on it (Prechelt, 1998, compares such rules). An epoch improves only if it beats
the best loss so far by more than ``min_delta``, so noise in the last digits does not
count as progress. See :doc:`/chapters/ch09_after_bert`.
"""

from __future__ import annotations

import math

from course_lib import checks


def check_stopping_args(losses, patience, min_delta) -> tuple[list[float], int, float]:
    """Return ``losses`` as floats, ``patience`` and ``min_delta``, raising unless they fit :func:`early_stopping`. Chapter 9.

    ``losses``: a non-empty sequence of numbers ``(N,)``, none NaN; ``patience``: an int ``>= 1``;
    ``min_delta``: a finite number ``>= 0``.
    """
    if isinstance(losses, (str, bytes)) or not hasattr(losses, "__len__") or len(losses) == 0:
        raise ValueError(f"losses must be a non-empty sequence of numbers, got {losses!r}")
    values = []
    for i, loss in enumerate(losses):
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) and not hasattr(loss, "__float__"):
            raise TypeError(f"losses[{i}] must be a number, got {type(loss).__name__}")
        values.append(float(loss))
        if math.isnan(values[-1]):
            raise ValueError(f"losses[{i}] is NaN: the training diverged")
    if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not 0 <= min_delta < math.inf:
        raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta!r}")
    return values, checks.positive_int(patience, "patience"), float(min_delta)


def early_stopping(losses, patience: int = 2, min_delta: float = 0.0) -> tuple[int, bool]:
    """The epoch to keep and whether to stop, from the validation losses of the epochs so far. Chapter 9.

    Epoch 0 is the first best. Going through the epochs in order, epoch ``e`` becomes the
    best when ``losses[e] < losses[best] - min_delta``: lower by more than ``min_delta`` than
    the best so far (a tie, or a gain of ``min_delta`` or less, is no improvement, and the
    earlier epoch stays the best). Training stops once the last ``patience`` epochs have
    not improved: ``N - 1 - best >= patience``, with ``N`` the epochs so far. Pure Python;
    the arguments are not modified. Exercise of ps09.

    Args:
        losses: ``(N,)`` the validation loss after each epoch so far, a sequence of numbers.
        patience: how many epochs in a row without improvement end the training, ``>= 1``.
        min_delta: the smallest decrease that counts as an improvement, ``>= 0``.

    Returns:
        ``(best, stop)``: the index of the best epoch (an int) and whether to stop (a bool).
    """
    losses, patience, min_delta = check_stopping_args(losses, patience, min_delta)
    ### BEGIN SOLUTION
    best = 0
    for epoch, loss in enumerate(losses):  # epoch 0 against itself: no change
        if loss < losses[best] - min_delta:
            best = epoch
    return best, len(losses) - 1 - best >= patience
    ### END SOLUTION
