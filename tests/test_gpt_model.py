"""course_lib.gpt's model, causal attention, weight copying and training helpers against PyTorch and transformers.

``causal_self_attention`` against ``torch.nn.MultiheadAttention(batch_first=True)`` with a
causal mask and the same weights (outputs, keys and values, gradients; float32 and
float64), with a KV cache against the full pass, ``gradcheck`` in float64, causality
(a later token changes no earlier output) and an unmodified cache. ``GPT`` against
``transformers.GPT2LMHeadModel`` built from ``GPTConfig.gpt2_config_kwargs()`` with random
weights (nothing is downloaded) copied both ways by ``to_gpt2_state_dict`` /
``from_gpt2_state_dict``: logits (``1e-5`` in float32, ``1e-10`` in float64), logits and
cache contents when the rest of a sequence is fed one token at a time after a prefix,
against GPT-2's full pass and against GPT-2's own cache (``past_key_values``), gradients
of a language-model loss, dropout in training mode with the same seed, the parameter
count. Generation's fast path, ``GPT._decode`` with a preallocated ``KVCache``, against
``forward`` with its concatenating cache (logits, keys and values, prompt and steps, chunks),
its errors beyond the cache's capacity and the context, and the models it runs for
(``uses_reference_layers``: not with a plugged-in function, a hook, a subclass). The
weights are perturbed far from GPT-2's small initialisation so that the
logits are far from uniform. Then ``GPTConfig`` validation, the initialisation, argument
errors, ``warmup_cosine`` at known steps, ``window_perplexity`` against a brute-force
computation of every prediction and against chapter 3's ``evaluate_perplexity``, and
``train_gpt`` / ``train_language_model`` (schedule, ``carry_state``, the chunks read, a
hand-written reference loop).
"""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_lib.gpt import training as gpt_training
from course_lib.gpt.causal_attention import CausalSelfAttention, KVCache, causal_mask_after, causal_self_attention
from course_lib.gpt.gpt2_weights import from_gpt2_state_dict, to_gpt2_state_dict
from course_lib.gpt.model import GPT, GPTConfig
from course_lib.recurrent import language_model
from course_lib.recurrent.language_model import RecurrentLanguageModel, batchify, evaluate_perplexity
from course_lib.training import torch_seed
from course_lib.transformer.scaled_attention import causal_mask
from torch_helpers import perturb, randn

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
GPT2Config, GPT2LMHeadModel = transformers.GPT2Config, transformers.GPT2LMHeadModel

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])
VOCAB, CONTEXT, WIDTH, HEADS, LAYERS = 13, 16, 16, 2, 2

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float | None = None):
    atol = TOLERANCE.get(expected.dtype, 1e-10) if atol is None else atol
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def make_config(**kwargs) -> GPTConfig:
    return GPTConfig(**{**dict(vocab_size=VOCAB, context=CONTEXT, width=WIDTH, num_heads=HEADS, layers=LAYERS),
                        **kwargs})


def make_gpt(seed: int = 0, dtype=torch.float32, **kwargs) -> GPT:
    """A GPT in eval mode with GPT-2's initialisation, then perturbed."""
    with torch_seed(seed):
        model = GPT(make_config(**kwargs))
    return perturb(model, seed).to(dtype).eval()


def gpt2_of(config: GPTConfig, dtype=torch.float32):
    """A randomly initialised ``GPT2LMHeadModel`` of the same size, in eval mode (no download)."""
    return GPT2LMHeadModel(GPT2Config(**config.gpt2_config_kwargs())).to(dtype).eval()


def twin(model: GPT):
    """GPT-2 holding the weights of our model (``load_state_dict`` is strict: every key must match)."""
    hf = gpt2_of(model.config, model.token_embedding.weight.dtype)
    hf.load_state_dict(to_gpt2_state_dict(model))
    return hf


def ids_of(batch: int, steps: int, seed: int, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, steps), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- causal_mask_after

def test_causal_mask_after_is_j_at_most_p_plus_i():
    for past, steps in [(0, 1), (0, 5), (3, 1), (3, 4), (6, 2)]:
        expected = torch.tensor([[j <= past + i for j in range(past + steps)] for i in range(steps)])
        assert torch.equal(causal_mask_after(past, steps), expected), (past, steps)
    assert torch.equal(causal_mask_after(0, 5), causal_mask(5))


# ---------------------------------------------------------------- causal_self_attention against torch

def torch_mha(width: int, heads: int, dtype, seed: int) -> nn.MultiheadAttention:
    with torch_seed(seed):
        mha = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True, dtype=dtype)
    return perturb(mha, seed, scale=0.5)


def mha_args(mha: nn.MultiheadAttention):
    return mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias, mha.num_heads


def heads_of(x, weight, bias, heads: int):
    """``x W^T + b`` cut into heads by hand: ``(B, T, D) -> (B, nh, T, hs)``."""
    projected = x @ weight.T + bias
    batch, steps, width = projected.shape
    return projected.reshape(batch, steps, heads, width // heads).permute(0, 2, 1, 3)


@DTYPES
@pytest.mark.parametrize("heads", [1, 2, 4])
def test_causal_self_attention_matches_torch_multihead_attention(heads, dtype):
    width, batch, steps = 8, 3, 6
    mha = torch_mha(width, heads, dtype, seed=heads)
    x = randn(batch, steps, width, seed=10 + heads, dtype=dtype, grad=True)
    given = x.detach().clone()
    output, (keys, values) = causal_self_attention(x, *mha_args(mha))
    expected, _ = mha(x, x, x, attn_mask=~causal_mask(steps), need_weights=False)  # torch: True = masked out
    assert output.shape == (batch, steps, width) and output.dtype == dtype
    assert_close(output, expected, "output against nn.MultiheadAttention with a causal mask")
    w_q, w_k, w_v = mha.in_proj_weight.split(width)
    b_q, b_k, b_v = mha.in_proj_bias.split(width)
    assert keys.shape == values.shape == (batch, heads, steps, width // heads)
    assert_close(keys, heads_of(x, w_k, b_k, heads), "the returned keys, (B, nh, T, hs)")
    assert_close(values, heads_of(x, w_v, b_v, heads), "the returned values, (B, nh, T, hs)")
    assert torch.equal(x.detach(), given), "x must not be modified"
    probe = randn(batch, steps, width, seed=99, dtype=dtype)
    params = [x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias]
    mine = torch.autograd.grad((output * probe).sum(), params)
    theirs = torch.autograd.grad((expected * probe).sum(), params)
    for m, t, name in zip(mine, theirs, ("x", "in_weight", "in_bias", "out_weight", "out_bias")):
        assert_close(m, t, f"gradient w.r.t. {name}")


@DTYPES
@pytest.mark.parametrize("chunks", [[1, 1, 1, 1, 1, 1, 1], [3, 4], [2, 1, 4], [6, 1]], ids=str)
def test_causal_self_attention_with_a_cache_equals_the_full_pass(chunks, dtype):
    width, heads, batch = 8, 2, 2
    mha = torch_mha(width, heads, dtype, seed=5)
    x = randn(batch, sum(chunks), width, seed=6, dtype=dtype)
    full, (full_keys, full_values) = causal_self_attention(x, *mha_args(mha))
    cache, start = None, 0
    for size in chunks:
        before = None if cache is None else [t.clone() for t in cache]
        part, new_cache = causal_self_attention(x[:, start:start + size], *mha_args(mha), cache=cache)
        if cache is not None:
            assert all(torch.equal(t, b) for t, b in zip(cache, before)), "the cache passed in must not be modified"
        start += size
        assert_close(part, full[:, start - size:start], f"positions {start - size}..{start - 1} after a cache")
        assert new_cache[0].shape == new_cache[1].shape == (batch, heads, start, width // heads)
        assert_close(new_cache[0], full_keys[:, :, :start], f"cached keys of the first {start} positions")
        assert_close(new_cache[1], full_values[:, :, :start], f"cached values of the first {start} positions")
        cache = new_cache


def test_causal_self_attention_gradcheck_with_a_cache():
    width, heads = 4, 2
    args = [randn(2, 2, width, seed=1, grad=True), randn(3 * width, width, seed=2, grad=True) * 0.5,
            randn(3 * width, seed=3, grad=True), randn(width, width, seed=4, grad=True) * 0.5,
            randn(width, seed=5, grad=True), randn(2, heads, 3, width // heads, seed=6, grad=True),
            randn(2, heads, 3, width // heads, seed=7, grad=True)]
    args = [a.detach().requires_grad_() for a in args]

    def layer(x, w_in, b_in, w_out, b_out, keys, values):
        output, (k, v) = causal_self_attention(x, w_in, b_in, w_out, b_out, heads, cache=(keys, values))
        return output, k, v

    assert torch.autograd.gradcheck(layer, args, eps=1e-6, atol=1e-7, rtol=1e-5)
    assert torch.autograd.gradcheck(lambda *a: causal_self_attention(*a, heads)[0], args[:5],
                                    eps=1e-6, atol=1e-7, rtol=1e-5)


def test_a_later_token_changes_no_earlier_output():
    mha = torch_mha(8, 2, torch.float64, seed=7)
    x = randn(2, 7, 8, seed=8)
    changed = x.clone()
    changed[:, 4] += 1.0
    before, _ = causal_self_attention(x, *mha_args(mha))
    after, _ = causal_self_attention(changed, *mha_args(mha))
    assert_close(after[:, :4], before[:, :4], "positions before the changed one", atol=1e-12)
    assert (after[:, 4:] - before[:, 4:]).abs().amax(dim=-1).min() > 1e-3, "the changed position and later ones"
    model = make_gpt(seed=3, dtype=torch.float64)
    ids = ids_of(2, 9, seed=4)
    other = ids.clone()
    other[:, 5] = (other[:, 5] + 1) % VOCAB
    logits, _ = model(ids)
    other_logits, _ = model(other)
    assert_close(other_logits[:, :5], logits[:, :5], "GPT logits before the changed token", atol=1e-12)
    assert (other_logits[:, 5:] - logits[:, 5:]).abs().amax(dim=-1).min() > 1e-3


def test_causal_self_attention_module_loads_torch_weights_and_plugs_in_functions():
    mha = torch_mha(8, 2, torch.float32, seed=9)
    layer = CausalSelfAttention(8, 2)
    layer.load_state_dict(mha.state_dict())  # strict: the same parameter names as torch
    x = randn(2, 5, 8, seed=10, dtype=torch.float32)
    output, cache = layer(x)
    assert_close(output, mha(x, x, x, attn_mask=~causal_mask(5), need_weights=False)[0], "module output")
    calls = []

    def recording_attention(q, k, v, mask):
        calls.append((tuple(q.shape), tuple(k.shape), mask.clone()))
        return torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, -math.inf),
                             dim=-1) @ v, None

    plugged = CausalSelfAttention(8, 2, attention_fn=recording_attention)
    plugged.load_state_dict(mha.state_dict())
    step, _ = plugged(x[:, 4:], cache=tuple(t[:, :, :4] for t in cache))
    assert len(calls) == 1 and calls[0][:2] == ((2, 2, 1, 4), (2, 2, 5, 4))
    assert torch.equal(calls[0][2], causal_mask_after(4, 1))
    assert_close(step, output[:, 4:], "one step with a plugged-in attention_fn after a cache of 4")
    seen = []
    custom = CausalSelfAttention(8, 2, causal_attention_fn=lambda *a, **k: seen.append(k)
                                 or causal_self_attention(*a, **k))
    custom(x)
    assert len(seen) == 1, "causal_attention_fn computes the layer"


# ---------------------------------------------------------------- GPT against transformers' GPT-2

CONFIGS = {"default": {}, "ff 24, eps 1e-3, 3 layers, 4 heads": dict(ff_size=24, eps=1e-3, layers=3, num_heads=4)}
CONFIG_CASES = pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))


def gpt2_then_ours(seed: int, dtype, **kwargs):
    """A perturbed random GPT-2, and our GPT loaded from its state dict with ``from_gpt2_state_dict``."""
    config = make_config(**kwargs)
    with torch_seed(seed):
        hf = gpt2_of(config, dtype)
    perturb(hf, seed)
    ours = GPT(config).to(dtype).eval()
    ours.load_state_dict(from_gpt2_state_dict(hf.state_dict(), config.layers))  # strict
    return ours, hf


@DTYPES
@CONFIG_CASES
@pytest.mark.parametrize("direction", ["ours to GPT-2", "GPT-2 to ours"])
def test_gpt_logits_equal_gpt2(direction, config, dtype):
    if direction == "ours to GPT-2":
        ours = make_gpt(seed=11, dtype=dtype, **config)
        hf = twin(ours)
    else:
        ours, hf = gpt2_then_ours(seed=12, dtype=dtype, **config)
    ids = ids_of(3, CONTEXT, seed=13)
    logits, cache = ours(ids)
    with torch.no_grad():
        expected = hf(ids).logits
    assert logits.shape == (3, CONTEXT, VOCAB) and logits.dtype == dtype
    assert logits.std() > 1.0, "the perturbed weights give logits far from uniform"
    assert_close(logits, expected, f"{direction}: logits")
    assert len(cache) == ours.config.layers
    hs = WIDTH // ours.config.num_heads
    assert all(k.shape == v.shape == (3, ours.config.num_heads, CONTEXT, hs) for k, v in cache)


@DTYPES
@pytest.mark.parametrize("prefix", [1, 5])
def test_gpt_with_its_cache_equals_gpt2_full_pass_and_gpt2_cache(prefix, dtype):
    ours = make_gpt(seed=14, dtype=dtype)
    hf = twin(ours)
    ids = ids_of(2, 11, seed=15)
    with torch.no_grad():
        full = hf(ids).logits
        out = hf(ids[:, :prefix], use_cache=True)
    logits, cache = ours(ids[:, :prefix])
    assert_close(logits, full[:, :prefix], "the prefix")
    assert_close(logits, out.logits, "the prefix against GPT-2's cached pass")
    past = out.past_key_values
    for t in range(prefix, ids.shape[1]):
        given = [(k.clone(), v.clone()) for k, v in cache]
        logits, new_cache = ours(ids[:, t:t + 1], cache)
        assert all(torch.equal(k, gk) and torch.equal(v, gv) for (k, v), (gk, gv) in zip(cache, given)), \
            "the cache passed to GPT.forward must not be modified"
        cache = new_cache
        with torch.no_grad():
            out = hf(ids[:, t:t + 1], past_key_values=past, use_cache=True)
        past = out.past_key_values
        assert logits.shape == (2, 1, VOCAB)
        assert_close(logits[:, 0], full[:, t], f"position {t} with our cache against GPT-2's full pass")
        assert_close(logits[:, 0], out.logits[:, 0], f"position {t} with our cache against GPT-2's cache")
        for layer, (keys, values) in enumerate(cache):
            assert keys.shape == (2, HEADS, t + 1, WIDTH // HEADS)
            assert_close(keys, past.layers[layer].keys, f"layer {layer} cached keys after position {t}")
            assert_close(values, past.layers[layer].values, f"layer {layer} cached values after position {t}")


def test_gpt_chunks_with_a_cache_equal_the_full_pass():
    model = make_gpt(seed=16, dtype=torch.float64)
    ids = ids_of(3, CONTEXT, seed=17)
    full, _ = model(ids)
    cache, start = None, 0
    for size in [4, 1, 6, 5]:
        logits, cache = model(ids[:, start:start + size], cache)
        assert_close(logits, full[:, start:start + size], f"chunk {start}..{start + size - 1}")
        start += size


# ---------------------------------------------------------------- the preallocated KV cache of generation

@DTYPES
@pytest.mark.parametrize("chunks", [[5, 1, 1, 1, 1, 1], [1] * CONTEXT, [4, 1, 6, 5], [CONTEXT]],
                         ids=["prompt then steps", "one at a time", "chunks", "all at once"])
def test_decoding_into_a_kv_cache_equals_forward_with_the_concatenating_cache(chunks, dtype):
    """``GPT._decode`` (a preallocated ``KVCache`` written in place, fused LayerNorm, no checks) against ``forward``
    with its ``torch.cat`` cache: the last logits of every chunk, the keys and values cached, the positions counted."""
    model = make_gpt(seed=19, dtype=dtype, dropout=0.3)  # eval mode: no dropout
    ids = ids_of(3, sum(chunks), seed=20)
    fast_cache = model.new_cache(3)
    assert fast_cache.capacity == CONTEXT and fast_cache.keys[0].dtype == dtype
    cache, start = None, 0
    with torch.no_grad():
        for size in chunks:
            logits, cache = model(ids[:, start:start + size], cache)
            fast = model._decode(ids[:, start:start + size], fast_cache)
            start += size
            assert fast.shape == (3, VOCAB) and fast.dtype == dtype
            assert_close(fast, logits[:, -1], f"the last logits of positions ..{start - 1}")
            assert fast_cache.length == start
            for layer, ((keys, values), (fast_keys, fast_values)) in enumerate(zip(cache, fast_cache.pairs())):
                assert fast_keys.shape == keys.shape == (3, HEADS, start, WIDTH // HEADS)
                assert_close(fast_keys, keys, f"layer {layer} keys after position {start - 1}")
                assert_close(fast_values, values, f"layer {layer} values after position {start - 1}")


def test_the_kv_cache_refuses_positions_beyond_its_capacity_and_the_context():
    model = make_gpt(seed=21)
    with pytest.raises(ValueError, match=f"a cache of capacity {CONTEXT + 1} exceeds the context of {CONTEXT}"):
        model.new_cache(2, CONTEXT + 1)
    with pytest.raises(ValueError, match="capacity must be a positive integer"):
        model.new_cache(2, 0)
    with pytest.raises(ValueError, match="batch must be a non-negative integer"):
        KVCache(LAYERS, -1, HEADS, WIDTH // HEADS, 4)
    cache = model.new_cache(2, 6)
    with torch.no_grad():
        model._decode(ids_of(2, 5, seed=22), cache)
        with pytest.raises(ValueError, match="5 cached and 2 new positions exceed the cache's capacity of 6 positions"):
            model._decode(ids_of(2, 2, seed=23), cache)
        assert cache.length == 5, "a refused pass claims no position"
        model._decode(ids_of(2, 1, seed=24), cache)
        assert cache.length == 6
        roomy = KVCache(LAYERS, 2, HEADS, WIDTH // HEADS, CONTEXT + 4)  # built by hand, larger than the context
        model._decode(ids_of(2, CONTEXT, seed=25), roomy)
        with pytest.raises(ValueError, match=f"{CONTEXT} cached and 1 new positions exceed the context of {CONTEXT}"):
            model._decode(ids_of(2, 1, seed=26), roomy)
    model.train()
    assert model._decode(ids_of(2, 1, seed=27), model.new_cache(2)).shape == (2, VOCAB), \
        "without dropout, training mode changes nothing"
    with pytest.raises(RuntimeError, match="put the model in eval mode"):
        make_gpt(seed=21, dropout=0.1).train()._decode(ids_of(2, 1, seed=27), model.new_cache(2))


def test_uses_reference_layers_only_for_the_library_functions_without_hooks():
    """Generation decodes fast only through the reference layers; a plugged-in function runs through ``forward``."""
    from course_lib.testing import PlainCausalAttention
    from course_lib.transformer.layer_norm import layer_norm

    assert make_gpt(seed=28).uses_reference_layers()
    assert not GPT(make_config(), causal_attention_fn=PlainCausalAttention()).uses_reference_layers()
    assert not GPT(make_config(), attention_fn=lambda q, k, v, mask: (q, None)).uses_reference_layers()
    model = make_gpt(seed=28)
    model.blocks[1].norm2.norm_fn = lambda x, w, b, eps: layer_norm(x, w, b, eps)
    assert not model.uses_reference_layers(), "a plugged-in LayerNorm"
    model = make_gpt(seed=28)
    handle = model.blocks[0].self_attn.register_forward_hook(lambda module, args, output: None)
    assert not model.uses_reference_layers(), "a forward hook"
    handle.remove()
    assert model.uses_reference_layers()
    handle = model.register_forward_pre_hook(lambda module, args: None)
    assert not model.uses_reference_layers(), "a forward pre-hook on the model"
    handle.remove()
    model.blocks[0].linear1 = nn.Sequential(model.blocks[0].linear1)
    assert not model.uses_reference_layers(), "another module put in"

    class Scaled(GPT):
        def forward(self, ids, cache=None):
            logits, cache = super().forward(ids, cache)
            return 2 * logits, cache

    assert not Scaled(make_config()).uses_reference_layers(), "a subclass with its own forward"


def test_gpt_gradients_and_training_dropout_equal_gpt2():
    ours = make_gpt(seed=18, dropout=0.25)
    hf = twin(ours)
    ours.train(), hf.train()
    ids = ids_of(3, 12, seed=19)
    with torch_seed(5):
        logits, _ = ours(ids[:, :-1])
        ours_loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
    with torch_seed(5):
        hf_loss = F.cross_entropy(hf(ids[:, :-1]).logits.transpose(1, 2), ids[:, 1:])
    with torch_seed(6):
        other, _ = ours(ids[:, :-1])
    assert (other - logits).abs().max() > 1e-2, "dropout is active in training mode"
    assert_close(ours_loss, hf_loss, "loss with dropout 0.25 in training mode, same seed (same dropout masks)")
    ours_loss.backward(), hf_loss.backward()
    grads = copy.deepcopy(ours)
    for p, q in zip(grads.parameters(), ours.parameters()):
        p.data = q.grad.clone()
    expected = to_gpt2_state_dict(grads)
    names = [name for name, _ in hf.named_parameters()]
    assert len(names) == len(list(ours.parameters())), "GPT-2 ties lm_head to wte as we do"
    for name, p in hf.named_parameters():
        assert_close(expected[name], p.grad, f"gradient of {name}")


def test_weight_copy_round_trip_layout_and_copies():
    model = make_gpt(seed=20, layers=3)
    state = to_gpt2_state_dict(model)
    D = WIDTH
    assert state["transformer.h.0.attn.c_attn.weight"].shape == (D, 3 * D)
    assert state["transformer.h.2.mlp.c_fc.weight"].shape == (D, 4 * D)
    assert torch.equal(state["transformer.h.1.attn.c_proj.weight"], model.blocks[1].self_attn.out_proj.weight.T)
    assert torch.equal(state["lm_head.weight"], model.token_embedding.weight)
    back = from_gpt2_state_dict(state, 3)
    ours = model.state_dict()
    assert back.keys() == ours.keys()
    assert all(torch.equal(back[name], ours[name]) for name in ours)
    state["transformer.wte.weight"].add_(1.0)
    back["blocks.0.linear1.weight"].add_(1.0)
    assert torch.equal(model.state_dict()["token_embedding.weight"], ours["token_embedding.weight"]), "copies"
    assert torch.equal(model.blocks[0].linear1.weight, ours["blocks.0.linear1.weight"]), "copies"
    del state["transformer.h.2.ln_2.bias"]
    with pytest.raises(KeyError, match="transformer.h.2.ln_2.bias"):
        from_gpt2_state_dict(state, 3)


def test_gpt2_config_kwargs_and_parameter_count():
    config = make_config(dropout=0.1, eps=1e-3, ff_size=40)
    kwargs = config.gpt2_config_kwargs()
    assert kwargs["resid_pdrop"] == kwargs["embd_pdrop"] == 0.1 and kwargs["attn_pdrop"] == 0.0
    assert kwargs["n_inner"] == 40 and kwargs["layer_norm_epsilon"] == 1e-3 and kwargs["n_positions"] == CONTEXT
    assert kwargs["activation_function"] == "gelu_new" and kwargs["tie_word_embeddings"] is True
    model = GPT(config)
    D, F_, L = WIDTH, 40, LAYERS
    expected = VOCAB * D + CONTEXT * D + L * (3 * D * D + 3 * D + D * D + D + D * F_ + F_ + F_ * D + D + 4 * D) + 2 * D
    assert model.num_parameters() == expected == gpt2_of(config).num_parameters()


def test_gpt_initialisation_is_gpt2s_with_embeddings_of_std_one_over_sqrt_d():
    config = GPTConfig(vocab_size=50, context=64, width=32, num_heads=4, layers=2)
    with torch_seed(0):
        model = GPT(config)
    residual = 0.02 / math.sqrt(2 * config.layers)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert torch.all(p == 0), name
        elif "norm" in name:
            assert torch.all(p == 1), name
        else:
            if "embedding" in name:  # chapter 6's N(0, 1/D), not GPT-2's 0.02 (see the class docstring)
                std = config.width ** -0.5
            else:
                std = residual if name.endswith(("out_proj.weight", "linear2.weight")) else 0.02
            assert abs(p.std().item() / std - 1) < 0.1 and abs(p.mean().item()) < 0.2 * std, (name, p.std())
    assert model.config.ff_size == 4 * 32 and model.blocks[0].linear1.weight.shape == (128, 32)


def test_gpt_feed_forward_is_gpt2_gelu():
    block = make_gpt(seed=21).blocks[0]
    x = randn(5, WIDTH, seed=22, dtype=torch.float32)
    h = x @ block.linear1.weight.T + block.linear1.bias
    gelu_new = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    assert_close(block.feed_forward(x), gelu_new @ block.linear2.weight.T + block.linear2.bias, "FFN")


def test_gpt_config_validation():
    assert make_config().ff_size == 4 * WIDTH
    with pytest.raises(ValueError, match="width = 10 must be a multiple of num_heads = 4"):
        GPTConfig(VOCAB, width=10, num_heads=4)
    for dropout in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="dropout must lie in"):
            GPTConfig(VOCAB, dropout=dropout)
    for name in ("vocab_size", "context", "width", "num_heads", "layers", "ff_size"):
        with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
            GPTConfig(**{"vocab_size": VOCAB, name: 0})
    config = make_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.width = 32
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        GPT(config.gpt2_config_kwargs())


# ---------------------------------------------------------------- argument errors

def _attention(x=(2, 3, 8), in_weight=(24, 8), in_bias=(24,), out_weight=(8, 8), out_bias=(8,), num_heads=2,
               cache=None, dtype=torch.float32):
    make = (lambda s: torch.zeros(s, dtype=dtype) if isinstance(s, tuple) else s)
    return causal_self_attention(make(x), make(in_weight), make(in_bias), make(out_weight), make(out_bias),
                                 num_heads, cache=cache)


_MODEL = make_gpt(seed=23)


def _cache(past: int, batch: int = 2, layers: int = LAYERS):
    return [(torch.zeros(batch, HEADS, past, WIDTH // HEADS),) * 2 for _ in range(layers)]


ERRORS = {
    "x of rank 2": (lambda: _attention(x=(3, 8)), ValueError, r"x must have shape \(B, T, I\)"),
    "x of ids": (lambda: _attention(x=torch.zeros(2, 3, 8, dtype=torch.int64)), TypeError, r"x must be a float"),
    "x not a tensor": (lambda: _attention(x=np.zeros((2, 3, 8))), TypeError, r"x must be a torch.Tensor"),
    "in_weight": (lambda: _attention(in_weight=(8, 8)), ValueError,
                  r"in_weight must have shape \(3D, D\) = \(24, 8\), got \(8, 8\)"),
    "in_bias": (lambda: _attention(in_bias=(8,)), ValueError, r"in_bias must have shape \(3D,\)"),
    "out_weight": (lambda: _attention(out_weight=(8, 24)), ValueError, r"out_weight must have shape \(D, D\)"),
    "out_bias": (lambda: _attention(out_bias=(24,)), ValueError, r"out_bias must have shape \(D,\)"),
    "heads do not divide D": (lambda: _attention(num_heads=3), ValueError,
                              r"D = 8 must be a multiple of num_heads = 3"),
    "cache not a pair": (lambda: _attention(cache=torch.zeros(2, 2, 1, 4)), TypeError,
                         r"cache must be None or a pair \(keys, values\)"),
    "cache of three": (lambda: _attention(cache=(torch.zeros(2, 2, 1, 4),) * 3), TypeError, r"cache must be"),
    "cache keys of other head size": (lambda: _attention(cache=(torch.zeros(2, 2, 1, 3),) * 2), ValueError,
                                      r"cache keys must have shape \(B, nh, P, hs\) = \(2, 2, \?, 4\)"),
    "cache keys of other batch": (lambda: _attention(cache=(torch.zeros(1, 2, 1, 4),) * 2), ValueError,
                                  r"cache keys must have shape \(B, nh, P, hs\)"),
    "cache keys of other heads": (lambda: _attention(cache=(torch.zeros(2, 4, 1, 2),) * 2), ValueError,
                                  r"cache keys must have shape"),
    "cache values of other length": (lambda: _attention(cache=(torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 2, 4))),
                                     ValueError, r"cache values must have shape \(B, nh, P, hs\) = \(2, 2, 3, 4\)"),
    "cache keys not a tensor": (lambda: _attention(cache=(np.zeros((2, 2, 1, 4)),) * 2), TypeError,
                                r"cache keys must be a torch.Tensor"),
    "module heads do not divide width": (lambda: CausalSelfAttention(10, 4), ValueError,
                                         r"width = 10 must be a multiple of num_heads = 4"),
    "mask of negative past": (lambda: causal_mask_after(-1, 2), ValueError, r"past must be a non-negative integer"),
    "mask of no steps": (lambda: causal_mask_after(2, 0), ValueError, r"steps must be a positive integer"),
    "context overflow": (lambda: _MODEL(torch.zeros(1, CONTEXT + 1, dtype=torch.int64)), ValueError,
                         r"0 cached and 17 new positions exceed the context of 16"),
    "context overflow after a cache": (lambda: _MODEL(torch.zeros(2, 3, dtype=torch.int64), _cache(14)), ValueError,
                                       r"14 cached and 3 new positions exceed the context of 16"),
    "id equal to V": (lambda: _MODEL(torch.tensor([[0, VOCAB]])), ValueError,
                      r"ids must lie in \[0, 13\), got 0\.\.13"),
    "negative id": (lambda: _MODEL(torch.tensor([[-1, 2]])), ValueError, r"ids must lie in \[0, 13\)"),
    "float ids": (lambda: _MODEL(torch.zeros(1, 3)), ValueError, r"ids must be a \(B, T\) int64 tensor"),
    "ids of rank 1": (lambda: _MODEL(torch.zeros(3, dtype=torch.int64)), ValueError, r"ids must be a \(B, T\) int64"),
    "cache of other length": (lambda: _MODEL(torch.zeros(2, 1, dtype=torch.int64), _cache(2, layers=1)), ValueError,
                              r"one \(keys, values\) pair per layer \(2\), got 1"),
    "cache of other batch": (lambda: _MODEL(torch.zeros(3, 1, dtype=torch.int64), _cache(2)), ValueError,
                             r"cache keys must have shape"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------- warmup_cosine

def test_warmup_cosine_at_known_steps():
    f = gpt_training.warmup_cosine(10, 110, floor=0.1)
    known = {0: 0.0, 1: 0.1, 5: 0.5, 10: 1.0, 35: 0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2, 60: 0.55,
             85: 0.1 + 0.9 * (1 - math.cos(math.pi / 4)) / 2, 110: 0.1, 200: 0.1}
    for step, value in known.items():
        assert f(step) == pytest.approx(value, abs=1e-12), step
    values = [f(s) for s in range(10, 111)]
    assert all(a > b for a, b in zip(values, values[1:])), "decreasing after the warm-up"
    g = gpt_training.warmup_cosine(0, 4, floor=0.0)
    assert [g(s) for s in range(1, 5)] == pytest.approx([(1 + math.cos(math.pi * s / 4)) / 2 for s in range(1, 5)])
    assert gpt_training.warmup_cosine(3, 7, floor=1.0)(5) == 1.0
    for args, match in [((10, 10), "warmup = 10 must be shorter"), ((-1, 10), "warmup must be a non-negative"),
                        ((2, 10, 1.5), "floor must lie in"), ((2, 10, -0.1), "floor must lie in"),
                        ((2, 0), "steps must be a positive")]:
        with pytest.raises(ValueError, match=match):
            gpt_training.warmup_cosine(*args)


# ---------------------------------------------------------------- window_perplexity

def brute_force_losses(model, ids, context: int, stride: int, batch_size: int) -> np.ndarray:
    """``(B, N // B - 1)``: every prediction on its own, input ``j`` of a row reading the window that scores it."""
    rows = batchify(ids, batch_size)
    losses = np.zeros((rows.shape[0], rows.shape[1] - 1))
    for b, row in enumerate(rows):
        for j in range(rows.shape[1] - 1):
            start = stride * max(0, (j - context + stride) // stride)
            assert j - start < context and j - start + 1 >= min(j + 1, context - stride + 1)
            logits, _ = model(row[start:j + 1][None])
            losses[b, j] = -torch.log_softmax(logits[0, -1].double(), dim=-1)[row[j + 1]].item()
    return losses


def brute_force_perplexity(model, ids, context: int, stride: int, batch_size: int) -> float:
    return math.exp(brute_force_losses(model, ids, context, stride, batch_size).mean())


class Stateless(nn.Module):
    """A GPT read without a cache: ``(ids, state) -> (logits, None)``, for chapter 3's functions."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def forward(self, ids, state=None):
        return self.model(ids)[0], None


class Bigram(nn.Module):
    """A model whose prediction reads the last token only: every window gives it the same scores."""

    def __init__(self, vocab: int, seed: int):
        super().__init__()
        self.table = nn.Parameter(randn(vocab, vocab, seed=seed, dtype=torch.float32) * 2)

    def forward(self, ids, state=None):
        return self.table[ids], None


@pytest.mark.parametrize("context, stride, batch_size", [(8, 3, 3), (8, 8, 3), (8, 1, 2), (8, None, 3), (6, 4, 1),
                                                         (5, 2, 4)])
def test_window_perplexity_equals_brute_force(context, stride, batch_size):
    model = make_gpt(seed=24, dtype=torch.float64, context=8)
    ids = np.asarray(ids_of(1, 79, seed=25)[0])
    expected = brute_force_perplexity(model, ids, context, stride or context // 2, batch_size)
    got = gpt_training.window_perplexity(model, ids, context=None if context == 8 else context, stride=stride,
                                         batch_size=batch_size, windows_per_batch=2)
    assert got == pytest.approx(expected, rel=1e-10)
    assert model.training is False


def test_window_perplexity_scores_the_targets_of_evaluate_perplexity():
    model = make_gpt(seed=26, dtype=torch.float64, context=8)
    ids = np.asarray(ids_of(1, 90, seed=27)[0])
    for batch_size in (1, 3):  # stride = context: disjoint chunks, as chapter 3 reads the stream
        chunked = evaluate_perplexity(Stateless(model), ids, seq_len=8, batch_size=batch_size)
        assert gpt_training.window_perplexity(model, ids, stride=8, batch_size=batch_size) == \
            pytest.approx(chunked, rel=1e-10)
    bigram = Bigram(VOCAB, seed=28)
    for stride in (1, 3, 5):
        assert gpt_training.window_perplexity(bigram, ids, context=5, stride=stride, batch_size=4) == \
            pytest.approx(evaluate_perplexity(bigram, ids, seq_len=7, batch_size=4), rel=1e-6), stride
    with pytest.raises(ValueError, match="stride = 9 must not exceed the context of 8"):
        gpt_training.window_perplexity(model, ids, stride=9)



@pytest.mark.parametrize("context, stride, batch_size", [(8, 3, 3), (8, 1, 2), (6, 4, 1)])
def test_window_losses_score_every_target_once_in_the_window_that_scores_it(context, stride, batch_size):
    model = make_gpt(seed=30, dtype=torch.float64, context=8)
    ids = np.asarray(ids_of(1, 61, seed=31)[0])
    got = gpt_training.window_losses(model, ids, context=context, stride=stride, batch_size=batch_size,
                                     windows_per_batch=2)
    assert got.shape == (batch_size, len(ids) // batch_size - 1) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), brute_force_losses(model, ids, context, stride, batch_size), rtol=1e-10)


def test_bits_per_character_divides_the_bits_by_the_characters_the_targets_stand_for():
    model = make_gpt(seed=32, dtype=torch.float64, context=8)
    ids = np.asarray(ids_of(1, 70, seed=33)[0])  # 70 ids in 3 rows of 23: the last id is not scored
    ones = np.ones(len(ids), dtype=np.int64)
    assert gpt_training.bits_per_character(model, ids, ones, batch_size=3) == \
        pytest.approx(math.log2(gpt_training.window_perplexity(model, ids, batch_size=3)), rel=1e-10)
    lengths = np.random.default_rng(34).integers(0, 5, len(ids))  # characters per token, 0 for a partial one
    losses = brute_force_losses(model, ids, 8, 4, 3)
    scored = lengths[:69].reshape(3, 23)[:, 1:]  # the characters of the targets, row by row
    assert gpt_training.bits_per_character(model, ids, lengths, batch_size=3) == \
        pytest.approx(losses.sum() / math.log(2) / scored.sum(), rel=1e-10)
    for bad in (ones[:-1], -ones, ones.astype(float)):
        with pytest.raises(ValueError, match="characters must hold one integer count >= 0 per id"):
            gpt_training.bits_per_character(model, ids, bad, batch_size=3)

# ---------------------------------------------------------------- train_gpt and train_language_model

class Recorder(nn.Module):
    """Wraps a model and records the ids and the state of every call in training mode."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, []
        self.config = getattr(model, "config", None)

    def forward(self, ids, state=None):
        if self.training:
            self.calls.append((ids.clone(), state))
        return self.model(ids, state)


REPETITIVE = np.tile(np.array([0, 1, 2, 3, 4, 5, 3, 2, 6, 7]), 120)  # 1,200 ids of a period of 10


def test_train_gpt_learns_a_repetitive_stream_and_reads_chapter_3_chunks(monkeypatch):
    lrs = []
    real_step = language_model.optimizer_step

    def recording_step(model, optimizer, loss, max_norm):
        lrs.append(optimizer.param_groups[0]["lr"])
        return real_step(model, optimizer, loss, max_norm)

    monkeypatch.setattr(language_model, "optimizer_step", recording_step)
    with torch_seed(1):
        model = GPT(GPTConfig(8, context=16, width=16, num_heads=2, layers=1))
    recorder = Recorder(model)
    steps, batch, seq = 60, 8, 12
    history = gpt_training.train_gpt(recorder, REPETITIVE, steps, seq_len=seq, batch_size=batch, lr=1e-2, warmup=6,
                                     floor=0.2, valid_ids=REPETITIVE[:400], eval_every=30, progress=False)
    loss = history["loss"]
    assert loss.shape == (steps,) and history["grad_norm"].shape == (steps,)
    assert loss[0] > 1.8 and loss[-5:].mean() < 0.3, loss
    assert list(history["valid_step"]) == [30, 60]
    assert history["valid_perplexity"][-1] == pytest.approx(gpt_training.window_perplexity(model, REPETITIVE[:400]))
    schedule = gpt_training.warmup_cosine(6, steps, 0.2)
    assert lrs == pytest.approx([1e-2 * schedule(s) for s in range(1, steps + 1)], rel=1e-12)
    lrs.clear()
    with torch_seed(2):
        small = GPT(GPTConfig(8, context=16, width=8, num_heads=2, layers=1))
    gpt_training.train_gpt(small, REPETITIVE, 30, lr=1.0, batch_size=batch, progress=False)
    default = gpt_training.warmup_cosine(3, 30, 0.1)  # warm-up: a tenth of the steps; floor 0.1
    assert lrs == pytest.approx([default(s) for s in range(1, 31)], rel=1e-12)
    rows = batchify(REPETITIVE, batch)
    assert len(recorder.calls) == steps
    per_pass = (rows.shape[1] - 1) // seq
    for step, (ids, state) in enumerate(recorder.calls):
        start = (step % per_pass) * seq
        assert state is None and torch.equal(ids, rows[:, start:start + seq]), step
    runs = []
    for _ in range(2):
        with torch_seed(1):
            again = GPT(GPTConfig(8, context=16, width=16, num_heads=2, layers=1, dropout=0.1))
        runs.append(gpt_training.train_gpt(again, REPETITIVE, 8, seq_len=seq, batch_size=batch, progress=False,
                                           seed=3)["loss"])
    assert np.array_equal(*runs), "the same seed repeats a run (dropout included)"
    with torch_seed(1):
        again = GPT(GPTConfig(8, context=16, width=16, num_heads=2, layers=1, dropout=0.1))
    other = gpt_training.train_gpt(again, REPETITIVE, 8, seq_len=seq, batch_size=batch, progress=False, seed=4)
    assert not np.array_equal(other["loss"], runs[0]), "another seed draws other dropout masks"
    with pytest.raises(ValueError, match="seq_len = 17 exceeds the model's context of 16"):
        gpt_training.train_gpt(again, REPETITIVE, 2, seq_len=17, progress=False)


def small_rnn(seed: int = 0):
    with torch_seed(seed):
        return RecurrentLanguageModel(8, 6, 10, mode="lstm")


def reference_loop(model, ids, steps: int, seq_len: int, batch_size: int, lr: float, max_norm: float):
    """Chapter 3's training as written before schedules: Adam, truncated BPTT, clipping, state carried."""
    data = batchify(ids, batch_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses, state, position = [], None, 0
    for _ in range(steps):
        if position + seq_len + 1 > data.shape[1]:
            state, position = None, 0
        inputs, targets = data[:, position:position + seq_len], data[:, position + 1:position + seq_len + 1]
        position += seq_len
        if state is not None:
            state = tuple(s.detach() for s in state)
        logits, state = model(inputs, state)
        loss = F.cross_entropy(logits.reshape(-1, 8), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def test_train_language_model_without_a_schedule_behaves_as_before():
    ids = np.asarray(ids_of(1, 600, seed=29, vocab=8)[0])
    kwargs = dict(steps=12, seq_len=10, batch_size=4, lr=5e-3, progress=False)
    plain, constant, reference = small_rnn(), small_rnn(), small_rnn()
    history = language_model.train_language_model(plain, ids, schedule=None, **kwargs)
    assert np.array_equal(history["loss"],
                          language_model.train_language_model(constant, ids, schedule=lambda s: 1.0, **kwargs)["loss"])
    assert all(torch.equal(p, q) for p, q in zip(plain.parameters(), constant.parameters()))
    np.testing.assert_allclose(history["loss"], reference_loop(reference, ids, 12, 10, 4, 5e-3, 1.0), rtol=1e-6)
    frozen = small_rnn()
    before = [p.detach().clone() for p in frozen.parameters()]
    language_model.train_language_model(frozen, ids, schedule=lambda s: 0.0, **kwargs)
    assert all(torch.equal(p, b) for p, b in zip(frozen.parameters(), before)), "a factor of 0 leaves the weights"
    carried, fresh = Recorder(small_rnn()), Recorder(small_rnn())
    language_model.train_language_model(carried, ids, **kwargs)
    language_model.train_language_model(fresh, ids, carry_state=False, **kwargs)
    assert carried.calls[0][1] is None and all(state is not None for _, state in carried.calls[1:5])
    assert all(state is None for _, state in fresh.calls)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(carried.calls, fresh.calls)), "the same chunks"
