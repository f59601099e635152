"""Chapters 3 and 4: recurrent layers built from the cells of :mod:`course_lib.recurrent.cells`.

A :class:`Recurrent` layer unrolls one cell over time: the same weights at
every step. Sequences are batch-first, ``(B, T, I)``, and may have different
lengths: past its length a sequence's state stops changing and its outputs are
zero, exactly as ``torch.nn.utils.rnn.pack_padded_sequence`` gives with the
PyTorch layers. :class:`RecurrentNetwork` stacks layers, optionally in both
directions, with the interface of ``torch.nn.RNN``, ``torch.nn.LSTM`` and
``torch.nn.GRU`` (``batch_first=True``), and can copy their weights.

Exercise of assignment ps04 here: ``bidirectional``. See :doc:`/chapters/ch03_rnn`
and :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
from torch import nn

from course_lib import checks
from course_lib.recurrent.cells import CELLS, Cell, LSTMCell, lstm_cell
from course_lib.recurrent.fused_lstm import lstm_layer


def _select(mask: torch.Tensor, new, old):
    """``new`` where ``mask`` ``(B, 1)`` is true, else ``old``; works on a state or a pair of states."""
    if isinstance(new, tuple):
        return tuple(_select(mask, n, o) for n, o in zip(new, old))
    return torch.where(mask, new, old)


class Recurrent(nn.Module):
    """One recurrent layer in one direction: ``cell`` applied at every step, left to right. Chapter 3.

    ``h_t = cell(x_t, h_{t-1})`` for ``t = 1..T``, with the same weights at every step.
    """

    def __init__(self, cell: Cell):
        super().__init__()
        self.cell = cell

    def run(self, x: torch.Tensor, lengths=None, state=None):
        """Unroll the cell and also return every intermediate state (for measuring gradients).

        Args:
            x: ``(B, T, I)`` inputs, batch first.
            lengths: ``(B,)`` valid lengths in ``[1, T]``, or ``None`` for all ``T``.
            state: the initial state (``(B, H)``, or ``(h, c)`` for the LSTM); zeros if ``None``.

        Returns:
            ``(outputs, final, states)``: ``outputs`` ``(B, T, H)`` holds ``h_t`` and
            zeros past each length; ``final`` is the state at each sequence's last
            valid step; ``states`` is the list of the ``T`` states, each one the
            tensor the next step reads (so ``torch.autograd.grad(loss, states)``
            gives ``dL/dh_t``).
        """
        x = checks.sequence_batch(x)
        batch, steps = x.shape[:2]
        lengths = checks.sequence_lengths(lengths, batch, steps).to(x.device)
        masked = bool((lengths < steps).any())  # only then do states need holding
        if state is None:
            state = self.cell.initial_state(batch, x)
        hidden = self.cell.hidden
        outputs, states = [], []
        for t in range(steps):
            new = self.cell(x[:, t], state)
            if masked:  # sequences that have ended keep their last state and output zeros
                alive = (lengths > t).unsqueeze(1)  # (B, 1)
                state = _select(alive, new, state)
            else:
                state = new
            states.append(hidden(state))  # (B, H), the tensor the next step reads
            outputs.append(states[-1] * alive if masked else states[-1])  # (B, H)
        return torch.stack(outputs, dim=1), state, states  # (B, T, H)

    def forward(self, x: torch.Tensor, lengths=None, state=None):
        """``(outputs, final)`` of :meth:`run`: ``(B, T, H)`` outputs and the final state.

        An LSTM layer whose cell runs the library's own :func:`~course_lib.recurrent.cells.lstm_cell`
        computes the same with :func:`~course_lib.recurrent.fused_lstm.lstm_layer` (the input projection
        of all steps at once and a hand-written backward pass; chapter 4); any other cell is unrolled by
        :meth:`run`.
        """
        cell = self.cell
        if isinstance(cell, LSTMCell) and cell.cell_fn is lstm_cell:
            return lstm_layer(x, state, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, lengths)
        outputs, final, _ = self.run(x, lengths, state)
        return outputs, final


def bidirectional(x, lengths, forward, backward):
    """Run ``forward`` over the sequences and ``backward`` over them reversed; join the two.

    Each sequence is reversed *within its length*: row ``b`` of the reversed
    input holds ``x[b, L_b - 1], ..., x[b, 0]`` and then its padding, unchanged.
    The backward outputs are put back in the original order, so that position
    ``t`` of the result is ``[h_fwd_t ; h_bwd_t]``: the forward state has read
    ``x_1..x_t`` and the backward state ``x_t..x_L``. Written with torch
    operations only, so that gradients flow back to ``x`` through both
    directions; ``x`` is not modified. Chapter 3 (bidirectional RNNs) and
    chapter 4 (ELMo), exercise of ps04.

    Args:
        x: ``(B, T, ...)`` inputs, batch first.
        lengths: ``(B,)`` int64 tensor of valid lengths in ``[1, T]``.
        forward, backward: layers, each called as ``layer(inputs, lengths)`` and
            returning ``(outputs, final_state)`` with outputs ``(B, T, ..., H)``
            (zero past each length).

    Returns:
        ``(outputs, (final_forward, final_backward))``: outputs, a ``(B, T, ..., 2H)`` tensor of
        the dtype the layers return,
        forward and backward outputs concatenated on the last axis, and the two
        final states as the layers returned them.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 3:
        raise ValueError(f"x must be a tensor of shape (B, T, ...), got {getattr(x, 'shape', type(x).__name__)}")
    lengths = checks.sequence_lengths(lengths, x.shape[0], x.shape[1]).to(x.device)
    ### BEGIN SOLUTION
    t = torch.arange(x.shape[1], device=x.device)  # (T,)
    source = lengths.unsqueeze(1) - 1 - t  # (B, T) position that step t of the reversal reads
    source = torch.where(source >= 0, source, t)  # padding stays where it is

    def reverse(seq):  # (B, T, ...) -> (B, T, ...); its own inverse
        index = source.view(*source.shape, *[1] * (seq.dim() - 2)).expand_as(seq)
        return seq.gather(1, index)

    out_forward, final_forward = forward(x, lengths)
    out_backward, final_backward = backward(reverse(x), lengths)
    return torch.cat([out_forward, reverse(out_backward)], dim=-1), (final_forward, final_backward)
    ### END SOLUTION


def _stack_states(states: list):
    """Stack per-layer final states into ``(L, B, H)``, or ``(2L, B, H)`` when bidirectional, as PyTorch returns.

    A pair of them for the LSTM.
    """
    if isinstance(states[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*states))
    return torch.stack(states)


def _layer_state(state, index: int):
    """The initial state of layer-direction ``index`` from a ``(L, B, H)`` or ``(2L, B, H)`` state, or ``None``."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return tuple(part[index] for part in state)
    return state[index]


class RecurrentNetwork(nn.Module):
    """Stacked, optionally bidirectional, RNN, LSTM or GRU: ``torch.nn.RNN/LSTM/GRU`` with ``batch_first=True``.

    Layer ``l > 0`` reads the outputs of layer ``l - 1`` (both directions
    concatenated when bidirectional), with dropout between layers as PyTorch
    applies it. Chapters 3 and 4.

    Args:
        mode: ``"rnn"``, ``"lstm"`` or ``"gru"``.
        input_size, hidden_size: ``I`` and ``H``.
        num_layers: ``L``, layers stacked.
        bidirectional: add a right-to-left layer to every layer; outputs are then ``2H`` wide.
        dropout: dropout probability on the outputs of every layer but the last.
        cell_fn: the cell function for every cell (default: the reference one of ``mode``).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bidirectional: bool = False, dropout: float = 0.0, cell_fn: Callable | None = None):
        super().__init__()
        if mode not in CELLS:
            raise ValueError(f"mode must be one of {sorted(CELLS)}, got {mode!r}")
        self.mode, self.hidden_size, self.num_layers = mode, hidden_size, num_layers
        self.directions = 2 if bidirectional else 1
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()
        for layer in range(num_layers):
            size = input_size if layer == 0 else hidden_size * self.directions
            self.layers.append(nn.ModuleList(Recurrent(CELLS[mode](size, hidden_size, cell_fn))
                                             for _ in range(self.directions)))

    def forward(self, x: torch.Tensor, lengths=None, state=None):
        """Run every layer; return the last layer's outputs and every layer's final state.

        Args:
            x: ``(B, T, I)`` inputs.
            lengths: ``(B,)`` valid lengths, or ``None``.
            state: initial states shaped as PyTorch's: ``(L, B, H)``, or ``(2L, B, H)``
                when bidirectional, or a pair of them for the LSTM; zeros if ``None``.

        Returns:
            ``(outputs, final)``: outputs ``(B, T, H)``, or ``(B, T, 2H)`` when
            bidirectional, of the last layer (zero past each length) and the final
            states ``(L, B, H)``, or ``(2L, B, H)`` (a pair for the LSTM), ordered
            as PyTorch orders them (layer by layer, forward before backward).
        """
        finals = []
        inputs = checks.sequence_batch(x)
        for number, directions in enumerate(self.layers):
            if number > 0:
                inputs = self.dropout(inputs)
            start = [_layer_state(state, number * self.directions + d) for d in range(self.directions)]
            if self.directions == 1:
                inputs, final = directions[0](inputs, lengths, start[0])
                finals.append(final)
            else:
                inputs, pair = bidirectional(inputs, lengths,
                                             functools.partial(directions[0], state=start[0]),
                                             functools.partial(directions[1], state=start[1]))
                finals.extend(pair)
        return inputs, _stack_states(finals)

    def load_torch(self, module: nn.RNNBase) -> "RecurrentNetwork":
        """Copy the weights of a ``torch.nn.RNN``, ``LSTM`` or ``GRU`` of the same sizes into this network.

        Returns the network itself. The PyTorch module must have biases and no projections.
        """
        expected = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[self.mode]
        if not isinstance(module, expected):
            raise TypeError(f"a {self.mode} network copies a torch.nn.{expected.__name__}, got {type(module).__name__}")
        ours = (self.layers[0][0].cell.input_size, self.hidden_size, self.num_layers, self.directions)
        theirs = (module.input_size, module.hidden_size, module.num_layers, 2 if module.bidirectional else 1)
        if theirs != ours:
            raise ValueError(f"the input size, hidden size, number of layers or directions differ: {ours} here, "
                             f"{theirs} in the PyTorch module")
        if not module.bias or getattr(module, "proj_size", 0):
            raise ValueError("the PyTorch module must have biases and no projection (proj_size=0)")
        with torch.no_grad():
            for number, directions in enumerate(self.layers):
                for direction, layer in enumerate(directions):
                    suffix = f"_l{number}" + ("_reverse" if direction else "")
                    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                        getattr(layer.cell, name).copy_(getattr(module, name + suffix))
        return self

    @classmethod
    def from_torch(cls, module: nn.RNNBase, cell_fn: Callable | None = None) -> "RecurrentNetwork":
        """A network with the sizes and weights of ``module`` (``torch.nn.RNN``, ``LSTM`` or ``GRU``).

        Only weights are copied: the network is batch-first whatever
        ``module.batch_first`` says, so compare it with a module built with
        ``batch_first=True`` (or transpose that module's inputs and outputs).
        """
        mode = {nn.LSTM: "lstm", nn.GRU: "gru", nn.RNN: "rnn"}.get(type(module))
        if mode is None:
            raise TypeError(f"expected torch.nn.RNN, LSTM or GRU, got {type(module).__name__}")
        if mode == "rnn" and module.nonlinearity != "tanh":
            raise ValueError("only the tanh RNN is supported")
        network = cls(mode, module.input_size, module.hidden_size, module.num_layers, module.bidirectional,
                      module.dropout, cell_fn)
        return network.to(next(module.parameters()).dtype).load_torch(module)
