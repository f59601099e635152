"""Chapters 3 and 4: measuring how gradients flow back through time.

For a language model and a batch of sequences, take the loss ``L_T`` of the
prediction made at the last step only, and measure ``||dL_T / dh_t||`` for
every earlier step ``t``. In an Elman RNN the gradient is multiplied by
``diag(1 - h_t^2) U`` at every step back, so its norm shrinks (or grows)
roughly geometrically with the distance ``T - t``; the LSTM's additive cell
state lets it travel further (Hochreiter, 1991; Bengio et al., 1994;
Pascanu et al., 2013). See :doc:`/chapters/ch03_rnn` and :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from course_lib.recurrent.language_model import RecurrentLanguageModel
from course_lib.training import eval_mode


def gradient_norms_through_time(model: RecurrentLanguageModel, ids: torch.Tensor) -> np.ndarray:
    """``||dL_T / dh_t||`` for ``t = 1..T``, where ``L_T`` is the loss of the last prediction. Chapters 3 and 4.

    ``L_T = -(1/B) sum_b log p(x_{b,T+1} | x_{b,1..T})`` is the mean
    cross-entropy of predicting the final token of each row from the ones
    before it; ``h_t`` is the first layer's hidden state after step ``t``
    (the tensor the next step reads, so the gradient includes every path
    through later steps). The norm is taken over the whole ``(B, H)`` gradient,
    in double precision (in float32 the sum of squares of a gradient of size
    1e-22 underflows to 0).

    Args:
        model: a one-layer :class:`~course_lib.recurrent.language_model.RecurrentLanguageModel`.
        ids: ``(B, T + 1)`` int64 token ids: the inputs and, last, the targets.

    Returns:
        ``(T,)`` float64 norms; entry ``t`` is for the state after step ``t + 1``.
    """
    if not isinstance(model, RecurrentLanguageModel) or model.network.num_layers != 1 \
            or model.network.directions != 1:
        raise ValueError("the measurement needs a one-layer, one-direction RecurrentLanguageModel")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[1] < 2 or ids.dtype != torch.int64:
        raise ValueError(f"ids must be a (B, T + 1) int64 tensor with T >= 1, got {getattr(ids, 'shape', ids)}")
    layer = model.network.layers[0][0]
    with eval_mode(model):  # no dropout: measure the network itself
        embedded = model.embedding(ids[:, :-1])  # (B, T, E)
        outputs, _, states = layer.run(embedded)  # (B, T, H), T states of (B, H)
        loss = F.cross_entropy(model.readout(outputs[:, -1]), ids[:, -1])  # L_T
        grads = torch.autograd.grad(loss, states)
    return np.array([g.double().norm().item() for g in grads])  # float64: norms far below 1e-20 stay exact
