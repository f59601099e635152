"""course_lib.transfer.grouped_query_attention against chapter 7, torch and transformers.

``grouped_query_attention`` with ``n_kv = nh`` against chapter 7's ``causal_self_attention`` (same
weights, with and without a cache); with any ``n_kv`` against torch's
``scaled_dot_product_attention(..., is_causal=True, enable_gqa=True)``, against the keys and values
repeated per group by ``transformers``' ``repeat_kv`` and fed to plain causal attention, against
chapter 7's layer whose key and value weights repeat each key-value head ``g`` times, and against
``transformers``' ``LlamaAttention`` (biases on, rotation turned off with ``cos = 1``, ``sin = 0``;
built from a config, nothing downloaded); a prompt then one position at a time with the cache
against the full pass; gradients; the module; ``mean_pooled_heads`` (GQA's conversion of a
multi-head checkpoint) against averages by a loop and exactly when the heads of a group agree;
``kv_cache_bytes`` against hand numbers, the caches the layer returns and a tiny Llama's
``DynamicCache``; argument errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from course_lib.gpt.causal_attention import CausalSelfAttention, causal_self_attention
from course_lib.transfer.grouped_query_attention import (GroupedQueryAttention, grouped_query_attention,
                                                         kv_cache_bytes, mean_pooled_heads)
from course_lib.training import torch_seed
from course_lib.transformer.multi_head import merge_heads, split_heads
from course_lib.transformer.scaled_attention import scaled_dot_product_attention
from torch_helpers import perturb, randn

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from transformers.models.llama.modeling_llama import LlamaAttention, repeat_kv  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one torch thread (conftest.py)

WIDTH, HEADS, BATCH, STEPS = 16, 4, 2, 7
SIZE = WIDTH // HEADS
KV_HEADS = pytest.mark.parametrize("kv_heads", [1, 2, 4], ids=["multi-query", "grouped", "multi-head"])


def assert_close(actual, expected, what: str, atol: float = 1e-12):
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def weights(kv_heads: int, seed: int = 0, dtype=torch.float64):
    """``(in_weight, in_bias, out_weight, out_bias)`` of a layer with ``kv_heads`` key-value heads."""
    rows = WIDTH + 2 * kv_heads * SIZE
    return (randn(rows, WIDTH, seed=seed, dtype=dtype) / 4, randn(rows, seed=seed + 1, dtype=dtype) / 4,
            randn(WIDTH, WIDTH, seed=seed + 2, dtype=dtype) / 4, randn(WIDTH, seed=seed + 3, dtype=dtype) / 4)


def projections(x, params, kv_heads: int):
    """``q (B, nh, T, hs)``, ``k``, ``v (B, n_kv, T, hs)``, computed here from the weights."""
    in_weight, in_bias = params[:2]
    w_q, w_k, w_v = in_weight.split([WIDTH, kv_heads * SIZE, kv_heads * SIZE])
    b_q, b_k, b_v = in_bias.split([WIDTH, kv_heads * SIZE, kv_heads * SIZE])
    return (split_heads(F.linear(x, w_q, b_q), HEADS), split_heads(F.linear(x, w_k, b_k), kv_heads),
            split_heads(F.linear(x, w_v, b_v), kv_heads))


def test_with_as_many_key_value_heads_as_query_heads_it_is_chapter_7s_attention():
    x, params = randn(BATCH, STEPS, WIDTH, seed=5), weights(HEADS)
    ours, (keys, values) = grouped_query_attention(x, *params, HEADS, HEADS)
    theirs, (their_keys, their_values) = causal_self_attention(x, *params, HEADS)
    assert_close(ours, theirs, "output")
    assert_close(keys, their_keys, "keys")
    assert_close(values, their_values, "values")
    cache = (randn(BATCH, HEADS, 3, SIZE, seed=6), randn(BATCH, HEADS, 3, SIZE, seed=7))
    assert_close(grouped_query_attention(x, *params, HEADS, HEADS, cache)[0],
                 causal_self_attention(x, *params, HEADS, cache)[0], "output after a cache")


@KV_HEADS
def test_equals_torch_sdpa_with_enable_gqa_and_the_keys_and_values_repeated_per_group(kv_heads):
    x, params = randn(BATCH, STEPS, WIDTH, seed=kv_heads), weights(kv_heads, seed=10 * kv_heads)
    out_weight, out_bias = params[2:]
    ours, (keys, values) = grouped_query_attention(x, *params, HEADS, kv_heads)
    q, k, v = projections(x, params, kv_heads)
    assert keys.shape == values.shape == (BATCH, kv_heads, STEPS, SIZE)
    assert_close(keys, k, "keys")
    assert_close(values, v, "values")
    torch_gqa = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, nh, T, hs)
    assert_close(ours, F.linear(merge_heads(torch_gqa), out_weight, out_bias), "against enable_gqa")
    group = HEADS // kv_heads
    repeated = F.scaled_dot_product_attention(q, repeat_kv(k, group), repeat_kv(v, group), is_causal=True)
    assert_close(ours, F.linear(merge_heads(repeated), out_weight, out_bias), "against repeat_kv")
    # Chapter 7's layer whose key and value weights repeat key-value head j for query heads j*g .. j*g + g - 1.
    in_weight, in_bias = params[:2]
    w_q, w_k, w_v = in_weight.split([WIDTH, kv_heads * SIZE, kv_heads * SIZE])
    b_q, b_k, b_v = in_bias.split([WIDTH, kv_heads * SIZE, kv_heads * SIZE])
    per_group = (lambda w: w.reshape(kv_heads, SIZE, -1).repeat_interleave(group, dim=0).reshape(WIDTH, -1))
    full_weight = torch.cat([w_q, per_group(w_k), per_group(w_v)])
    full_bias = torch.cat([b_q, per_group(b_k[:, None])[:, 0], per_group(b_v[:, None])[:, 0]])
    assert_close(ours, causal_self_attention(x, full_weight, full_bias, out_weight, out_bias, HEADS)[0],
                 "against chapter 7 with repeated key-value weights")


@KV_HEADS
def test_equals_transformers_llama_attention_without_rotation(kv_heads):
    config = transformers.LlamaConfig(hidden_size=WIDTH, num_attention_heads=HEADS, num_key_value_heads=kv_heads,
                                      attention_bias=True, intermediate_size=32, num_hidden_layers=1,
                                      vocab_size=11)
    config._attn_implementation = "eager"
    llama = LlamaAttention(config, layer_idx=0).to(torch.float64)
    perturb(llama, seed=kv_heads, scale=0.3)
    in_weight = torch.cat([llama.q_proj.weight, llama.k_proj.weight, llama.v_proj.weight]).detach()
    in_bias = torch.cat([llama.q_proj.bias, llama.k_proj.bias, llama.v_proj.bias]).detach()
    x = randn(BATCH, STEPS, WIDTH, seed=3)
    ones, zeros = torch.ones(BATCH, STEPS, SIZE, dtype=torch.float64), torch.zeros(BATCH, STEPS, SIZE,
                                                                                   dtype=torch.float64)
    future = torch.ones(STEPS, STEPS, dtype=torch.bool).triu(1)
    additive = torch.zeros(STEPS, STEPS, dtype=torch.float64).masked_fill(future, float("-inf"))[None, None]
    with torch.no_grad():
        theirs, _ = llama(x, position_embeddings=(ones, zeros), attention_mask=additive)
    ours, _ = grouped_query_attention(x, in_weight, in_bias, llama.o_proj.weight.detach(),
                                      llama.o_proj.bias.detach(), HEADS, kv_heads)
    assert_close(ours, theirs, "against LlamaAttention", atol=1e-6)  # Llama's eager softmax runs in float32


@KV_HEADS
@pytest.mark.parametrize("chunks", [[3, 1, 1, 1, 1], [1] * 7, [2, 5]], ids=["prompt then steps", "steps", "chunks"])
def test_with_a_cache_a_prompt_then_steps_equal_the_full_pass(kv_heads, chunks):
    x, params = randn(BATCH, STEPS, WIDTH, seed=20), weights(kv_heads, seed=21)
    full, (full_keys, full_values) = grouped_query_attention(x, *params, HEADS, kv_heads)
    outputs, cache, start = [], None, 0
    for size in chunks:
        before = None if cache is None else [t.clone() for t in cache]
        output, new_cache = grouped_query_attention(x[:, start:start + size], *params, HEADS, kv_heads, cache)
        if cache is not None:
            assert all(torch.equal(a, b) for a, b in zip(cache, before)), "the cache passed in is not modified"
        assert new_cache[0].shape == (BATCH, kv_heads, start + size, SIZE)
        outputs.append(output)
        cache, start = new_cache, start + size
    assert_close(torch.cat(outputs, dim=1), full, "outputs")
    assert_close(cache[0], full_keys, "cached keys")
    assert_close(cache[1], full_values, "cached values")


def test_attention_fn_gets_n_kv_heads_of_stacked_queries_and_the_keys_uncopied():
    seen = []

    def recording(q, k, v, mask):
        seen.append((tuple(q.shape), tuple(k.shape), tuple(mask.shape)))
        return scaled_dot_product_attention(q, k, v, mask)

    x, params = randn(BATCH, 3, WIDTH, seed=70), weights(2, seed=71)
    cache = (randn(BATCH, 2, 4, SIZE, seed=72), randn(BATCH, 2, 4, SIZE, seed=73))
    grouped_query_attention(x, *params, HEADS, 2, cache, attention_fn=recording)
    with torch_seed(0):
        layer = GroupedQueryAttention(WIDTH, HEADS, 1, attention_fn=recording)
    layer(x.float())
    assert seen == [((BATCH, 2, 2 * 3, SIZE), (BATCH, 2, 4 + 3, SIZE), (2 * 3, 4 + 3)),  # g = 2 heads of 3 queries
                    ((BATCH, 1, HEADS * 3, SIZE), (BATCH, 1, 3, SIZE), (HEADS * 3, 3))]


def test_gradients_flow_to_every_weight_and_a_later_position_changes_no_earlier_output():
    params = [p.requires_grad_() for p in weights(2, seed=30)]
    x = randn(1, 5, WIDTH, seed=31, grad=True)
    assert torch.autograd.gradcheck(lambda x, *p: grouped_query_attention(x, *p, HEADS, 2)[0], (x, *params))
    later = x.detach().clone()
    later[0, 3] += 1.0
    moved = (grouped_query_attention(later, *params, HEADS, 2)[0] - grouped_query_attention(x, *params, HEADS, 2)[0])
    assert moved[0, :3].abs().max() == 0 and moved[0, 3:].abs().max() > 1e-3


def test_the_module_loads_chapter_7s_weights_and_computes_the_same():
    with torch_seed(0):
        gqa, mha = perturb(GroupedQueryAttention(WIDTH, HEADS, HEADS), seed=1), CausalSelfAttention(WIDTH, HEADS)
        small = GroupedQueryAttention(WIDTH, HEADS, 1)
    mha.load_state_dict(gqa.state_dict())  # the same parameter names and shapes (chapter 7's are left unset)
    x = randn(BATCH, STEPS, WIDTH, seed=2, dtype=torch.float32)
    assert_close(gqa(x)[0], mha(x)[0], "output", atol=1e-6)
    assert small.in_proj_weight.shape == (WIDTH + 2 * SIZE, WIDTH) and small(x)[1][0].shape == (BATCH, 1, STEPS, SIZE)
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in mha.parameters())


@KV_HEADS
def test_mean_pooled_heads_averages_each_group_and_is_exact_when_a_groups_heads_agree(kv_heads):
    in_weight, in_bias, out_weight, out_bias = weights(HEADS, seed=40)
    pooled_weight, pooled_bias = mean_pooled_heads(in_weight, in_bias, HEADS, kv_heads)
    group = HEADS // kv_heads
    for block in (1, 2):  # keys, values
        heads = in_weight[block * WIDTH:(block + 1) * WIDTH].reshape(HEADS, SIZE, WIDTH)
        biases = in_bias[block * WIDTH:(block + 1) * WIDTH].reshape(HEADS, SIZE)
        for j in range(kv_heads):
            rows = slice(WIDTH + (block - 1) * kv_heads * SIZE + j * SIZE, WIDTH + (block - 1) * kv_heads * SIZE
                         + (j + 1) * SIZE)
            assert_close(pooled_weight[rows], sum(heads[j * group + i] for i in range(group)) / group, "weights")
            assert_close(pooled_bias[rows], sum(biases[j * group + i] for i in range(group)) / group, "biases")
    assert torch.equal(pooled_weight[:WIDTH], in_weight[:WIDTH]) and torch.equal(pooled_bias[:WIDTH], in_bias[:WIDTH])
    # A multi-head layer whose heads repeat within each group loses nothing.
    same = in_weight.clone()
    for block in (1, 2):
        heads = same[block * WIDTH:(block + 1) * WIDTH].view(kv_heads, group, SIZE, WIDTH)
        heads[:] = heads[:, :1]
    same_bias = in_bias.clone()
    for block in (1, 2):
        biases = same_bias[block * WIDTH:(block + 1) * WIDTH].view(kv_heads, group, SIZE)
        biases[:] = biases[:, :1]
    x = randn(BATCH, STEPS, WIDTH, seed=41)
    assert_close(grouped_query_attention(x, *mean_pooled_heads(same, same_bias, HEADS, kv_heads), out_weight,
                                         out_bias, HEADS, kv_heads)[0],
                 causal_self_attention(x, same, same_bias, out_weight, out_bias, HEADS)[0], "converted layer")


def test_kv_cache_bytes_by_hand_and_against_the_caches():
    assert kv_cache_bytes(80, 8, 128, 4096) == 1_342_177_280  # Llama 2 70B, one sequence of 4096, 16-bit
    assert kv_cache_bytes(80, 64, 128, 4096) == 8 * kv_cache_bytes(80, 8, 128, 4096)
    assert kv_cache_bytes(12, 12, 64, 1024, batch=1, bytes_per_number=4) == 2 * 12 * 1024 * 768 * 4  # GPT-2 small
    assert kv_cache_bytes(2, 3, 4, 0) == 0
    for kv_heads in (1, 2, 4):  # our layers' caches, two layers of float64
        params, x, total = weights(kv_heads, seed=50), randn(BATCH, STEPS, WIDTH, seed=51), 0
        for _layer in range(2):
            x, (keys, values) = grouped_query_attention(x, *params, HEADS, kv_heads)
            total += keys.nbytes + values.nbytes
        assert total == kv_cache_bytes(2, kv_heads, SIZE, STEPS, BATCH, bytes_per_number=8)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_kv_cache_bytes_equals_a_tiny_llamas_cache(kv_heads):
    config = transformers.LlamaConfig(vocab_size=32, hidden_size=WIDTH, intermediate_size=32, num_hidden_layers=3,
                                      num_attention_heads=HEADS, num_key_value_heads=kv_heads)
    with torch.no_grad():
        cache = transformers.LlamaForCausalLM(config).eval()(torch.zeros(3, 5, dtype=torch.int64),
                                                             use_cache=True).past_key_values
    assert sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers) == \
        kv_cache_bytes(3, kv_heads, SIZE, positions=5, batch=3, bytes_per_number=4)


def _call(x=(2, 3, 16), in_weight=(32, 16), in_bias=(32,), out_weight=(16, 16), out_bias=(16,), num_heads=4,
          num_kv_heads=2, cache=None):
    make = (lambda s: torch.zeros(s) if isinstance(s, tuple) else s)
    return grouped_query_attention(make(x), make(in_weight), make(in_bias), make(out_weight), make(out_bias),
                                   num_heads, num_kv_heads, cache)


ERRORS = {
    "groups of unequal size": (lambda: _call(num_kv_heads=3), ValueError,
                               r"num_heads = 4 must be a multiple of num_kv_heads = 3"),
    "more key-value heads": (lambda: _call(num_kv_heads=8), ValueError, r"must be a multiple of num_kv_heads = 8"),
    "no key-value heads": (lambda: _call(num_kv_heads=0), ValueError, r"num_kv_heads must be a positive integer"),
    "heads do not divide D": (lambda: _call(num_heads=3), ValueError, r"D = 16 must be a multiple of num_heads = 3"),
    "multi-head weights": (lambda: _call(in_weight=(48, 16)), ValueError,
                           r"in_weight must have shape \(D \+ 2 n_kv hs, D\) = \(32, 16\), got \(48, 16\)"),
    "in_bias": (lambda: _call(in_bias=(48,)), ValueError, r"in_bias must have shape \(D \+ 2 n_kv hs,\) = \(32,\)"),
    "out_weight": (lambda: _call(out_weight=(16, 8)), ValueError, r"out_weight must have shape \(D, D\)"),
    "x of ids": (lambda: _call(x=torch.zeros(2, 3, 16, dtype=torch.int64)), TypeError, r"x must be a float"),
    "x of rank 2": (lambda: _call(x=(3, 16)), ValueError, r"x must have shape \(B, T, I\)"),
    "cache with nh heads": (lambda: _call(cache=(torch.zeros(2, 4, 1, 4),) * 2), ValueError,
                            r"cache keys must have shape \(B, n_kv, P, hs\) = \(2, 2, \?, 4\), got \(2, 4, 1, 4\)"),
    "cache values of other length": (lambda: _call(cache=(torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 2, 4))),
                                     ValueError, r"cache values must have shape \(B, n_kv, P, hs\) = \(2, 2, 3, 4\)"),
    "cache not a pair": (lambda: _call(cache=torch.zeros(2, 2, 1, 4)), TypeError, r"cache must be None or a pair"),
    "module groups": (lambda: GroupedQueryAttention(16, 4, 3), ValueError, r"a multiple of num_kv_heads = 3"),
    "pooling to unequal groups": (lambda: mean_pooled_heads(torch.zeros(48, 16), torch.zeros(48), 4, 3), ValueError,
                                  r"num_heads a multiple of num_kv_heads = 3"),
    "pooling grouped weights": (lambda: mean_pooled_heads(torch.zeros(32, 16), torch.zeros(32), 4, 2), ValueError,
                                r"in_weight must have shape \(3D, D\) = \(48, 16\)"),
    "no layers": (lambda: kv_cache_bytes(0, 2, 4, 8), ValueError, r"layers must be a positive integer"),
    "negative positions": (lambda: kv_cache_bytes(2, 2, 4, -1), ValueError, r"positions must be a non-negative"),
    "fractional bytes": (lambda: kv_cache_bytes(2, 2, 4, 8, 1, 0.5), ValueError,
                         r"bytes_per_number must be a positive integer"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_nothing_is_modified_and_dtypes_are_kept():
    params = weights(2, seed=60, dtype=torch.float32)
    copies = [p.clone() for p in params]
    x = randn(BATCH, STEPS, WIDTH, seed=61, dtype=torch.float32)
    output, (keys, _) = grouped_query_attention(x, *params, HEADS, 2)
    assert output.dtype == keys.dtype == torch.float32
    assert all(torch.equal(p, c) for p, c in zip(params, copies))
    assert np.isfinite(output.detach().numpy()).all()
