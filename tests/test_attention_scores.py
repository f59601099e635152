"""course_lib.attention.masking and course_lib.attention.scores against references.

``dot_attention`` against ``torch.nn.functional.scaled_dot_product_attention``
with scale 1 (boolean ``attn_mask`` True = attend, broadcast as ``(B, 1, Tk)``),
contexts directly and weights by attending to identity values; ``masked_softmax``
against a Python loop over the rows (softmax over each row's real positions, exact
0 on padding) and its gradient against the softmax Jacobian written by hand;
``general_attention`` and ``additive_attention`` against einsum formulas in float64
(values and gradients); every variant through ``torch.autograd.gradcheck``
(autograd against finite differences). The ``Attention`` module against the
functions called with its parameters, argument errors, and the testing and
plotting helpers of chapter 5.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from course_lib import plotting  # noqa: E402
from course_lib.attention import masking, scores  # noqa: E402
from course_lib.attention.masking import masked_softmax, padding_mask  # noqa: E402
from course_lib.attention.scores import Attention, additive_attention, dot_attention, general_attention  # noqa: E402
from course_lib.testing import TorchDotAttention  # noqa: E402

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])

# (lengths, Tk, Tq): full rows, one real token, mixed lengths, a single query and several
MASKS = {
    "full": ([5, 5, 5], 5, 3),
    "one query": ([4, 1, 2, 4], 4, 1),
    "mixed": ([6, 1, 3, 5], 6, 4),
    "one token": ([1, 1], 3, 2),
}
MASK_CASES = pytest.mark.parametrize("lengths, keys, queries", list(MASKS.values()), ids=list(MASKS))


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float | None = None):
    atol = TOLERANCE.get(expected.dtype, 1e-12) if atol is None else atol
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def mask_of(lengths, steps: int) -> torch.Tensor:
    """The padding mask written out element by element: True on the first ``length`` positions."""
    return torch.tensor([[i < length for i in range(steps)] for length in lengths], dtype=torch.bool)


def loop_softmax(scores_, mask) -> torch.Tensor:
    """The masked softmax one row at a time in Python floats: ``exp(e_i - max) / sum``, 0 on padding."""
    batch, queries, keys = scores_.shape
    out = torch.zeros(batch, queries, keys, dtype=torch.float64)
    for b in range(batch):
        real = [i for i in range(keys) if bool(mask[b, i])]
        for q in range(queries):
            row = [float(scores_[b, q, i]) for i in real]
            top = max(row)
            exps = [math.exp(s - top) for s in row]
            for i, e in zip(real, exps):
                out[b, q, i] = e / sum(exps)
    return out


def softmax_by_formula(scores_, mask) -> torch.Tensor:
    """``exp(e - max_real) * mask / sum``: a second masked softmax, differentiable, without ``-inf``."""
    keep = mask[:, None, :]
    top = torch.where(keep, scores_, torch.finfo(scores_.dtype).min).amax(dim=-1, keepdim=True).detach()
    exps = torch.exp(torch.where(keep, scores_ - top, torch.zeros_like(scores_))) * keep
    return exps / exps.sum(dim=-1, keepdim=True)


def random_inputs(lengths, keys: int, queries: int, hidden: int = 3, dtype=torch.float64, seed: int = 0):
    """``(query (B, Tq, H), keys (B, Tk, H), mask (B, Tk))``, the float tensors leaves that require grad."""
    generator = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    query = torch.randn(batch, queries, hidden, generator=generator, dtype=dtype).requires_grad_()
    key = torch.randn(batch, keys, hidden, generator=generator, dtype=dtype).requires_grad_()
    return query, key, mask_of(lengths, keys)


def sdpa(query, keys, values, mask):
    """PyTorch's scaled dot-product attention with scale 1 and the padding mask broadcast over the queries."""
    attn_mask = None if mask is None else mask[:, None, :]  # (B, 1, Tk): True = attend
    return F.scaled_dot_product_attention(query, keys, values, attn_mask=attn_mask, scale=1.0)


# ---------------------------------------------------------------- padding_mask

def test_padding_mask_against_the_definition():
    lengths = [4, 1, 6, 3]
    mask = padding_mask(torch.tensor(lengths), 6)
    assert mask.dtype == torch.bool and mask.shape == (4, 6)
    assert torch.equal(mask, mask_of(lengths, 6))
    assert torch.equal(padding_mask(lengths, 6), mask), "a list of lengths works as a tensor does"


# ---------------------------------------------------------------- masked_softmax against a loop over the rows

@DTYPES
@MASK_CASES
def test_masked_softmax_matches_a_loop_over_rows(lengths, keys, queries, dtype):
    generator = torch.Generator().manual_seed(1)
    e = (torch.randn(len(lengths), queries, keys, generator=generator, dtype=torch.float64) * 3).to(dtype)
    mask = mask_of(lengths, keys)
    given_scores, given_mask = e.clone(), mask.clone()
    a = masked_softmax(e, mask)
    assert a.shape == e.shape and a.dtype == dtype
    assert_close(a.double(), loop_softmax(e, mask), "masked_softmax against the loop", TOLERANCE[dtype])
    padding = ~mask[:, None, :].expand_as(a)
    assert torch.all(a[padding] == 0), "padding must get a weight of exactly 0"
    assert torch.all(a[~padding] > 0)
    assert_close(a.sum(dim=-1), torch.ones(a.shape[:2], dtype=dtype), "row sums")
    assert torch.equal(e, given_scores) and torch.equal(mask, given_mask), "the arguments must not be modified"


@DTYPES
def test_masked_softmax_of_huge_scores_is_finite_and_exact(dtype):
    e = torch.tensor([[[1e4, -1e4, 1e4 - 1.0, 5.0],
                       [-1e4, -1e4 + 2.0, -1e4 + 1.0, 3e4]],
                      [[-1e4, 1e4, 0.0, -3e4],
                       [2.0, 1.0, 1e4, 1e4]]], dtype=dtype)
    mask = mask_of([3, 2], 4)  # the 3e4 of the first sentence and the 1e4 of the second are padding
    a = masked_softmax(e, mask)
    assert torch.isfinite(a).all(), "huge scores must give finite weights (subtract the largest real score)"
    assert_close(a.double(), loop_softmax(e, mask), "huge scores against the loop", TOLERANCE[dtype])
    expected_first = torch.tensor([1 / (1 + math.exp(-1)), 0.0, math.exp(-1) / (1 + math.exp(-1)), 0.0])
    assert_close(a[0, 0].double(), expected_first.double(), "row [1e4, -1e4, 1e4 - 1 | pad]", 1e-6)
    assert torch.equal(a[1, 0], torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=dtype)), \
        "a score 2e4 above the others takes all the weight"
    assert_close(a[1, 1].double(), torch.tensor([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1)), 0, 0],
                                                dtype=torch.float64), "row with huge padding scores", 1e-6)


def test_masked_softmax_ignores_whatever_the_padding_holds():
    generator = torch.Generator().manual_seed(2)
    e = torch.randn(3, 2, 5, generator=generator, dtype=torch.float64)
    mask = mask_of([2, 5, 3], 5)
    other = e.clone()
    junk = torch.tensor([1e30, -1e30, 7.0, 1e4, -5.0, 0.0, 2e3, -2e3, 9.0, 1.0], dtype=torch.float64)
    other[~mask[:, None, :].expand_as(e)] = junk
    assert torch.equal(masked_softmax(e, mask), masked_softmax(other, mask))


def test_masked_softmax_gradient_is_the_softmax_jacobian():
    """``dL/de_i = a_i (g_i - sum_j a_j g_j)`` on real positions, 0 on padding, ``g = dL/da``."""
    generator = torch.Generator().manual_seed(3)
    e = torch.randn(3, 2, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    mask = mask_of([5, 1, 3], 5)
    a = masked_softmax(e, mask)
    probe = torch.randn(a.shape, generator=generator, dtype=torch.float64)
    (grad,) = torch.autograd.grad((a * probe).sum(), e)
    a = a.detach()
    expected = a * (probe - (a * probe).sum(dim=-1, keepdim=True))
    assert_close(grad, expected, "gradient of masked_softmax")
    assert torch.all(grad[~mask[:, None, :].expand_as(grad)] == 0), "padding gets no gradient"


# ---------------------------------------------------------------- dot_attention against torch's SDPA

@DTYPES
@MASK_CASES
def test_dot_attention_matches_torch_sdpa(lengths, keys, queries, dtype):
    query, key, mask = random_inputs(lengths, keys, queries, hidden=4, dtype=dtype, seed=4)
    given = (query.detach().clone(), key.detach().clone(), mask.clone())
    context, weights = dot_attention(query, key, mask)
    assert context.shape == (len(lengths), queries, 4) and weights.shape == (len(lengths), queries, keys)
    assert context.dtype == dtype and weights.dtype == dtype
    assert_close(context, sdpa(query, key, key, mask), "context against SDPA (the keys are the values)")
    identity = torch.eye(keys, dtype=dtype).expand(len(lengths), -1, -1)
    assert_close(weights, sdpa(query, key, identity, mask), "weights against SDPA with identity values")
    assert torch.all(weights[~mask[:, None, :].expand_as(weights)] == 0), "padding gets weight 0"
    for tensor, before in zip((query, key, mask), given):
        assert torch.equal(tensor, before), "the arguments must not be modified"


@DTYPES
def test_dot_attention_without_padding_matches_sdpa_without_a_mask(dtype):
    query, key, _ = random_inputs([5, 5], 5, 3, hidden=6, dtype=dtype, seed=5)
    context, weights = dot_attention(query, key, torch.ones(2, 5, dtype=torch.bool))
    assert_close(context, sdpa(query, key, key, None), "context, no padding")
    assert_close(weights, sdpa(query, key, torch.eye(5, dtype=dtype).expand(2, -1, -1), None), "weights, no padding")


def test_dot_attention_gradients_match_sdpa():
    query, key, mask = random_inputs([4, 2, 3], 4, 3, hidden=5, seed=6)
    context, _ = dot_attention(query, key, mask)
    probe = torch.randn_like(context)
    mine = torch.autograd.grad((context * probe).sum(), (query, key))
    theirs = torch.autograd.grad((sdpa(query, key, key, mask) * probe).sum(), (query, key))
    for m, t, name in zip(mine, theirs, ("query", "keys")):
        assert_close(m, t, f"gradient w.r.t. {name}")


# ---------------------------------------------------------------- general and additive attention against einsum

def general_by_einsum(query, key, mask, weight):
    e = torch.einsum("bqh,hg,bkg->bqk", query, weight, key)  # q^T W k
    a = softmax_by_formula(e, mask)
    return torch.einsum("bqk,bkh->bqh", a, key), a


def additive_by_einsum(query, key, mask, weight_query, weight_key, v):
    projected_query = torch.einsum("ah,bqh->bqa", weight_query, query)
    projected_key = torch.einsum("ah,bkh->bka", weight_key, key)
    e = torch.einsum("a,bqka->bqk", v, torch.tanh(projected_query[:, :, None, :] + projected_key[:, None, :, :]))
    a = softmax_by_formula(e, mask)
    return torch.einsum("bqk,bkh->bqh", a, key), a


def dot_by_einsum(query, key, mask):
    a = softmax_by_formula(torch.einsum("bqh,bkh->bqk", query, key), mask)
    return torch.einsum("bqk,bkh->bqh", a, key), a


def parameters_of(kind: str, hidden: int, size: int, seed: int) -> list:
    generator = torch.Generator().manual_seed(seed)
    shapes = {"dot": [], "general": [(hidden, hidden)], "additive": [(size, hidden), (size, hidden), (size,)]}[kind]
    return [torch.randn(*s, generator=generator, dtype=torch.float64).requires_grad_() for s in shapes]


FUNCTIONS = {"dot": (dot_attention, dot_by_einsum), "general": (general_attention, general_by_einsum),
             "additive": (additive_attention, additive_by_einsum)}


@MASK_CASES
@pytest.mark.parametrize("kind", list(FUNCTIONS))
def test_attention_matches_einsum_formula_values_and_gradients(kind, lengths, keys, queries):
    query, key, mask = random_inputs(lengths, keys, queries, hidden=4, seed=7)
    params = parameters_of(kind, 4, 3, seed=8)
    given = [t.detach().clone() for t in (query, key, *params)]
    ours, reference = FUNCTIONS[kind]
    context, weights = ours(query, key, mask, *params)
    expected_context, expected_weights = reference(query, key, mask, *params)
    assert context.shape == expected_context.shape and weights.shape == expected_weights.shape
    assert_close(context, expected_context, f"{kind}: context")
    assert_close(weights, expected_weights, f"{kind}: weights")
    assert torch.all(weights[~mask[:, None, :].expand_as(weights)] == 0), f"{kind}: padding gets weight 0"
    assert_close(weights.sum(-1), torch.ones(weights.shape[:2], dtype=torch.float64), f"{kind}: row sums")
    leaves = [query, key, *params]
    names = ["query", "keys", *{"dot": [], "general": ["weight"],
                                "additive": ["weight_query", "weight_key", "v"]}[kind]]
    probe_c, probe_w = torch.randn_like(context), torch.randn_like(weights)
    mine = torch.autograd.grad((context * probe_c).sum() + (weights * probe_w).sum(), leaves)
    theirs = torch.autograd.grad((expected_context * probe_c).sum() + (expected_weights * probe_w).sum(), leaves)
    for m, t, name in zip(mine, theirs, names):
        assert_close(m, t, f"{kind}: gradient w.r.t. {name}")
    for tensor, before in zip(leaves, given):
        assert torch.equal(tensor.detach(), before), f"{kind}: the arguments must not be modified"


def test_additive_attention_with_attention_size_other_than_hidden():
    query, key, mask = random_inputs([3, 1], 3, 2, hidden=4, seed=9)
    params = parameters_of("additive", 4, 7, seed=10)
    for got, expected, name in zip(additive_attention(query, key, mask, *params),
                                   additive_by_einsum(query, key, mask, *params), ("context", "weights")):
        assert_close(got, expected, f"A = 7, H = 4: {name}")


# ---------------------------------------------------------------- autograd against finite differences

@pytest.mark.parametrize("kind", ["masked_softmax", *FUNCTIONS])
def test_gradcheck_against_finite_differences(kind):
    query, key, mask = random_inputs([4, 1, 3], 4, 2, hidden=3, seed=11)
    if kind == "masked_softmax":
        inputs = (torch.randn(3, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(12),
                              requires_grad=True),)
        fn = lambda e: masked_softmax(e, mask)  # noqa: E731
    else:
        inputs = (query, key, *parameters_of(kind, 3, 2, seed=13))
        fn = lambda q, k, *p: FUNCTIONS[kind][0](q, k, mask, *p)  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


# ---------------------------------------------------------------- the Attention module

@pytest.mark.parametrize("kind", list(FUNCTIONS))
def test_attention_module_equals_the_function_with_its_parameters(kind):
    torch.manual_seed(14)
    module = Attention(kind, 4, attention_size=6 if kind == "additive" else None).double()
    query, key, mask = random_inputs([3, 1, 2], 3, 2, hidden=4, seed=15)
    named = dict(module.named_parameters())
    expected_shapes = {"dot": {}, "general": {"weight": (4, 4)},
                       "additive": {"weight_query": (6, 4), "weight_key": (6, 4), "v": (6,)}}[kind]
    assert {n: tuple(p.shape) for n, p in named.items()} == expected_shapes
    params = [named[n] for n in expected_shapes]
    context, weights = module(query, key, mask)
    expected = FUNCTIONS[kind][0](query, key, mask, *params)
    assert_close(context, expected[0], f"Attention({kind!r}) context")
    assert_close(weights, expected[1], f"Attention({kind!r}) weights")
    by_formula = FUNCTIONS[kind][1](query, key, mask, *params)
    assert_close(context, by_formula[0], f"Attention({kind!r}) context against einsum")
    if params:  # the parameters are trained: they get gradients
        context.sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


def test_attention_module_default_attention_size_is_hidden_size():
    module = Attention("additive", 5)
    assert module.weight_query.shape == (5, 5) and module.weight_key.shape == (5, 5) and module.v.shape == (5,)


@pytest.mark.parametrize("kind", list(FUNCTIONS))
def test_attention_module_calls_the_given_attention_fn(kind):
    calls = []

    def spy(query, keys, mask, *params):
        calls.append(params)
        return FUNCTIONS[kind][0](query, keys, mask, *params)

    torch.manual_seed(16)
    module = Attention(kind, 3, attention_fn=spy)
    query, key, mask = random_inputs([2, 3], 3, 1, hidden=3, dtype=torch.float32, seed=17)
    module(query, key, mask)
    assert len(calls) == 1, "the module must call the attention_fn it was given"
    assert [p is q for p, q in zip(calls[0], module.parameters())] == [True] * len(list(module.parameters()))
    assert len(calls[0]) == {"dot": 0, "general": 1, "additive": 3}[kind]


# ---------------------------------------------------------------- testing and plotting helpers

@MASK_CASES
def test_torch_dot_attention_equals_dot_attention(lengths, keys, queries):
    query, key, mask = random_inputs(lengths, keys, queries, hidden=4, seed=18)
    for got, expected, name in zip(TorchDotAttention()(query, key, mask), dot_attention(query, key, mask),
                                   ("context", "weights")):
        assert_close(got, expected, f"TorchDotAttention {name}")


def test_attention_heatmap_draws_one_row_per_output_word():
    weights = masked_softmax(torch.randn(1, 2, 3), torch.ones(1, 3, dtype=torch.bool))[0].numpy()
    ax = plotting.attention_heatmap(weights, ["twenty", "four", "!"], ["vier", "und"], title="t",
                                    source_label="English", output_label="German")
    try:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["twenty", "four", "!"]
        assert [t.get_text() for t in ax.get_yticklabels()] == ["vier", "und"]
        assert ax.get_xlabel() == "English" and ax.get_ylabel() == "German" and ax.get_title() == "t"
        assert ax.images[0].get_array().shape == (2, 3)
    finally:
        plt.close(ax.figure)


def test_attention_heatmap_shape_error():
    with pytest.raises(ValueError, match=r"weights must have shape \(Tq, Tk\) = \(2, 3\), got \(3, 2\)"):
        plotting.attention_heatmap(torch.ones(3, 2).numpy() / 2, ["a", "b", "c"], ["x", "y"])


# ---------------------------------------------------------------- error messages

def _q(b=2, t=1, h=3):
    return torch.randn(b, t, h)


ERRORS = {
    "scores of rank 2": (lambda: masked_softmax(torch.randn(2, 3), torch.ones(2, 3, dtype=torch.bool)),
                         ValueError, r"scores must be a \(B, Tq, Tk\) float tensor, got torch.Size\(\[2, 3\]\)"),
    "integer scores": (lambda: masked_softmax(torch.zeros(2, 1, 3, dtype=torch.int64),
                                              torch.ones(2, 3, dtype=torch.bool)), ValueError, r"float tensor"),
    "scores not a tensor": (lambda: masked_softmax([[[1.0]]], torch.ones(1, 1, dtype=torch.bool)), ValueError,
                            r"scores must be .* got list"),
    "mask of other length": (lambda: masked_softmax(torch.randn(2, 1, 3), torch.ones(2, 4, dtype=torch.bool)),
                             ValueError, r"mask must have shape \(B, Tk\) = \(2, 3\), got \(2, 4\)"),
    "mask of other batch": (lambda: masked_softmax(torch.randn(2, 1, 3), torch.ones(3, 3, dtype=torch.bool)),
                            ValueError, r"mask must have shape \(B, Tk\) = \(2, 3\), got \(3, 3\)"),
    "mask (B, 1, Tk)": (lambda: masked_softmax(torch.randn(2, 1, 3), torch.ones(2, 1, 3, dtype=torch.bool)),
                        ValueError, r"mask must have shape \(B, Tk\)"),
    "float mask": (lambda: masked_softmax(torch.randn(2, 1, 3), torch.ones(2, 3)), TypeError,
                   r"mask must be a bool tensor .* got dtype torch.float32"),
    "integer mask": (lambda: masked_softmax(torch.randn(2, 1, 3), torch.ones(2, 3, dtype=torch.int64)), TypeError,
                     r"mask must be a bool tensor"),
    "mask not a tensor": (lambda: masked_softmax(torch.randn(1, 1, 2), [[True, True]]), TypeError,
                          r"mask must be a torch.Tensor"),
    "mask row without True": (lambda: masked_softmax(torch.randn(3, 2, 4), mask_of([2, 0, 1], 4)), ValueError,
                              r"mask row 1 has no True entry"),
    "padding_mask length 0": (lambda: padding_mask([2, 0], 3), ValueError, r"lengths must lie in \[1, 3\]"),
    "padding_mask length > steps": (lambda: padding_mask([4], 3), ValueError, r"lengths must lie in \[1, 3\]"),
    "padding_mask steps 0": (lambda: padding_mask([1], 0), ValueError, r"steps must be a positive integer"),
    "dot query of rank 2": (lambda: dot_attention(torch.randn(2, 3), torch.randn(2, 4, 3),
                                                  torch.ones(2, 4, dtype=torch.bool)),
                            ValueError, r"query must be a \(B, Tq, H\) tensor"),
    "dot keys of other H": (lambda: dot_attention(_q(), torch.randn(2, 4, 5), torch.ones(2, 4, dtype=torch.bool)),
                            ValueError, r"keys must have shape \(B, Tk, H\) = \(2, \?, 3\), got \(2, 4, 5\)"),
    "dot keys of other batch": (lambda: dot_attention(_q(), torch.randn(1, 4, 3),
                                                      torch.ones(2, 4, dtype=torch.bool)),
                                ValueError, r"keys must have shape \(B, Tk, H\) = \(2, \?, 3\)"),
    "dot mask of other Tk": (lambda: dot_attention(_q(), torch.randn(2, 4, 3), torch.ones(2, 5, dtype=torch.bool)),
                             ValueError, r"mask must have shape \(B, Tk\) = \(2, 4\), got \(2, 5\)"),
    "dot float mask": (lambda: dot_attention(_q(), torch.randn(2, 4, 3), torch.ones(2, 4)), TypeError,
                       r"mask must be a bool tensor"),
    "general weight shape": (lambda: general_attention(_q(), torch.randn(2, 4, 3), torch.ones(2, 4, dtype=torch.bool),
                                                       torch.randn(3, 4)),
                             ValueError, r"weight must have shape \(H, H\) = \(3, 3\), got \(3, 4\)"),
    "general weight not a tensor": (lambda: general_attention(_q(), torch.randn(2, 4, 3),
                                                              torch.ones(2, 4, dtype=torch.bool), [[1.0]]),
                                    TypeError, r"weight must be a torch.Tensor"),
    "additive weight_query": (lambda: additive_attention(_q(), torch.randn(2, 4, 3),
                                                         torch.ones(2, 4, dtype=torch.bool),
                                                         torch.randn(5, 2), torch.randn(5, 3), torch.randn(5)),
                              ValueError, r"weight_query must have shape \(A, H\) = \(\?, 3\), got \(5, 2\)"),
    "additive weight_key": (lambda: additive_attention(_q(), torch.randn(2, 4, 3), torch.ones(2, 4, dtype=torch.bool),
                                                       torch.randn(5, 3), torch.randn(4, 3), torch.randn(5)),
                            ValueError, r"weight_key must have shape \(A, H\) = \(5, 3\), got \(4, 3\)"),
    "additive v": (lambda: additive_attention(_q(), torch.randn(2, 4, 3), torch.ones(2, 4, dtype=torch.bool),
                                              torch.randn(5, 3), torch.randn(5, 3), torch.randn(5, 1)),
                   ValueError, r"v must have shape \(A,\) = \(5,\), got \(5, 1\)"),
    "additive mask row without True": (lambda: additive_attention(_q(), torch.randn(2, 4, 3), mask_of([4, 0], 4),
                                                                  torch.randn(5, 3), torch.randn(5, 3), torch.randn(5)),
                                       ValueError, r"mask row 1 has no True entry"),
    "Attention kind": (lambda: Attention("cosine", 4), ValueError,
                       r"kind must be one of \('additive', 'general', 'dot'\)"),
    "Attention hidden_size": (lambda: Attention("dot", 0), ValueError, r"hidden_size must be a positive integer"),
    "Attention attention_size": (lambda: Attention("additive", 4, attention_size=-2), ValueError,
                                 r"attention_size must be a positive integer"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_check_scores_and_mask_accepts_good_arguments():
    assert masking.check_scores_and_mask(torch.randn(2, 3, 4), mask_of([1, 4], 4)) is None
    assert scores.check_attention_args(_q(2, 1, 3), torch.randn(2, 5, 3), mask_of([5, 2], 5)) == (2, 5, 3)
