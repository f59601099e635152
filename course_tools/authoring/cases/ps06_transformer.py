"""Hidden cases of ps06_transformer: the Transformer's attention, positions, LayerNorm and block (chapter 6).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np


def _rows_with_a_true(mask):
    """``mask`` (..., Tk) bool with one True (at random) put in each row that has none."""
    rows = mask.reshape(-1, mask.shape[-1])
    empty = ~rows.any(axis=1)
    rows[empty, 0] = True
    return rows.reshape(mask.shape)


def _attention_mask(rng, kind, lead, tq, tk, heads=1):
    """A mask for attention scores (*lead, Tq, Tk) of one kind, in a shape that broadcasts to them.

    ``lead`` is (B, nh, ...) or shorter; ``heads`` the size of the head axis for ALiBi-like biases.
    """
    if kind is None:
        return None
    if kind == "causal":  # (Tq, Tk), the last Tq keys are the queries' own positions
        return np.tril(np.ones((tq, tk), dtype=bool), k=tk - tq)
    if kind == "padding":  # (B, 1, ..., 1, Tk): each sequence's real keys, at least one
        lengths = rng.integers(1, tk + 1, size=lead[0])
        lengths[0] = tk
        padding = np.arange(tk)[None, :] < lengths[:, None]
        return padding.reshape(lead[0], *[1] * (len(lead) - 1), 1, tk)
    if kind == "any":  # every entry drawn, full shape
        return _rows_with_a_true(rng.random((*lead, tq, tk)) < 0.5)
    if kind == "float":  # added to the scores, full shape, a few -inf
        bias = rng.normal(size=(*lead, tq, tk)) * 2
        forbid = _rows_with_a_true(rng.random((*lead, tq, tk)) < 0.7)
        return np.where(forbid, bias, -np.inf)
    if kind == "alibi":  # (nh, Tq, Tk) distance penalties, -inf on the future
        slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
        distance = np.abs(np.arange(tq)[:, None] - np.arange(tk)[None, :])
        bias = -slopes[:, None, None] * distance
        return np.where(np.tril(np.ones((tq, tk), dtype=bool)), bias, -np.inf)
    raise ValueError(kind)


def scaled_dot_product_attention(rng):
    # (leading axes, Tq, Tk, hs, mask): self- and cross-attention (Tq != Tk), every kind of mask
    for lead, tq, tk, hs, kind in [((), 1, 1, 1, None), ((2,), 4, 4, 8, "causal"), ((2, 3), 3, 5, 4, "padding"),
                                   ((3,), 5, 2, 6, "any"), ((2, 2), 4, 6, 8, "float"), ((1, 2, 2), 2, 3, 2, None),
                                   ((2, 4), 5, 5, 16, "alibi"), ((4,), 1, 7, 3, "padding"), ((2, 2), 6, 3, 4, "any")]:
        scale = rng.uniform(0.5, 2.5)
        query, key = rng.normal(size=(*lead, tq, hs)) * scale, rng.normal(size=(*lead, tk, hs)) * scale
        value = rng.normal(size=(*lead, tk, hs))
        mask = _attention_mask(rng, kind, lead, tq, tk, heads=lead[-1] if lead else 1)
        yield (query, key, value) if mask is None else (query, key, value, mask), {}
    query, key, value = (rng.normal(size=(2, 3, n, 8)).astype(np.float32) for n in (4, 5, 5))
    yield (query, key, value, _attention_mask(rng, "padding", (2, 3), 4, 5)), {}  # float32 in, float32 out
    query, key, value = (rng.normal(size=(3, 6, 16)).astype(np.float32) * 1.5 for _ in range(3))
    yield (query, key, value, _attention_mask(rng, "causal", (3,), 6, 6)), {}


def multi_head_attention(rng):
    from course_lib.testing import PlainScaledAttention

    # (B, Tq, Tk, D, nh, mask, self-attention): one head, hs = 1, cross-attention with Tq != Tk
    for b, tq, tk, d, nh, kind, itself in [(1, 1, 1, 2, 1, None, True), (2, 4, 4, 8, 2, "causal", True),
                                          (2, 3, 5, 6, 3, "padding", False), (3, 5, 5, 8, 4, "both", True),
                                          (1, 4, 6, 12, 2, "float", False), (2, 2, 3, 4, 4, None, False),
                                          (2, 6, 6, 6, 2, "alibi", True)]:
        query = rng.normal(size=(b, tq, d))
        key, value = (query.copy(), query.copy()) if itself else (rng.normal(size=(b, tk, d)), rng.normal(size=(b, tk, d)))
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        if kind == "both":  # padding and causality, as a decoder with padded targets
            mask = _attention_mask(rng, "padding", (b, nh), tq, tk) & _attention_mask(rng, "causal", (), tq, tk)
        elif kind == "float":
            mask = _attention_mask(rng, "float", (b, nh), tq, tk)
        elif kind == "alibi":
            mask = _attention_mask(rng, "alibi", (), tq, tk, heads=nh)[None]  # (1, nh, T, T)
        else:
            mask = _attention_mask(rng, kind, (b, nh), tq, tk)
        yield (query, key, value, *weights, nh, mask), {"attention_fn": PlainScaledAttention()}
    for b, tq, tk, d, nh, kind in [(2, 4, 4, 8, 2, "causal"), (3, 3, 5, 12, 3, "padding")]:  # float32 in, float32 out
        query, key, value = (rng.normal(size=(b, n, d)).astype(np.float32) for n in (tq, tk, tk))
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        yield (query, key, value, *(w.astype(np.float32) for w in weights), nh,
               _attention_mask(rng, kind, (b, nh), tq, tk)), {"attention_fn": PlainScaledAttention()}


def sinusoidal_encoding(rng):
    del rng  # the inputs are sizes: no randomness needed
    # (T, D, base): one pair, D not a power of 2, long sequences, other bases; positions in the hundreds,
    # where angles computed in float32 are off by 1e-5
    for steps, width, base in [(1, 2, None), (6, 4, None), (50, 16, None), (9, 6, None), (64, 64, None),
                               (12, 10, 100.0), (30, 8, 1e3), (200, 4, None), (512, 32, None), (1000, 12, None)]:
        yield (steps, width), ({} if base is None else {"base": base})


def rope(rng):
    # (shape (..., T, hs), start, base, dtype): one pair, leading axes, a start, other bases, float32; float32 at
    # positions around 1000, where angles t * theta_i computed in float32 are off by up to 3e-5 radians (the ulp of
    # 1000 is 6e-5) and the result by as much, beyond float32's tolerance (the angles are computed in float64)
    for shape, start, base, dtype in [((1, 2), 0, None, np.float64), ((5, 4), 0, None, np.float64),
                                      ((2, 6, 8), 3, None, np.float64), ((2, 3, 4, 16), 0, None, np.float64),
                                      ((1, 2, 7, 6), 17, 100.0, np.float64), ((3, 10), 0, None, np.float64),
                                      ((2, 5, 8), 0, None, np.float32), ((4, 12), 40, 1e3, np.float64),
                                      ((2, 16, 32), 990, None, np.float32), ((3, 2, 12, 16), 1000, None, np.float32),
                                      ((40, 12), 1003, 1e3, np.float32)]:
        kwargs = {k: v for k, v in (("start", start), ("base", base)) if v}
        yield ((rng.normal(size=shape) * rng.uniform(0.5, 3)).astype(dtype),), kwargs


def layer_norm(rng):
    # (shape (..., D), offset, spread, eps): one vector, D = 1, rows far from 0, spreads near sqrt(eps), float32
    for shape, offset, spread, eps in [((3,), 0.0, 1.0, None), ((4, 5), 0.0, 2.0, None), ((2, 3, 8), 5.0, 1.0, None),
                                       ((2, 2, 2, 6), 0.0, 1.0, 1e-3), ((3, 1), 0.0, 1.0, None),
                                       ((5, 7), 0.0, 1e-3, None), ((4, 6), 1e6, 1.0, None), ((2, 4), -3.0, 0.003, 1e-6),
                                       ((2, 3, 5), -2e6, 0.5, None)]:
        x = offset + rng.normal(size=shape) * spread
        yield (x, rng.normal(size=shape[-1:]) + 1, rng.normal(size=shape[-1:])), ({} if eps is None else {"eps": eps})
    x = rng.normal(size=(3, 5))
    x[1] = 2.5  # a constant row: (x - mu) / sqrt(0 + eps) = 0, the output is the bias
    yield (x, rng.normal(size=5) + 1, rng.normal(size=5)), {}
    x = rng.normal(size=(2, 3, 4)).astype(np.float32) * 3  # float32 in, float32 out
    yield (x, (rng.normal(size=4) + 1).astype(np.float32), rng.normal(size=4).astype(np.float32)), {}
    x = (2.0 + rng.normal(size=(4, 10)) * 0.5).astype(np.float32)
    yield (x, (rng.normal(size=10) + 1).astype(np.float32), rng.normal(size=10).astype(np.float32)), {"eps": 1e-3}


def pre_ln_encoder_block(rng):
    from course_lib.testing import TorchEncoderParts

    # (B, T, D, nh, F, mask): one position, padding, causality, ALiBi-like biases (blocks of PyTorch's parts)
    for b, t, d, nh, ff, kind in [(1, 1, 4, 1, 8, None), (2, 5, 8, 2, 16, "padding"), (3, 4, 6, 3, 12, "causal"),
                                  (2, 6, 8, 4, 32, "alibi"), (4, 3, 4, 2, 4, None), (2, 4, 6, 2, 8, "float")]:
        parts = TorchEncoderParts.random(rng, d, nh, ff)
        x = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)
        if kind == "alibi":
            mask = _attention_mask(rng, "alibi", (), t, t, heads=nh)[None]  # (1, nh, T, T)
        else:
            mask = _attention_mask(rng, kind, (b, nh), t, t)
        yield (parts, x) if kind is None else (parts, x, mask), {}
    for b, t, d, nh, ff, kind in [(2, 5, 8, 2, 16, "padding"), (3, 4, 6, 3, 12, "causal")]:  # float32 in, float32 out
        parts = TorchEncoderParts.random(rng, d, nh, ff)
        parts.layer.float()  # PyTorch's layer in float32
        x = (rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)).astype(np.float32)
        yield (parts, x, _attention_mask(rng, kind, (b, nh), t, t)), {}


GENERATORS = {
    "transformer.scaled_attention.scaled_dot_product_attention": scaled_dot_product_attention,
    "transformer.multi_head.multi_head_attention": multi_head_attention,
    "transformer.positions.sinusoidal_encoding": sinusoidal_encoding,
    "transformer.positions.rope": rope,
    "transformer.layer_norm.layer_norm": layer_norm,
    "transformer.blocks.pre_ln_encoder_block": pre_ln_encoder_block,
}

GRADIENTS = {
    "transformer.scaled_attention.scaled_dot_product_attention": (0, 1, 2),
    "transformer.multi_head.multi_head_attention": (0, 1, 2, 3, 4, 5, 6),  # the inputs and every weight
    "transformer.positions.rope": (0,),
    "transformer.layer_norm.layer_norm": (0, 1, 2),
    "transformer.blocks.pre_ln_encoder_block": (1,),  # x (the parts are PyTorch's)
}

HINTS: dict[str, str] = {
    "transformer.scaled_attention.scaled_dot_product_attention":
        "Divide Q K^T by sqrt(hs), the size of a query, set the scores where a bool mask is False to -inf (a float "
        "mask is added instead) before one softmax over the last axis (the keys), and return (weights @ value, weights).",
    "transformer.multi_head.multi_head_attention":
        "Split in_weight and in_bias into the Q, K, V blocks in that order, give head h the columns h*hs to (h+1)*hs "
        "by a reshape to (B, T, nh, hs) and a transpose to (B, nh, T, hs), call attention_fn once for all heads, and "
        "merge the heads back the same way before out_weight.T and out_bias.",
    "transformer.positions.sinusoidal_encoding":
        "Column 2i holds sin(t w_i) and column 2i+1 holds cos(t w_i), with w_i = base ** (-2i / D) for the pair "
        "index i (not the column index), computed in float64 and returned as float32.",
    "transformer.positions.rope":
        "Rotate the interleaved pairs (x[..., 0::2], x[..., 1::2]) by t * theta_i with t = start + row and "
        "theta_i = base ** (-2i / hs), the angles in float64, and interleave the rotated pairs back (not the first "
        "half with the second).",
    "transformer.layer_norm.layer_norm":
        "Normalise over the last axis only, with the biased variance (the mean of (x - mu) ** 2, not torch.var's "
        "unbiased default) and eps inside the square root, then multiply by weight and add bias.",
    "transformer.blocks.pre_ln_encoder_block":
        "Normalise the input of each sublayer, not its output, and add the sublayer's result to that input: "
        "h = x + self_attention(norm1(x), mask), then h + feed_forward(norm2(h)).",
}

TORCH = {'transformer.scaled_attention.scaled_dot_product_attention',
         'transformer.multi_head.multi_head_attention',
         'transformer.positions.sinusoidal_encoding',
         'transformer.positions.rope',
         'transformer.layer_norm.layer_norm',
         'transformer.blocks.pre_ln_encoder_block'}
