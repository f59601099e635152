"""Chapter 4: the LSTM layer the library trains with, forward and backward written out over the whole sequence.

:class:`~course_lib.recurrent.layers.Recurrent` unrolls a cell step by step and lets
autograd record every operation of every step; that is the layer the chapter
teaches, and the one that runs a cell function given to it (a student's
``lstm_cell``). When the cell is the library's own :func:`~course_lib.recurrent.cells.lstm_cell`,
the layer calls :func:`lstm_layer` instead, which computes the same function with
the structure fast implementations use:

- **the input projection of every step at once**: ``X W_ih^T + b_ih + b_hh`` is one
  ``(T*B, I) @ (I, 4H)`` product before the loop; each step adds only ``h W_hh^T``;
- **backpropagation through time written by hand**: the backward loop runs over the
  steps once, computing ``dL/da_t`` of the four gates from the gate values saved in
  the forward pass; the weight gradients are then single products over all steps,
  ``dW_hh = sum_t da_t^T h_{t-1}`` and ``dW_ih = sum_t da_t^T x_t``, instead of one
  small product per step.

The gradients, for ``a = [a_i, a_f, a_g, a_o]``, ``c' = f * c + i * g`` and ``h' = o * tanh(c')``
(``*`` element by element, ``sigma' = sigma (1 - sigma)``, ``tanh' = 1 - tanh^2``)::

    dc' += dh' * o * (1 - tanh(c')^2)
    da_i = dc' * g * i (1 - i)      da_f = dc' * c * f (1 - f)
    da_g = dc' * i * (1 - g^2)      da_o = dh' * tanh(c') * o (1 - o)
    dc = dc' * f                    dh = da W_hh

Sequences past their length keep their state and output zeros, as in
:class:`~course_lib.recurrent.layers.Recurrent`; there, a step's gradient passes to the
previous state unchanged. Tested equal, values and gradients, to the step-by-step layer.
See :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

import torch

from course_lib import checks
from course_lib.recurrent.cells import check_cell_args


class _LSTMLayer(torch.autograd.Function):
    """``(outputs, h_T, c_T)`` of one LSTM layer; see :func:`lstm_layer`. Takes ``x`` time-major, ``(T, B, I)``,
    and returns the outputs batch-first, ``(B, T, H)``."""

    @staticmethod
    def forward(ctx, x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, alive):
        steps, batch, _ = x.shape  # (T, B, I)
        hidden = h0.shape[1]
        projected = torch.addmm(bias_ih + bias_hh, x.reshape(steps * batch, -1), weight_ih.T)
        projected = projected.view(steps, batch, 4 * hidden)  # (T, B, 4H): x_t W_ih^T + b for every t
        gates = torch.empty_like(projected)  # (T, B, 4H): i, f, g, o after their nonlinearities
        tanh_c = x.new_empty(steps, batch, hidden)  # (T, B, H): tanh(c') of each step
        hs = x.new_empty(steps + 1, batch, hidden)  # (T+1, B, H): h_0 .. h_T
        cs = x.new_empty(steps + 1, batch, hidden)  # (T+1, B, H): c_0 .. c_T
        hs[0], cs[0] = h0, c0
        for t in range(steps):
            a = torch.addmm(projected[t], hs[t], weight_hh.T)  # (B, 4H)
            gate = gates[t]
            torch.sigmoid(a, out=gate)
            torch.tanh(a[:, 2 * hidden:3 * hidden], out=gate[:, 2 * hidden:3 * hidden])
            i, f, g, o = gate.chunk(4, dim=1)  # each (B, H)
            c_new = torch.addcmul(f * cs[t], i, g)  # f * c + i * g
            torch.tanh(c_new, out=tanh_c[t])
            h_new = o * tanh_c[t]
            if alive is None:
                hs[t + 1], cs[t + 1] = h_new, c_new
            else:  # ended sequences keep their state
                torch.where(alive[t], h_new, hs[t], out=hs[t + 1])
                torch.where(alive[t], c_new, cs[t], out=cs[t + 1])
        outputs = hs[1:] if alive is None else hs[1:] * alive  # (T, B, H), zero past each length
        ctx.save_for_backward(x, weight_ih, weight_hh, gates, tanh_c, hs, cs, alive)
        return outputs.transpose(0, 1).contiguous(), hs[steps].clone(), cs[steps].clone()  # (B, T, H) first

    @staticmethod
    def backward(ctx, grad_outputs, grad_h, grad_c):
        x, weight_ih, weight_hh, gates, tanh_c, hs, cs, alive = ctx.saved_tensors
        steps, batch, _ = x.shape
        hidden = hs.shape[2]
        # Every factor that does not depend on the incoming gradient, for all steps at once (T, B, H) each:
        i, f, g, o = gates.chunk(4, dim=2)
        sigmoid_slope = gates * (1 - gates)  # sigma' of each gate (g's block unused)
        slope_i, slope_f, _, slope_o = sigmoid_slope.chunk(4, dim=2)
        through_h = o * (1 - tanh_c ** 2)  # dc'/dh': o tanh'(c')
        partners = torch.stack([g * slope_i, cs[:-1] * slope_f, i * (1 - g ** 2)], dim=2)  # (T, B, 3, H)
        out_gate = tanh_c * slope_o  # da_o / dh'
        grad_a = torch.empty_like(gates)  # (T, B, 4H): dL/da_t
        dh, dc = grad_h.clone(), grad_c.clone()  # (B, H) each: the gradient reaching h_t and c_t
        keep = None if alive is None else alive.to(x.dtype)  # (T, B, 1)
        for t in range(steps - 1, -1, -1):  # the steps backwards
            dh += grad_outputs[:, t] if keep is None else grad_outputs[:, t] * keep[t]
            if keep is not None:  # past the length the state is passed on: its gradient too
                carried_h, carried_c = dh * (1 - keep[t]), dc * (1 - keep[t])
                dh, dc = dh * keep[t], dc * keep[t]
            dc = torch.addcmul(dc, dh, through_h[t])  # dL/dc'
            torch.mul(dc.unsqueeze(1), partners[t], out=grad_a[t, :, :3 * hidden].view(batch, 3, hidden))  # i, f, g
            torch.mul(dh, out_gate[t], out=grad_a[t, :, 3 * hidden:])  # o
            dh = grad_a[t] @ weight_hh  # (B, H)
            dc = dc * f[t]
            if keep is not None:
                dh += carried_h
                dc += carried_c
        flat = grad_a.view(steps * batch, 4 * hidden)  # (T*B, 4H)
        grad_x = (flat @ weight_ih).view_as(x) if ctx.needs_input_grad[0] else None
        grad_w_ih = flat.T @ x.reshape(steps * batch, -1)  # (4H, I)
        grad_w_hh = flat.T @ hs[:-1].reshape(steps * batch, hidden)  # (4H, H)
        grad_b = flat.sum(0)  # (4H,)
        return grad_x, dh, dc, grad_w_ih, grad_w_hh, grad_b, grad_b, None


def lstm_layer(x, state, weight_ih, weight_hh, bias_ih, bias_hh, lengths=None):
    """One LSTM layer over whole sequences, the gradients written out by hand. Chapter 4.

    The same function as :class:`~course_lib.recurrent.layers.Recurrent` around an
    :class:`~course_lib.recurrent.cells.LSTMCell` (``h_t, c_t = lstm_cell(x_t, (h_{t-1},
    c_{t-1}))`` for ``t = 1..T``) and as a one-layer ``torch.nn.LSTM``, computed as the
    module's docstring describes. Differentiable with respect to ``x``, the initial
    state and the four weights (not twice).

    Args:
        x: ``(B, T, I)`` inputs, batch first.
        state: ``(h_0, c_0)``, two ``(B, H)`` tensors, or ``None`` for zeros.
        weight_ih: ``(4H, I)``; weight_hh: ``(4H, H)``; bias_ih, bias_hh: ``(4H,)`` (gate order i, f, g, o).
        lengths: ``(B,)`` valid lengths in ``[1, T]``, or ``None`` for all ``T``.

    Returns:
        ``(outputs, (h_T, c_T))``: outputs ``(B, T, H)`` (zero past each length) and the
        states at each sequence's last valid step, ``(B, H)`` each.
    """
    x = checks.sequence_batch(x)
    batch, steps = x.shape[:2]
    lengths = checks.sequence_lengths(lengths, batch, steps).to(x.device)
    if state is None:
        zeros = x.new_zeros(batch, weight_hh.shape[1])
        state = (zeros, zeros)
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError("state must be a pair (h, c) of (B, H) tensors")
    h0, c0 = state
    checks.expect_tensor(x, "x", (None, None, weight_ih.shape[1]), "(B, T, I)")
    check_cell_args(x[:, 0], h0, weight_ih, weight_hh, bias_ih, bias_hh, gates=4)
    checks.expect_tensor(c0, "c", tuple(h0.shape), "(B, H)")
    alive = None
    if bool((lengths < steps).any()):
        alive = (torch.arange(steps, device=x.device)[:, None] < lengths[None, :]).unsqueeze(2)  # (T, B, 1)
    outputs, h_last, c_last = _LSTMLayer.apply(x.transpose(0, 1).contiguous(), h0, c0, weight_ih, weight_hh,
                                               bias_ih, bias_hh, alive)
    return outputs, (h_last, c_last)  # (B, T, H), two (B, H)
