"""course_lib.bert's embeddings, self-attention, model, pretrained weights, pooling and MLM masking against transformers.

The reference model is ``transformers.BertModel``: loaded from the packaged
all-MiniLM-L6-v2 files with eager attention (so that it returns its attention
probabilities), and built with random weights from ``BertConfig.hf_config_kwargs()``
for small models (nothing is downloaded). With the MiniLM weights (``load_pretrained``),
on a batch of texts of different lengths and on sentence pairs (two segments), every
layer's hidden states at the real tokens, every layer's attention probabilities
everywhere (exactly 0 on padded keys) and the pooler agree to ``1e-5``, and the
gradients of a loss with every parameter to ``1e-4`` of the largest. A small random
BERT in float64, weights copied both ways (``to_bert_state_dict`` into
``transformers.BertModel``, ``from_bert_state_dict`` from it), agrees to ``1e-10``,
gradients included. Dropout makes the model stochastic in training mode only.

The pieces: ``bert_embeddings`` against ``transformers``' ``BertEmbeddings`` and the
formula, ``bert_self_attention`` against ``transformers``' ``BertSelfAttention``
(eager) and a loop over batch, heads and queries, with padding; ``gradcheck`` of both
in float64. Mean-pooled sentence embeddings (``encode_sentences``) against
``sentence_transformers.SentenceTransformer`` on the same files to ``1e-5``, and
similarity rankings. ``mlm_mask`` by counting over many draws (binomial tolerances of
5 standard deviations), with its edge cases. ``read_safetensors`` against
``safetensors.torch.load_file``; errors of every argument check, of the safetensors
reader and of the weight loader (which names the weight and loads nothing).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import pytest
import torch
from torch.nn import functional as F

from course_lib.bert.embeddings import BertEmbeddings, bert_embeddings
from course_lib.bert.inputs import encode_batch
from course_lib.bert.masking import IGNORE, mlm_mask, special_token_mask
from course_lib.bert.model import BertConfig, BertLayer, BertModel, BertOutput
from course_lib.bert.pooling import cls_pool, encode_sentences, mean_pool
from course_lib.bert.pretrained import (from_bert_state_dict, load_pretrained, minilm_directory, read_safetensors,
                                        to_bert_state_dict)
from course_lib.bert.self_attention import BertSelfAttention, bert_self_attention
from course_lib.text.movie_reviews import movie_review_sentences
from course_lib.training import torch_seed
from torch_helpers import perturb, randn

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
safetensors_torch = pytest.importorskip("safetensors.torch")

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one torch thread

TEXTS = ["The film is a charming, funny romp.", "Dull.",
         "An overlong, self-indulgent mess of a movie that never quite figures out what it wants to be.",
         "Café society in the 1990s: witty, warm and wise!"]
PAIRS = ["Is it any good?", "A tedious film with a plot that makes no sense at all.", "Yes.", "No."]


def assert_close(actual, expected, what: str, atol: float):
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol, msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------- shared models (once per module)

@pytest.fixture(scope="module")
def minilm():
    """``(model, tokenizer)`` of course_lib with the MiniLM weights, in eval mode."""
    return load_pretrained()


@pytest.fixture(scope="module")
def hf_minilm():
    from transformers.utils import logging

    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # its "Loading weights" bar goes to stderr
    try:
        return transformers.BertModel.from_pretrained(str(minilm_directory()), attn_implementation="eager").eval()
    finally:
        if shown:
            logging.enable_progress_bar()


@pytest.fixture(scope="module")
def sentence_transformer():
    from transformers.utils import logging

    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")  # nothing may be downloaded
        sentence_transformers = pytest.importorskip("sentence_transformers")
        try:
            return sentence_transformers.SentenceTransformer(str(minilm_directory()), device="cpu")
        finally:
            if shown:
                logging.enable_progress_bar()


def hf_forward(hf, batch):
    return hf(input_ids=batch.ids, token_type_ids=batch.segments, attention_mask=batch.padding.long(),
              output_hidden_states=True, output_attentions=True)


def assert_same_as_transformers(ours: BertOutput, theirs, padding, atol: float, what: str):
    """Every hidden state at the real tokens, every attention everywhere, the pooler."""
    assert len(ours.hidden_states) == len(theirs.hidden_states) and len(ours.attentions) == len(theirs.attentions)
    for layer, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        assert a.shape == b.shape
        assert_close(a[padding], b[padding], f"{what}: hidden state {layer} at the real tokens", atol)
    for layer, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
        assert a.shape == b.shape and not a.requires_grad
        assert_close(a, b, f"{what}: attention probabilities of layer {layer + 1}", atol)
        assert torch.all(a.masked_select(~padding[:, None, None, :]) == 0), "weights on padded keys must be 0"
    assert_close(ours.last, ours.hidden_states[-1], "last is the last hidden state", 0)
    assert_close(ours.pooled, theirs.pooler_output, f"{what}: pooler output", atol)


# ---------------------------------------------------------------- MiniLM against transformers.BertModel

@pytest.mark.parametrize("pairs", [None, PAIRS], ids=["single texts", "pairs"])
def test_minilm_equals_transformers_layer_by_layer(pairs, minilm, hf_minilm):
    model, tokenizer = minilm
    batch = encode_batch(tokenizer, TEXTS, pairs)
    assert not batch.padding.all(), "the batch must hold padding"
    if pairs is not None:
        assert batch.segments.max() == 1
    with torch.no_grad():
        ours, theirs = model(*batch), hf_forward(hf_minilm, batch)
    assert len(ours.attentions) == 6 and ours.attentions[0].shape == (4, 12, batch.ids.shape[1], batch.ids.shape[1])
    assert_same_as_transformers(ours, theirs, batch.padding, 1e-5, "MiniLM")
    assert ours.last.abs().max() > 1 and ours.pooled.abs().max() > 0.1, "not a trivial output"


def test_minilm_without_padding_or_segments_equals_transformers(minilm, hf_minilm):
    model, tokenizer = minilm
    batch = encode_batch(tokenizer, ["A single sentence without any padding at all."])
    with torch.no_grad():
        ours = model(batch.ids)  # segments None: all 0; padding None: no padding
        theirs = hf_forward(hf_minilm, batch)
    assert_same_as_transformers(ours, theirs, batch.padding, 1e-5, "MiniLM, one sentence")


def test_minilm_gradients_equal_transformers(minilm, hf_minilm):
    model, tokenizer = minilm
    batch = encode_batch(tokenizer, TEXTS[:3], PAIRS[:3])
    probe = randn(*batch.ids.shape, 384, seed=1, dtype=torch.float32) * batch.padding[..., None]
    probe_pooled = randn(3, 384, seed=2, dtype=torch.float32)
    ours, theirs = model(*batch), hf_forward(hf_minilm, batch)
    names = dict(zip(model.state_dict(), to_bert_state_dict(model)))  # our name -> transformers'
    params = dict(model.named_parameters())
    their_params = dict(hf_minilm.named_parameters())
    mine = torch.autograd.grad((ours.last * probe).sum() + (ours.pooled * probe_pooled).sum(), list(params.values()))
    expected = torch.autograd.grad((theirs.last_hidden_state * probe).sum()
                                   + (theirs.pooler_output * probe_pooled).sum(),
                                   [their_params[names[n]] for n in params])
    for name, a, b in zip(params, mine, expected):
        # relative to the largest; a key bias has none (it shifts every score of a query alike): rounding noise
        assert_close(a, b, f"gradient of {name}", 1e-4 * max(b.abs().max().item(), 0.1))


def test_minilm_size_and_loading(minilm, hf_minilm):
    model, tokenizer = minilm
    assert not model.training
    assert model.config == BertConfig(30522, width=384, num_heads=12, layers=6, ff_size=1536, context=512)
    assert model.num_parameters() == sum(p.numel() for p in hf_minilm.parameters()) == 22_713_216
    assert len(tokenizer) == 30522 and tokenizer.lowercase
    theirs = hf_minilm.state_dict()
    for name, tensor in to_bert_state_dict(model).items():
        assert torch.equal(tensor, theirs[name]), name


# ---------------------------------------------------------------- a small random BERT, float64, both directions

SMALL = BertConfig(vocab_size=40, width=16, num_heads=4, layers=2, ff_size=24, context=12, dropout=0.0,
                   attention_dropout=0.0)


def hf_model(config: BertConfig, dtype=torch.float64):
    """A random ``transformers.BertModel`` of the same size (eager attention), in eval mode."""
    hf_config = transformers.BertConfig(**config.hf_config_kwargs(), attn_implementation="eager")
    return transformers.BertModel(hf_config, add_pooling_layer=True).to(dtype).eval()


def small_batch(config: BertConfig, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, config.vocab_size, (3, 9), generator=g)
    segments = torch.zeros_like(ids)
    segments[0, 4:], segments[1, 3:6] = 1, 1
    padding = torch.ones_like(ids, dtype=torch.bool)
    padding[1, 6:], padding[2, 2:] = False, False
    ids[~padding] = 0  # [PAD] only at padded positions (transformers never trains its row: padding_idx)
    return ids, segments, padding


@pytest.mark.parametrize("config", [SMALL, dataclasses.replace(SMALL, num_heads=1, layers=3, eps=1e-3, ff_size=None)],
                         ids=["4 heads", "1 head, eps 1e-3"])
def test_weights_copied_both_ways_give_transformers_outputs_and_gradients(config):
    ids, segments, padding = small_batch(config)
    with torch_seed(0):
        ours = perturb(BertModel(config).double(), seed=1).eval()
    hf = hf_model(config)
    hf.load_state_dict(to_bert_state_dict(ours))  # strict: every name matches
    theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=padding.long(), output_hidden_states=True,
                output_attentions=True)
    out = ours(ids, segments, padding)
    assert_same_as_transformers(out, theirs, padding, 1e-10, "ours -> transformers")
    probe = randn(3, 9, config.width, seed=3) * padding[..., None]
    names = dict(zip(ours.state_dict(), to_bert_state_dict(ours)))
    params, their_params = dict(ours.named_parameters()), dict(hf.named_parameters())
    mine = torch.autograd.grad((out.last * probe).sum() + out.pooled.sum(), list(params.values()))
    expected = torch.autograd.grad((theirs.last_hidden_state * probe).sum() + theirs.pooler_output.sum(),
                                   [their_params[names[n]] for n in params])
    for name, a, b in zip(params, mine, expected):
        assert b.abs().max() > 0 or name.startswith("embeddings.token"), name
        assert_close(a, b, f"gradient of {name}", 1e-10)

    perturb(hf, seed=2)
    back = BertModel(config).double().eval()
    from_bert_state_dict(back, hf.state_dict())
    theirs = hf(input_ids=ids, token_type_ids=segments, attention_mask=padding.long(), output_hidden_states=True,
                output_attentions=True)
    assert_same_as_transformers(back(ids, segments, padding), theirs, padding, 1e-10, "transformers -> ours")


def test_from_bert_state_dict_takes_prefixed_and_tensorflow_names():
    hf = perturb(hf_model(SMALL), seed=4)
    ids, segments, padding = small_batch(SMALL, seed=5)
    expected = hf(input_ids=ids, token_type_ids=segments, attention_mask=padding.long()).last_hidden_state
    renamed = {"bert." + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"):
               t for name, t in hf.state_dict().items()}
    renamed["bert.embeddings.position_ids"] = torch.arange(SMALL.context)[None]
    model = BertModel(SMALL).double().eval()
    from_bert_state_dict(model, renamed)
    assert_close(model(ids, segments, padding).last[padding], expected[padding], "after bert./gamma/beta names",
                 1e-10)
    as_float = BertModel(SMALL).eval()
    from_bert_state_dict(as_float, hf.state_dict())  # float64 weights into a float32 model: converted
    assert as_float.pooler.weight.dtype == torch.float32
    assert torch.equal(as_float.pooler.weight, hf.pooler.dense.weight.float())


def test_to_bert_state_dict_names_are_transformers_and_copies():
    model = BertModel(SMALL)
    state = to_bert_state_dict(model)
    assert set(state) == set(hf_model(SMALL).state_dict())
    state["pooler.dense.weight"].add_(1.0)
    assert not torch.equal(state["pooler.dense.weight"], model.pooler.weight), "the tensors must be copies"


def test_dropout_makes_training_mode_stochastic_and_eval_mode_deterministic():
    config = dataclasses.replace(SMALL, dropout=0.1, attention_dropout=0.1)
    ids, segments, padding = small_batch(config)
    with torch_seed(0):
        model = perturb(BertModel(config).double(), seed=6)
    model.train()
    with torch_seed(1):
        first = model(ids, segments, padding)
    with torch_seed(1):
        again = model(ids, segments, padding)
    second = model(ids, segments, padding)
    assert torch.equal(first.last, again.last), "the same seed repeats a training-mode pass"
    assert (first.last - second.last).abs().max() > 1e-3, "dropout must change a training-mode pass"
    model.eval()
    assert torch.equal(model(ids, segments, padding).last, model(ids, segments, padding).last)
    # attention dropout alone: the returned weights are those before dropout, the output changes
    attention_only = dataclasses.replace(SMALL, attention_dropout=0.5)
    with torch_seed(0):
        model = perturb(BertModel(attention_only).double(), seed=6)
    evaluated = model.eval()(ids, segments, padding)
    trained = model.train()(ids, segments, padding)
    assert_close(trained.attentions[0], evaluated.attentions[0], "first layer's weights before dropout", 1e-12)
    assert (trained.last - evaluated.last).abs().max() > 1e-3


def test_bert_layer_is_post_ln_with_exact_gelu():
    layer = perturb(BertLayer(SMALL).double(), seed=7).eval()
    x, padding = randn(2, 5, 16, seed=8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    attention, _ = layer.self_attn(x, mask=padding)
    g = F.layer_norm(x + attention, (16,), layer.norm1.weight, layer.norm1.bias, eps=1e-12)
    ffn = layer.linear2(0.5 * layer.linear1(g) * (1 + torch.erf(layer.linear1(g) / math.sqrt(2))))
    expected = F.layer_norm(g + ffn, (16,), layer.norm2.weight, layer.norm2.bias, eps=1e-12)
    assert_close(layer(x, padding), expected, "LN_2(g + FFN(g)) with g = LN_1(x + attention(x))", 1e-12)
    assert layer.norm1.eps == layer.norm2.eps == 1e-12


def test_plugged_in_functions_and_initialisation():
    calls = []

    def embed(*args):
        calls.append("embed")
        return bert_embeddings(*args)

    def attend(*args):
        calls.append("attend")
        return bert_self_attention(*args)

    model = BertModel(SMALL, embed_fn=embed, attention_fn=attend).eval()
    ids, segments, padding = small_batch(SMALL)
    model(ids, segments, padding)
    assert calls == ["embed", "attend", "attend"]
    with torch_seed(0):
        big = BertModel(BertConfig(vocab_size=500, width=64, num_heads=4, layers=2))
    assert big.config.ff_size == 256
    for name, p in big.named_parameters():
        if name.endswith("bias"):
            assert torch.all(p == 0), name
        elif "norm" in name:
            assert torch.all(p == 1), name
        else:  # N(0, 0.02^2): mean and standard deviation within 5 standard errors
            n = p.numel()
            assert abs(p.mean().item()) < 5 * 0.02 / math.sqrt(n), name
            assert abs(p.std().item() - 0.02) < 5 * 0.02 / math.sqrt(2 * n), name
    assert big.num_parameters() == sum(p.numel() for p in big.parameters())
    assert big.num_parameters() == sum(p.numel() for p in hf_model(big.config).parameters())


# ---------------------------------------------------------------- embeddings

def test_bert_embeddings_equal_transformers_and_the_formula():
    config = dataclasses.replace(SMALL, eps=1e-6)
    hf = perturb(transformers.models.bert.modeling_bert.BertEmbeddings(
        transformers.BertConfig(**config.hf_config_kwargs())).double(), seed=9).eval()
    ids, segments, _ = small_batch(config)
    args = [ids, segments, hf.word_embeddings.weight, hf.token_type_embeddings.weight,
            hf.position_embeddings.weight, hf.LayerNorm.weight, hf.LayerNorm.bias]
    given = [a.detach().clone() for a in args]
    ours = bert_embeddings(*args, eps=1e-6)
    assert ours.shape == (3, 9, 16) and ours.dtype == torch.float64
    assert_close(ours, hf(input_ids=ids, token_type_ids=segments), "against BertEmbeddings", 1e-12)
    summed = torch.stack([torch.stack([args[2][ids[b, t]] + args[3][segments[b, t]] + args[4][t] for t in range(9)])
                          for b in range(3)])
    assert_close(ours, F.layer_norm(summed, (16,), args[5], args[6], eps=1e-6), "the formula, by hand", 1e-12)
    assert all(torch.equal(a, b) for a, b in zip(args, given)), "the arguments must not be modified"
    assert_close(bert_embeddings(*args), F.layer_norm(summed, (16,), args[5], args[6], eps=1e-12), "eps 1e-12",
                 1e-12)


def test_bert_embeddings_gradcheck():
    g = torch.Generator().manual_seed(10)
    ids = torch.randint(0, 6, (2, 3), generator=g)
    segments = torch.tensor([[0, 1, 1], [0, 0, 1]])
    weights = [randn(6, 4, seed=11, grad=True), randn(2, 4, seed=12, grad=True), randn(5, 4, seed=13, grad=True),
               (1 + randn(4, seed=14) * 0.1).requires_grad_(), randn(4, seed=15, grad=True)]
    assert torch.autograd.gradcheck(lambda *w: bert_embeddings(ids, segments, *w), weights, eps=1e-6, atol=1e-7)


def test_bert_embeddings_module():
    module = BertEmbeddings(30, 8, 10, dropout=0.5).eval()
    ids = torch.tensor([[3, 4, 5]])
    expected = bert_embeddings(ids, torch.zeros_like(ids), module.token_embedding.weight,
                               module.segment_embedding.weight, module.position_embedding.weight,
                               module.norm.weight, module.norm.bias)
    assert_close(module(ids), expected, "segments None means all 0", 0)
    assert [n for n, _ in module.named_parameters()] == ["token_embedding.weight", "segment_embedding.weight",
                                                         "position_embedding.weight", "norm.weight", "norm.bias"]
    assert not torch.equal(module.train()(ids), expected), "dropout in training mode"


# ---------------------------------------------------------------- self-attention

def attention_args(width: int, seed: int, dtype=torch.float64, grad: bool = False):
    return [randn(width, width, seed=seed + i, dtype=dtype, grad=grad) * 0.5 if i % 2 == 0
            else randn(width, seed=seed + i, dtype=dtype, grad=grad) for i in range(6)]


def attention_by_loops(x, padding, w_q, b_q, w_k, b_k, w_v, b_v, heads):
    """The docstring's equation, one batch row, head and query at a time."""
    batch, steps, width = x.shape
    size = width // heads
    q, k, v = x @ w_q.T + b_q, x @ w_k.T + b_k, x @ w_v.T + b_v
    output, weights = torch.zeros_like(x), torch.zeros(batch, heads, steps, steps, dtype=x.dtype)
    for b in range(batch):
        real = [j for j in range(steps) if padding is None or padding[b, j]]
        for h in range(heads):
            cols = slice(h * size, (h + 1) * size)
            for i in range(steps):
                scores = torch.stack([q[b, i, cols] @ k[b, j, cols] for j in real]) / math.sqrt(size)
                p = torch.exp(scores - scores.max())
                p = p / p.sum()
                weights[b, h, i, real] = p
                output[b, i, cols] = sum(p[n] * v[b, j, cols] for n, j in enumerate(real))
    return output, weights


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_bert_self_attention_equals_transformers_and_loops(heads):
    width, padding = 8, torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    x = randn(3, 5, width, seed=20 + heads)
    args = attention_args(width, seed=30 + heads)
    given = [t.clone() for t in [x, padding, *args]]
    output, weights = bert_self_attention(x, padding, *args, heads)
    assert output.shape == (3, 5, width) and weights.shape == (3, heads, 5, 5)
    expected_output, expected_weights = attention_by_loops(x, padding, *args, heads)
    assert_close(output, expected_output, "output against loops", 1e-12)
    assert_close(weights, expected_weights, "weights against loops", 1e-12)
    hf_config = transformers.BertConfig(hidden_size=width, num_attention_heads=heads, attention_probs_dropout_prob=0.0,
                                        attn_implementation="eager")
    hf = transformers.models.bert.modeling_bert.BertSelfAttention(hf_config).double().eval()
    with torch.no_grad():
        for layer, (w, b) in zip((hf.query, hf.key, hf.value), zip(args[::2], args[1::2])):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    additive = torch.zeros(3, 1, 1, 5, dtype=torch.float64).masked_fill(~padding[:, None, None, :], -math.inf)
    hf_output, hf_weights = hf(x, attention_mask=additive)
    assert_close(output, hf_output, "output against transformers' BertSelfAttention", 1e-12)
    assert_close(weights, hf_weights, "weights against transformers' BertSelfAttention", 1e-12)
    assert torch.all(weights.masked_select(~padding[:, None, None, :]) == 0), "weights on padded keys: exactly 0"
    assert_close(weights.sum(-1), torch.ones(3, heads, 5, dtype=torch.float64), "weights sum to 1", 1e-12)
    assert all(torch.equal(a, b) for a, b in zip([x, padding, *args], given)), "the arguments must not be modified"
    no_padding = bert_self_attention(x, None, *args, heads)
    assert_close(no_padding[0], bert_self_attention(x, torch.ones_like(padding), *args, heads)[0], "None", 1e-12)


def test_padded_positions_change_no_real_output():
    padding = torch.tensor([[True] * 4 + [False] * 3, [True] * 6 + [False]])
    x = randn(2, 7, 8, seed=40)
    changed = x.clone()
    changed[~padding] = 1e3 * randn(int((~padding).sum()), 8, seed=41)
    args = attention_args(8, seed=42)
    before, weights = bert_self_attention(x, padding, *args, 2)
    after, changed_weights = bert_self_attention(changed, padding, *args, 2)
    assert_close(after[padding], before[padding], "real rows after changing padded vectors", 1e-12)
    assert_close(changed_weights.transpose(1, 2)[padding], weights.transpose(1, 2)[padding],
                 "the weights of the real queries", 1e-12)
    assert (after[~padding] - before[~padding]).abs().max() > 1e-3, "padded rows do change (they are not read)"


def test_bert_self_attention_gradcheck_and_dropout():
    padding = torch.tensor([[True, True, True], [True, True, False]])
    x = randn(2, 3, 4, seed=50, grad=True)
    args = [a.detach().requires_grad_() for a in attention_args(4, seed=51)]
    assert torch.autograd.gradcheck(lambda *a: bert_self_attention(a[0], padding, *a[1:], 2)[0], [x, *args],
                                    eps=1e-6, atol=1e-7)
    assert torch.autograd.gradcheck(lambda *a: bert_self_attention(a[0], padding, *a[1:], 2)[1], [x, *args],
                                    eps=1e-6, atol=1e-7)
    plain, weights = bert_self_attention(x, padding, *args, 2)
    doubled, same_weights = bert_self_attention(x, padding, *args, 2, dropout=lambda w: 2 * w)
    assert_close(doubled, 2 * plain, "dropout acts on the weights that average V", 1e-12)
    assert_close(same_weights, weights, "the returned weights are those before dropout", 0)


def test_bert_self_attention_module():
    layer = perturb(BertSelfAttention(8, 2, dropout=0.3, attention_dropout=0.3).double(), seed=60).eval()
    x, padding = randn(2, 4, 8, seed=61), torch.tensor([[True] * 4, [True, True, False, False]])
    output, weights = layer(x, mask=padding)
    inner, expected_weights = bert_self_attention(x, padding, layer.query.weight, layer.query.bias, layer.key.weight,
                                                  layer.key.bias, layer.value.weight, layer.value.bias, 2)
    assert_close(output, layer.out_proj(inner), "out_proj(attention)", 1e-12)
    assert_close(weights, expected_weights, "weights", 0)
    assert_close(layer(x, x, x, padding)[0], output, "key and value given as the query", 0)
    with pytest.raises(ValueError, match="self-attention"):
        layer(x, randn(2, 4, 8, seed=62), mask=padding)
    layer.train()
    assert not torch.equal(layer(x, mask=padding)[0], output), "dropout in training mode"


# ---------------------------------------------------------------- argument errors

def test_attention_and_embedding_argument_errors():
    x, padding, args = randn(2, 3, 8, seed=70), torch.ones(2, 3, dtype=torch.bool), attention_args(8, seed=71)
    cases = [
        (lambda: bert_self_attention(x[0], None, *args, 2), ValueError, r"x must have shape \(B, T, I\)"),
        (lambda: bert_self_attention(x.long(), None, *args, 2), TypeError, "x must be a float tensor"),
        (lambda: bert_self_attention(x, padding[:, :2], *args, 2), ValueError, r"padding must have shape \(B, T\)"),
        (lambda: bert_self_attention(x, padding.long(), *args, 2), ValueError, "padding must be a bool tensor"),
        (lambda: bert_self_attention(x, None, args[0][:, :7], *args[1:], 2), ValueError, r"w_q must have shape"),
        (lambda: bert_self_attention(x, None, *args[:3], args[3][:7], *args[4:], 2), ValueError, "b_k must have"),
        (lambda: bert_self_attention(x, None, *args, 3), ValueError, "multiple of num_heads = 3"),
        (lambda: bert_self_attention(x, None, *args, 0), ValueError, "num_heads"),
    ]
    ids, segments = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 1, 1]])
    tables = [randn(5, 4, seed=72), randn(2, 4, seed=73), randn(3, 4, seed=74), torch.ones(4), torch.zeros(4)]
    cases += [
        (lambda: bert_embeddings(ids[0], segments, *tables), ValueError, r"ids must be a \(B, T\) int64 tensor"),
        (lambda: bert_embeddings(ids.float(), segments, *tables), ValueError, "ids must be a"),
        (lambda: bert_embeddings(ids, segments[:, :2], *tables), ValueError, r"segments must have shape \(B, T\)"),
        (lambda: bert_embeddings(ids, segments.int(), *tables), ValueError, "segments must be int64"),
        (lambda: bert_embeddings(ids, segments + 1, *tables), ValueError, r"segments must lie in \[0, 2\), got 1..2"),
        (lambda: bert_embeddings(ids + 3, segments, *tables), ValueError, r"ids must lie in \[0, 5\), got 4..6"),
        (lambda: bert_embeddings(-ids, segments, *tables), ValueError, r"ids must lie in \[0, 5\)"),
        (lambda: bert_embeddings(ids, segments, tables[0], tables[1][:, :3], *tables[2:]), ValueError,
         "segment_weight must have shape"),
        (lambda: bert_embeddings(ids, segments, *tables[:2], tables[2][:2], *tables[3:]), ValueError,
         "3 tokens exceed the 2 positions"),
    ]
    model = BertModel(SMALL)
    cases += [
        (lambda: model(torch.tensor([1, 2])), ValueError, r"ids must be a \(B, T\) int64 tensor"),
        (lambda: model(ids, padding=padding), ValueError, r"padding must have shape \(B, T\)"),
        (lambda: model(torch.zeros(1, 13, dtype=torch.int64)), ValueError, "13 tokens exceed the 12 positions"),
        (lambda: model(ids + 40), ValueError, r"ids must lie in \[0, 40\)"),
        (lambda: model(ids, segments * 2), ValueError, r"segments must lie in \[0, 2\)"),
        (lambda: model(ids, padding=torch.ones(1, 3)), ValueError, "padding must be a bool tensor"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message):
            call()


@pytest.mark.parametrize("kwargs, message", [
    (dict(width=30, num_heads=4), "width = 30 must be a multiple of num_heads = 4"),
    (dict(layers=0), "layers"),
    (dict(vocab_size=-1), "vocab_size"),
    (dict(context=2.5), "context"),
    (dict(ff_size=0), "ff_size"),
    (dict(dropout=1.0), r"dropout must lie in \[0, 1\)"),
    (dict(attention_dropout=-0.1), r"attention_dropout must lie in \[0, 1\)"),
])
def test_bert_config_validation(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        BertConfig(**{"vocab_size": 10, **kwargs})


def test_bert_config_json_round_trip_and_refusals(tmp_path):
    config = BertConfig(vocab_size=99, width=24, num_heads=3, layers=5, ff_size=40, context=33, dropout=0.2,
                        attention_dropout=0.05, eps=1e-7)
    transformers.BertConfig(**config.hf_config_kwargs()).to_json_file(tmp_path / "config.json")
    assert BertConfig.from_json(tmp_path / "config.json") == config
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.width = 8
    with pytest.raises(TypeError, match="config must be a BertConfig"):
        BertModel({"vocab_size": 10})
    for change, message in [({"model_type": "roberta"}, "not a BERT with GELU"), ({"hidden_act": "relu"}, "GELU"),
                            ({"position_embedding_type": "relative_key"}, "only absolute positions")]:
        found = json.loads((tmp_path / "config.json").read_text()) | change
        (tmp_path / "other.json").write_text(json.dumps(found))
        with pytest.raises(ValueError, match=message):
            BertConfig.from_json(tmp_path / "other.json")


# ---------------------------------------------------------------- safetensors and the weight loader

def test_read_safetensors_equals_the_safetensors_library_on_minilm():
    path = minilm_directory() / "model.safetensors"
    ours, theirs = read_safetensors(path), safetensors_torch.load_file(str(path))
    assert set(ours) == set(theirs) and len(ours) > 100
    for name, tensor in theirs.items():
        assert ours[name].dtype == tensor.dtype and ours[name].shape == tensor.shape, name
        assert torch.equal(ours[name], tensor), name


def test_read_safetensors_every_dtype_and_shape(tmp_path):
    tensors = {"f64": randn(2, 3, seed=80), "f32": randn(4, seed=81, dtype=torch.float32),
               "f16": randn(3, 1, 2, seed=82, dtype=torch.float16), "bf16": randn(5, seed=83, dtype=torch.bfloat16),
               "i64": torch.arange(-3, 3), "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
               "i16": torch.tensor([-7, 7], dtype=torch.int16), "i8": torch.tensor([-128, 127], dtype=torch.int8),
               "u8": torch.tensor([0, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
               "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4)}
    safetensors_torch.save_file(tensors, str(tmp_path / "t.safetensors"), metadata={"format": "pt"})
    ours = read_safetensors(tmp_path / "t.safetensors")
    assert set(ours) == set(tensors)
    for name, tensor in tensors.items():
        assert ours[name].dtype == tensor.dtype and ours[name].shape == tensor.shape, name
        assert torch.equal(ours[name], tensor), name


def test_read_safetensors_errors(tmp_path):
    good = tmp_path / "good.safetensors"
    safetensors_torch.save_file({"a": torch.ones(10), "b": torch.zeros(3)}, str(good))
    data = good.read_bytes()
    (tmp_path / "truncated").write_bytes(data[:-8])
    with pytest.raises(ValueError, match="truncated: tensor [ab] ends at byte"):
        read_safetensors(tmp_path / "truncated")
    (tmp_path / "short").write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="not a safetensors file: 2 bytes"):
        read_safetensors(tmp_path / "short")
    (tmp_path / "huge").write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="header of 1000000000 bytes"):
        read_safetensors(tmp_path / "huge")
    header = b"{not json"
    (tmp_path / "bad").write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError, match="unreadable safetensors header"):
        read_safetensors(tmp_path / "bad")
    header = json.dumps({"x": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}).encode()
    (tmp_path / "fp8").write_bytes(len(header).to_bytes(8, "little") + header + b"\x00\x00")
    with pytest.raises(ValueError, match="tensor x has dtype F8_E4M3"):
        read_safetensors(tmp_path / "fp8")


def test_from_bert_state_dict_names_what_is_wrong_and_loads_nothing():
    hf = perturb(hf_model(SMALL), seed=90)
    model = BertModel(SMALL).double()
    before = {n: t.clone() for n, t in model.state_dict().items()}
    good = hf.state_dict()
    broken = [
        ({n: t for n, t in good.items() if n != "encoder.layer.1.attention.self.key.weight"},
         r"1 missing: encoder\.layers\.1\.self_attn\.key\.weight"),
        (good | {"cls.predictions.bias": torch.zeros(40)}, r"1 unexpected: cls\.predictions\.bias"),
        (good | {"encoder.layer.0.intermediate.dense.weight": torch.zeros(24, 15, dtype=torch.float64)},
         r"1 of the wrong shape: encoder\.layers\.0\.linear1\.weight: the file has \(24, 15\), the model \(24, 16\)"),
        (good | {"encoder.layer.2.output.dense.weight": torch.zeros(16, 24)}, r"unexpected: encoder\.layer\.2\.output"),
    ]
    for state, message in broken:
        with pytest.raises(ValueError, match=r"nothing was loaded.*" + message):
            from_bert_state_dict(model, state)
        assert all(torch.equal(t, before[n]) for n, t in model.state_dict().items()), "the model must not change"
    from_bert_state_dict(model, good)
    assert torch.equal(model.encoder.layers[1].self_attn.key.weight, good["encoder.layer.1.attention.self.key.weight"])
    assert torch.equal(model.encoder.layers[0].self_attn.value.weight,
                       good["encoder.layer.0.attention.self.value.weight"])
    assert torch.equal(model.encoder.layers[0].norm1.weight, good["encoder.layer.0.attention.output.LayerNorm.weight"])
    assert torch.equal(model.encoder.layers[1].norm2.bias, good["encoder.layer.1.output.LayerNorm.bias"])


def test_load_pretrained_from_a_folder(tmp_path):
    source = minilm_directory()
    for name in ("vocab.txt", "model.safetensors"):
        (tmp_path / name).symlink_to(source / name)
    config = json.loads((source / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"vocab_size": 30523}))
    with pytest.raises(ValueError, match="vocab.txt has 30522 tokens, config.json says 30523"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    model, tokenizer = load_pretrained(tmp_path, attention_fn=bert_self_attention)
    assert not model.training and not tokenizer.lowercase and tokenizer.tokenize("Café") != ["cafe"]
    (tmp_path / "model.safetensors").unlink()
    shutil.copy(source / "config.json", tmp_path / "config.json")
    with pytest.raises(FileNotFoundError):
        load_pretrained(tmp_path)


# ---------------------------------------------------------------- pooling and sentence embeddings

def test_mean_pool_ignores_padding_and_equals_a_loop():
    hidden = randn(3, 5, 4, seed=100)
    padding = torch.tensor([[True] * 5, [True, True, False, False, False], [True, False, False, False, False]])
    hidden[~padding] = 1e6
    given = hidden.clone(), padding.clone()
    pooled = mean_pool(hidden, padding)
    expected = torch.stack([sum(hidden[b, t] for t in range(5) if padding[b, t]) / padding[b].sum() for b in range(3)])
    assert_close(pooled, expected, "mean over the real tokens", 1e-12)
    assert torch.equal(hidden, given[0]) and torch.equal(padding, given[1]), "the arguments must not be modified"
    assert torch.equal(cls_pool(hidden, padding), hidden[:, 0])
    for args, message in [((hidden, padding.long()), "padding must be a bool tensor"),
                          ((hidden, padding[:, :4]), r"padding must have shape \(B, T\)"),
                          ((hidden, padding & False), "at least one real token"),
                          ((hidden[0], padding), r"hidden must have shape \(B, T, I\)")]:
        with pytest.raises(ValueError, match=message):
            mean_pool(*args)


def test_sentence_embeddings_equal_sentence_transformers(minilm, sentence_transformer):
    model, tokenizer = minilm
    texts = list(movie_review_sentences().texts[:40]) + ["", "Dull.", "Café naïve — “quoted” 北京 😀"]
    ours = encode_sentences(model, tokenizer, texts)
    theirs = sentence_transformer.encode(texts, convert_to_tensor=True)
    assert ours.shape == theirs.shape == (43, 384) and ours.dtype == torch.float32
    assert_close(ours, theirs, "normalised mean-pooled embeddings", 1e-5)
    assert_close(ours.norm(dim=1), torch.ones(43), "unit length", 1e-5)
    long_text = " ".join(movie_review_sentences().texts[200:230])  # longer than 256 tokens: both truncate
    assert len(tokenizer.tokenize(long_text)) > 300
    assert_close(encode_sentences(model, tokenizer, [long_text]),
                 sentence_transformer.encode([long_text], convert_to_tensor=True), "a text cut to 256 tokens", 1e-5)
    small_batches = encode_sentences(model, tokenizer, texts[:10], batch_size=3)
    assert_close(small_batches, ours[:10], "batches of 3 (other padding)", 1e-5)
    raw = encode_sentences(model, tokenizer, texts[:4], normalize=False)
    assert_close(raw / raw.norm(dim=1, keepdim=True), ours[:4], "normalize=False, then normalised", 1e-6)
    batch = encode_batch(tokenizer, texts[:4])
    with torch.no_grad():
        embeddings = model(*batch).hidden_states[0][:, 0]
    assert_close(encode_sentences(model, tokenizer, texts[:4], pooling=cls_pool, layer=0, normalize=False),
                 embeddings, "cls_pool of layer 0", 1e-6)
    assert encode_sentences(model, tokenizer, []).shape == (0, 384)
    with pytest.raises(TypeError, match="not one string"):
        encode_sentences(model, tokenizer, "one string")


CASES = [("A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."),
         ("The movie was wonderful and moving.", "I loved this film; it touched me deeply.",
          "Add two cups of flour to the bowl."),
         ("How do I reset my password?", "I forgot my password and need to change it.",
          "The cat sleeps on the windowsill."),
         ("It is raining heavily in London.", "There is a downpour in London today.",
          "Python is a programming language."),
         ("The children are playing football in the park.", "Kids play soccer outside.",
          "The central bank raised interest rates.")]


def test_sentence_similarities_rank_paraphrases_first(minilm):
    model, tokenizer = minilm
    texts = [t for case in CASES for t in case]
    vectors = encode_sentences(model, tokenizer, texts)
    cosine = vectors @ vectors.T
    for n in range(len(CASES)):
        anchor, paraphrase, unrelated = 3 * n, 3 * n + 1, 3 * n + 2
        assert cosine[anchor, paraphrase] > cosine[anchor, unrelated] + 0.3, CASES[n]
        others = [j for j in range(len(texts)) if j != anchor]
        assert max(others, key=lambda j: cosine[anchor, j]) == paraphrase, CASES[n]


# ---------------------------------------------------------------- MLM masking

SPECIAL = (0, 100, 101, 102, 103)  # [PAD], [UNK], [CLS], [SEP], [MASK] of BERT's vocabulary
VOCAB = 30522


def mlm_batch(seed: int, batch: int = 64, steps: int = 256):
    """Random ids with [CLS] first, a [SEP] inside and at the end, padding after different lengths, some [UNK]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(999, VOCAB, (batch, steps), generator=g)
    lengths = torch.randint(steps // 2, steps + 1, (batch,), generator=g)
    for b, length in enumerate(lengths.tolist()):
        ids[b, 0], ids[b, length // 2], ids[b, length - 1] = 101, 102, 102
        ids[b, length:] = 0
    ids[torch.rand(ids.shape, generator=g) < 0.01] = 100
    return ids


def within(count: int, total: int, p: float, what: str, sigmas: float = 5.0):
    std = math.sqrt(total * p * (1 - p))
    assert abs(count - total * p) <= sigmas * std, f"{what}: {count} of {total}, expected {total * p:.0f} +- {std:.0f}"


def test_mlm_mask_fractions_over_many_draws():
    chosen_total = positions = masked = replaced = kept = 0
    for seed in range(4):
        ids = mlm_batch(seed)
        given = ids.clone()
        inputs, labels = mlm_mask(ids, SPECIAL, 103, VOCAB, generator=torch.Generator().manual_seed(100 + seed))
        assert torch.equal(ids, given), "ids must not be modified"
        assert inputs.dtype == labels.dtype == torch.int64 and inputs.shape == labels.shape == ids.shape
        special = torch.isin(ids, torch.tensor(SPECIAL))
        chosen = labels != IGNORE
        assert not (chosen & special).any(), "special tokens and padding are never chosen"
        assert torch.equal(labels[chosen], ids[chosen]), "labels are the original ids where chosen"
        assert torch.all(labels[~chosen] == IGNORE), "labels are -100 elsewhere"
        assert torch.equal(inputs[~chosen], ids[~chosen]), "positions not chosen keep their ids"
        random_ones = chosen & (inputs != 103) & (inputs != ids)
        assert not torch.isin(inputs[random_ones], torch.tensor(SPECIAL)).any(), "random tokens are never special"
        positions += int((~special).sum())
        chosen_total += int(chosen.sum())
        masked += int((chosen & (inputs == 103)).sum())
        replaced += int(random_ones.sum())
        kept += int((chosen & (inputs == ids)).sum())
    within(chosen_total, positions, 0.15, "chosen among the non-special positions")
    within(masked, chosen_total, 0.8, "[MASK] among the chosen")
    keep = 0.1 + 0.1 / (VOCAB - len(SPECIAL))  # a random token may be the original one
    within(kept, chosen_total, keep, "unchanged among the chosen")
    within(replaced, chosen_total, 0.1 - 0.1 / (VOCAB - len(SPECIAL)), "random among the chosen")


def test_mlm_random_tokens_are_uniform_over_the_non_special_ids():
    vocab, special = 12, (0, 1, 2, 3, 4)
    ids = torch.randint(5, vocab, (64, 256), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, -20:] = 2, 0
    inputs, labels = mlm_mask(ids, special, 4, vocab, probability=1.0, generator=torch.Generator().manual_seed(2))
    chosen = labels != IGNORE
    assert torch.equal(chosen, ids > 4), "probability 1 chooses every non-special position"
    random_positions = chosen & (inputs != 4) & (inputs != ids)
    assert not torch.isin(inputs[random_positions], torch.tensor(special)).any(), "no special id as a random token"
    assert set(inputs[random_positions].unique().tolist()) == set(range(5, vocab)), "every non-special id is drawn"
    # a chosen position becomes a given non-special id t != its own with probability 0.1 / 7
    for token in range(5, vocab):
        others = chosen & (ids != token)
        within(int((others & (inputs == token)).sum()), int(others.sum()), 0.1 / (vocab - 5), f"random token {token}")


def test_mlm_mask_seeds_and_edge_cases():
    ids = mlm_batch(7, batch=8, steps=64)
    first = mlm_mask(ids, SPECIAL, 103, VOCAB, generator=torch.Generator().manual_seed(3))
    again = mlm_mask(ids, SPECIAL, 103, VOCAB, generator=torch.Generator().manual_seed(3))
    other = mlm_mask(ids, SPECIAL, 103, VOCAB, generator=torch.Generator().manual_seed(4))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1]), "the same seed, the same draw"
    assert not torch.equal(first[1], other[1]), "another seed, another draw"
    with torch_seed(5):
        global_first = mlm_mask(ids, SPECIAL, 103, VOCAB)
    with torch_seed(5):
        assert torch.equal(mlm_mask(ids, SPECIAL, 103, VOCAB)[0], global_first[0]), "torch's global generator"
    inputs, labels = mlm_mask(ids, SPECIAL, 103, VOCAB, probability=0.0)
    assert torch.equal(inputs, ids) and torch.all(labels == IGNORE), "probability 0 changes nothing"
    inputs, labels = mlm_mask(ids, SPECIAL, 103, VOCAB, probability=1.0, generator=torch.Generator().manual_seed(6))
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert torch.equal(labels != IGNORE, ~special) and torch.equal(labels[~special], ids[~special])
    assert torch.equal(special_token_mask(ids, SPECIAL), special)
    for args, message in [((ids, SPECIAL, 103, VOCAB, 1.5), r"probability must lie in \[0, 1\]"),
                          ((ids, SPECIAL, 103, VOCAB, -0.1), "probability"),
                          ((ids, SPECIAL, 103, 1000), r"ids must lie in \[0, 1000\)"),
                          ((ids, SPECIAL, 103, 0), "vocab_size"),
                          ((ids[0], SPECIAL, 103, VOCAB), r"ids must be a \(B, T\) int64 tensor")]:
        with pytest.raises(ValueError, match=message):
            mlm_mask(*args)
