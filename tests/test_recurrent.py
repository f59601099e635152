"""course_lib.recurrent.cells and course_lib.recurrent.layers against torch.nn, holding the same weights.

``torch.nn.RNNCell/LSTMCell/GRUCell`` for one step and ``torch.nn.RNN/LSTM/GRU``
(batch first, stacked, bidirectional, packed variable-length sequences, initial
states, dropout in eval mode) for whole networks: outputs, final states and the
gradients with respect to the inputs, the states and every weight agree to 1e-5
in float32 and 1e-10 in float64. ``bidirectional`` is checked against loops
over each sequence's prefixes and suffixes, and the states ``Recurrent.run``
returns against gradients recomputed by restarting the recurrence at each step.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from course_lib.recurrent import cells
from course_lib.recurrent.layers import Recurrent, RecurrentNetwork, bidirectional

MODES = ["rnn", "lstm", "gru"]
TORCH_CELLS = {"rnn": nn.RNNCell, "lstm": nn.LSTMCell, "gru": nn.GRUCell}
TORCH_NETWORKS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
CELL_FNS = {"rnn": cells.rnn_cell, "lstm": cells.lstm_cell, "gru": cells.gru_cell}
WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def assert_close(actual, expected, what: str):
    atol = TOLERANCE.get(expected.dtype, 1e-10)
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def as_tuple(state) -> tuple:
    """A state as a tuple of tensors: ``(h,)``, or ``(h, c)`` for the LSTM."""
    return tuple(state) if isinstance(state, (tuple, list)) else (state,)


def random_state(mode: str, *shape, dtype=torch.float64) -> tuple:
    """Leaf tensors of a random state: one ``shape`` tensor, two for the LSTM."""
    return tuple(torch.randn(*shape, dtype=dtype, requires_grad=True) for _ in range(2 if mode == "lstm" else 1))


def as_argument(mode: str, state: tuple | None):
    """What a cell or network takes: ``h``, or the pair ``(h, c)`` for the LSTM."""
    if state is None:
        return None
    return state if mode == "lstm" else state[0]


def probed_loss(outputs, probes) -> torch.Tensor:
    """``sum_k <outputs_k, probes_k>``: a scalar whose gradient reaches every output with a random weight."""
    return sum((o * p).sum() for o, p in zip(outputs, probes))


def assert_same_gradients(loss_ours, loss_theirs, ours: dict, theirs: dict):
    """Gradients of the two losses with respect to paired tensors (same keys) agree."""
    names = list(ours)
    grads_ours = torch.autograd.grad(loss_ours, [ours[n] for n in names])
    grads_theirs = torch.autograd.grad(loss_theirs, [theirs[n] for n in names])
    for name, mine, reference in zip(names, grads_ours, grads_theirs):
        assert_close(mine, reference, f"gradient w.r.t. {name}")


# ---------------------------------------------------------------- cells

@DTYPES
@pytest.mark.parametrize("form", ["function", "module"])
@pytest.mark.parametrize("mode", MODES)
def test_cell_matches_torch_cell(mode, form, dtype):
    torch.manual_seed(0)
    batch, inputs, hidden = 3, 4, 5
    reference = TORCH_CELLS[mode](inputs, hidden).to(dtype)
    if form == "module":
        ours = cells.CELLS[mode](inputs, hidden).to(dtype)
        with torch.no_grad():
            for name in WEIGHTS:
                getattr(ours, name).copy_(getattr(reference, name))
        weights = {name: getattr(ours, name) for name in WEIGHTS}
        step = ours
    else:
        weights = {name: getattr(reference, name).detach().clone().requires_grad_() for name in WEIGHTS}
        step = lambda x, s: CELL_FNS[mode](x, s, *weights.values())
    x = torch.randn(batch, inputs, dtype=dtype, requires_grad=True)
    state = random_state(mode, batch, hidden, dtype=dtype)

    mine, theirs = as_tuple(step(x, as_argument(mode, state))), as_tuple(reference(x, as_argument(mode, state)))
    assert len(mine) == len(theirs)
    for k, (a, b) in enumerate(zip(mine, theirs)):
        assert a.shape == (batch, hidden) and a.dtype == dtype
        assert_close(a, b, f"{mode} {form}: output {'hc'[k]}")
    probes = [torch.randn_like(t) for t in theirs]
    leaves = {"x": x, **{f"state[{k}]": s for k, s in enumerate(state)}}
    assert_same_gradients(probed_loss(mine, probes), probed_loss(theirs, probes),
                          {**leaves, **weights}, {**leaves, **{n: getattr(reference, n) for n in WEIGHTS}})


@pytest.mark.parametrize("mode", MODES)
def test_cell_module_starts_from_zero_state_and_uses_the_given_cell_fn(mode):
    torch.manual_seed(0)
    cell = cells.CELLS[mode](3, 4).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    zero = as_argument(mode, tuple(torch.zeros(2, 4, dtype=torch.float64) for _ in range(2)))
    for a, b in zip(as_tuple(cell(x)), as_tuple(cell(x, zero))):
        assert_close(a, b, "cell(x) against cell(x, zeros)")
    bound = 1 / 4 ** 0.5
    assert all(p.abs().max() <= bound for p in cell.parameters()), "weights are drawn from U(-1/sqrt(H), 1/sqrt(H))"
    calls = []
    spy = cells.CELLS[mode](3, 4, cell_fn=lambda *args: calls.append(args) or CELL_FNS[mode](*args))
    spy(x.float())
    assert len(calls) == 1, "the module must call the cell function it was given"


# ---------------------------------------------------------------- whole networks against torch.nn.RNN/LSTM/GRU

def torch_run(module: nn.RNNBase, x, lengths, state):
    """PyTorch's outputs ``(B, T, D*H)`` and final state, packing variable-length sequences."""
    if lengths is None:
        return module(x, state)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    outputs, final = module(packed, state)
    return pad_packed_sequence(outputs, batch_first=True, total_length=x.shape[1])[0], final


def paired_weights(ours: RecurrentNetwork, theirs: nn.RNNBase) -> tuple[dict, dict]:
    """Our and PyTorch's weights under PyTorch's names: layer l, direction d <-> ``weight_ih_l{l}[_reverse]``."""
    mine = {}
    for number, directions in enumerate(ours.layers):
        for direction, layer in enumerate(directions):
            for name in WEIGHTS:
                mine[f"{name}_l{number}" + ("_reverse" if direction else "")] = getattr(layer.cell, name)
    reference = dict(theirs.named_parameters())
    assert set(mine) == set(reference) and len(list(ours.parameters())) == len(reference)
    return mine, reference


SEQUENCES = ["full", "lengths", "state", "lengths+state"]


@DTYPES
@pytest.mark.parametrize("sequences", SEQUENCES)
@pytest.mark.parametrize("bidirectional_", [False, True], ids=["one-way", "bidirectional"])
@pytest.mark.parametrize("num_layers", [1, 3])
@pytest.mark.parametrize("mode", MODES)
def test_network_matches_torch(mode, num_layers, bidirectional_, sequences, dtype):
    torch.manual_seed(1)
    batch, steps, inputs, hidden = 4, 6, 3, 5
    theirs = TORCH_NETWORKS[mode](inputs, hidden, num_layers, batch_first=True,
                                  bidirectional=bidirectional_).to(dtype)
    ours = RecurrentNetwork.from_torch(theirs)
    assert all(p.dtype == dtype for p in ours.parameters())
    directions = 2 if bidirectional_ else 1
    x = torch.randn(batch, steps, inputs, dtype=dtype, requires_grad=True)
    lengths = torch.tensor([steps, 1, 4, steps - 1]) if "lengths" in sequences else None
    state = random_state(mode, num_layers * directions, batch, hidden, dtype=dtype) if "state" in sequences else None

    out_ours, final_ours = ours(x, lengths, as_argument(mode, state))
    out_theirs, final_theirs = torch_run(theirs, x, lengths, as_argument(mode, state))
    assert out_ours.shape == (batch, steps, directions * hidden)
    assert_close(out_ours, out_theirs, "outputs")
    if lengths is not None:
        for b, length in enumerate(lengths.tolist()):
            assert not out_ours[b, length:].any(), "outputs past a sequence's length must be zero"
    final_ours, final_theirs = as_tuple(final_ours), as_tuple(final_theirs)
    assert len(final_ours) == len(final_theirs)
    for a, b, name in zip(final_ours, final_theirs, ("h_n", "c_n")):
        assert a.shape == (num_layers * directions, batch, hidden)
        assert_close(a, b, name)

    probes = [torch.randn_like(t) for t in (out_theirs, *final_theirs)]
    leaves = {"x": x, **{f"initial state[{k}]": s for k, s in enumerate(state or ())}}
    mine, reference = paired_weights(ours, theirs)
    assert_same_gradients(probed_loss((out_ours, *final_ours), probes),
                          probed_loss((out_theirs, *final_theirs), probes),
                          {**leaves, **mine}, {**leaves, **reference})


@pytest.mark.parametrize("mode", MODES)
def test_network_with_dropout_matches_torch_in_eval_mode(mode):
    torch.manual_seed(2)
    theirs = TORCH_NETWORKS[mode](3, 5, 2, batch_first=True, dropout=0.5, bidirectional=True).double()
    ours = RecurrentNetwork.from_torch(theirs)
    assert ours.dropout.p == 0.5
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    lengths = torch.tensor([6, 2, 1, 5])
    ours.eval(), theirs.eval()
    out_ours, _ = ours(x, lengths)
    assert_close(out_ours, torch_run(theirs, x, lengths, None)[0], "outputs in eval mode")
    ours.train()
    assert not torch.equal(ours(x, lengths)[0], out_ours), "in training mode dropout must act between the layers"


def test_network_cell_fn_is_used_by_every_cell():
    torch.manual_seed(3)
    calls = []

    def counting_gru(*args):
        calls.append(1)
        return cells.gru_cell(*args)

    theirs = nn.GRU(3, 4, 2, batch_first=True, bidirectional=True)
    ours = RecurrentNetwork.from_torch(theirs, cell_fn=counting_gru)
    x = torch.randn(2, 5, 3)
    assert_close(ours(x)[0], theirs(x)[0], "outputs with a given cell_fn")
    assert len(calls) == 2 * 2 * 5, "one call per layer, direction and step"


# ---------------------------------------------------------------- Recurrent.run and its states

def hold(alive, new, old) -> tuple:
    """``new`` for the sequences still running, ``old`` for those that have ended (state tuples)."""
    return tuple(torch.where(alive, n, o) for n, o in zip(new, old))


def gradient_restarted_at(layer, x, lengths, states, probe, t: int, mode: str) -> torch.Tensor:
    """``dL/dh_t`` for ``L = sum_s <probe_s, out_s>``, restarting the recurrence from a leaf copy of ``h_t``.

    For the LSTM the cell state ``c_t`` is held fixed (it is not part of ``states``); it is read from the
    final state of the layer run on the first ``t + 1`` steps.
    """
    steps = x.shape[1]
    h = states[t].detach().clone().requires_grad_()
    state = (h,)
    if mode == "lstm":
        state = (h, layer(x[:, :t + 1], lengths.clamp(max=t + 1))[1][1].detach())
    alive = [(lengths > s).unsqueeze(1) for s in range(steps)]  # each (B, 1)
    loss = (probe[:, t] * h * alive[t]).sum()
    for s in range(t + 1, steps):
        new = as_tuple(layer.cell(x[:, s], as_argument(mode, state)))
        loss = loss + (probe[:, s] * new[0] * alive[s]).sum()
        state = hold(alive[s], new, state)
    return torch.autograd.grad(loss, h)[0]


RUN_LENGTHS = [pytest.param(None, id="full"),
               pytest.param([5, 2, 1, 4], id="lengths")]


@pytest.mark.parametrize("lengths", RUN_LENGTHS)
@pytest.mark.parametrize("mode", MODES)
def test_run_states_give_dL_dh_t(mode, lengths):
    torch.manual_seed(4)
    batch, steps = 4, 5
    layer = Recurrent(cells.CELLS[mode](3, 4)).double()
    x = torch.randn(batch, steps, 3, dtype=torch.float64)
    lengths = torch.tensor(lengths if lengths is not None else [steps] * batch)
    outputs, _, states = layer.run(x, lengths)
    assert len(states) == steps and all(s.shape == (batch, 4) for s in states)
    probe = torch.randn_like(outputs)
    loss = (outputs * probe).sum()
    grads = torch.autograd.grad(loss, states, allow_unused=True, retain_graph=True)
    grads = [torch.zeros_like(s) if g is None else g for g, s in zip(grads, states)]
    by_output = torch.autograd.grad(loss, outputs)[0]  # (B, T, H)
    for b, length in enumerate(lengths.tolist()):  # the last valid state is read by nothing but its own output
        assert_close(grads[length - 1][b], by_output[b, length - 1], f"dL/dh at the last step of sequence {b}")
    for t in range(steps):
        expected = gradient_restarted_at(layer, x, lengths, states, probe, t, mode)
        assert_close(grads[t], expected, f"dL/dh_{t + 1}")


@pytest.mark.parametrize("mode", MODES)
def test_run_holds_the_state_past_each_length(mode):
    torch.manual_seed(5)
    steps = 6
    layer = Recurrent(cells.CELLS[mode](3, 4)).double()
    x = torch.randn(4, steps, 3, dtype=torch.float64)
    lengths = [6, 1, 3, 5]
    outputs, final, states = layer.run(x, torch.tensor(lengths))
    assert_close(as_tuple(final)[0], states[-1], "the final h is the last of the states")
    for b, length in enumerate(lengths):
        for t in range(length - 1, steps):
            assert torch.equal(states[t][b], states[length - 1][b]), f"sequence {b} changed its state at step {t + 1}"
        assert not outputs[b, length:].any()
        alone_outputs, alone_final = layer(x[b:b + 1, :length])  # the sequence on its own, without padding
        assert_close(outputs[b, :length], alone_outputs[0], f"outputs of sequence {b}")
        for a, e in zip(as_tuple(final), as_tuple(alone_final)):
            assert_close(a[b], e[0], f"final state of sequence {b}")


# ---------------------------------------------------------------- bidirectional

def test_bidirectional_against_prefixes_and_reversed_suffixes():
    """Position t is [forward layer on x_1..x_t ; backward layer on x_L..x_t], each sequence run alone."""
    torch.manual_seed(6)
    forward_layer, backward_layer = Recurrent(cells.GRUCell(3, 4)).double(), Recurrent(cells.GRUCell(3, 4)).double()
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    lengths = [4, 6, 1, 3]
    out, (final_forward, final_backward) = bidirectional(x, torch.tensor(lengths), forward_layer, backward_layer)
    assert out.shape == (4, 6, 8)
    for b, length in enumerate(lengths):
        for t in range(length):
            ahead = forward_layer(x[b:b + 1, :t + 1])[0][0, -1]
            behind = backward_layer(x[b:b + 1, t:length].flip(1))[0][0, -1]
            assert_close(out[b, t], torch.cat([ahead, behind]), f"sequence {b}, position {t}")
        assert not out[b, length:].any(), "padding positions must be zero"
        assert_close(final_forward[b], forward_layer(x[b:b + 1, :length])[1][0], f"forward final state {b}")
        assert_close(final_backward[b], backward_layer(x[b:b + 1, :length].flip(1))[1][0], f"backward final {b}")


def leaky_layer(decay: float, log: list | None = None):
    """A layer for any ``(B, T, ...)`` input: ``o_t = decay * o_{t-1} + x_t``, zero past each length.

    Order matters (unlike a plain sum), so a wrong reversal shows; ``log`` records what the layer was given.
    """
    def layer(seq, lengths):
        if log is not None:
            log.append(seq.clone())
        if lengths is None:
            lengths = torch.full((seq.shape[0],), seq.shape[1])
        o, outs = torch.zeros_like(seq[:, 0]), []
        for t in range(seq.shape[1]):
            o = decay * o + seq[:, t]
            alive = (lengths > t).view(-1, *[1] * (o.dim() - 1))
            outs.append(o * alive)
        return torch.stack(outs, dim=1), o
    return layer


@pytest.mark.parametrize("shape", [(5, 7, 3), (5, 7, 2, 3)], ids=["B-T-H", "B-T-L-H"])
def test_bidirectional_reverses_within_lengths_on_any_trailing_axes(shape):
    torch.manual_seed(7)
    x = torch.randn(*shape, dtype=torch.float64)
    lengths = [7, 1, 4, 6, 2]
    given = []
    out, _ = bidirectional(x, torch.tensor(lengths), leaky_layer(0.5), leaky_layer(0.8, given))
    assert out.shape == (*shape[:-1], 2 * shape[-1])
    (reversed_x,) = given
    for b, length in enumerate(lengths):  # the reversal, by hand
        for t in range(shape[1]):
            source = length - 1 - t if t < length else t  # padding stays where it is
            assert torch.equal(reversed_x[b, t], x[b, source]), f"reversed input of sequence {b}, position {t}"
    half = shape[-1]
    for b, length in enumerate(lengths):
        for t in range(length):
            ahead = sum(0.5 ** (t - s) * x[b, s] for s in range(t + 1))
            behind = sum(0.8 ** (s - t) * x[b, s] for s in range(t, length))
            assert_close(out[b, t, ..., :half], ahead, f"forward half of sequence {b}, position {t}")
            assert_close(out[b, t, ..., half:], behind, f"backward half of sequence {b}, position {t}")
        assert not out[b, length:].any(), "padding positions must be zero"


def test_bidirectional_without_lengths_reverses_the_whole_sequence():
    torch.manual_seed(8)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    out, _ = bidirectional(x, None, leaky_layer(0.5), leaky_layer(0.8))
    backward, _ = leaky_layer(0.8)(x.flip(1), None)
    assert_close(out[..., 3:], backward.flip(1), "backward half")


# ---------------------------------------------------------------- error messages

def _lstm_step_with_wide_weight():
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    cells.lstm_cell(x, (h, h), torch.randn(16, 5), torch.randn(16, 4), torch.randn(16), torch.randn(16))


def _gru_step_with_short_bias():
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    cells.gru_cell(x, h, torch.randn(12, 3), torch.randn(12, 4), torch.randn(12), torch.randn(4))


def _layer(mode="gru"):
    return Recurrent(cells.CELLS[mode](3, 4))


ERRORS = {
    "input of rank 2": (lambda: _layer()(torch.randn(6, 3)), ValueError, r"x must have shape \(B, T, I\)"),
    "input of rank 4": (lambda: RecurrentNetwork("lstm", 3, 4)(torch.randn(2, 6, 1, 3)), ValueError, r"x must"),
    "zero steps": (lambda: _layer()(torch.randn(2, 0, 3)), ValueError, r"T >= 1"),
    "integer inputs": (lambda: _layer()(torch.zeros(2, 6, 3, dtype=torch.int64)), TypeError, r"x must be a float"),
    "length 0": (lambda: _layer()(torch.randn(2, 6, 3), [0, 6]), ValueError, r"lengths must lie in \[1, 6\]"),
    "length > T": (lambda: _layer()(torch.randn(2, 6, 3), [7, 6]), ValueError, r"lengths must lie in \[1, 6\]"),
    "too many lengths": (lambda: _layer()(torch.randn(2, 6, 3), [6, 6, 6]), ValueError, r"lengths must be 2 int"),
    "float lengths": (lambda: _layer()(torch.randn(2, 6, 3), [6.0, 2.0]), ValueError, r"lengths must be 2 int"),
    "bidirectional of rank 2": (lambda: bidirectional(torch.randn(6, 3), None, _layer(), _layer()), ValueError,
                                r"x must be a tensor of shape \(B, T, \.\.\.\)"),
    "bidirectional length 0": (lambda: bidirectional(torch.randn(2, 6, 3), [0, 1], _layer(), _layer()),
                               ValueError, r"lengths must lie"),
    "mode": (lambda: RecurrentNetwork("transformer", 3, 4), ValueError, r"mode must be one of"),
    "load_torch hidden size": (lambda: RecurrentNetwork("gru", 3, 4).load_torch(nn.GRU(3, 5)), ValueError,
                               r"hidden size"),
    "load_torch layers": (lambda: RecurrentNetwork("gru", 3, 4).load_torch(nn.GRU(3, 4, 2)), ValueError,
                          r"number of layers"),
    "load_torch directions": (lambda: RecurrentNetwork("gru", 3, 4).load_torch(nn.GRU(3, 4, bidirectional=True)),
                              ValueError, r"directions"),
    "load_torch no bias": (lambda: RecurrentNetwork("gru", 3, 4).load_torch(nn.GRU(3, 4, bias=False)), ValueError,
                           r"biases"),
    "load_torch other kind": (lambda: RecurrentNetwork("gru", 3, 4).load_torch(nn.LSTM(3, 4)), TypeError,
                              r"copies a torch.nn.GRU, got LSTM"),
    "from_torch relu": (lambda: RecurrentNetwork.from_torch(nn.RNN(3, 4, nonlinearity="relu")), ValueError, r"tanh"),
    "from_torch other module": (lambda: RecurrentNetwork.from_torch(nn.Linear(3, 4)), TypeError, r"got Linear"),
    "cell weight_ih": (_lstm_step_with_wide_weight, ValueError, r"weight_ih must have shape \(4\*H, I\) = \(16, 3\), got \(16, 5\)"),
    "cell bias_hh": (_gru_step_with_short_bias, ValueError, r"bias_hh must have shape \(3\*H,\) = \(12,\), got \(4,\)"),
    "cell state not a pair": (lambda: cells.lstm_cell(torch.randn(2, 3), torch.randn(2, 4), *[None] * 4),
                              TypeError, r"state must be a pair"),
    "cell h batch": (lambda: cells.rnn_cell(torch.randn(2, 3), torch.randn(3, 4), *[None] * 4), ValueError,
                     r"h must have shape \(B, H\) = \(2, \?\), got \(3, 4\)"),
    "cell x not a tensor": (lambda: cells.rnn_cell([[1.0, 2.0]], torch.randn(1, 4), *[None] * 4), TypeError,
                            r"x must be a torch.Tensor"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


LOAD_MISMATCHES = {
    "input size 1": ("gru", lambda: nn.GRU(1, 4)),
    "input size 3": ("gru", lambda: nn.GRU(3, 4)),
    "projections": ("lstm", lambda: nn.LSTM(5, 4, proj_size=1)),
}


@pytest.mark.parametrize("mode, module", list(LOAD_MISMATCHES.values()), ids=list(LOAD_MISMATCHES))
def test_load_torch_rejects_other_input_sizes_and_projections(mode, module):
    with pytest.raises(ValueError, match="input size|projection"):
        RecurrentNetwork(mode, 5, 4).load_torch(module())
