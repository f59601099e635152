"""The LSTM layer the library trains with (course_lib.recurrent.fused_lstm) against the step-by-step layer.

``Recurrent.forward`` runs :func:`lstm_layer` when the cell is the library's own ``lstm_cell``; every other
cell (a student's function among them) is unrolled step by step by ``Recurrent.run``, the layer chapter 4
teaches. The two must be the same function: outputs, final states and the gradients with respect to the
inputs, the initial state and the four weights, with and without lengths, to float64 rounding; and the
hand-written backward pass must pass ``torch.autograd.gradcheck``. (Against ``torch.nn.LSTM``:
tests/test_recurrent.py, whose networks now run this layer.)
"""

from __future__ import annotations

import pytest
import torch

from course_lib.recurrent import cells
from course_lib.recurrent.fused_lstm import lstm_layer
from course_lib.recurrent.layers import Recurrent

pytestmark = pytest.mark.usefixtures("one_thread")

LENGTHS = {"full": None, "ragged": [6, 2, 1, 6, 4], "all short": [3, 2, 1, 3, 2]}


def _layer(inputs=3, hidden=4, seed=0):
    torch.manual_seed(seed)
    return Recurrent(cells.LSTMCell(inputs, hidden)).double()


def _both(layer, x, lengths, state):
    """``(outputs, (h, c))`` of the fused layer and of the step-by-step unrolling, same weights."""
    fused = layer(x, lengths, state)
    outputs, final, _ = layer.run(x, lengths, state)
    return fused, (outputs, final)


@pytest.mark.parametrize("with_state", [False, True], ids=["zero state", "given state"])
@pytest.mark.parametrize("lengths", list(LENGTHS.values()), ids=list(LENGTHS))
def test_fused_layer_is_the_step_by_step_layer_values_and_gradients(lengths, with_state):
    layer = _layer()
    x = torch.randn(5, 6, 3, dtype=torch.float64, requires_grad=True)
    state = tuple(torch.randn(5, 4, dtype=torch.float64, requires_grad=True) for _ in range(2)) if with_state else None
    (out_f, (h_f, c_f)), (out_s, (h_s, c_s)) = _both(layer, x, lengths, state)
    assert out_f.grad_fn.name() == "_LSTMLayerBackward" and out_s.grad_fn.name() != "_LSTMLayerBackward"
    for fused, stepwise in [(out_f, out_s), (h_f, h_s), (c_f, c_s)]:
        torch.testing.assert_close(fused, stepwise, rtol=0, atol=1e-12)
    if lengths is not None:  # zero past each length, and the state held from the last valid step
        for b, n in enumerate(lengths):
            assert torch.all(out_f[b, n:] == 0)
            torch.testing.assert_close(h_f[b], out_f[b, n - 1], rtol=0, atol=0)
    probes = [torch.randn_like(t) for t in (out_f, h_f, c_f)]
    wrt = [x, *layer.parameters()] + (list(state) if with_state else [])

    def grads(outputs):
        return torch.autograd.grad(sum((o * p).sum() for o, p in zip(outputs, probes)), wrt)

    for fused, stepwise, name in zip(grads((out_f, h_f, c_f)), grads((out_s, h_s, c_s)),
                                     ["x", "weight_ih", "weight_hh", "bias_ih", "bias_hh", "h_0", "c_0"]):
        torch.testing.assert_close(fused, stepwise, rtol=1e-10, atol=1e-12, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("lengths", [None, [3, 1, 2]], ids=["full", "ragged"])
def test_hand_written_backward_passes_gradcheck(lengths):
    torch.manual_seed(1)
    x = torch.randn(3, 3, 2, dtype=torch.float64, requires_grad=True)
    weights = [torch.randn(12, 2), torch.randn(12, 3), torch.randn(12), torch.randn(12)]
    weights = [w.double().requires_grad_() for w in weights]
    h0, c0 = (torch.randn(3, 3, dtype=torch.float64, requires_grad=True) for _ in range(2))

    def flat(x, h0, c0, *weights):
        outputs, (h, c) = lstm_layer(x, (h0, c0), *weights, lengths=lengths)
        return torch.cat([outputs.flatten(), h.flatten(), c.flatten()])

    assert torch.autograd.gradcheck(flat, (x, h0, c0, *weights))


def test_a_cell_function_given_to_the_layer_runs_at_every_step():
    """A student's ``lstm_cell`` (here a wrapper that counts its calls) must be what the layer runs."""
    calls = []

    def counted(*args):
        calls.append(1)
        return cells.lstm_cell(*args)

    torch.manual_seed(0)
    reference, custom = Recurrent(cells.LSTMCell(3, 4)), Recurrent(cells.LSTMCell(3, 4, counted))
    custom.load_state_dict(reference.state_dict())
    x = torch.randn(2, 7, 3)
    out_custom, _ = custom(x)
    assert len(calls) == 7 and out_custom.grad_fn.name() != "_LSTMLayerBackward"
    out_reference, _ = reference(x)
    assert len(calls) == 7  # the fused layer does not call the cell function
    torch.testing.assert_close(out_custom, out_reference, rtol=0, atol=1e-6)


ERRORS = {
    "input width": (lambda layer: layer(torch.randn(2, 6, 5, dtype=torch.float64)), ValueError,
                    r"x must have shape \(B, T, I\) = \(\?, \?, 3\), got \(2, 6, 5\)"),
    "state not a pair": (lambda layer: layer(torch.randn(2, 6, 3, dtype=torch.float64),
                                             state=torch.zeros(2, 4, dtype=torch.float64)),
                         TypeError, r"state must be a pair"),
    "h batch": (lambda layer: layer(torch.randn(2, 6, 3, dtype=torch.float64),
                                    state=(torch.zeros(3, 4, dtype=torch.float64),) * 2),
                ValueError, r"h must have shape \(B, H\) = \(2, \?\), got \(3, 4\)"),
    "c shape": (lambda layer: layer(torch.randn(2, 6, 3, dtype=torch.float64),
                                    state=(torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 5, dtype=torch.float64))),
                ValueError, r"c must have shape \(B, H\) = \(2, 4\), got \(2, 5\)"),
    "length 0": (lambda layer: layer(torch.randn(2, 6, 3, dtype=torch.float64), [0, 6]), ValueError,
                 r"lengths must lie in \[1, 6\]"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call(_layer())
