"""Chapter 3, recurrent neural networks: the Elman RNN in numpy, forward and backward by hand.

An Elman network (Elman, 1990) reads a sequence ``x_1 ... x_T`` one vector at
a time and keeps a hidden state that summarizes what it has read:

``h_t = tanh(U h_{t-1} + W x_t + b)``, and, as a language model, scores for the
next token ``z_t = V h_t + c`` (the read-out weights ``params['V']`` of
:mod:`course_lib.recurrent.elman_lm`, of shape ``(V, H)``).

The code stores a batch of ``B`` sequences as rows, so with ``I`` input
features and ``H`` hidden units: ``x_t`` is ``(B, I)``, ``h_t`` is ``(B, H)``,
``W`` is ``(H, I)``, ``U`` is ``(H, H)``, ``b`` is ``(H,)``, and a step is
``h_t = tanh(x_t W^T + h_{t-1} U^T + b)``. Gradients are propagated back
through time by hand (Werbos, 1990). See :doc:`/chapters/ch03_rnn`.

Exercises of assignment ps03 here: ``rnn_step`` and ``rnn_backward``. The
language model of :mod:`course_lib.recurrent.elman_lm` takes them as arguments.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from course_lib.checks import expect_shape


def rnn_step(x, h_prev, W, U, b):
    """One step of an Elman RNN on a batch: ``h_t = tanh(x_t W^T + h_{t-1} U^T + b)``.

    Row ``i`` of the result is ``tanh(W x_i + U h_i + b)`` for example ``i`` of
    the batch, the column-vector equation of the chapter. The arguments are not
    modified. Chapter 3, exercise of ps03.

    Args:
        x: ``(B, I)`` inputs ``x_t``.
        h_prev: ``(B, H)`` previous hidden states ``h_{t-1}``.
        W: ``(H, I)`` input-to-hidden weights.
        U: ``(H, H)`` hidden-to-hidden (recurrent) weights.
        b: ``(H,)`` bias.

    Returns:
        ``(B, H)`` float64 array, the new hidden states ``h_t``, in ``(-1, 1)``.
    """
    x = expect_shape(x, "x", (None, None), "(B, I)")
    batch, dim = x.shape
    W = expect_shape(W, "W", (None, dim), "(H, I)")
    hidden = len(W)
    h_prev = expect_shape(h_prev, "h_prev", (batch, hidden), "(B, H)")
    U = expect_shape(U, "U", (hidden, hidden), "(H, H)")
    b = expect_shape(b, "b", (hidden,), "(H,)")
    ### BEGIN SOLUTION
    return np.tanh(x @ W.T + h_prev @ U.T + b)  # (B, H)
    ### END SOLUTION


def rnn_forward(xs, h0, W, U, b, step_fn: Callable = rnn_step):
    """Run an Elman RNN over whole sequences: ``h_t = step_fn(x_t, h_{t-1}, W, U, b)`` for ``t = 1 ... T``.

    Chapter 3. ``step_fn`` is called once per time step, so an assignment can
    run its own :func:`rnn_step`.

    Args:
        xs: ``(B, T, I)`` input sequences.
        h0: ``(B, H)`` initial hidden states.
        W, U, b: ``(H, I)``, ``(H, H)``, ``(H,)`` weights, as in :func:`rnn_step`.
        step_fn: the step function.

    Returns:
        ``(B, T, H)`` float64 array: ``hs[:, t]`` is the hidden state after reading ``xs[:, t]``.
    """
    xs = expect_shape(xs, "xs", (None, None, None), "(B, T, I)")
    batch, steps, _dim = xs.shape
    h0 = expect_shape(h0, "h0", (batch, None), "(B, H)")
    hs = np.empty((batch, steps, h0.shape[1]))  # (B, T, H)
    h = h0
    for t in range(steps):
        h = step_fn(xs[:, t], h, W, U, b)  # (B, H)
        hs[:, t] = h
    return hs


def rnn_backward(dhs, xs, hs, h0, W, U):
    """Backpropagation through time for an Elman RNN: the gradients of a loss ``L`` w.r.t. inputs and weights.

    ``dhs[:, t]`` is the gradient of ``L`` w.r.t. ``h_t`` through the output at
    step ``t`` only. The total gradient of ``h_t`` adds what flows back from
    later steps through ``h_{t+1} = tanh(... + h_t U^T ...)``, so the loop runs
    backwards, ``t = T-1 ... 0``, with ``dh_next = 0`` at first:

    - ``dh_t = dhs[:, t] + dh_next``
    - ``da_t = dh_t * (1 - h_t^2)``, through the tanh (``tanh' = 1 - tanh^2``)
    - ``dx_t = da_t W`` and ``dh_next = da_t U``
    - ``dW = sum_t da_t^T x_t``, ``dU = sum_t da_t^T h_{t-1}`` (``h_{-1} = h0``),
      ``db = sum_t sum_batch da_t``

    Only ``dh_next`` needs the loop; the weight gradients can be summed after it.

    Truncated backpropagation through time is this function applied to one
    chunk of a longer sequence: ``h0`` is the last state of the previous chunk,
    treated as a constant, and the returned ``dh0`` is dropped instead of
    flowing further back. The arguments are not modified (``dhs`` included: add
    ``dh_next`` into a new array). Chapter 3, exercise of ps03.

    Args:
        dhs: ``(B, T, H)`` gradients w.r.t. each ``h_t`` through its own output.
        xs: ``(B, T, I)`` the inputs of the forward pass.
        hs: ``(B, T, H)`` the hidden states it returned (:func:`rnn_forward`).
        h0: ``(B, H)`` the initial states.
        W: ``(H, I)`` input-to-hidden weights.
        U: ``(H, H)`` recurrent weights.

    Returns:
        ``(dxs, dh0, dW, dU, db)``, float64 arrays of shapes ``(B, T, I)``,
        ``(B, H)``, ``(H, I)``, ``(H, H)``, ``(H,)``.
    """
    xs = expect_shape(xs, "xs", (None, None, None), "(B, T, I)")
    batch, steps, dim = xs.shape
    W = expect_shape(W, "W", (None, dim), "(H, I)")
    hidden = len(W)
    U = expect_shape(U, "U", (hidden, hidden), "(H, H)")
    hs = expect_shape(hs, "hs", (batch, steps, hidden), "(B, T, H)")
    dhs = expect_shape(dhs, "dhs", (batch, steps, hidden), "(B, T, H)")
    h0 = expect_shape(h0, "h0", (batch, hidden), "(B, H)")
    ### BEGIN SOLUTION
    das = np.empty_like(hs)  # (B, T, H) gradients w.r.t. the pre-activations a_t
    dh_next = np.zeros_like(h0)  # (B, H) gradient reaching h_t from step t + 1
    for t in reversed(range(steps)):
        das[:, t] = (dhs[:, t] + dh_next) * (1.0 - hs[:, t] ** 2)  # (B, H)
        dh_next = das[:, t] @ U  # (B, H)
    h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)  # (B, T, H) h_{t-1}
    flat_das = das.reshape(-1, hidden)  # (B*T, H)
    dW = flat_das.T @ xs.reshape(-1, dim)  # (H, I)
    dU = flat_das.T @ h_prevs.reshape(-1, hidden)  # (H, H)
    db = flat_das.sum(axis=0)  # (H,)
    dxs = das @ W  # (B, T, I)
    return dxs, dh_next, dW, dU, db
    ### END SOLUTION
