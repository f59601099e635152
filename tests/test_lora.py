"""course_lib.transfer.lora against the dense formula, autograd and peft.

``lora_linear`` equals ``x (W + scale B A)^T + b``; its gradients equal the hand-derived ones
and pass ``gradcheck`` in float64; wrong shapes and types name what was expected.
``LoRALinear`` starts equal to its base layer (B = 0), with A inside peft's Kaiming-uniform
bound ``1 / sqrt(D_in)``; with random A and B it equals ``merged()``; only A and B get
gradients; in training mode its dropout matches peft's ``lora_dropout`` draw for draw.
``add_lora`` selects the same modules as peft's ``target_modules`` rule on a toy model.
Against peft on BERT: ``transformers.BertModel`` (random, float64) through
``peft.get_peft_model`` and course_lib's ``BertModel`` with the same weights through
``add_lora``, peft's A and (non-zero) B copied across, for two target sets: ``query`` and
``value`` (course_lib's attention reads these layers' weights) and ``key`` plus every dense
layer (peft's ``dense`` is our ``out_proj``, ``linear1``, ``linear2``, ``pooler``; these layers
are called): equal last hidden states and pooled outputs, equal gradients of every A and B,
equal trainable and total parameter counts. The fused case (blocks of an
``in_proj_weight (3D, D)``): chapter 6's attention against the hand-built weight
``[W_Q + s B_Q A_Q; W_K; W_V + s B_V A_V]`` and merged by ``remove_parametrizations``; GPT
starting unchanged; bad targets refused.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from course_lib.bert.model import BertConfig, BertModel
from course_lib.bert.pretrained import from_bert_state_dict
from course_lib.transfer.lora import FusedLoRA, LoRALinear, add_lora, lora_delta, lora_linear, trainable_parameters
from course_lib.transformer.multi_head import MultiHeadAttention, multi_head_attention
from course_lib.training import torch_seed
from torch_helpers import perturb, randn

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one torch thread


def assert_close(actual, expected, what: str, atol: float = 1e-12):
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


def lora_inputs(seed: int = 0, batch=(2, 3), in_features=5, out_features=4, rank=2):
    """``x (*batch, I), W (O, I), b (O,), A (r, I), B (O, r)`` in float64."""
    return (randn(*batch, in_features, seed=seed), randn(out_features, in_features, seed=seed + 1),
            randn(out_features, seed=seed + 2), randn(rank, in_features, seed=seed + 3),
            randn(out_features, rank, seed=seed + 4))


# ---------------------------------------------------------------- lora_linear

@pytest.mark.parametrize("batch", [(2, 3), (7,), ()], ids=["(B, T, I)", "(N, I)", "(I,)"])
def test_lora_linear_equals_the_dense_merged_weight(batch):
    x, w, b, a, bb = lora_inputs(batch=batch)
    dense = w + 1.5 * bb @ a  # (O, I)
    assert_close(lora_linear(x, w, b, a, bb, 1.5), x @ dense.T + b, "with bias")
    assert_close(lora_linear(x, w, None, a, bb, 1.5), x @ dense.T, "without bias")
    assert_close(lora_linear(x, w, b, a, torch.zeros_like(bb), 1.5), x @ w.T + b, "B = 0 gives the frozen layer")
    assert_close(lora_delta(a, bb, 1.5), 1.5 * torch.einsum("or,ri->oi", bb, a), "lora_delta")
    assert lora_linear(x.float(), w.float(), b.float(), a.float(), bb.float(), 1.5).dtype == torch.float32


def test_lora_linear_gradients_equal_the_hand_derived_ones_and_gradcheck():
    x, w, b, a, bb = (t.requires_grad_(True) for t in lora_inputs(batch=(2, 3)))
    scale = 0.75
    torch.autograd.gradcheck(lambda *args: lora_linear(*args, scale), (x, w, b, a, bb))
    probe = randn(2, 3, 4, seed=9)  # dL/dy for L = sum(y * probe)
    grads = torch.autograd.grad((lora_linear(x, w, b, a, bb, scale) * probe).sum(), (x, w, b, a, bb))
    g, xs = probe.reshape(-1, 4), x.detach().reshape(-1, 5)  # (N, O), (N, I)
    a_, b_ = a.detach(), bb.detach()
    expected = ((g @ (w.detach() + scale * b_ @ a_)).reshape(2, 3, 5),  # dL/dx = G (W + s B A)
                g.T @ xs, g.sum(0),  # dL/dW = G^T X, dL/db = sum of G's rows
                scale * b_.T @ g.T @ xs,  # dL/dA = s B^T G^T X   (r, I)
                scale * g.T @ xs @ a_.T)  # dL/dB = s G^T X A^T   (O, r)
    for name, got, want in zip(("x", "W", "b", "A", "B"), grads, expected):
        assert_close(got, want, f"dL/d{name}")


@pytest.mark.parametrize("which, value, message", [
    ("x", randn(2, 3, 6, seed=0), r"x must have shape \(\.\.\., D_in\) = \(2, 3, 5\), got \(2, 3, 6\)"),
    ("weight", randn(4, 5, 1, seed=0), r"weight must have shape \(D_out, D_in\)"),
    ("bias", randn(3, seed=0), r"bias must have shape \(D_out,\) = \(4,\), got \(3,\)"),
    ("lora_a", randn(2, 4, seed=0), r"lora_a must have shape \(R, D_in\) = \(\?, 5\), got \(2, 4\)"),
    ("lora_b", randn(4, 3, seed=0), r"lora_b must have shape \(D_out, R\) = \(4, 2\), got \(4, 3\)"),
    ("lora_b", randn(5, 2, seed=0), r"lora_b must have shape \(D_out, R\) = \(4, 2\), got \(5, 2\)"),
])
def test_lora_linear_names_the_wrong_shape(which, value, message):
    args = dict(zip(("x", "weight", "bias", "lora_a", "lora_b"), lora_inputs())) | {which: value}
    with pytest.raises(ValueError, match=message):
        lora_linear(scale=2.0, **args)


def test_lora_linear_names_the_wrong_type():
    x, w, b, a, bb = lora_inputs()
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor of shape \(\.\.\., D_in\), got ndarray"):
        lora_linear(x.numpy(), w, b, a, bb, 2.0)
    with pytest.raises(TypeError, match="x must be a float tensor"):
        lora_linear(torch.ones(2, 5, dtype=torch.int64), w, b, a, bb, 2.0)
    with pytest.raises(TypeError, match="scale must be a finite number"):
        lora_linear(x, w, b, a, bb, torch.tensor(2.0))


# ---------------------------------------------------------------- LoRALinear

def test_lora_linear_layer_starts_as_its_base_with_peft_s_initialisation():
    with torch_seed(0):
        base = nn.Linear(64, 12)
        layer = LoRALinear(base, rank=8, alpha=16)
    x = randn(3, 64, seed=1, dtype=torch.float32)
    assert_close(layer(x), base(x), "at initialisation (B = 0)", atol=0.0)
    assert layer.scale == 2.0 and layer.base is base
    assert layer.lora_a.shape == (8, 64) and layer.lora_b.shape == (12, 8) and not layer.lora_b.any()
    bound = 1 / math.sqrt(64)  # Kaiming uniform with a = sqrt(5): gain sqrt(1/3), bound sqrt(3) gain / sqrt(I)
    assert layer.lora_a.abs().max() <= bound and layer.lora_a.abs().max() > 0.95 * bound
    assert abs(layer.lora_a.std().item() - bound / math.sqrt(3)) < 0.15 * bound / math.sqrt(3)


def test_lora_linear_layer_equals_merged_and_only_a_and_b_learn():
    with torch_seed(0):
        layer = LoRALinear(nn.Linear(6, 4).double(), rank=3, alpha=6)
    with torch.no_grad():
        layer.lora_a.copy_(randn(3, 6, seed=1))
        layer.lora_b.copy_(randn(4, 3, seed=2))
    x = randn(2, 5, 6, seed=3)
    merged = layer.merged()
    assert type(merged) is nn.Linear and merged.weight.dtype == torch.float64
    assert_close(layer(x), merged(x), "LoRALinear against merged()")
    assert_close(merged.weight, layer.base.weight + 2.0 * layer.lora_b @ layer.lora_a, "merged weight")
    layer(x).square().sum().backward()
    assert layer.base.weight.grad is None and layer.base.bias.grad is None
    assert not layer.base.weight.requires_grad and not layer.base.bias.requires_grad
    assert layer.lora_a.grad.abs().min() > 0 and layer.lora_b.grad.abs().min() > 0
    assert trainable_parameters(layer) == 3 * 6 + 4 * 3
    without_bias = LoRALinear(nn.Linear(6, 4, bias=False).double(), rank=2, alpha=1)
    assert without_bias.merged().bias is None
    assert_close(without_bias(x), x @ without_bias.base.weight.T, "no bias, B = 0")


def test_lora_linear_layer_checks_its_arguments():
    with pytest.raises(TypeError, match="base must be a torch.nn.Linear, got Conv1d"):
        LoRALinear(nn.Conv1d(2, 2, 1), 2, 4)
    with pytest.raises(ValueError, match="rank must be a positive integer, got 0"):
        LoRALinear(nn.Linear(2, 2), 0, 4)
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\), got 1.0"):
        LoRALinear(nn.Linear(2, 2), 2, 4, dropout=1.0)


# ---------------------------------------------------------------- against peft

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


class Toy(nn.Module):
    """Linear layers whose names test the target rule: exact, suffix after a dot, not a mere suffix."""

    def __init__(self):
        super().__init__()
        self.query = nn.Linear(4, 4)
        self.attn = nn.ModuleDict({"query": nn.Linear(4, 4), "query_proj": nn.Linear(4, 4),
                                   "value": nn.Linear(4, 4), "myvalue": nn.Linear(4, 4)})
        self.blocks = nn.ModuleList([nn.ModuleDict({"value": nn.Linear(4, 4), "key": nn.Linear(4, 4)})])

    def forward(self, x):
        return self.query(x)


@pytest.mark.parametrize("targets", [["query", "value"], ["attn.value", "key"], ["blocks.0.key"]])
def test_add_lora_picks_the_modules_peft_picks(targets):
    ours = Toy()
    names = add_lora(ours, targets, rank=2, alpha=4)
    theirs = peft.get_peft_model(Toy(), peft.LoraConfig(r=2, lora_alpha=4, target_modules=targets))
    adapted = sorted(n.removeprefix("base_model.model.") for n, m in theirs.named_modules()
                     if isinstance(m, peft.tuners.lora.LoraLayer))
    assert sorted(names) == adapted
    assert {n for n, m in ours.named_modules() if isinstance(m, LoRALinear)} == set(names)
    assert trainable_parameters(ours) == theirs.get_nb_trainable_parameters()[0] == len(names) * 2 * (2 * 4)


def test_add_lora_dropout_matches_peft_s_lora_dropout_in_training():
    with torch_seed(0):
        toy = Toy().double()
    theirs = peft.get_peft_model(copy.deepcopy(toy), peft.LoraConfig(r=2, lora_alpha=4, target_modules=["query"],
                                                                      lora_dropout=0.5))
    add_lora(toy, ["query"], rank=2, alpha=4, dropout=0.5)
    peft_query = theirs.base_model.model.query
    with torch.no_grad():
        peft_query.lora_B["default"].weight.copy_(randn(4, 2, seed=1))
        toy.query.lora_a.copy_(peft_query.lora_A["default"].weight)
        toy.query.lora_b.copy_(peft_query.lora_B["default"].weight)
    x = randn(6, 4, seed=2)
    toy.train(), theirs.train()
    with torch_seed(5):
        ours_out = toy(x)
    with torch_seed(5):
        their_out = theirs(x)
    assert_close(ours_out, their_out, "training mode, the same dropout draws")
    toy.eval()
    assert not torch.allclose(ours_out, toy(x)), "dropout must change the training output"
    assert_close(toy(x), toy.query.merged()(x), "eval mode: no dropout")


SMALL = BertConfig(vocab_size=40, width=16, num_heads=4, layers=2, ff_size=24, context=12, dropout=0.0,
                   attention_dropout=0.0)
# transformers' BertModel -> course_lib's BertModel, the layers LoRA can target (the query, key and value
# layers have the same last names; the other three, and so their targets, differ)
HF_TO_OURS = {r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)": r"encoder.layers.\1.self_attn.\2",
              r"encoder\.layer\.(\d+)\.attention\.output\.dense": r"encoder.layers.\1.self_attn.out_proj",
              r"encoder\.layer\.(\d+)\.intermediate\.dense": r"encoder.layers.\1.linear1",
              r"encoder\.layer\.(\d+)\.output\.dense": r"encoder.layers.\1.linear2",
              r"pooler\.dense": "pooler"}


def _our_lora_name(peft_name: str) -> str:
    """``base_model.model.encoder.layer.0.attention.self.query.lora_A.default.weight -> encoder.layers.0.self_attn.query.lora_a``."""
    module, _, kind = peft_name.removeprefix("base_model.model.").partition(".lora_")
    for pattern, ours in HF_TO_OURS.items():
        if re.fullmatch(pattern, module):
            return f"{re.sub(pattern, ours, module)}.lora_{kind[0].lower()}"
    raise AssertionError(f"no course_lib name for {peft_name}")


def bert_pair(dropout: float = 0.0):
    """A random ``transformers.BertModel`` (float64, eval mode) and course_lib's ``BertModel`` with its weights."""
    config = dataclasses.replace(SMALL, dropout=dropout, attention_dropout=dropout)
    hf_config = transformers.BertConfig(**config.hf_config_kwargs(), attn_implementation="eager")
    with torch_seed(0):
        hf = perturb(transformers.BertModel(hf_config).double(), seed=1).eval()
    ours = BertModel(config).double().eval()
    from_bert_state_dict(ours, hf.state_dict())
    return hf, ours


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # peft 0.21 calls it
@pytest.mark.parametrize("their_targets, our_targets, adapted", [
    (["query", "value"], ["query", "value"], ["self_attn.query", "self_attn.value"]),
    (["key", "dense"], ["key", "out_proj", "linear1", "linear2", "pooler"],
     ["self_attn.key", "self_attn.out_proj", "linear1", "linear2"]),
], ids=["query and value (read as weights)", "key and every dense layer (called)"])
def test_add_lora_on_course_bert_equals_peft_on_transformers_bert(their_targets, our_targets, adapted):
    hf, ours = bert_pair()
    with torch_seed(2):
        theirs = peft.get_peft_model(hf, peft.LoraConfig(r=4, lora_alpha=8, target_modules=their_targets,
                                                         lora_dropout=0.0)).eval()
    names = add_lora(ours, our_targets, rank=4, alpha=8)
    expected_names = [f"encoder.layers.{i}.{n}" for i in range(SMALL.layers) for n in adapted]
    assert names == expected_names + (["pooler"] if "pooler" in our_targets else [])

    peft_lora = {n: p for n, p in theirs.named_parameters() if "lora_" in n}
    our_lora = dict(ours.named_parameters())
    assert sorted(map(_our_lora_name, peft_lora)) == sorted(n for n, p in our_lora.items() if p.requires_grad)
    with torch.no_grad():
        for i, (name, p) in enumerate(peft_lora.items()):
            if "lora_B" in name:
                assert not p.any(), "peft starts B at zero"
                p.copy_(randn(*p.shape, seed=10 + i))  # non-zero B, so the update shows
            our_lora[_our_lora_name(name)].copy_(p)

    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, SMALL.vocab_size, (3, 7), generator=g)
    padding = torch.ones_like(ids, dtype=torch.bool)
    padding[1, 5:], padding[2, 3:] = False, False
    ids[~padding] = 0
    out = ours(ids, None, padding)
    ref = theirs(input_ids=ids, attention_mask=padding.long())
    assert_close(out.last, ref.last_hidden_state, "last hidden states with LoRA", atol=1e-10)
    assert_close(out.pooled, ref.pooler_output, "pooled output with LoRA", atol=1e-10)
    with theirs.disable_adapter():
        plain = theirs(input_ids=ids, attention_mask=padding.long()).last_hidden_state
    assert (out.last - plain).abs().max() > 1e-3, "the LoRA update must change the output"

    probe = randn(3, 7, SMALL.width, seed=4) * padding[..., None]
    mine = torch.autograd.grad((out.last * probe).sum() + out.pooled.sum(),
                               [our_lora[_our_lora_name(n)] for n in peft_lora])
    expected = torch.autograd.grad((ref.last_hidden_state * probe).sum() + ref.pooler_output.sum(),
                                   list(peft_lora.values()))
    for name, a, b in zip(peft_lora, mine, expected):
        assert b.abs().max() > 0, name
        assert_close(a, b, f"gradient of {name}", atol=1e-10)
    trainable, total = theirs.get_nb_trainable_parameters()
    assert trainable_parameters(ours) == trainable
    assert sum(p.numel() for p in ours.parameters()) == total


def test_lora_on_bert_s_query_refuses_dropout_it_cannot_apply():
    _, ours = bert_pair(dropout=0.1)
    add_lora(ours, ["query", "linear1"], rank=2, alpha=4, dropout=0.1)
    ids = torch.ones(1, 4, dtype=torch.int64)
    ours.eval()(ids)  # no dropout in eval mode
    with pytest.raises(RuntimeError, match="reads this LoRA layer's weight instead of calling it"):
        ours.train()(ids)


# ---------------------------------------------------------------- fused in_proj_weight blocks

def test_add_lora_on_fused_attention_adapts_the_query_and_value_blocks():
    with torch_seed(0):
        model = nn.ModuleDict({"self_attn": MultiHeadAttention(8, 2)}).double()
    frozen_w, frozen_b = model["self_attn"].in_proj_weight.detach().clone(), model["self_attn"].in_proj_bias.clone()
    assert add_lora(model, ["query", "value"], rank=2, alpha=3) == ["self_attn.query", "self_attn.value"]
    attention = model["self_attn"]
    lora = attention.parametrizations.in_proj_weight[0]
    assert isinstance(lora, FusedLoRA) and sorted(lora.lora_a) == ["query", "value"]
    x = randn(2, 5, 8, seed=1)
    out, _ = attention(x, x, x)
    plain = multi_head_attention(x, x, x, frozen_w, frozen_b, attention.out_proj.weight, attention.out_proj.bias, 2)
    assert_close(out, plain[0], "B = 0: the frozen attention")
    with torch.no_grad():
        for i, name in enumerate(("query", "value")):
            lora.lora_b[name].copy_(randn(8, 2, seed=2 + i))
    a, b = lora.lora_a, lora.lora_b
    by_hand = torch.cat([frozen_w[:8] + 1.5 * b["query"] @ a["query"], frozen_w[8:16],
                         frozen_w[16:] + 1.5 * b["value"] @ a["value"]])  # (3D, D)
    out, _ = attention(x, x, x)
    expected = multi_head_attention(x, x, x, by_hand, frozen_b, attention.out_proj.weight, attention.out_proj.bias, 2)
    assert_close(out, expected[0], "adapted blocks")
    assert trainable_parameters(model) == 2 * (2 * 8 + 8 * 2)
    out.square().sum().backward()
    assert attention.parametrizations.in_proj_weight.original.grad is None
    assert all(p.grad.abs().max() > 0 for p in [*a.values(), *b.values()])
    parametrize.remove_parametrizations(attention, "in_proj_weight")  # merge: W + the update, plain again
    assert_close(attention(x, x, x)[0], expected[0].detach(), "merged by remove_parametrizations")


def test_add_lora_on_gpt_starts_unchanged_and_rejects_bad_targets():
    from course_lib.gpt.model import GPT, GPTConfig

    config = GPTConfig(vocab_size=20, width=8, num_heads=2, layers=2, context=6, dropout=0.0)
    with torch_seed(0):
        gpt = GPT(config).double().eval()
    ids = torch.randint(0, 20, (2, 6), generator=torch.Generator().manual_seed(1))
    before = gpt(ids)[0].detach()
    names = add_lora(gpt, ["query", "value", "linear1"], rank=2, alpha=4)
    assert names == [f"blocks.{i}.{n}" for i in range(2) for n in ("self_attn.query", "self_attn.value", "linear1")]
    assert_close(gpt(ids)[0], before, "GPT with LoRA at initialisation")
    assert trainable_parameters(gpt) == 2 * (2 * (2 * 8 + 8 * 2) + (2 * 8 + config.ff_size * 2))
    with pytest.raises(ValueError, match=r"no nn.Linear layer or fused attention block of the model matches \['q'\]"):
        add_lora(GPT(config), ["q"], 2, 4)
    with pytest.raises(TypeError, match="targets must be a non-empty list"):
        add_lora(GPT(config), "query", 2, 4)
    with pytest.raises(ValueError, match="dropout must be 0 when a fused"):
        add_lora(GPT(config), ["query"], 2, 4, dropout=0.1)


def test_merge_lora_folds_every_update_into_plain_weights():
    """A BERT with LoRA layers and a chapter 6 attention with fused blocks compute the same after the merge,
    with no LoRA module or parameter left."""
    from course_lib.bert.model import BertConfig, BertModel
    from course_lib.transfer.lora import FusedLoRA, LoRALinear, add_lora, merge_lora

    torch.manual_seed(40)
    bert = BertModel(BertConfig(vocab_size=30, width=16, num_heads=2, layers=2, ff_size=32, context=12,
                                dropout=0.0)).double().eval()
    add_lora(bert, ["query", "value", "linear1"], rank=2, alpha=4)
    with torch.no_grad():
        for name, p in bert.named_parameters():
            if "lora_b" in name:
                p.normal_()
    ids = torch.randint(0, 30, (3, 7))
    before = bert(ids).last
    merge_lora(bert)
    assert not any(isinstance(m, (LoRALinear, FusedLoRA)) for m in bert.modules())
    assert not any("lora" in name for name, _ in bert.named_parameters())
    torch.testing.assert_close(bert(ids).last, before, rtol=1e-10, atol=1e-12)


def test_merge_lora_removes_the_fused_blocks_of_a_gpt():
    from course_lib.gpt.model import GPT, GPTConfig
    from course_lib.transfer.lora import FusedLoRA, add_lora, merge_lora

    torch.manual_seed(41)
    gpt = GPT(GPTConfig(vocab_size=20, context=8, width=16, num_heads=2, layers=2)).double().eval()
    names = add_lora(gpt, ["query", "value"], rank=2, alpha=4)
    assert names and all(name.endswith((".query", ".value")) for name in names), names
    with torch.no_grad():
        for name, p in gpt.named_parameters():
            if "lora_b" in name:
                p.normal_()
    ids = torch.randint(0, 20, (2, 8))
    before, _ = gpt(ids)
    merge_lora(gpt)
    assert not any(isinstance(m, FusedLoRA) for m in gpt.modules())
    after, _ = gpt(ids)
    torch.testing.assert_close(after, before, rtol=1e-10, atol=1e-12)
