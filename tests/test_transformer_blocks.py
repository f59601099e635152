"""course_lib.transformer.layer_norm, .blocks and .translator against PyTorch.

``layer_norm`` / ``LayerNorm`` against ``torch.nn.LayerNorm`` (values and gradients, several
shapes, gradcheck). ``EncoderBlock`` against ``torch.nn.TransformerEncoderLayer`` and
``DecoderBlock`` against ``torch.nn.TransformerDecoderLayer`` (``dropout=0.0``,
``batch_first=True``, ``norm_first`` both ways), ``Core`` against ``torch.nn.Transformer``
with the same parameter names (asserted), weights copied both ways, with padding and
causal masks: outputs, and the gradients of the inputs and of every parameter (tolerance
``1e-5`` in float32 and ``1e-10`` in float64, for gradients relative to the largest one).

PyTorch's modules stay in training mode, which with dropout 0 computes every position
with plain operations. In eval mode under ``no_grad`` they take a "fast path": with a
key padding mask, ``nn.TransformerEncoder`` (post-LN) packs the batch into a nested tensor
and returns 0 at padded positions, where course_lib (like training mode) returns
whatever the block computes there. Padded positions are never read (they are masked
as keys and ignored by the loss), so the eval-mode test compares the real positions
only. Then the translation ``Transformer``: its forward equals ``torch.nn.Transformer``
and ``Core`` run by hand on the embeddings; padding a source does not change any real
output; ``transformer_step_fn`` with chapter 5's searches equals ``transformer_translate``;
and a tiny model learns to reverse a few sentences in about a hundred steps.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from course_lib.attention.decoding import beam_search, greedy_decode
from course_lib.attention.teacher_forcing import train_seq2seq
from course_lib.training import eval_mode, torch_seed
from course_lib.transformer.blocks import DecoderBlock, EncoderBlock, Stack, pre_ln_encoder_block
from course_lib.transformer.embedding import self_attention_mask
from course_lib.transformer.layer_norm import LayerNorm, layer_norm
from course_lib.transformer.multi_head import attention_mask
from course_lib.transformer.positions import KINDS
from course_lib.transformer.scaled_attention import causal_mask
from course_lib.transformer.translator import Core, Transformer, transformer_step_fn, transformer_translate

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
DTYPES = pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["float32", "float64"])
DIRECTIONS = pytest.mark.parametrize("direction", ["torch to ours", "ours to torch"])
NORM_FIRST = pytest.mark.parametrize("norm_first", [True, False], ids=["pre-LN", "post-LN"])
WIDTH, HEADS, FF, BATCH = 8, 2, 16, 3
BOS, EOS = 1, 2

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def assert_close(actual, expected, what: str, atol: float | None = None):
    atol = TOLERANCE.get(expected.dtype, 1e-10) if atol is None else atol
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def randn(*shape, seed: int, dtype=torch.float64, grad: bool = True):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x.to(dtype).requires_grad_(grad)


def lengths_mask(lengths, steps: int) -> torch.Tensor:
    return torch.tensor([[k < length for k in range(steps)] for length in lengths], dtype=torch.bool)


def randomize(module: nn.Module, seed: int) -> nn.Module:
    """Every parameter drawn at random (LayerNorm's scales and shifts and all biases too), in place."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            scale = 1 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.5
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale)
    return module


def torch_module(cls, *args, **kwargs):
    """A torch module built without its warnings (``nn.Transformer`` warns that pre-LN turns off nested tensors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(*args, **kwargs)


def copy_weights(ours: nn.Module, theirs: nn.Module, direction: str, seed: int = 0):
    """Random weights in one module, loaded into the other; the parameter names must be the same."""
    source, target = (theirs, ours) if direction == "torch to ours" else (ours, theirs)
    randomize(source, seed)
    assert sorted(source.state_dict()) == sorted(target.state_dict()), "parameter names must be torch's"
    target.load_state_dict(source.state_dict())


def assert_same_gradients(ours: nn.Module, theirs: nn.Module, inputs, output, expected, what: str):
    """The gradients of a random projection of the outputs w.r.t. the inputs and every parameter, by name."""
    probe = torch.randn(output.shape, generator=torch.Generator().manual_seed(99), dtype=torch.float64)
    names = [n for n, _ in ours.named_parameters()]
    ours_params, torch_params = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert sorted(names) == sorted(torch_params)
    mine = torch.autograd.grad((output * probe.to(output.dtype)).sum(), [*inputs, *(ours_params[n] for n in names)])
    reference = torch.autograd.grad((expected * probe.to(output.dtype)).sum(),
                                    [*inputs, *(torch_params[n] for n in names)])
    for m, t, name in zip(mine, reference, [f"input {i}" for i in range(len(inputs))] + names):
        assert_close(m, t, f"{what}: gradient w.r.t. {name}", TOLERANCE[output.dtype] * max(1.0, t.abs().max().item()))


# ---------------------------------------------------------------- LayerNorm

@DTYPES
@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 8), (2, 1, 4, 16)], ids=str)
def test_layer_norm_matches_torch(shape, dtype):
    x = (randn(*shape, seed=1, dtype=dtype, grad=False) * 3 + 2).requires_grad_()
    theirs = nn.LayerNorm(shape[-1], dtype=dtype)
    randomize(theirs, 2)
    weight, bias = (p.detach().clone().requires_grad_() for p in (theirs.weight, theirs.bias))
    before = x.detach().clone()
    output, expected = layer_norm(x, weight, bias), theirs(x)
    assert output.shape == shape and output.dtype == dtype
    assert_close(output, expected, f"{shape}: values")
    assert torch.equal(x.detach(), before), "x must not be modified"
    probe = randn(*shape, seed=3, dtype=dtype, grad=False)
    mine = torch.autograd.grad((output * probe).sum(), (x, weight, bias))
    reference = torch.autograd.grad((expected * probe).sum(), (x, theirs.weight, theirs.bias))
    for m, t, name in zip(mine, reference, ("x", "weight", "bias")):
        assert_close(m, t, f"{shape}: gradient w.r.t. {name}")


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_layer_norm_uses_biased_variance_and_eps(eps):
    x = torch.tensor([[1.0, 2.0, 4.0, 9.0], [3.0, 3.0, 3.0, 3.0]], dtype=torch.float64)
    weight, bias = torch.tensor([1.0, 2.0, -1.0, 0.5], dtype=torch.float64), torch.tensor([0.0, 1.0, 2.0, 3.0],
                                                                                         dtype=torch.float64)
    mean, variance = 4.0, ((1 - 4) ** 2 + (2 - 4) ** 2 + 0 + (9 - 4) ** 2) / 4  # divided by D, not D - 1
    expected = torch.tensor([[(v - mean) / math.sqrt(variance + eps) for v in (1.0, 2.0, 4.0, 9.0)],
                             [0.0] * 4], dtype=torch.float64) * weight + bias
    assert_close(layer_norm(x, weight, bias, eps), expected, "by the formula (a constant row gives beta)")
    module = LayerNorm(4, eps=eps).double()
    with torch.no_grad():
        module.weight.copy_(weight)
        module.bias.copy_(bias)
    assert_close(module(x), nn.functional.layer_norm(x, (4,), weight, bias, eps), "LayerNorm module")


def test_layer_norm_gradcheck():
    x, weight, bias = randn(2, 3, 5, seed=4), randn(5, seed=5), randn(5, seed=6)
    assert torch.autograd.gradcheck(layer_norm, (x, weight, bias), eps=1e-6, atol=1e-7, rtol=1e-5)


@DIRECTIONS
def test_layer_norm_module_loads_torch_weights(direction):
    ours, theirs = LayerNorm(6), nn.LayerNorm(6)
    copy_weights(ours, theirs, direction, seed=7)
    x = randn(2, 3, 6, seed=8, dtype=torch.float32)
    assert_close(ours(x), theirs(x), "LayerNorm after load_state_dict")


def test_layer_norm_module_calls_norm_fn():
    calls = []
    module = LayerNorm(3, norm_fn=lambda x, w, b, eps: calls.append(eps) or x)
    module(torch.zeros(1, 3))
    assert calls == [1e-5]


# ---------------------------------------------------------------- encoder and decoder blocks against torch's layers

@DTYPES
@DIRECTIONS
@NORM_FIRST
@pytest.mark.parametrize("lengths", [None, [5, 2, 1]], ids=["no padding", "padding"])
def test_encoder_block_matches_torch_encoder_layer(lengths, norm_first, direction, dtype):
    ours = EncoderBlock(WIDTH, HEADS, FF, norm_first=norm_first).to(dtype)
    theirs = nn.TransformerEncoderLayer(WIDTH, HEADS, FF, dropout=0.0, batch_first=True, norm_first=norm_first,
                                        dtype=dtype)
    copy_weights(ours, theirs, direction, seed=10)
    x = randn(BATCH, 5, WIDTH, seed=11, dtype=dtype)
    padding = None if lengths is None else lengths_mask(lengths, 5)
    output = ours(x, attention_mask(padding))
    expected = theirs(x, src_key_padding_mask=None if padding is None else ~padding)
    what = f"{'pre' if norm_first else 'post'}-LN encoder block"
    assert_close(output, expected, what)
    assert ours.attention_weights.shape == (BATCH, HEADS, 5, 5) and not ours.attention_weights.requires_grad
    assert_same_gradients(ours, theirs, [x], output, expected, what)


@NORM_FIRST
def test_encoder_block_equals_torch_eval_fast_path_on_real_positions(norm_first):
    ours = EncoderBlock(WIDTH, HEADS, FF, norm_first=norm_first)
    theirs = nn.TransformerEncoderLayer(WIDTH, HEADS, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    copy_weights(ours, theirs, "torch to ours", seed=12)
    x, padding = randn(BATCH, 5, WIDTH, seed=13, dtype=torch.float32, grad=False), lengths_mask([5, 3, 1], 5)
    theirs.eval()
    with torch.no_grad():
        output, expected = ours(x, attention_mask(padding)), theirs(x, src_key_padding_mask=~padding)
    assert_close(output[padding], expected[padding], "real positions, torch in eval mode")


@DTYPES
@DIRECTIONS
@NORM_FIRST
def test_decoder_block_matches_torch_decoder_layer(norm_first, direction, dtype):
    ours = DecoderBlock(WIDTH, HEADS, FF, norm_first=norm_first).to(dtype)
    theirs = nn.TransformerDecoderLayer(WIDTH, HEADS, FF, dropout=0.0, batch_first=True, norm_first=norm_first,
                                        dtype=dtype)
    copy_weights(ours, theirs, direction, seed=14)
    x, memory = randn(BATCH, 4, WIDTH, seed=15, dtype=dtype), randn(BATCH, 6, WIDTH, seed=16, dtype=dtype)
    padding = lengths_mask([6, 2, 4], 6)
    output = ours(x, memory, mask=attention_mask(causal=True, steps=4), memory_mask=attention_mask(padding))
    expected = theirs(x, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=~padding)
    what = f"{'pre' if norm_first else 'post'}-LN decoder block"
    assert_close(output, expected, what)
    assert ours.attention_weights.shape == (BATCH, HEADS, 4, 4) and ours.cross_weights.shape == (BATCH, HEADS, 4, 6)
    assert torch.all(ours.attention_weights[..., ~causal_mask(4)] == 0), "no weight on future positions"
    assert torch.all(ours.cross_weights.masked_select(~padding[:, None, None, :]) == 0), "no weight on padding"
    assert_same_gradients(ours, theirs, [x, memory], output, expected, what)


def test_encoder_block_calls_block_fn_and_pre_ln_matches_its_formula():
    calls = []

    def spy(block, x, mask=None):
        calls.append(mask)
        return pre_ln_encoder_block(block, x, mask)

    torch.manual_seed(17)
    block = EncoderBlock(WIDTH, HEADS, FF, block_fn=spy).double()
    randomize(block, 18)
    x = randn(2, 3, WIDTH, seed=19, grad=False)
    output = block(x)
    assert len(calls) == 1 and block.block_fn is spy
    h = x + block.self_attn(block.norm1(x), block.norm1(x), block.norm1(x))[0]
    assert_close(output, h + block.linear2(torch.relu(block.linear1(block.norm2(h)))), "x + SA(LN1 x), h + FFN(LN2 h)")


# ---------------------------------------------------------------- Core against torch.nn.Transformer

def run_core(core: Core, source, target, padding):
    """``Core`` run by hand as ``nn.Transformer`` runs: encoder with padding, decoder causal and attending to memory."""
    memory = core.encoder(source, attention_mask(padding))
    steps = target.shape[1]
    return core.decoder(target, memory, mask=attention_mask(causal=True, steps=steps),
                        memory_mask=attention_mask(padding)), memory


def torch_transformer(norm_first: bool, dtype, layers: int = 2, width: int = WIDTH, heads: int = HEADS,
                      ff: int = FF):
    return torch_module(nn.Transformer, width, heads, layers, layers, ff, dropout=0.0, batch_first=True,
                        norm_first=norm_first, dtype=dtype)


def torch_run(transformer: nn.Transformer, source, target, padding):
    return transformer(source, target, tgt_mask=~causal_mask(target.shape[1]), src_key_padding_mask=~padding,
                       memory_key_padding_mask=~padding)


@DTYPES
@DIRECTIONS
@NORM_FIRST
def test_core_matches_torch_transformer(norm_first, direction, dtype):
    ours, theirs = Core(WIDTH, HEADS, FF, 2, norm_first).to(dtype), torch_transformer(norm_first, dtype)
    assert list(ours.state_dict()) == list(theirs.state_dict()), "the same names in the same order"
    assert all(ours.state_dict()[n].shape == p.shape for n, p in theirs.state_dict().items())
    copy_weights(ours, theirs, direction, seed=20)
    source, target = randn(BATCH, 6, WIDTH, seed=21, dtype=dtype), randn(BATCH, 4, WIDTH, seed=22, dtype=dtype)
    padding = lengths_mask([6, 1, 3], 6)
    output, memory = run_core(ours, source, target, padding)
    assert_close(memory, theirs.encoder(source, src_key_padding_mask=~padding), "encoder output (memory)")
    expected = torch_run(theirs, source, target, padding)
    what = f"{'pre' if norm_first else 'post'}-LN Core"
    assert_close(output, expected, what)
    assert_same_gradients(ours, theirs, [source, target], output, expected, what)


@NORM_FIRST
def test_core_equals_torch_transformer_eval_fast_path_on_real_positions(norm_first):
    ours, theirs = Core(WIDTH, HEADS, FF, 2, norm_first), torch_transformer(norm_first, torch.float32)
    copy_weights(ours, theirs, "torch to ours", seed=23)
    source, target = randn(BATCH, 6, WIDTH, seed=24, grad=False).float(), randn(BATCH, 4, WIDTH, seed=25).float()
    padding = lengths_mask([6, 1, 3], 6)
    theirs.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        output, memory = run_core(ours, source, target, padding)
        expected_memory = theirs.encoder(source, src_key_padding_mask=~padding)
        expected = torch_run(theirs, source, target, padding)
    assert_close(memory[padding], expected_memory[padding], "memory at real positions")
    assert_close(output, expected, "decoder output (every target position is real)")


def test_stack_runs_its_blocks_in_order_then_the_final_norm():
    blocks = [EncoderBlock(WIDTH, HEADS, FF) for _ in range(3)]
    stack, bare = Stack(blocks, WIDTH), Stack(blocks, WIDTH, final_norm=False)
    randomize(stack, 26)
    assert isinstance(bare.norm, nn.Identity) and len(stack.layers) == 3
    x, mask = randn(2, 4, WIDTH, seed=27, dtype=torch.float32, grad=False), attention_mask(lengths_mask([4, 2], 4))
    y = x
    for block in blocks:
        y = block(y, mask)
    assert_close(bare(x, mask), y, "blocks in turn")
    assert_close(stack(x, mask), stack.norm(y), "then the final LayerNorm")


# ---------------------------------------------------------------- the translation Transformer

def random_batch(lengths, vocab: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (len(lengths), max(lengths)), generator=g)
    return ids.masked_fill(~lengths_mask(lengths, max(lengths)), 0), torch.tensor(lengths)


@NORM_FIRST
def test_transformer_forward_equals_torch_transformer_on_its_embeddings(norm_first):
    with torch_seed(28):
        model = Transformer(11, 13, width=WIDTH, num_heads=HEADS, ff_size=FF, layers=2, norm_first=norm_first,
                            max_len=10).double()
    theirs = torch_transformer(norm_first, torch.float64)
    copy_weights(model.core, theirs, "torch to ours", seed=29)
    source, lengths = random_batch([6, 2, 4], 11, seed=30)
    target_in, _ = random_batch([5, 5, 5], 13, seed=31)
    target_in[:, 0] = BOS
    logits, cross = model(source, lengths, target_in)
    assert logits.shape == (3, 5, 13) and cross.shape == (3, HEADS, 5, 6)
    padding = lengths_mask([6, 2, 4], 6)
    hidden = torch_run(theirs, model.source_embedding(source), model.target_embedding(target_in), padding)
    assert_close(logits, model.output(hidden), "logits = output(nn.Transformer(embeddings))")
    assert cross is model.core.decoder.layers[-1].cross_weights, "the last decoder block's cross-attention"
    assert torch.all(cross.masked_select(~padding[:, None, None, :]) == 0)


@pytest.mark.parametrize("positions", KINDS)
def test_transformer_forward_equals_core_by_hand(positions):
    with torch_seed(32):
        model = Transformer(9, 10, width=WIDTH, num_heads=HEADS, ff_size=FF, layers=2, positions=positions,
                            max_len=10).double()
    source, lengths = random_batch([5, 3], 9, seed=33)
    target_in, _ = random_batch([4, 4], 10, seed=34)
    logits, cross = model(source, lengths, target_in)
    cross = cross.clone()
    padding = lengths_mask([5, 3], 5)
    memory = model.core.encoder(model.source_embedding(source),
                                self_attention_mask(positions, HEADS, padding, steps=5))
    hidden = model.core.decoder(model.target_embedding(target_in), memory,
                                mask=self_attention_mask(positions, HEADS, causal=True, steps=4),
                                memory_mask=attention_mask(padding))
    assert_close(logits, model.output(hidden), f"{positions}: logits")
    assert_close(cross, model.core.decoder.layers[-1].cross_weights, f"{positions}: cross weights")


@pytest.mark.parametrize("positions", KINDS)
def test_source_padding_does_not_change_real_outputs(positions):
    with torch_seed(35):
        model = Transformer(9, 10, width=WIDTH, num_heads=HEADS, ff_size=FF, layers=2, positions=positions,
                            max_len=12).double()
    source, lengths = random_batch([7, 2, 4], 9, seed=36)
    target_in, _ = random_batch([5, 5, 5], 10, seed=37)
    model.eval()
    with torch.no_grad():
        memory, _ = model.encode(source, lengths)
        logits, _ = model(source, lengths, target_in)
        for row, length in enumerate(lengths.tolist()):
            alone = source[row:row + 1, :length]
            memory_alone, _ = model.encode(alone, torch.tensor([length]))
            assert_close(memory[row, :length], memory_alone[0], f"{positions}: memory of sentence {row}")
            logits_alone, _ = model(alone, torch.tensor([length]), target_in[row:row + 1])
            assert_close(logits[row], logits_alone[0], f"{positions}: logits of sentence {row}")


PAIRS = 8


@pytest.fixture(scope="module")
def reversal():
    """A tiny Transformer trained to reverse 8 short sentences: ``(model, sources, targets, history)``."""
    rng = np.random.default_rng(0)
    sources = [rng.integers(3, 10, size=rng.integers(2, 6)) for _ in range(PAIRS)]
    targets = [np.concatenate([[BOS], s[::-1], [EOS]]) for s in sources]
    with torch_seed(0):
        model = Transformer(10, 10, width=32, num_heads=2, ff_size=64, layers=2, max_len=16)
    history = train_seq2seq(model, sources, targets, steps=100, batch_size=PAIRS, lr=5e-3, progress=False)
    return model, sources, targets, history


def test_tiny_transformer_learns_to_reverse_sentences(reversal):
    model, sources, targets, history = reversal
    assert history["loss"][0] > 1.5 and history["loss"][-5:].mean() < 0.05, \
        f"loss {history['loss'][0]:.2f} -> {history['loss'][-5:].mean():.3f}"
    outputs, _ = transformer_translate(model, sources, BOS, EOS, max_len=8)
    assert [o.tolist() for o in outputs] == [t[1:-1].tolist() for t in targets]


def test_step_fn_with_greedy_decode_equals_transformer_translate(reversal):
    model = reversal[0]
    sources = reversal[1][:4] + [np.array([9, 3]), np.array([5, 5, 5, 5, 5, 5]), np.array([4])]
    outputs, alignments = transformer_translate(model, sources, BOS, EOS, max_len=7, batch_size=3)
    for source, output, alignment in zip(sources, outputs, alignments):
        step_fn, state = transformer_step_fn(model, source)
        words, _ = greedy_decode(step_fn, state, BOS, EOS, max_len=7)
        assert output.tolist() == [w for w in words if w != EOS], f"source {source.tolist()}"
        step_fn, state = transformer_step_fn(model, source)
        assert beam_search(step_fn, state, BOS, EOS, 1, 7)[0] == words, "a beam of width 1 is greedy search"
        rows = len(output) + 1 if EOS in words else len(output)
        assert alignment.shape == (2, 2, rows, len(source))
        with torch.no_grad(), eval_mode(model):  # the same rows as teacher forcing on the output produced
            model(torch.as_tensor(source)[None], torch.tensor([len(source)]),
                  torch.tensor([[BOS, *words[:rows - 1]]]))
        teacher = torch.stack([block.cross_weights[0] for block in model.core.decoder.layers]).numpy()
        np.testing.assert_allclose(alignment, teacher, atol=1e-6)


def test_step_fn_scores_several_hypotheses_at_once(reversal):
    model, sources = reversal[0], reversal[1]
    step_fn, state = transformer_step_fn(model, sources[0])
    log_probs, state = step_fn(torch.tensor([BOS]), state)
    tokens = torch.tensor([3, 7, EOS])
    together, prefixes = step_fn(tokens, state.expand(3, -1))
    assert prefixes.tolist() == [[BOS, 3], [BOS, 7], [BOS, EOS]] and together.shape == (3, 10)
    for row, token in enumerate(tokens):
        alone, _ = step_fn(token[None], state)
        assert_close(together[row], alone[0], f"hypothesis {row}", 1e-5)
    assert_close(together.exp().sum(-1), torch.ones(3), "log-probabilities", 1e-5)


# ---------------------------------------------------------------- argument errors

ERRORS = {
    "layer_norm of integers": (lambda: layer_norm(torch.ones(2, 3, dtype=torch.int64), torch.ones(3), torch.zeros(3)),
                               ValueError, r"x must be a float tensor of shape \(\.\.\., D\)"),
    "layer_norm weight": (lambda: layer_norm(torch.ones(2, 4), torch.ones(5), torch.zeros(4)), ValueError,
                          r"weight must have shape \(D,\) = \(4,\), got \(5,\)"),
    "layer_norm bias": (lambda: layer_norm(torch.ones(2, 4), torch.ones(4), torch.zeros(4, 1)), ValueError,
                        r"bias must have shape \(D,\) = \(4,\), got \(4, 1\)"),
    "encoder block x of rank 2": (lambda: EncoderBlock(WIDTH, HEADS, FF)(torch.randn(3, WIDTH)), ValueError,
                                  r"x must have shape \(B, T, I\)"),
    "post-LN block x of rank 2": (lambda: EncoderBlock(WIDTH, HEADS, FF, norm_first=False)(torch.randn(3, WIDTH)),
                                  ValueError, r"x must have shape \(B, T, I\)"),
    "encoder block ff_size 0": (lambda: EncoderBlock(WIDTH, HEADS, 0), ValueError,
                                r"ff_size must be a positive integer"),
    "decoder memory of other width": (lambda: DecoderBlock(WIDTH, HEADS, FF)(torch.randn(2, 3, WIDTH),
                                                                             torch.randn(2, 4, 6)),
                                      ValueError, r"key must have shape \(B, Tk, D\) = \(2, \?, 8\), got \(2, 4, 6\)"),
    "source of floats": (lambda: Transformer(5, 5, width=8, num_heads=2)(torch.ones(2, 3), torch.tensor([3, 3]),
                                                                          torch.ones(2, 2, dtype=torch.int64)),
                         ValueError, r"source must be a \(B, T\) int64 tensor"),
    "target_in of other batch": (lambda: Transformer(5, 5, width=8, num_heads=2)(
        torch.ones(2, 3, dtype=torch.int64), torch.tensor([3, 3]), torch.ones(3, 2, dtype=torch.int64)),
        ValueError, r"target_in must have shape \(B, T\) = \(2, \?\) with T >= 1, got \(3, 2\)"),
    "length 0": (lambda: Transformer(5, 5, width=8, num_heads=2)(
        torch.ones(2, 3, dtype=torch.int64), torch.tensor([3, 0]), torch.ones(2, 2, dtype=torch.int64)),
        ValueError, r"lengths must lie in \[1, 3\]"),
    "unknown positions": (lambda: Transformer(5, 5, width=8, num_heads=2, positions="absolute"), ValueError,
                          r"positions must be one of"),
}


@pytest.mark.parametrize("call, error, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
