"""Chapters 3 and 4: recurrent cells in PyTorch, one time step of a batch.

A cell maps the input of one step and the previous state to the next state.
The weights are laid out exactly as in ``torch.nn.RNN``, ``torch.nn.LSTM`` and
``torch.nn.GRU``, so weights can be copied between the two and the results
compared (the tests do): ``weight_ih`` is ``(G*H, I)``, ``weight_hh`` is
``(G*H, H)``, ``bias_ih`` and ``bias_hh`` are ``(G*H,)``, where ``G`` is the
number of gate blocks (1 for the Elman RNN, 4 for the LSTM in the order
input, forget, candidate, output; 3 for the GRU in the order reset, update,
candidate).

Exercises of assignment ps04 here: ``lstm_cell`` and ``gru_cell``. The cell
modules take the cell function as an argument, so an assignment can train a
network built on its own function. See :doc:`/chapters/ch03_rnn` (the RNN cell)
and :doc:`/chapters/ch04_lstm` (LSTM and GRU).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from course_lib import checks


def check_cell_args(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gates: int) -> None:
    """Check the shapes of one cell step's arguments, naming the first that is wrong. Chapters 3 and 4.

    Built on :func:`course_lib.checks.expect_tensor`, so the messages read like every
    other shape error: ``weight_ih must have shape (4*H, I) = (16, 3), got (16, 5)``.

    Args:
        x: ``(B, I)`` inputs of the step.
        h: ``(B, H)`` previous hidden state.
        weight_ih: ``(G*H, I)``; weight_hh: ``(G*H, H)``; bias_ih, bias_hh: ``(G*H,)``.
        gates: ``G``, the number of gate blocks stacked in the weights.

    Raises:
        TypeError, ValueError: naming the argument, the expected and the actual shape.
    """
    checks.expect_tensor(x, "x", (None, None), "(B, I)")
    checks.expect_tensor(h, "h", (x.shape[0], None), "(B, H)")
    inputs, hidden = x.shape[1], h.shape[1]
    gate_rows = "H" if gates == 1 else f"{gates}*H"
    checks.expect_tensor(weight_ih, "weight_ih", (gates * hidden, inputs), f"({gate_rows}, I)")
    checks.expect_tensor(weight_hh, "weight_hh", (gates * hidden, hidden), f"({gate_rows}, H)")
    checks.expect_tensor(bias_ih, "bias_ih", (gates * hidden,), f"({gate_rows},)")
    checks.expect_tensor(bias_hh, "bias_hh", (gates * hidden,), f"({gate_rows},)")


def rnn_cell(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    """One step of the Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    The batched, row-vector form of ``h_t = tanh(W x_t + U h_{t-1} + b)``
    (``W = weight_ih``, ``U = weight_hh``, ``b = bias_ih + bias_hh``); the same
    step as ``torch.nn.RNNCell``. Chapter 3.

    Args:
        x: ``(B, I)`` inputs. h: ``(B, H)`` previous state.
        weight_ih: ``(H, I)``; weight_hh: ``(H, H)``; bias_ih, bias_hh: ``(H,)``.

    Returns:
        ``(B, H)`` the next state.
    """
    check_cell_args(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gates=1)
    return torch.tanh(x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh)  # (B, H)


def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
    """One step of the LSTM (Hochreiter and Schmidhuber, 1997, with the forget gate of Gers et al., 2000).

    With ``a = x W_ih^T + b_ih + h W_hh^T + b_hh`` split into four ``(B, H)``
    blocks ``a_i, a_f, a_g, a_o`` (in this order, as in ``torch.nn.LSTM``):

    ``i = sigma(a_i)``, ``f = sigma(a_f)``, ``g = tanh(a_g)``, ``o = sigma(a_o)``

    ``c' = f * c + i * g``  and  ``h' = o * tanh(c')``

    where ``*`` multiplies element by element. Written with torch operations
    only, so that autograd gives the gradients of ``h'`` and ``c'`` with respect to
    ``x``, the state and the four weights; the arguments are not modified (no
    in-place updates of ``c``). Chapter 4, exercise of ps04.

    Args:
        x: ``(B, I)`` inputs of the step.
        state: ``(h, c)``, two ``(B, H)`` tensors: the previous hidden and cell states.
        weight_ih: ``(4H, I)``; weight_hh: ``(4H, H)``; bias_ih, bias_hh: ``(4H,)``.

    Returns:
        ``(h', c')``: two ``(B, H)`` tensors of the dtype of ``x``, the next hidden and cell states.
    """
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError("state must be a pair (h, c) of (B, H) tensors")
    h, c = state
    check_cell_args(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gates=4)
    checks.expect_tensor(c, "c", tuple(h.shape), "(B, H)")
    ### BEGIN SOLUTION
    a = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh  # (B, 4H)
    a_i, a_f, a_g, a_o = a.chunk(4, dim=1)  # each (B, H)
    c_next = torch.sigmoid(a_f) * c + torch.sigmoid(a_i) * torch.tanh(a_g)  # (B, H)
    h_next = torch.sigmoid(a_o) * torch.tanh(c_next)  # (B, H)
    return h_next, c_next
    ### END SOLUTION


def gru_cell(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    """One step of the GRU (Cho et al., 2014), in the form of ``torch.nn.GRU``.

    With ``x W_ih^T + b_ih`` split into ``(B, H)`` blocks ``x_r, x_z, x_n`` and
    ``h W_hh^T + b_hh`` into ``h_r, h_z, h_n`` (in this order):

    ``r = sigma(x_r + h_r)``, ``z = sigma(x_z + h_z)``, ``n = tanh(x_n + r * h_n)``

    ``h' = (1 - z) * n + z * h``

    The reset gate ``r`` scales the recurrent part of the candidate (after its
    bias is added); ``z = 1`` keeps the old state. Written with torch operations
    only, so that autograd gives the gradients of ``h'`` with respect to ``x``,
    ``h`` and the four weights; the arguments are not modified. Chapter 4,
    exercise of ps04.

    Args:
        x: ``(B, I)`` inputs. h: ``(B, H)`` previous state.
        weight_ih: ``(3H, I)``; weight_hh: ``(3H, H)``; bias_ih, bias_hh: ``(3H,)``.

    Returns:
        ``(B, H)`` tensor of the dtype of ``x``, the next state.
    """
    check_cell_args(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gates=3)
    ### BEGIN SOLUTION
    x_r, x_z, x_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)  # each (B, H)
    h_r, h_z, h_n = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)  # each (B, H)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h
    ### END SOLUTION


class Cell(nn.Module):
    """A recurrent cell with its weights: the shared base of :class:`RNNCell`, :class:`LSTMCell`, :class:`GRUCell`.

    Holds ``weight_ih (G*H, I)``, ``weight_hh (G*H, H)``, ``bias_ih`` and
    ``bias_hh (G*H,)``, initialized uniformly in ``[-1/sqrt(H), 1/sqrt(H)]`` as
    PyTorch does, and calls ``cell_fn(x, state, weight_ih, weight_hh, bias_ih,
    bias_hh)`` for one step. Chapters 3 and 4.
    """

    gates = 1
    default_fn: Callable = staticmethod(rnn_cell)

    def __init__(self, input_size: int, hidden_size: int, cell_fn: Callable | None = None):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(rows))
        self.bias_hh = nn.Parameter(torch.empty(rows))
        self.cell_fn = cell_fn if cell_fn is not None else type(self).default_fn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every weight uniformly from ``[-1/sqrt(H), 1/sqrt(H)]``, as ``torch.nn.RNN`` does."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def initial_state(self, batch_size: int, like: torch.Tensor):
        """The zero state for a batch: ``(B, H)`` zeros (a pair of them for the LSTM)."""
        return like.new_zeros(batch_size, self.hidden_size)

    @staticmethod
    def hidden(state) -> torch.Tensor:
        """The hidden state ``h`` of a state: ``(B, H)``."""
        return state

    def forward(self, x: torch.Tensor, state=None):
        """One step: ``x`` ``(B, I)`` and the previous state (zeros if ``None``) give the next state."""
        if state is None:
            state = self.initial_state(x.shape[0], x)
        return self.cell_fn(x, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    def extra_repr(self) -> str:
        """The sizes ``I``, ``H`` and the cell function, shown in ``repr(cell)``."""
        return f"{self.input_size}, {self.hidden_size}, cell_fn={getattr(self.cell_fn, '__name__', self.cell_fn)}"


class RNNCell(Cell):
    """The Elman RNN cell (:func:`rnn_cell`), the counterpart of ``torch.nn.RNNCell``. Chapter 3.

    State: ``h`` of shape ``(B, H)``.
    """

    gates = 1
    default_fn = staticmethod(rnn_cell)


class LSTMCell(Cell):
    """The LSTM cell (:func:`lstm_cell`), the counterpart of ``torch.nn.LSTMCell``. Chapter 4.

    State: the pair ``(h, c)``, both ``(B, H)``.
    """

    gates = 4
    default_fn = staticmethod(lstm_cell)

    def initial_state(self, batch_size: int, like: torch.Tensor):
        """The zero state ``(h, c)``: two ``(B, H)`` zero tensors."""
        zeros = like.new_zeros(batch_size, self.hidden_size)
        return zeros, zeros

    @staticmethod
    def hidden(state) -> torch.Tensor:
        """``h`` of the state ``(h, c)``: ``(B, H)``."""
        return state[0]


class GRUCell(Cell):
    """The GRU cell (:func:`gru_cell`), the counterpart of ``torch.nn.GRUCell``. Chapter 4.

    State: ``h`` of shape ``(B, H)``.
    """

    gates = 3
    default_fn = staticmethod(gru_cell)


CELLS = {"rnn": RNNCell, "lstm": LSTMCell, "gru": GRUCell}
