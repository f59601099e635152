"""Chapter 3: a character-level language model on the numpy Elman RNN, trained by hand.

Scores for the next token are ``z_t = V h_t + c`` with ``h_t`` from
:func:`course_lib.recurrent.elman.rnn_step`; the loss is the mean cross-entropy of
``softmax(z_t)``. Training uses truncated backpropagation through time
(:func:`course_lib.recurrent.elman.rnn_backward`), global-norm gradient clipping and
Adam. The exercise functions of ps03 are arguments, so an assignment trains with its own.

The parameters are a dict whose keys are the letters of the equations,
``params['E']`` (embeddings), ``params['W']``, ``params['U']``, ``params['b']``
(the RNN) and ``params['V']``, ``params['c']`` (the read-out); their shapes are
written in the library's letters, so ``params['V']`` has shape ``(V, H)`` and
``params['E']`` shape ``(V, E)``. The RNN reads the embeddings: its input size
``I`` is ``E``. See :doc:`/chapters/ch03_rnn`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from course_lib import checks
from course_lib.activations import log_softmax
from course_lib.checks import expect_shape
from course_lib.progress import progress_bar
from course_lib.recurrent.clipping import clip_gradients
from course_lib.recurrent.elman import rnn_backward, rnn_forward, rnn_step
from course_lib.recurrent.perplexity import flatten_positions
from course_lib.training import TrainingHistory, blas_threads

PARAM_NAMES = ("E", "W", "U", "b", "V", "c")
"""The keys of a language model's parameter dict, in the order the trainer clips and updates them."""


def softmax_cross_entropy(logits, targets):
    """The mean cross-entropy of softmax predictions, and its gradient w.r.t. the scores.

    With ``p_n = softmax(z_n)``: ``L = -(1/N) sum_n log p_n[w_n]`` and
    ``dL/dz_n = (p_n - onehot(w_n)) / N``. The log-softmax subtracts the
    largest score first, so no score overflows. Chapter 3.

    Args:
        logits: ``(N, V)`` unnormalized scores ``z_n``.
        targets: ``(N,)`` int ids ``w_n`` in ``[0, V)``.

    Returns:
        ``(loss, dlogits)``: a float and a ``(N, V)`` float64 array.
    """
    if np.ndim(logits) != 2:
        raise ValueError(f"logits must be a 2-D matrix (N, V), got shape {np.shape(logits)}")
    logits, targets = flatten_positions(logits, targets)  # (N, V), (N,), checked
    rows = np.arange(len(targets))
    log_probs = log_softmax(logits, axis=1)  # (N, V)
    loss = -log_probs[rows, targets].mean()
    dlogits = np.exp(log_probs)  # (N, V) p_n
    dlogits[rows, targets] -= 1.0
    return float(loss), dlogits / len(targets)


def init_lm_params(vocab_size, embed_dim, hidden_size, rng):
    """Random initial parameters of an RNN language model. Chapter 3.

    - ``params['E']``, ``(V, E)``: embeddings, standard normal, as ``torch.nn.Embedding``;
    - ``params['W']``, ``(H, E)``, and ``params['V']``, ``(V, H)``: uniform in
      ``+-1/sqrt(fan_in)``, as ``torch.nn.Linear``, so each unit's input starts
      with variance about 1/3;
    - ``params['U']``, ``(H, H)``: a random orthogonal matrix (Saxe et al., 2014). All its
      singular values are 1, so at first the recurrence neither shrinks nor
      blows up the state, and gradients can travel back many steps;
    - ``params['b']``, ``(H,)``, and ``params['c']``, ``(V,)``: zeros.

    Args:
        vocab_size: ``V``.
        embed_dim: ``E``.
        hidden_size: ``H``.
        rng: a ``numpy.random.Generator``.

    Returns:
        dict with the keys of :data:`PARAM_NAMES` and float64 arrays of the shapes above.
    """
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    embed_dim = checks.positive_int(embed_dim, "embed_dim")
    hidden_size = checks.positive_int(hidden_size, "hidden_size")
    checks.generator(rng)
    q, r = np.linalg.qr(rng.standard_normal((hidden_size, hidden_size)))
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)  # makes q uniformly distributed over orthogonal matrices
    return {
        "E": rng.standard_normal((vocab_size, embed_dim)),
        "W": rng.uniform(-1.0, 1.0, (hidden_size, embed_dim)) / math.sqrt(embed_dim),
        "U": q * signs,
        "b": np.zeros(hidden_size),
        "V": rng.uniform(-1.0, 1.0, (vocab_size, hidden_size)) / math.sqrt(hidden_size),
        "c": np.zeros(vocab_size),
    }


def _unpack(params):
    """The six arrays of a parameter dict, in the order of :data:`PARAM_NAMES`."""
    missing = [k for k in PARAM_NAMES if k not in params]
    if missing:
        raise ValueError(f"params is missing {missing}; expected the keys {list(PARAM_NAMES)} of init_lm_params")
    return tuple(params[k] for k in PARAM_NAMES)


def lm_loss_and_grads(params, inputs, targets, h0=None, step_fn: Callable = rnn_step,
                      backward_fn: Callable = rnn_backward):
    """The loss of an RNN language model on a batch of chunks, and its gradients by hand.

    ``x_t = E[w_t]``, ``h_t = tanh(x_t W^T + h_{t-1} U^T + b)``,
    ``z_t = h_t V^T + c``, and ``L = -(1/(B T)) sum_{i,t} log softmax(z_t)[y_t]``
    for the inputs ``w`` and the targets ``y`` (usually the inputs shifted by one).
    Backwards: :func:`softmax_cross_entropy` gives ``dL/dz``, then
    ``dV = sum dz^T h``, ``dc = sum dz``, ``dL/dh_t = dz_t V`` through the outputs,
    ``backward_fn`` (:func:`rnn_backward`) carries it through time, and each
    embedding row ``E[w]`` collects ``dL/dx_t`` of every position where ``w`` was read
    (``np.add.at``, since a token can occur many times in a batch). Chapter 3.

    Args:
        params: dict of :func:`init_lm_params`, with ``params['E']`` of shape ``(V, E)``,
            ``params['W']`` ``(H, E)``, ``params['U']`` ``(H, H)``, ``params['b']`` ``(H,)``,
            ``params['V']`` ``(V, H)`` and ``params['c']`` ``(V,)``.
        inputs: ``(B, T)`` int token ids read.
        targets: ``(B, T)`` int token ids to predict.
        h0: ``(B, H)`` initial states (from the previous chunk), or ``None`` for zeros.
        step_fn, backward_fn: :func:`rnn_step` and :func:`rnn_backward`, or an assignment's own.

    Returns:
        ``(loss, grads, h_last)``: the mean cross-entropy (a float), a dict of
        gradients with the keys and shapes of ``params``, and the ``(B, H)`` last
        hidden states, to start the next chunk from.
    """
    E, W, U, b, V, c = _unpack(params)
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    if inputs.ndim != 2 or inputs.shape != targets.shape:
        raise ValueError(f"inputs and targets must both have shape (B, T), got {inputs.shape} and {targets.shape}")
    checks.token_ids(inputs.ravel(), len(E), "inputs")
    batch, steps = inputs.shape
    vocab_size, hidden = len(E), len(W)
    h0 = np.zeros((batch, hidden)) if h0 is None else expect_shape(h0, "h0", (batch, hidden), "(B, H)")
    xs = E[inputs]  # (B, T, E)
    hs = rnn_forward(xs, h0, W, U, b, step_fn)  # (B, T, H)
    logits = hs @ V.T + c  # (B, T, V)
    loss, dlogits = softmax_cross_entropy(logits.reshape(-1, vocab_size), targets.reshape(-1))  # (B*T, V)
    flat_hs = hs.reshape(-1, hidden)  # (B*T, H)
    dhs = (dlogits @ V).reshape(batch, steps, hidden)  # (B, T, H)
    dxs, _dh0, dW, dU, db = backward_fn(dhs, xs, hs, h0, W, U)  # h0 is a constant: _dh0 stops here
    dE = np.zeros_like(E)  # (V, E)
    np.add.at(dE, inputs, dxs)
    grads = {"E": dE, "W": dW, "U": dU, "b": db, "V": dlogits.T @ flat_hs, "c": dlogits.sum(axis=0)}
    return loss, grads, hs[:, -1]


def train_rnn_lm_numpy(ids, vocab_size, embed_dim: int = 32, hidden_size: int = 128, seq_len: int = 32,
                       batch_size: int = 32, steps: int = 1000, lr: float = 3e-3, max_norm: float = 5.0,
                       seed: int = 0, progress: bool = True, step_fn: Callable = rnn_step,
                       backward_fn: Callable = rnn_backward, clip_fn: Callable = clip_gradients):
    """Train an RNN language model on a stream of token ids with truncated BPTT, clipping and Adam.

    The stream is cut into ``B = batch_size`` parallel streams of equal length,
    stacked as the rows of a ``(B, N // B)`` array. Each step reads the next chunk of
    ``T = seq_len`` columns and predicts each next token (the targets are the
    chunk shifted by one). The hidden state is carried from one chunk to the next
    but the gradient is not (:func:`rnn_backward` treats ``h0`` as a constant);
    when the chunks run out, reading wraps around to the first one with the
    state reset to zeros. Each step:

    1. ``loss, g, h = lm_loss_and_grads(params, chunk, next_chunk, h)``;
    2. ``g, norm = clip_fn(g, max_norm)`` (global-norm clipping, :func:`clip_gradients`);
    3. Adam (Kingma and Ba, 2015) with ``beta1 = 0.9``, ``beta2 = 0.999``, ``eps = 1e-8``:
       ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
       ``theta -= lr m_hat / (sqrt(v_hat) + eps)`` with the bias corrections
       ``m_hat = m / (1 - beta1^k)``, ``v_hat = v / (1 - beta2^k)`` at step ``k``.

    Chapter 3. The exercise functions are arguments, so an assignment trains with its own.

    Args:
        ids: ``(N,)`` int token ids in ``[0, V)``, at least ``batch_size * (seq_len + 1)`` of them.
        vocab_size: ``V``.
        embed_dim, hidden_size: ``E`` and ``H``.
        seq_len: ``T``, the length of a chunk (how far back gradients flow).
        batch_size: ``B``, the number of parallel streams.
        steps: the number of updates.
        lr: Adam's learning rate.
        max_norm: the clipping threshold on the global gradient norm.
        seed: seeds the initialization (the only randomness).
        progress: show a tqdm progress bar.
        step_fn, backward_fn: passed to :func:`lm_loss_and_grads`.
        clip_fn: ``clip_fn(list_of_grads, max_norm) -> (clipped_list, norm)``.

    Returns:
        ``(params, history)``: the trained parameters (see :func:`init_lm_params`) and
        a :class:`~course_lib.training.TrainingHistory` with ``(steps,)`` float64 records ``"loss"``
        (the mean cross-entropy of each step, in nats) and ``"grad_norm"`` (the global gradient
        norm before clipping).
    """
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    ids = checks.token_ids(ids, vocab_size, "ids")
    seq_len = checks.positive_int(seq_len, "seq_len")
    batch_size = checks.positive_int(batch_size, "batch_size")
    steps = checks.positive_int(steps, "steps")
    stream_len = len(ids) // batch_size
    n_chunks = (stream_len - 1) // seq_len
    if n_chunks < 1:
        raise ValueError(f"ids is too short: {len(ids)} tokens, need at least batch_size * (seq_len + 1) = "
                         f"{batch_size * (seq_len + 1)}")
    streams = ids[:batch_size * stream_len].reshape(batch_size, stream_len)  # (B, N // B)
    rng = np.random.default_rng(seed)
    params = init_lm_params(vocab_size, embed_dim, hidden_size, rng)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    m = {k: np.zeros_like(p) for k, p in params.items()}  # first moments
    v = {k: np.zeros_like(p) for k, p in params.items()}  # second moments
    losses, norms = np.empty(steps), np.empty(steps)
    h = None
    # The matrices are small: one BLAS thread is fastest, and several threads that spin while
    # waiting slow the loop down by an order of magnitude when the machine is busy.
    with blas_threads(1), \
            progress_bar(steps, "RNN LM (numpy)", progress) as bar:
        for k in range(steps):
            chunk = k % n_chunks
            if chunk == 0:
                h = None  # back at the beginning of the streams: start from zeros
            start = chunk * seq_len
            inputs = streams[:, start:start + seq_len]  # (B, T)
            targets = streams[:, start + 1:start + seq_len + 1]  # (B, T)
            losses[k], grads, h = lm_loss_and_grads(params, inputs, targets, h, step_fn, backward_fn)
            clipped, norms[k] = clip_fn([grads[name] for name in PARAM_NAMES], max_norm)
            for name, g in zip(PARAM_NAMES, clipped):
                m[name] = beta1 * m[name] + (1 - beta1) * g
                v[name] = beta2 * v[name] + (1 - beta2) * g * g
                m_hat = m[name] / (1 - beta1 ** (k + 1))
                v_hat = v[name] / (1 - beta2 ** (k + 1))
                params[name] -= lr * m_hat / (np.sqrt(v_hat) + eps)
            bar.update(1)
            bar.set_postfix(loss=f"{losses[k]:.3f}", refresh=False)
    return params, TrainingHistory({"loss": losses, "grad_norm": norms})


def lm_next_logits(params, step_fn: Callable = rnn_step):
    """A trained RNN language model as a step function for :func:`course_lib.recurrent.sampling.sample`. Chapter 3.

    The returned ``step(token_id, h)`` reads one token,
    ``h' = step_fn(E[token_id], h, W, U, b)``, and scores the next,
    ``z = V h' + c``.

    Args:
        params: dict of :func:`init_lm_params`, with ``params['E']`` of shape ``(V, E)``,
            ``params['W']`` ``(H, E)``, ``params['U']`` ``(H, H)``, ``params['b']`` ``(H,)``,
            ``params['V']`` ``(V, H)`` and ``params['c']`` ``(V,)``.
        step_fn: the RNN step (:func:`rnn_step`).

    Returns:
        ``step(token_id, h) -> (logits, h')`` with ``h`` and ``h'`` of shape ``(1, H)``
        (``h = None`` means zeros) and ``logits`` of shape ``(V,)``.
    """
    E, W, U, b, V, c = _unpack(params)

    def step(token_id, h):
        if h is None:
            h = np.zeros((1, len(W)))  # (1, H)
        h = step_fn(E[[token_id]], h, W, U, b)  # (1, H)
        return h[0] @ V.T + c, h  # (V,), (1, H)

    return step
