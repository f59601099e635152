"""Chapter 3, recurrent neural networks: generating text from a language model, one token at a time.

Any autoregressive model, the numpy RNN of chapter 3 as well as the PyTorch
models of later chapters, is seen here as a ``step`` function: given the last
token and its state, it returns scores for the next token and the new state.
Sampling feeds each drawn token back in. Dividing the scores by a temperature
``tau`` before the softmax sharpens the distribution (``tau < 1``, safer and
more repetitive text) or flattens it (``tau > 1``, more surprising text).
See :doc:`/chapters/ch03_rnn`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from course_lib import checks
from course_lib.activations import log_softmax


def sample(step_fn: Callable, first_id, length, rng, temperature: float = 1.0, state=None):
    """Draw ``length`` tokens from a language model, each conditioned on all before it.

    Starting from ``w_0 = first_id``, repeat for ``t = 1 ... length``:
    ``z, state = step_fn(w_{t-1}, state)`` and draw
    ``w_t ~ softmax(z / temperature)``. Chapter 3.

    Args:
        step_fn: ``step_fn(token_id, state) -> (logits, state)``, ``logits`` of shape
            ``(V,)`` (or ``(1, V)``), numpy or a torch tensor; the state is
            whatever the model carries (``None`` at first means "start fresh").
        first_id: the int id of the token to start from (not returned).
        length: how many tokens to draw, an int ``>= 0``.
        rng: a ``numpy.random.Generator``, the only source of randomness.
        temperature: ``tau > 0``, dividing the scores before the softmax.
        state: the model's state before ``first_id``.

    Returns:
        ``(length,)`` int64 array of the drawn ids.
    """
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)) \
            or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    length = checks.nonnegative_int(length, "length")
    if isinstance(first_id, bool) or not isinstance(first_id, (int, np.integer)):
        raise TypeError(f"first_id must be an int token id, got {first_id!r}")
    checks.generator(rng)
    ids = np.empty(length, dtype=np.int64)
    token = int(first_id)
    for t in range(length):
        logits, state = step_fn(token, state)
        if hasattr(logits, "detach"):  # a torch tensor
            logits = logits.detach().cpu().numpy()
        probs = np.exp(log_softmax(np.ravel(logits) / temperature))  # (V,)
        token = int(rng.choice(len(probs), p=probs))
        ids[t] = token
    return ids
