"""course_lib.transformer.scaled_attention and course_lib.transformer.multi_head against PyTorch.

``scaled_dot_product_attention`` against ``torch.nn.functional.scaled_dot_product_attention``
(no mask, bool masks, float masks with ``-inf``, masks that broadcast, zero to three
leading axes): outputs directly, weights by attending to identity values, gradients
against torch's and against finite differences (``torch.autograd.gradcheck``, float64).
``MultiHeadAttention`` against ``torch.nn.MultiheadAttention(batch_first=True, dropout=0)``
with weights copied both ways (``load_state_dict``): outputs, head-averaged and per-head
weights, the gradients of the query, key and value inputs and of every weight, for
self- and cross-attention, with key padding, a causal mask and an ALiBi-like float bias.
Tolerances: ``1e-5`` in float32, ``1e-10`` in float64. Then ``attention_mask``,
``split_heads`` / ``merge_heads``, ``parameter_count`` and the argument errors.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_lib.transformer.multi_head import (MultiHeadAttention, attention_mask, merge_heads,
                                                multi_head_attention, parameter_count, split_heads)
from course_lib.transformer.scaled_attention import causal_mask, scaled_dot_product_attention

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float | None = None):
    atol = TOLERANCE.get(expected.dtype, 1e-10) if atol is None else atol
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def randn(*shape, generator, dtype=torch.float64, grad: bool = False):
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype).requires_grad_(grad)


def lengths_mask(lengths, steps: int) -> torch.Tensor:
    """``(B, Tk)`` bool, True on the first ``length`` keys, written out element by element."""
    return torch.tensor([[k < length for k in range(steps)] for length in lengths], dtype=torch.bool)


def identity_values(query, keys: int):
    """Values ``I`` of shape ``(..., Tk, Tk)``: attending to them returns the weights themselves."""
    return torch.eye(keys, dtype=query.dtype).expand(*query.shape[:-2], keys, keys)


# ---------------------------------------------------------------- causal_mask

def test_causal_mask_is_j_at_most_i():
    mask = causal_mask(5)
    assert mask.dtype == torch.bool and mask.shape == (5, 5)
    assert torch.equal(mask, torch.tensor([[j <= i for j in range(5)] for i in range(5)]))
    assert torch.equal(causal_mask(1), torch.ones(1, 1, dtype=torch.bool))


# ---------------------------------------------------------------- scaled_dot_product_attention against torch

def sdpa_case(name: str, dtype, seed: int = 0):
    """``(query, key, value, mask)`` of one named case; the float tensors are leaves with gradients."""
    g = torch.Generator().manual_seed(seed)
    lead, queries, keys, size = {"no leading axes": ((), 4, 4, 6), "three leading axes": ((2, 2, 3), 3, 5, 4),
                                 "one leading axis": ((3,), 4, 5, 6)}.get(name, ((2, 3), 4, 5, 6))
    q = randn(*lead, queries, size, generator=g, dtype=dtype, grad=True)
    k = randn(*lead, keys, size, generator=g, dtype=dtype, grad=True)
    v = randn(*lead, keys, size + 1, generator=g, dtype=dtype, grad=True)  # the values may be wider
    if name in ("no mask", "no leading axes", "three leading axes"):
        mask = None
    elif name == "one leading axis":
        mask = lengths_mask([5, 2, 1], keys)[:, None, :]  # (B, 1, Tk)
    elif name == "bool padding (B, 1, 1, Tk)":
        mask = lengths_mask([5, 1], keys)[:, None, None, :]
    elif name == "bool (Tq, Tk)":
        mask = torch.tensor([[True, False, True, False, False], [False, False, False, False, True],
                             [True, True, True, True, True], [False, True, True, False, False]])
    elif name == "bool full shape":
        mask = torch.rand(2, 3, queries, keys, generator=g) < 0.5
        mask[..., 2] = True  # every query sees at least key 2
    elif name == "float (nh, Tq, Tk)":
        mask = randn(3, queries, keys, generator=g, dtype=dtype) * 2
    elif name == "float with -inf":
        distance = (torch.arange(queries)[:, None] - torch.arange(keys)[None, :]).abs().to(dtype)
        mask = (-0.5 * distance).masked_fill(torch.tensor([[j > i + 1 for j in range(keys)]
                                                           for i in range(queries)]), float("-inf"))
    else:
        raise KeyError(name)
    return q, k, v, mask


SDPA_CASES = ["no mask", "no leading axes", "three leading axes", "one leading axis", "bool padding (B, 1, 1, Tk)",
              "bool (Tq, Tk)", "bool full shape", "float (nh, Tq, Tk)", "float with -inf"]


@DTYPES
@pytest.mark.parametrize("case", SDPA_CASES)
def test_scaled_dot_product_attention_matches_torch(case, dtype):
    q, k, v, mask = sdpa_case(case, dtype)
    given = [t.detach().clone() for t in (q, k, v)] + [None if mask is None else mask.clone()]
    output, weights = scaled_dot_product_attention(q, k, v, mask)
    assert output.shape == (*q.shape[:-1], v.shape[-1]) and weights.shape == (*q.shape[:-1], k.shape[-2])
    assert output.dtype == dtype and weights.dtype == dtype
    assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), f"{case}: output")
    expected_weights = F.scaled_dot_product_attention(q, k, identity_values(q, k.shape[-2]), attn_mask=mask)
    assert_close(weights, expected_weights, f"{case}: weights (torch attending to identity values)")
    if mask is not None and mask.dtype == torch.bool:
        assert torch.all(weights[~mask.expand_as(weights)] == 0), f"{case}: masked keys get a weight of exactly 0"
    for tensor, before in zip((q, k, v, mask), given):
        assert before is None or torch.equal(tensor.detach(), before), "the arguments must not be modified"
    probe = torch.randn(output.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    mine = torch.autograd.grad((output * probe).sum(), (q, k, v))
    theirs = torch.autograd.grad((F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * probe).sum(), (q, k, v))
    for m, t, name in zip(mine, theirs, ("query", "key", "value")):
        assert_close(m, t, f"{case}: gradient w.r.t. {name}")


def test_scaled_dot_product_attention_weights_by_the_formula():
    """``softmax(Q K^T / sqrt(hs))`` written out with Python floats for one query."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (randn(1, 3, 4, generator=g) for _ in range(3))
    output, weights = scaled_dot_product_attention(q, k, v)
    scores = [sum(float(q[0, 1, d]) * float(k[0, j, d]) for d in range(4)) / math.sqrt(4) for j in range(3)]
    exps = [math.exp(s) for s in scores]
    expected = torch.tensor([e / sum(exps) for e in exps], dtype=torch.float64)
    assert_close(weights[0, 1], expected, "weights of query 1 (scale 1/sqrt(hs) = 1/2)")
    assert_close(output[0, 1], expected @ v[0], "output of query 1 = weights @ V")


@pytest.mark.parametrize("case", ["no mask", "bool full shape", "float with -inf", "one leading axis"])
def test_scaled_dot_product_attention_gradcheck(case):
    q, k, v, mask = sdpa_case(case, torch.float64, seed=3)
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask), (q, k, v),
                                    eps=1e-6, atol=1e-7, rtol=1e-5)


# ---------------------------------------------------------------- multi-head attention against torch's

WIDTH, HEADS, BATCH = 8, 2, 3

# (Tq, Tk, key lengths or None, causal, ALiBi-like bias, self-attention: query, key and value one tensor)
MHA_CASES = {
    "self": (5, 5, None, False, False, True),
    "self, padding": (5, 5, [5, 2, 1], False, False, True),
    "self, causal": (5, 5, None, True, False, True),
    "self, padding and causal": (5, 5, [5, 3, 1], True, False, True),
    "self, bias, padding, causal": (5, 5, [5, 3, 2], True, True, True),
    "cross": (3, 6, None, False, False, False),
    "cross, padding": (3, 6, [6, 1, 4], False, False, False),
}


def randomize(module: nn.Module, seed: int) -> nn.Module:
    """Every parameter drawn at random (biases too, unlike the default initialisations), in place."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) / math.sqrt(p.shape[-1] if p.dim() > 1
                                                                                      else 4))
    return module


def copied_pair(direction: str, dtype, seed: int = 0):
    """``(ours, torch's)`` multi-head attention with the same random weights, copied in ``direction``."""
    ours = MultiHeadAttention(WIDTH, HEADS).to(dtype)
    theirs = nn.MultiheadAttention(WIDTH, HEADS, dropout=0.0, batch_first=True, dtype=dtype)
    source, target = (theirs, ours) if direction == "torch to ours" else (ours, theirs)
    randomize(source, seed)
    assert sorted(source.state_dict()) == sorted(target.state_dict())
    target.load_state_dict(source.state_dict())
    return ours, theirs


def mha_inputs(case: str, dtype, seed: int = 4):
    queries, keys, lengths, causal, bias, self_attention = MHA_CASES[case]
    g = torch.Generator().manual_seed(seed)
    query = randn(BATCH, queries, WIDTH, generator=g, dtype=dtype, grad=True)
    key, value = (query, query) if self_attention else (randn(BATCH, keys, WIDTH, generator=g, dtype=dtype, grad=True),
                                                        randn(BATCH, keys, WIDTH, generator=g, dtype=dtype, grad=True))
    padding = None if lengths is None else lengths_mask(lengths, keys)
    distances = (torch.arange(queries)[:, None] - torch.arange(keys)[None, :]).abs().to(dtype)
    float_bias = -torch.tensor([0.5, 0.125], dtype=dtype)[:, None, None] * distances if bias else None  # (nh, Tq, Tk)
    ours_mask = attention_mask(padding, causal=causal, steps=queries,
                               bias=None if float_bias is None else float_bias[None])
    torch_args = {"key_padding_mask": None if padding is None else ~padding}  # torch: True = ignore
    if bias:  # torch takes a float attn_mask of shape (B * nh, Tq, Tk), -inf where forbidden
        forbidden = ~causal_mask(queries) if causal else torch.zeros(queries, keys, dtype=torch.bool)
        torch_args["attn_mask"] = float_bias.masked_fill(forbidden, float("-inf")).repeat(BATCH, 1, 1)
        if padding is not None:  # of the same (float) type as attn_mask, as torch asks
            torch_args["key_padding_mask"] = torch.zeros(padding.shape, dtype=dtype).masked_fill(~padding, -math.inf)
    elif causal:
        torch_args["attn_mask"] = ~causal_mask(queries)  # torch: True = not allowed
    return query, key, value, ours_mask, torch_args, padding


def input_leaves(query, key, value):
    """The distinct input tensors (one in self-attention) and their names."""
    return ([query], ["x"]) if key is query else ([query, key, value], ["query", "key", "value"])


@DTYPES
@pytest.mark.parametrize("direction", ["torch to ours", "ours to torch"])
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multi_head_attention_matches_torch(case, direction, dtype):
    ours, theirs = copied_pair(direction, dtype)
    query, key, value, mask, torch_args, padding = mha_inputs(case, dtype)
    output, weights = ours(query, key, value, mask)
    expected, expected_weights = theirs(query, key, value, need_weights=True, average_attn_weights=False, **torch_args)
    assert output.shape == (BATCH, query.shape[1], WIDTH) and weights.shape == (BATCH, HEADS, query.shape[1],
                                                                                 key.shape[1])
    assert_close(output, expected, f"{case}: output")
    assert_close(weights, expected_weights, f"{case}: per-head weights (average_attn_weights=False)")
    _, averaged = theirs(query, key, value, need_weights=True, average_attn_weights=True, **torch_args)
    assert_close(weights.mean(dim=1), averaged, f"{case}: head-averaged weights")
    fused, _ = theirs(query, key, value, need_weights=False, **torch_args)  # torch's fused SDPA path
    assert_close(output, fused, f"{case}: output against need_weights=False")
    if padding is not None:
        assert torch.all(weights.masked_select(~padding[:, None, None, :]) == 0), "padding keys get weight 0"

    leaves, names = input_leaves(query, key, value)
    g = torch.Generator().manual_seed(5)
    probe = torch.randn(output.shape, generator=g, dtype=torch.float64).to(dtype)
    probe_w = torch.randn(weights.shape, generator=g, dtype=torch.float64).to(dtype)
    params = [ours.in_proj_weight, ours.in_proj_bias, ours.out_proj.weight, ours.out_proj.bias]
    torch_params = [theirs.in_proj_weight, theirs.in_proj_bias, theirs.out_proj.weight, theirs.out_proj.bias]
    mine = torch.autograd.grad((output * probe).sum() + (weights * probe_w).sum(), leaves + params)
    theirs_grads = torch.autograd.grad((expected * probe).sum() + (expected_weights * probe_w).sum(),
                                       leaves + torch_params)
    for m, t, name in zip(mine, theirs_grads, names + ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                       "out_proj.bias"]):
        assert_close(m, t, f"{case}: gradient w.r.t. {name}")


@pytest.mark.parametrize("case", ["self, padding and causal", "cross, padding"])
def test_multi_head_attention_gradcheck(case):
    query, key, value, mask, _, _ = mha_inputs(case, torch.float64, seed=9)
    module = randomize(MultiHeadAttention(WIDTH, HEADS).double(), 10)
    weights = [p.detach().clone().requires_grad_() for p in module.parameters()]
    leaves, _ = input_leaves(query, key, value)

    def fn(*tensors):
        inputs = tensors[:len(leaves)] * (3 if len(leaves) == 1 else 1)
        return multi_head_attention(*inputs, *tensors[len(leaves):], HEADS, mask)

    assert torch.autograd.gradcheck(fn, (*leaves, *weights), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_multi_head_attention_function_with_torch_parameters():
    """The function alone, given ``torch.nn.MultiheadAttention``'s own tensors, with the heads' attention spied on."""
    torch.manual_seed(6)
    theirs = nn.MultiheadAttention(12, 3, batch_first=True, dtype=torch.float64)
    randomize(theirs, 7)
    query, key, value, mask, torch_args, _ = mha_inputs("cross, padding", torch.float64)
    query, key, value = (x.repeat(1, 1, 2)[..., :12] for x in (query, key, value))
    calls = []

    def spy(q, k, v, m):
        calls.append((q.shape, k.shape, v.shape))
        return scaled_dot_product_attention(q, k, v, m)

    output, weights = multi_head_attention(query, key, value, theirs.in_proj_weight, theirs.in_proj_bias,
                                           theirs.out_proj.weight, theirs.out_proj.bias, 3, mask, attention_fn=spy)
    expected, expected_weights = theirs(query, key, value, average_attn_weights=False, **torch_args)
    assert calls == [((BATCH, 3, 3, 4), (BATCH, 3, 6, 4), (BATCH, 3, 6, 4))], "attention_fn gets (B, nh, T, hs) heads"
    assert_close(output, expected, "output with nh = 3, hs = 4")
    assert_close(weights, expected_weights, "weights with nh = 3, hs = 4")


def test_multi_head_attention_module_calls_its_functions():
    calls = {"multi_head_fn": 0, "attention_fn": 0}

    def attention_spy(*args):
        calls["attention_fn"] += 1
        return scaled_dot_product_attention(*args)

    def multi_head_spy(*args, **kwargs):
        calls["multi_head_fn"] += 1
        return multi_head_attention(*args, **kwargs)

    torch.manual_seed(8)
    module = MultiHeadAttention(WIDTH, HEADS, attention_fn=attention_spy, multi_head_fn=multi_head_spy)
    x = torch.randn(2, 3, WIDTH)
    output, weights = module(x, x, x)
    assert calls == {"multi_head_fn": 1, "attention_fn": 1}
    assert output.shape == (2, 3, WIDTH) and weights.shape == (2, HEADS, 3, 3)
    assert {n: tuple(p.shape) for n, p in module.named_parameters()} == {
        "in_proj_weight": (3 * WIDTH, WIDTH), "in_proj_bias": (3 * WIDTH,), "out_proj.weight": (WIDTH, WIDTH),
        "out_proj.bias": (WIDTH,)}


@pytest.mark.parametrize("width, heads", [(8, 2), (12, 3), (64, 4), (512, 8)])
def test_parameter_count_counts_torch_parameters(width, heads):
    torch_count = sum(p.numel() for p in nn.MultiheadAttention(width, heads).parameters())
    assert parameter_count(width, heads) == torch_count
    assert sum(p.numel() for p in MultiHeadAttention(width, heads).parameters()) == torch_count


# ---------------------------------------------------------------- heads and masks

def test_split_heads_takes_consecutive_columns_and_merge_heads_undoes_it():
    x = torch.arange(2 * 3 * 12, dtype=torch.float64).reshape(2, 3, 12)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    for h in range(4):
        assert torch.equal(heads[:, h], x[:, :, 3 * h:3 * h + 3]), f"head {h} takes columns {3 * h}..{3 * h + 2}"
    assert torch.equal(merge_heads(heads), x)


def test_attention_mask_combines_padding_causality_and_bias():
    padding = lengths_mask([3, 1], 3)
    assert attention_mask() is None
    assert torch.equal(attention_mask(padding), padding[:, None, None, :])
    causal = attention_mask(causal=True, steps=3)
    assert causal.shape == (1, 1, 3, 3) and torch.equal(causal[0, 0], causal_mask(3))
    both = attention_mask(padding, causal=True, steps=3)
    expected = torch.tensor([[[[j <= i and j < length for j in range(3)] for i in range(3)]] for length in (3, 1)])
    assert torch.equal(both.expand(2, 1, 3, 3), expected)
    bias = -torch.arange(2 * 3 * 3, dtype=torch.float64).reshape(1, 2, 3, 3)
    with_bias = attention_mask(padding, causal=True, steps=3, bias=bias)
    assert with_bias.shape == (2, 2, 3, 3) and with_bias.dtype == torch.float64
    allowed = expected.expand(2, 2, 3, 3)
    assert torch.equal(with_bias[allowed], bias.expand(2, 2, 3, 3)[allowed])
    assert torch.all(with_bias[~allowed] == float("-inf"))
    assert torch.equal(attention_mask(bias=bias), bias)


# ---------------------------------------------------------------- argument errors

def _t(*shape):
    return torch.randn(*shape)


def _mha(query=(2, 3, 8), key=(2, 4, 8), value=(2, 4, 8), in_weight=(24, 8), in_bias=(24,), out_weight=(8, 8),
         out_bias=(8,), num_heads=2, mask=None):
    return multi_head_attention(_t(*query), _t(*key), _t(*value), _t(*in_weight), _t(*in_bias), _t(*out_weight),
                                _t(*out_bias), num_heads, mask)


ERRORS = {
    "query of rank 1": (lambda: scaled_dot_product_attention(_t(4), _t(3, 4), _t(3, 4)), ValueError,
                        r"query must be a float tensor of shape \(\.\.\., T, hs\), got torch.Size\(\[4\]\)"),
    "integer key": (lambda: scaled_dot_product_attention(_t(2, 4), torch.ones(3, 4, dtype=torch.int64), _t(3, 4)),
                    ValueError, r"key must be a float tensor"),
    "value not a tensor": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 4), [[1.0]]), ValueError,
                           r"value must be a float tensor .* got list"),
    "key of other hs": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 5), _t(3, 5)), ValueError,
                        r"query \(\.\.\., Tq, hs\), key .* must agree, got \(2, 4\), \(3, 5\) and \(3, 5\)"),
    "value of other Tk": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 4), _t(2, 4)), ValueError,
                          r"must agree, got \(2, 4\), \(3, 4\) and \(2, 4\)"),
    "key of other batch": (lambda: scaled_dot_product_attention(_t(2, 2, 4), _t(3, 3, 4), _t(3, 3, 4)), ValueError,
                           r"must agree"),
    "mask of other Tk": (lambda: scaled_dot_product_attention(_t(2, 2, 4), _t(2, 3, 4), _t(2, 3, 4),
                                                              torch.ones(2, 1, 4, dtype=torch.bool)),
                         ValueError, r"mask must broadcast to \(\.\.\., Tq, Tk\) = \(2, 2, 3\), got \(2, 1, 4\)"),
    "mask with more axes": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 4), _t(3, 4),
                                                                 torch.ones(5, 2, 3, dtype=torch.bool)),
                            ValueError, r"mask must broadcast to \(\.\.\., Tq, Tk\) = \(2, 3\), got \(5, 2, 3\)"),
    "mask not a tensor": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 4), _t(3, 4), [[True] * 3] * 2),
                          TypeError, r"mask must be a tensor broadcastable to \(\.\.\., Tq, Tk\)"),
    "mask row with no True": (lambda: scaled_dot_product_attention(_t(2, 4), _t(3, 4), _t(3, 4),
                                                                   torch.tensor([[True, False, False],
                                                                                 [False, False, False]])),
                              ValueError, r"every row needs at least one True"),
    "padding of an empty sentence": (lambda: _mha(mask=attention_mask(lengths_mask([4, 0], 4))), ValueError,
                                     r"every row needs at least one True"),
    "mha query of rank 2": (lambda: _mha(query=(3, 8)), ValueError, r"query must have shape \(B, T, I\)"),
    "mha key of other width": (lambda: _mha(key=(2, 4, 6), value=(2, 4, 6)), ValueError,
                               r"key must have shape \(B, Tk, D\) = \(2, \?, 8\), got \(2, 4, 6\)"),
    "mha key of other batch": (lambda: _mha(key=(1, 4, 8)), ValueError,
                               r"key must have shape \(B, Tk, D\) = \(2, \?, 8\), got \(1, 4, 8\)"),
    "mha value of other Tk": (lambda: _mha(value=(2, 5, 8)), ValueError,
                              r"value must have shape \(B, Tk, D\) = \(2, 4, 8\), got \(2, 5, 8\)"),
    "mha in_weight": (lambda: _mha(in_weight=(8, 8)), ValueError,
                      r"in_weight must have shape \(3D, D\) = \(24, 8\), got \(8, 8\)"),
    "mha in_bias": (lambda: _mha(in_bias=(8,)), ValueError, r"in_bias must have shape \(3D,\) = \(24,\), got \(8,\)"),
    "mha out_weight": (lambda: _mha(out_weight=(8, 24)), ValueError,
                       r"out_weight must have shape \(D, D\) = \(8, 8\), got \(8, 24\)"),
    "mha out_bias": (lambda: _mha(out_bias=(8, 1)), ValueError, r"out_bias must have shape \(D,\) = \(8,\)"),
    "mha heads do not divide D": (lambda: _mha(num_heads=3), ValueError,
                                  r"D = 8 must be a multiple of num_heads = 3"),
    "mha zero heads": (lambda: _mha(num_heads=0), ValueError, r"num_heads must be a positive integer"),
    "mha mask of other Tk": (lambda: _mha(mask=torch.ones(2, 1, 1, 3, dtype=torch.bool)), ValueError,
                             r"mask must broadcast to \(\.\.\., Tq, Tk\) = \(2, 2, 3, 4\), got \(2, 1, 1, 3\)"),
    "module heads do not divide width": (lambda: MultiHeadAttention(10, 4), ValueError,
                                         r"width = 10 must be a multiple of num_heads = 4"),
    "module width 0": (lambda: MultiHeadAttention(0, 1), ValueError, r"width must be a positive integer"),
    "causal mask without steps": (lambda: attention_mask(causal=True), ValueError, r"a causal mask needs steps"),
    "causal_mask of 0 steps": (lambda: causal_mask(0), ValueError, r"steps must be a positive int, got 0"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
