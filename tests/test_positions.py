"""course_lib.transformer.positions and course_lib.transformer.embedding against independent references.

``sinusoidal_encoding`` against a Python loop over ``PE[t, 2i] = sin(t / base^(2i/D))``,
``PE[t, 2i+1] = cos(...)``; ``rope`` against a rotation of complex numbers
(``torch.view_as_complex`` times ``torch.polar``) written here, and the property that
makes it work: the score of a query rotated to ``t`` with a key rotated to ``s`` depends
on ``t - s`` only. ``alibi_slopes`` against the numbers of Press et al. (2022) for 8 heads
(``1/2 .. 1/256``) and their rule for 12 heads (the 8 slopes, then every other slope of 16
heads: ``2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5``), typed in by hand; ``alibi_bias`` against a loop.
Then ``TokenEmbedding`` (``sqrt(D) E[ids]`` plus the positions), ``rotary_for`` inside
multi-head attention, ``self_attention_mask``, and the argument errors.
"""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.transformer.embedding import TokenEmbedding, rotary_for, self_attention_mask
from course_lib.transformer.multi_head import MultiHeadAttention, merge_heads, split_heads
from course_lib.transformer.positions import KINDS, alibi_bias, alibi_slopes, rope, sinusoidal_encoding
from course_lib.transformer.scaled_attention import scaled_dot_product_attention

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float | None = None):
    atol = TOLERANCE.get(expected.dtype, 1e-12) if atol is None else atol
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------- sinusoidal encoding

def sinusoidal_by_loop(steps: int, width: int, base: float) -> torch.Tensor:
    table = torch.zeros(steps, width, dtype=torch.float64)
    for t in range(steps):
        for i in range(width // 2):
            angle = t / base ** (2 * i / width)
            table[t, 2 * i], table[t, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return table


@pytest.mark.parametrize("steps, width, base", [(1, 2, 1e4), (7, 6, 1e4), (50, 16, 1e4), (12, 8, 100.0)])
def test_sinusoidal_encoding_matches_the_formula(steps, width, base):
    table = sinusoidal_encoding(steps, width, base)
    assert table.shape == (steps, width) and table.dtype == torch.float32
    assert_close(table, sinusoidal_by_loop(steps, width, base).float(), "PE against a loop", 1e-6)
    assert torch.equal(table[0], torch.tensor([0.0, 1.0] * (width // 2))), "position 0: sin 0 = 0, cos 0 = 1"


# ---------------------------------------------------------------- RoPE

def rope_by_complex_numbers(x, base: float = 1e4, start: int = 0):
    """Pair ``(x_{2i}, x_{2i+1})`` read as the complex number ``x_{2i} + i x_{2i+1}`` times ``exp(i t theta_i)``."""
    steps, size = x.shape[-2], x.shape[-1]
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], size // 2, 2).contiguous())  # (..., T, hs/2)
    theta = torch.tensor([base ** (-2 * i / size) for i in range(size // 2)], dtype=torch.float64)
    angles = torch.tensor([float(start + t) for t in range(steps)], dtype=torch.float64)[:, None] * theta
    turned = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).reshape(x.shape).to(x.dtype)


@DTYPES
@pytest.mark.parametrize("shape, base, start", [((5, 4), 1e4, 0), ((2, 3, 7, 8), 1e4, 0), ((3, 6, 16), 10.0, 0),
                                                ((2, 2, 4, 6), 1e4, 9)], ids=["(T, hs)", "(B, nh, T, hs)",
                                                                               "base 10", "start 9"])
def test_rope_matches_complex_rotation(shape, base, start, dtype):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    before = x.clone()
    rotated = rope(x, base=base, start=start)
    assert rotated.shape == x.shape and rotated.dtype == dtype
    assert_close(rotated, rope_by_complex_numbers(x, base, start), "RoPE against complex multiplication")
    assert torch.equal(x, before), "x must not be modified"
    assert_close(rotated.norm(dim=-1), x.norm(dim=-1), "rotations keep lengths")
    if start == 0:
        assert_close(rotated[..., 0, :], x[..., 0, :], "position 0 is not rotated")
    assert_close(rope(x, base=base, start=start)[..., 1:, :], rope(x[..., 1:, :], base=base, start=start + 1),
                 "start shifts the positions")


def test_rope_scores_depend_on_the_offset_only():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 8, generator=g, dtype=torch.float64), torch.randn(1, 8, generator=g, dtype=torch.float64)

    def score(t, s):
        return float(rope(q, start=t)[0] @ rope(k, start=s)[0])

    for offset in (0, 1, 3, -2):
        scores = [score(t, t - offset) for t in range(max(offset, 0), max(offset, 0) + 6)]
        assert max(scores) - min(scores) < 1e-12, f"offset {offset}: scores {scores} must be equal"
    assert abs(score(4, 1) - score(1, 4)) > 1e-6, "the score depends on the sign of t - s"
    assert abs(score(0, 0) - float(q[0] @ k[0])) < 1e-12


def test_rope_rotates_each_pair_by_t_theta():
    """One pair at a time: ``(1, 0)`` in pair ``i`` at position ``t`` goes to ``(cos t theta_i, sin t theta_i)``."""
    size, t = 6, 3
    x = torch.zeros(t + 1, size, dtype=torch.float64)
    x[t, 2] = 1.0  # pair i = 1 at position t
    out = rope(x)
    angle = t * 1e4 ** (-2 / size)
    expected = torch.zeros(size, dtype=torch.float64)
    expected[2], expected[3] = math.cos(angle), math.sin(angle)
    assert_close(out[t], expected, "e_2 at t = 3")


# ---------------------------------------------------------------- ALiBi

def test_alibi_slopes_of_8_heads_are_the_papers():
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    slopes = alibi_slopes(8)
    assert slopes.dtype == torch.float32
    assert torch.equal(slopes, expected)


def test_alibi_slopes_of_12_heads_follow_the_papers_rule():
    expected = [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256,
                2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    assert_close(alibi_slopes(12), torch.tensor(expected, dtype=torch.float32), "12 heads", 1e-7)


def test_alibi_slopes_of_other_head_counts():
    assert_close(alibi_slopes(4), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256]), "4 heads: 2^(-8h/4)", 1e-8)
    assert_close(alibi_slopes(1), torch.tensor([1 / 256]), "1 head", 1e-8)
    assert_close(alibi_slopes(3), torch.tensor([1 / 16, 1 / 256, 2 ** -2.0]), "3 heads: 2 heads, then 1 of 4", 1e-8)
    slopes_16 = alibi_slopes(16)
    assert_close(slopes_16, torch.tensor([2 ** (-h / 2) for h in range(1, 17)]), "16 heads", 1e-8)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = alibi_bias(3, 4, 6)
    assert bias.shape == (3, 4, 6)
    slopes = alibi_slopes(3)
    expected = torch.tensor([[[-float(slopes[h]) * abs(t - s) for s in range(6)] for t in range(4)] for h in range(3)])
    assert_close(bias, expected, "ALiBi bias", 1e-7)
    assert alibi_bias(2, 5).shape == (2, 5, 5)


# ---------------------------------------------------------------- embeddings and masks

@pytest.mark.parametrize("kind", KINDS)
def test_token_embedding_adds_the_positions_of_its_kind(kind):
    torch.manual_seed(2)
    width, ids = 6, torch.tensor([[3, 1, 4, 0], [5, 2, 0, 0]])
    module = TokenEmbedding(7, width, kind, max_len=10)
    scaled = module.embedding.weight[ids] * math.sqrt(width)
    if kind == "sinusoidal":
        added = sinusoidal_by_loop(10, width, 1e4).float()
    elif kind == "learned":
        added = module.learned.weight
    else:  # RoPE and ALiBi act inside attention, "none" has no positions
        added = torch.zeros(10, width)
    assert_close(module(ids), scaled + added[:4], f"{kind}: sqrt(D) E[ids] + P[t]")
    assert_close(module(ids[:, 2:], start=2), (scaled + added[:4])[:, 2:], f"{kind}: start = 2")
    assert torch.all(module.embedding.weight[0] == 0), "id 0 is padding"


def test_scaled_token_embeddings_have_the_scale_of_the_positions():
    """``E`` starts with standard deviation ``D^(-1/2)``, so ``sqrt(D) E[ids]`` has unit scale, like ``PE``:
    drawn from N(0, 1) as ``nn.Embedding`` does, ``sqrt(D) E`` would drown the positions (8 times larger at D = 64)."""
    with torch.random.fork_rng():
        torch.manual_seed(4)
        module = TokenEmbedding(2000, 64, "sinusoidal", max_len=16)
    scaled = module.embedding.weight.detach()[1:] * math.sqrt(64)
    assert abs(float(scaled.std()) - 1.0) < 0.02 and abs(float(scaled.mean())) < 0.02
    assert abs(float(module.table.pow(2).mean()) - 0.5) < 0.05, "sines and cosines: mean square 1/2"


def test_token_embedding_uses_the_given_sinusoidal_fn():
    calls = []

    def spy(steps, width):
        calls.append((steps, width))
        return sinusoidal_encoding(steps, width)

    TokenEmbedding(5, 4, "sinusoidal", max_len=9, sinusoidal_fn=spy)
    assert calls == [(9, 4)]


@pytest.mark.parametrize("kind", ["none", "rope"])
def test_rotary_attention_rotates_queries_and_keys_of_every_head(kind):
    torch.manual_seed(3)
    width, heads = 8, 2
    module = MultiHeadAttention(width, heads, rotary=rotary_for(kind))
    assert (module.rotary is None) == (kind == "none")
    x = torch.randn(2, 5, width, dtype=torch.float64)
    module = module.double()
    output, weights = module(x, x, x)
    w_q, w_k, w_v = module.in_proj_weight.split(width)
    b_q, b_k, b_v = module.in_proj_bias.split(width)
    q, k, v = (split_heads(x @ w.T + b, heads) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
    if kind == "rope":
        q, k = rope_by_complex_numbers(q), rope_by_complex_numbers(k)
    heads_out, expected_weights = scaled_dot_product_attention(q, k, v)
    expected = merge_heads(heads_out) @ module.out_proj.weight.T + module.out_proj.bias
    assert_close(output, expected, f"{kind}: output")
    assert_close(weights, expected_weights, f"{kind}: weights")


def test_rotary_for_uses_the_given_rope_fn():
    calls = []
    rotary = rotary_for("rope", lambda x: calls.append(x.shape) or x)
    rotary(torch.zeros(1, 2, 3, 4))
    assert calls == [(1, 2, 3, 4)]
    assert rotary_for("alibi") is None and rotary_for("sinusoidal") is None


def test_self_attention_mask_adds_alibi_bias_for_alibi_only():
    padding = torch.tensor([[True, True, False], [True, True, True]])
    plain = self_attention_mask("sinusoidal", 2, padding, causal=True, steps=3)
    assert plain.dtype == torch.bool and torch.equal(plain.expand(2, 1, 3, 3), torch.tensor(
        [[[[j <= i and j < length for j in range(3)] for i in range(3)]] for length in (2, 3)]))
    alibi = self_attention_mask("alibi", 2, padding, causal=True, steps=3)
    assert alibi.shape == (2, 2, 3, 3) and alibi.is_floating_point()
    allowed = plain.expand(2, 2, 3, 3)
    assert torch.equal(alibi[allowed], alibi_bias(2, 3)[None].expand(2, 2, 3, 3)[allowed])
    assert torch.all(alibi[~allowed] == float("-inf"))
    assert self_attention_mask("rope", 2, steps=3) is None


# ---------------------------------------------------------------- argument errors

ERRORS = {
    "odd width": (lambda: sinusoidal_encoding(4, 5), ValueError, r"width must be even .* got 5"),
    "steps 0": (lambda: sinusoidal_encoding(0, 4), ValueError, r"steps must be a positive integer"),
    "rope odd head size": (lambda: rope(torch.randn(3, 5)), ValueError, r"the head size hs must be even .* got 5"),
    "rope of rank 1": (lambda: rope(torch.randn(4)), ValueError,
                       r"x must be a float tensor of shape \(\.\.\., T, hs\), got torch.Size\(\[4\]\)"),
    "rope of integers": (lambda: rope(torch.ones(2, 4, dtype=torch.int64)), ValueError, r"x must be a float tensor"),
    "rope negative start": (lambda: rope(torch.randn(2, 4), start=-1), ValueError,
                            r"start must be a non-negative integer"),
    "alibi 0 heads": (lambda: alibi_slopes(0), ValueError, r"num_heads must be a positive integer"),
    "unknown positions": (lambda: TokenEmbedding(5, 4, "relative"), ValueError, r"positions must be one of"),
    "too long for max_len": (lambda: TokenEmbedding(5, 4, "learned", max_len=3)(torch.ones(1, 4, dtype=torch.int64)),
                             ValueError, r"a sequence of 4 positions is longer than max_len = 3"),
    "float ids": (lambda: TokenEmbedding(5, 4)(torch.ones(1, 2)), ValueError, r"ids must be a \(B, T\) int64 tensor"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
