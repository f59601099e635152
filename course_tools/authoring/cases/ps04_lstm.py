"""Hidden cases of ps04_lstm: LSTM and GRU cells, bidirectional layers and ELMo's scalar mix (chapter 4).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np


def _gate_weights(rng, gates, inputs, hidden):
    return (rng.normal(size=(gates * hidden, inputs)) * 0.6, rng.normal(size=(gates * hidden, hidden)) * 0.6,
            rng.normal(size=gates * hidden) * 0.3, rng.normal(size=gates * hidden) * 0.3)


def lstm_cell(rng):
    # (B, I, H, dtype): one unit, I below, above and equal to H; float32 in, float32 out
    for b, i, h, dtype in [(1, 1, 1, np.float64), (3, 4, 5, np.float64), (6, 2, 3, np.float64), (2, 7, 4, np.float64),
                           (3, 3, 4, np.float32), (2, 5, 2, np.float32)]:
        state = (np.tanh(rng.normal(size=(b, h))).astype(dtype), rng.normal(size=(b, h)).astype(dtype))
        x, weights = rng.normal(size=(b, i)).astype(dtype), (w.astype(dtype) for w in _gate_weights(rng, 4, i, h))
        yield (x, state, *weights), {}


def gru_cell(rng):
    # (B, I, H, dtype): one unit, I below, above and equal to H; float32 in, float32 out
    for b, i, h, dtype in [(1, 1, 1, np.float64), (3, 4, 5, np.float64), (6, 2, 3, np.float64), (2, 7, 4, np.float64),
                           (3, 3, 4, np.float32), (2, 5, 2, np.float32)]:
        yield tuple(a.astype(dtype) for a in (rng.normal(size=(b, i)), np.tanh(rng.normal(size=(b, h))),
                                              *_gate_weights(rng, 3, i, h))), {}


def bidirectional(rng):
    from course_lib.testing import CumulativeLayer

    # (B, T, extra axes, I, H, dtype): float32 x, which the layers keep in float32
    for b, t, extra, i, h, dtype in [(1, 1, (), 2, 3, np.float64), (3, 5, (), 2, 2, np.float64),
                                     (4, 6, (2,), 3, 2, np.float64), (2, 7, (), 1, 4, np.float64),
                                     (3, 5, (), 2, 3, np.float32), (2, 4, (2,), 3, 2, np.float32)]:
        lengths = rng.integers(1, t + 1, size=b)
        lengths[0] = t  # one sequence fills the batch
        x = rng.normal(size=(b, t, *extra, i)).astype(dtype)
        yield (x, lengths, CumulativeLayer(rng.normal(size=(i, h))), CumulativeLayer(rng.normal(size=(i, h)))), {}


def scalar_mix(rng):
    for layers, shape in [(1, (2,)), (3, (4, 5)), (2, (2, 3, 6)), (4, (1, 1, 3))]:
        yield (rng.normal(size=(layers, *shape)), rng.normal(size=layers) * 2, np.array(rng.uniform(0.2, 3))), {}
    # Weights where exp overflows (above 709.8) or underflows to 0 (below -745) in float64
    yield (rng.normal(size=(3, 2, 4)), np.array([1000.0, 0.0, -1000.0]), np.array([1.5])), {}
    yield (rng.normal(size=(2, 3, 2)), np.array([-1000.0, -1001.5]), np.array(0.7)), {}
    yield (rng.normal(size=(4, 5)), np.array([800.0, 803.0, 790.0, 801.0]), np.array(2.0)), {}
    for layers, shape in [(3, (2, 4)), (2, (3, 2, 2))]:  # float32 in, float32 out
        yield tuple(a.astype(np.float32) for a in (rng.normal(size=(layers, *shape)), rng.normal(size=layers),
                                                   np.array(rng.uniform(0.2, 3)))), {}


GENERATORS = {
    "recurrent.cells.lstm_cell": lstm_cell,
    "recurrent.cells.gru_cell": gru_cell,
    "recurrent.layers.bidirectional": bidirectional,
    "recurrent.elmo.scalar_mix": scalar_mix,
}

GRADIENTS = {
    "recurrent.cells.lstm_cell": (0, 2, 3, 4, 5),  # x and the weights; the state (h, c) is a pair, not a tensor
    "recurrent.cells.gru_cell": (0, 1, 2, 3, 4, 5),
    "recurrent.layers.bidirectional": (0,),
    "recurrent.elmo.scalar_mix": (0, 1, 2),
}

HINTS: dict[str, str] = {
    "recurrent.cells.lstm_cell":
        "The four blocks come in the order i, f, g, o with both biases added, h' = o * tanh(c'), and "
        "only torch operations (no numpy, no in-place updates) let the gradients flow.",
    "recurrent.cells.gru_cell":
        "The reset gate multiplies h W_hn^T + b_hn, after its bias, and h' = (1 - z) * n + z * h, "
        "with the blocks in the order r, z, n.",
    "recurrent.layers.bidirectional":
        "Reverse each sequence within its own length (its padding stays at the end), and reverse the "
        "backward outputs again before concatenating [forward; backward].",
    "recurrent.elmo.scalar_mix":
        "Use torch.softmax (exp of weights of +-1000 overflows) and keep gamma a tensor, so that "
        "gradients reach the weights, gamma and the layers.",
}

TORCH = {'recurrent.cells.lstm_cell',
         'recurrent.cells.gru_cell',
         'recurrent.layers.bidirectional',
         'recurrent.elmo.scalar_mix'}
