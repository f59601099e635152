"""Checks that the assignments' test cells call. Every assignment; shared by all chapters.

Visible tests use :func:`assert_close`, :func:`assert_own_code` and :func:`quiet` on the
student's machine. When a notebook is graded, the grader replays the same calls and the
hidden cases in a sandbox and decides every verdict outside it (``course_tools.grading.autograde``).

Everything here ships in the student edition: it contains no answers.
"""

from __future__ import annotations

import contextlib
import types
import warnings

import numpy as np
import scipy.sparse as sp


@contextlib.contextmanager
def quiet():
    """Silence warnings and numpy floating-point messages inside the block. Every assignment.

    nbgrader gives no points to a test cell that writes to stderr, so test
    cells run the student's code inside ``with quiet():``.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _as_plain(x):
    """Sparse matrices become dense arrays and torch tensors numpy arrays; anything else is returned as is."""
    if sp.issparse(x):
        return x.toarray()
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor, without importing torch here
        return x.detach().cpu().numpy()
    return x


def _shape_of(x) -> str:
    return str(getattr(x, "shape", type(x).__name__))


def assert_close(actual, expected, what: str, hint: str = "", rtol: float = 1e-6,
                 atol: float = 1e-9) -> None:
    """Assert that ``actual`` matches ``expected`` in type, shape and values. Every assignment.

    Works on numbers, numpy arrays and torch tensors of any shape, scipy sparse
    matrices (compared densely) and tuples or lists of these (compared item by item).

    Args:
        actual: what the student's function returned.
        expected: the right answer.
        what: names the value in the failure message, e.g. ``"tfidf(counts)"``.
        hint: a sentence that suggests the likely mistake.
        rtol, atol: tolerances as in ``numpy.allclose``.

    Raises:
        AssertionError: with a message naming ``what``, the mismatch and ``hint``.
    """
    suffix = f" {hint}" if hint else ""
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{what} should return {len(expected)} values, got {type(actual).__name__}"
                                 f" of length {len(actual) if hasattr(actual, '__len__') else 'n/a'}.{suffix}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, f"{what}[{i}]", hint, rtol, atol)
        return
    if actual is None:
        raise AssertionError(f"{what} returned None; did you forget a return statement?{suffix}")
    if sp.issparse(expected) and not sp.issparse(actual):
        raise AssertionError(f"{what} should be a scipy sparse matrix, got {type(actual).__name__}.{suffix}")
    if isinstance(expected, np.ndarray) and sp.issparse(actual):
        raise AssertionError(f"{what} should be a dense numpy array, got a sparse matrix; call .toarray().{suffix}")
    a, e = _as_plain(actual), _as_plain(expected)
    if np.ndim(e) > 0 or isinstance(e, np.ndarray):
        a_arr = np.asarray(a)
        if a_arr.shape != np.shape(e):
            raise AssertionError(f"{what} has shape {a_arr.shape}, expected {np.shape(e)}.{suffix}")
        try:
            a_arr = a_arr.astype(np.float64)
        except (TypeError, ValueError):
            raise AssertionError(f"{what} should be numeric, got dtype {a_arr.dtype}.{suffix}") from None
        e_arr = np.asarray(e, dtype=np.float64)
        close = np.isclose(a_arr, e_arr, rtol=rtol, atol=atol)
        if not close.all():
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            raise AssertionError(
                f"{what} differs from the expected value in {int((~close).sum())} of {close.size} entries; "
                f"first at index {where}: got {a_arr[where]:.6g}, expected {e_arr[where]:.6g}.{suffix}")
        return
    if np.ndim(a) != 0:
        raise AssertionError(f"{what} should be a single number, got shape {np.shape(a)}.{suffix}")
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise AssertionError(f"{what} should be a number, got {type(actual).__name__}.{suffix}") from None
    if not np.isclose(a, float(e), rtol=rtol, atol=atol):
        raise AssertionError(f"{what} is {a:.6g}, expected {float(e):.6g}.{suffix}")


def _names_used(code: types.CodeType) -> set[str]:
    """Global and attribute names a code object uses, including those of nested functions and lambdas."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


_ATTRIBUTE_OPS = {"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR", "IMPORT_NAME", "IMPORT_FROM"}


def _attribute_names(code: types.CodeType) -> set[str]:
    """The names a code object reads as attributes or imports (``F.layer_norm``), nested code included."""
    import dis

    names = {i.argval for i in dis.get_instructions(code) if i.opname in _ATTRIBUTE_OPS}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _attribute_names(const)
    return names


def _library_names(fn, seen: set | None = None) -> set[str]:
    """The names ``fn`` uses, following the helpers defined beside it (same module) into their own code.

    A helper the student wrote counts by what *it* uses, not by its name: a numpy-only
    function named ``cross_entropy`` is fine, a ``torch`` call inside a helper is not.
    A library's attribute keeps counting when a function of the notebook has its name
    (``F.layer_norm`` inside the student's own ``layer_norm``).
    """
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return set()
    seen.add(id(fn))
    names = set()
    module = getattr(fn, "__module__", None)
    attributes = _attribute_names(fn.__code__)
    for name in _names_used(fn.__code__):
        value = getattr(fn, "__globals__", {}).get(name)
        if isinstance(value, types.FunctionType) and value.__module__ == module:
            names |= _library_names(value, seen)  # the student's own helper: look inside
            if name in attributes:
                names.add(name)  # also read from a library under the same name
        else:
            names.add(name)
    return names


def assert_own_code(fn, forbidden, what: str, hint: str = "") -> None:
    """Fail if ``fn`` refers to any of the ``forbidden`` names (e.g. ``torch.lstm_cell``). Chapter 3 on.

    An exercise asks for the computation, not for a call to a library that does
    it: a function that returns ``torch.lstm_cell(...)`` passes every numerical
    test. The check reads the names in the function's compiled code (globals
    and attributes, also in nested functions and lambdas) and in the code of the
    helpers defined in the same notebook that it calls, so local variable names
    and the names of one's own helpers are free. When a notebook is graded, the
    grader judges the library functions the call really reaches instead.

    Args:
        fn: the student's function.
        forbidden: names that must not appear, e.g. ``{"lstm_cell", "LSTMCell"}``.
        what: the function's name for the message.
        hint: what to do instead.

    Raises:
        AssertionError: naming the forbidden names found.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        raise AssertionError(f"{what} must be a function defined in this notebook.")
    used = sorted(_library_names(fn) & set(forbidden))
    if used:
        raise AssertionError(f"{what} uses {', '.join(used)}: write the computation yourself "
                             f"instead of calling a library that does it.{' ' + hint if hint else ''}")


class CumulativeLayer:
    """A tiny recurrent layer for testing :func:`course_lib.recurrent.layers.bidirectional`: ``h_t = h_{t-1} + x_t M``.

    Called as ``layer(x, lengths)`` with ``x`` a ``(B, T, ..., I)`` torch tensor,
    it returns ``(outputs, final)``: outputs ``(B, T, ..., H)`` are zero past
    each length, ``final`` ``(B, ..., H)`` is the state at each sequence's last
    step. The running sum depends on the order of the steps, so a wrong
    reversal shows. Its weights are a numpy array, so test cases that hold it
    can be pickled. Chapter 3 on.

    Args:
        weights: ``(I, H)`` numpy array ``M``.
    """

    def __init__(self, weights):
        self.weights = np.asarray(weights, dtype=np.float64)

    def __call__(self, x, lengths):
        import torch

        projected = x @ torch.from_numpy(self.weights).to(x.dtype)  # (B, T, ..., H)
        steps = torch.arange(x.shape[1], device=x.device)
        alive = (steps[None, :] < torch.as_tensor(lengths)[:, None]).to(x.dtype)  # (B, T)
        alive = alive.view(*alive.shape, *[1] * (x.dim() - 2))
        outputs = torch.cumsum(projected * alive, dim=1) * alive  # (B, T, ..., H)
        last = (torch.as_tensor(lengths) - 1).view(-1, 1, *[1] * (x.dim() - 2))
        final = outputs.gather(1, last.expand(-1, 1, *outputs.shape[2:]).long()).squeeze(1)  # (B, ..., H)
        return outputs, final


class TorchDotAttention:
    """Dot-product attention computed by PyTorch, for testing code that calls an attention. Chapter 5 on.

    Called as ``attention(query, keys, mask)`` with ``query`` ``(B, Tq, H)``, ``keys``
    ``(B, Tk, H)`` and a bool ``mask`` ``(B, Tk)`` (True on real tokens), it returns
    ``(context (B, Tq, H), weights (B, Tq, Tk))`` with ``e_i = q^T k_i``, like
    :func:`course_lib.attention.scores.dot_attention`, but through
    ``torch.nn.functional.scaled_dot_product_attention`` with scale 1: attending to the
    identity matrix as values gives the weights themselves. It holds no parameters, so
    test cases that hold it can be pickled.
    """

    def __call__(self, query, keys, mask):
        import torch
        from torch.nn import functional as F

        identity = torch.eye(keys.shape[1], dtype=query.dtype).expand(keys.shape[0], -1, -1)  # (B, Tk, Tk)
        weights = F.scaled_dot_product_attention(query, keys, identity, attn_mask=mask[:, None, :], scale=1.0)
        return weights @ keys, weights


class PlainScaledAttention:
    """Scaled dot-product attention in plain PyTorch operations, for testing code that calls an attention. Chapter 6 on.

    Called as ``attention(query, key, value, mask)`` with ``query`` ``(..., Tq, hs)``,
    ``key`` and ``value`` ``(..., Tk, hs)`` and ``mask`` ``None``, bool (True where a query
    may attend to a key) or float (added to the scores), broadcastable to ``(..., Tq, Tk)``,
    it returns ``(output (..., Tq, hs), weights (..., Tq, Tk))`` with
    ``weights = softmax(Q K^T / sqrt(hs) + M)``, as
    :func:`course_lib.transformer.scaled_attention.scaled_dot_product_attention` does, but
    written independently of it (and without ``torch.nn.functional.scaled_dot_product_attention``),
    so a test of code that calls an attention does not depend on that exercise. It holds
    no parameters, so test cases that hold it can be pickled.
    """

    def __call__(self, query, key, value, mask=None):
        import torch

        logits = torch.einsum("...qd,...kd->...qk", query, key) * query.shape[-1] ** -0.5  # (..., Tq, Tk)
        if mask is None:
            bias = torch.zeros((), dtype=logits.dtype)
        elif mask.dtype == torch.bool:  # True to attend: 0 there, -inf elsewhere
            bias = torch.zeros(mask.shape, dtype=logits.dtype).masked_fill(mask.logical_not(), -float("inf"))
        else:
            bias = mask.to(logits.dtype)
        weights = (logits + bias).softmax(dim=-1)
        return torch.einsum("...qk,...kd->...qd", weights, value), weights


class PlainCausalAttention:
    """Causal self-attention with a KV cache in plain PyTorch, for a GPT in tests (no exercise inside). Chapter 7 on.

    As :func:`course_lib.gpt.causal_attention.causal_self_attention`: ``x`` ``(B, T, D)``, cache ``(B, nh, P, hs)``.
    With ``prompt_length``: ``ValueError`` on reading more than the prompt without the cache, or 2+ positions with it.
    """

    def __init__(self, prompt_length: int | None = None):
        self.prompt_length = prompt_length

    def __call__(self, x, in_weight, in_bias, out_weight, out_bias, num_heads, cache=None, attention_fn=None):
        import torch
        (b, t, d), p, prompt = x.shape, cache[0].shape[2] if cache else 0, self.prompt_length
        if prompt is not None and (t != 1 if cache else t > prompt):
            raise ValueError(f"read {t} positions {'with' if cache else 'without'} the cache (prompt: {prompt})")
        q, k, v = (z.reshape(b, t, num_heads, -1).transpose(1, 2) for z in (x @ in_weight.T + in_bias).chunk(3, -1))
        if cache:  # the cached positions first: (B, nh, P + T, hs)
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
        heads, _ = PlainScaledAttention()(q, k, v, torch.arange(p + t) <= torch.arange(p, p + t)[:, None])  # causal
        return heads.transpose(1, 2).reshape(b, t, d) @ out_weight.T + out_bias, (k, v)


class TorchEncoderParts:
    """The four parts of a pre-LN encoder block, all of them PyTorch's, for testing a block function. Chapter 6 on.

    Wraps a ``torch.nn.TransformerEncoderLayer`` (``batch_first=True``, dropout 0) and
    exposes what :func:`course_lib.transformer.blocks.pre_ln_encoder_block` uses:
    ``norm1`` and ``norm2`` (the layer's ``nn.LayerNorm``), ``self_attention(x, mask)``
    (its ``nn.MultiheadAttention`` with queries, keys and values all ``x``) and
    ``feed_forward(x)`` (``linear2(relu(linear1(x)))``). ``mask`` follows course_lib's
    convention: ``None``, bool (True to attend) or float (added to the scores),
    broadcastable to ``(B, nh, T, T)``; it is converted to PyTorch's, where a True
    forbids. No course_lib exercise runs inside, so a test of the block does not
    depend on the other parts of an assignment; the block then equals
    ``layer(x, src_mask=...)`` of the same layer with ``norm_first=True``.

    Args:
        layer: the ``nn.TransformerEncoderLayer``, used with its weights as they are.
    """

    def __init__(self, layer):
        self.layer = layer

    @classmethod
    def random(cls, rng, width: int, num_heads: int, ff_size: int, scale: float = 0.5):
        """A float64 layer of width ``D``, ``nh`` heads and feed-forward size ``F``, every weight drawn from ``rng``.

        The weights (the ``(3D, D)`` attention projections, the ``(F, D)`` and ``(D, F)``
        feed-forward maps, the LayerNorms' ``(D,)`` gains and biases...) are normal draws of
        the numpy Generator ``rng`` times ``scale``, the gains around 1.
        """
        import torch
        from torch import nn

        layer = nn.TransformerEncoderLayer(width, num_heads, dim_feedforward=ff_size, dropout=0.0, batch_first=True,
                                           norm_first=True, dtype=torch.float64)
        with torch.no_grad():
            for name, parameter in layer.named_parameters():
                drawn = rng.normal(size=tuple(parameter.shape)) * scale
                if name.startswith("norm") and name.endswith("weight"):
                    drawn = drawn + 1.0  # LayerNorm gains around 1, each its own
                parameter.copy_(torch.from_numpy(drawn))
        return cls(layer)

    @property
    def norm1(self):
        """The LayerNorm before the self-attention, ``(..., D) -> (..., D)``."""
        return self.layer.norm1

    @property
    def norm2(self):
        """The LayerNorm before the feed-forward network, ``(..., D) -> (..., D)``."""
        return self.layer.norm2

    def self_attention(self, x, mask=None):
        """``(B, T, D) -> (B, T, D)``: PyTorch's multi-head attention of ``x`` to itself."""
        import torch

        batch, steps, _ = x.shape
        heads = self.layer.self_attn.num_heads
        torch_mask = None
        if mask is not None:  # (B * nh, T, T), True (or -inf) where a query must not look
            full = torch.as_tensor(mask).expand(batch, heads, steps, steps).reshape(batch * heads, steps, steps)
            torch_mask = full.logical_not() if full.dtype == torch.bool else full.to(x.dtype)
        return self.layer.self_attn(x, x, x, attn_mask=torch_mask, need_weights=False)[0]

    def feed_forward(self, x):
        """``W_2 relu(W_1 x + b_1) + b_2``, ``(..., D) -> (..., D)``."""
        import torch

        return self.layer.linear2(torch.relu(self.layer.linear1(x)))
