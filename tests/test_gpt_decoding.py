"""course_lib.gpt's filters, generation and beam search against transformers and against brute force.

``temperature_top_k``, ``top_p_filter`` and ``repetition_penalty`` against ``transformers``'
``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper`` and
``RepetitionPenaltyLogitsProcessor`` on random logits without ties (several ``k``, ``p``,
batch shapes, float32 and float64), then the rules ``transformers`` does not share: ties
at the edge are kept, all the mass on one token, ``p = 1``, the exact temperature, the
inputs left unmodified, the argument errors. ``generate`` against
``GPT2LMHeadModel.generate`` with the same random weights (greedy, with and without a
repetition penalty; sampling with temperature, top-k, top-p and the penalty, where
torch's global generator seeded as ours gives the same draws), with and without the KV
cache, a seed that repeats a sample and another that changes it, a sliding window past
the context, ``eos``; the fast path of the reference layers (``GPT._decode``) against
``forward`` with a plugged-in attention, and its argument checks run once per call.
``beam_search`` against ``generate(num_beams=K)`` (no ``eos``, ``length_penalty=0``),
against greedy search for ``K = 1``, against exhaustive search over every continuation
of a tiny model (with ``eos``, ``alpha`` 0 and 0.7), and its log-probability against
the model's. Then ``continuation_perplexity`` and ``distinct_n``
by hand.
"""

from __future__ import annotations

import collections
import itertools
import math

import numpy as np
import pytest
import torch

from course_lib.gpt import filters
from course_lib.gpt.beam import beam_search, reorder_cache
from course_lib.gpt.filters import frequency_penalty, repetition_penalty, temperature_top_k, top_p_filter
from course_lib.gpt.generation import continuation_perplexity, distinct_n, generate, next_token_logits
from course_lib.gpt.gpt2_weights import to_gpt2_state_dict
from course_lib.gpt.model import GPT, GPTConfig
from course_lib.training import torch_seed

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from transformers.generation.logits_process import (LogitsProcessorList, RepetitionPenaltyLogitsProcessor,  # noqa: E402
                                                    TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

VOCAB, CONTEXT = 13, 24
SHAPES = pytest.mark.parametrize("shape", [(VOCAB,), (5, VOCAB), (2, 3, VOCAB)], ids=["(V,)", "(B, V)", "(2, 3, V)"])
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest.py)


def random_logits(shape, seed: int, dtype=torch.float32, scale: float = 2.0) -> torch.Tensor:
    logits = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale
    logits = logits.to(dtype)
    assert all(len(set(row.tolist())) == shape[-1] for row in logits.reshape(-1, shape[-1])), "no ties"
    return logits


def make_gpt(seed: int = 0, vocab: int = VOCAB, context: int = CONTEXT, width: int = 16, heads: int = 2,
             layers: int = 2, dtype=torch.float32, scale: float = 0.3) -> GPT:
    """A GPT with GPT-2's initialisation, perturbed so that its predictions are far from uniform."""
    with torch_seed(seed):
        model = GPT(GPTConfig(vocab, context=context, width=width, num_heads=heads, layers=layers))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model.to(dtype).eval()


def twin(model: GPT):
    """``transformers.GPT2LMHeadModel`` with the same (random) weights: nothing is downloaded."""
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**model.config.gpt2_config_kwargs()))
    hf = hf.to(model.token_embedding.weight.dtype).eval()
    hf.load_state_dict(to_gpt2_state_dict(model))
    return hf


def no_padding(prompt) -> dict:
    """``generate``'s arguments for prompts without padding: an explicit all-ones attention mask (without it,
    ``transformers`` masks every prompt token equal to ``pad_token_id``), and a pad id it then never uses."""
    return dict(attention_mask=torch.ones_like(prompt), pad_token_id=0)


def prompts_of(batch: int, steps: int, seed: int, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, steps), generator=torch.Generator().manual_seed(seed))


def kept(filtered: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(filtered)


# ---------------------------------------------------------------- filters against transformers

@DTYPES
@SHAPES
@pytest.mark.parametrize("k", [1, 2, 5, VOCAB - 1, VOCAB, VOCAB + 4, None])
@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.7])
def test_temperature_top_k_equals_transformers(temperature, k, shape, dtype):
    logits = random_logits(shape, seed=len(shape) + (k or 0), dtype=dtype)
    given = logits.clone()
    mine = temperature_top_k(logits, temperature, k)
    processors = [TemperatureLogitsWarper(temperature)] + ([TopKLogitsWarper(k)] if k is not None else [])
    theirs = LogitsProcessorList(processors)(None, logits.clone())
    assert mine.shape == logits.shape and mine.dtype == dtype
    assert torch.equal(kept(mine), kept(theirs)), "the same tokens are kept"
    assert torch.equal(mine[kept(mine)], theirs[kept(theirs)]), "kept logits divided by the temperature"
    assert torch.equal(kept(mine).sum(-1), torch.full(shape[:-1], min(k or VOCAB, VOCAB)))
    assert torch.equal(logits, given), "the input must not be modified"


@DTYPES
@SHAPES
@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.75, 0.9, 0.99])
def test_top_p_filter_equals_transformers(p, shape, dtype):
    logits = random_logits(shape, seed=int(p * 100) + len(shape), dtype=dtype)
    probs = torch.softmax(logits.double(), dim=-1).sort(dim=-1, descending=True).values
    edge = (probs.cumsum(-1) - p).abs().min()
    assert edge > 1e-5, "no row has a cumulative mass within rounding of p (the case would be ambiguous)"
    given = logits.clone()
    mine = top_p_filter(logits, p)
    theirs = TopPLogitsWarper(p)(None, logits.reshape(-1, VOCAB).clone()).reshape(shape)  # it wants (B, V)
    assert mine.shape == logits.shape and mine.dtype == dtype
    assert torch.equal(kept(mine), kept(theirs)), "the same tokens are kept"
    assert torch.equal(mine[kept(mine)], logits[kept(mine)]), "kept logits are unchanged"
    assert torch.equal(logits, given), "the input must not be modified"


@DTYPES
@pytest.mark.parametrize("penalty", [1.0, 1.3, 2.5, 0.7])
def test_repetition_penalty_equals_transformers(penalty, dtype):
    logits = random_logits((4, VOCAB), seed=3, dtype=dtype)
    previous = prompts_of(4, 9, seed=4)
    previous[0] = 2  # one token many times: penalised once
    given = logits.clone()
    mine = repetition_penalty(logits, previous, penalty)
    theirs = RepetitionPenaltyLogitsProcessor(penalty)(previous, logits.clone())
    assert torch.equal(mine, theirs)
    assert torch.equal(logits, given), "the input must not be modified"


def test_repetition_penalty_by_hand():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.0, 3.0]])
    out = repetition_penalty(logits, torch.tensor([[0, 1, 1, 1, 3]]), 2.0)
    assert torch.equal(out, torch.tensor([[1.0, -4.0, 1.0, 0.0, 3.0]])), "z / theta if z > 0, else z * theta, once"


def test_frequency_penalty_by_hand():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    previous = torch.tensor([[1, 1, 1, 3], [0, 0, 2, 2]])
    out = frequency_penalty(logits, previous, frequency=0.5, presence=0.25)
    expected = torch.tensor([[2.0, -2.0 - 1.5 - 0.25, 1.0, -0.5 - 0.25], [0.5 - 1.25, 0.5, 0.5 - 1.25, 0.5]])
    assert torch.equal(out, expected)
    assert torch.equal(frequency_penalty(logits, previous), logits)


# ---------------------------------------------------------------- filters: our own rules

def logits_of(probabilities, dtype=torch.float64):
    return torch.tensor(probabilities, dtype=dtype).log()


def test_top_p_keeps_ties_at_the_edge():
    z = logits_of([0.4, 0.3, 0.3])
    assert kept(top_p_filter(z, 0.5)).tolist() == [True, True, True], "0.3 and 0.3 tie at the edge: both kept"
    assert kept(top_p_filter(z, 0.35)).tolist() == [True, False, False]
    assert kept(top_p_filter(z, 0.41)).tolist() == [True, True, True]
    z = logits_of([0.1, 0.2, 0.2, 0.5])
    assert kept(top_p_filter(z, 0.6)).tolist() == [False, True, True, True]
    assert kept(top_p_filter(z, 0.45)).tolist() == [False, False, False, True]
    assert kept(top_p_filter(z, 0.51)).tolist() == [False, True, True, True]
    assert kept(top_p_filter(z, 0.75)).tolist() == [False, True, True, True]
    assert kept(top_p_filter(z, 0.95)).tolist() == [True, True, True, True]
    dyadic = torch.tensor([0.0, -math.log(2), -math.log(4), -math.log(4)], dtype=torch.float64)
    assert torch.softmax(dyadic, -1).tolist() == [0.5, 0.25, 0.125, 0.125], "exact probabilities"
    assert kept(top_p_filter(dyadic, 0.5)).tolist() == [True, False, False, False], "a mass of exactly p suffices"
    assert kept(top_p_filter(dyadic, 0.75)).tolist() == [True, True, False, False]
    assert kept(top_p_filter(dyadic, 0.8)).tolist() == [True, True, True, True]
    assert kept(top_p_filter(dyadic, 0.75 + 1e-10)).tolist() == [True] * 4, "decided in float64: 0.75 < p"
    batch = torch.stack([logits_of([0.4, 0.3, 0.3]), logits_of([0.3, 0.4, 0.3]), logits_of([0.8, 0.1, 0.1])])
    assert kept(top_p_filter(batch, 0.5)).tolist() == [[True] * 3, [True] * 3, [True, False, False]]


def test_top_p_all_mass_on_one_token_and_p_one():
    z = torch.tensor([[0.0, -math.inf, -math.inf, -math.inf], [-math.inf, -math.inf, 5.0, -math.inf]])
    for p in (0.01, 0.5, 0.999, 1.0):
        assert torch.equal(top_p_filter(z, p), z), f"only the certain token remains, p = {p}"
    for shape in [(VOCAB,), (6, VOCAB), (2, 3, VOCAB)]:
        logits = random_logits(shape, seed=5, scale=3.0)
        assert torch.equal(top_p_filter(logits, 1.0), logits), "p = 1 keeps every token"
        assert torch.equal(kept(top_p_filter(logits, 1e-6)), logits == logits.amax(-1, keepdim=True)), \
            "a tiny p keeps the most probable token only"
    tied = torch.tensor([1.0, 3.0, 3.0, 0.0])
    assert kept(top_p_filter(tied, 0.1)).tolist() == [False, True, True, False], "two most probable tokens tie"


def test_top_k_keeps_ties_and_temperature_is_exact():
    z = torch.tensor([[1.0, 2.0, 2.0, 0.0, -1.0], [3.0, 3.0, 3.0, 3.0, 3.0]])
    assert kept(temperature_top_k(z, k=1)).tolist() == [[False, True, True, False, False], [True] * 5]
    assert kept(temperature_top_k(z, k=2)).tolist() == [[False, True, True, False, False], [True] * 5]
    assert kept(temperature_top_k(z, k=3)).tolist() == [[True, True, True, False, False], [True] * 5]
    assert kept(temperature_top_k(z, k=4)).tolist() == [[True, True, True, True, False], [True] * 5]
    logits = random_logits((3, VOCAB), seed=6)
    for tau in (0.3, 1.0, 2.0, 7):
        assert torch.equal(temperature_top_k(logits, tau), logits / tau)
        kept_k = temperature_top_k(logits, tau, 4)
        assert torch.equal(kept_k[kept(kept_k)], (logits / tau)[kept(kept_k)])
    assert torch.equal(temperature_top_k(logits), logits)
    top = [torch.softmax(temperature_top_k(logits, tau), dim=-1).amax(-1) for tau in (2.0, 1.0, 0.5, 0.1)]
    assert all(torch.all(a < b) for a, b in zip(top, top[1:])), "a lower temperature sharpens towards argmax"


FILTER_ERRORS = {
    "k = 0": (lambda z: temperature_top_k(z, 1.0, 0), ValueError, "k must be a positive integer"),
    "k = -1": (lambda z: temperature_top_k(z, 1.0, -1), ValueError, "k must be a positive integer"),
    "k = 1.5": (lambda z: temperature_top_k(z, 1.0, 1.5), ValueError, "k must be a positive integer"),
    "temperature 0": (lambda z: temperature_top_k(z, 0.0), ValueError, "temperature must be a positive number"),
    "temperature -1": (lambda z: temperature_top_k(z, -1.0), ValueError, "temperature must be a positive number"),
    "temperature True": (lambda z: temperature_top_k(z, True), ValueError, "temperature must be a positive"),
    "temperature nan": (lambda z: temperature_top_k(z, math.nan), ValueError, "temperature must be a positive"),
    "p = 0": (lambda z: top_p_filter(z, 0.0), ValueError, r"p must be a number in \(0, 1\]"),
    "p = 1.1": (lambda z: top_p_filter(z, 1.1), ValueError, r"p must be a number in \(0, 1\]"),
    "p = -0.5": (lambda z: top_p_filter(z, -0.5), ValueError, r"p must be a number in \(0, 1\]"),
    "p a string": (lambda z: top_p_filter(z, "0.5"), ValueError, r"p must be a number in \(0, 1\]"),
    "p True": (lambda z: top_p_filter(z, True), ValueError, r"p must be a number in \(0, 1\]"),
    "int logits": (lambda z: top_p_filter(z.long(), 0.5), ValueError, r"logits must be a float tensor"),
    "numpy logits": (lambda z: temperature_top_k(z.numpy()), ValueError, r"logits must be a float tensor"),
    "scalar logits": (lambda z: top_p_filter(z[0, 0], 0.5), ValueError, r"logits must be a float tensor"),
    "penalty 0": (lambda z: repetition_penalty(z, torch.zeros(2, 1, dtype=torch.int64), 0.0), ValueError,
                  "penalty must be positive"),
    "previous of other batch": (lambda z: repetition_penalty(z, torch.zeros(3, 1, dtype=torch.int64), 1.2),
                                ValueError, r"previous must have shape \(B, T\)"),
}


@pytest.mark.parametrize("call, error, match", list(FILTER_ERRORS.values()), ids=list(FILTER_ERRORS))
def test_filter_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(random_logits((2, 5), seed=7))


def test_next_token_logits_applies_penalty_then_temperature_top_k_then_top_p():
    logits = random_logits((4, VOCAB), seed=8)
    ids = prompts_of(4, 6, seed=9)
    mine = next_token_logits(logits, ids, True, temperature=0.7, top_k=6, top_p=0.8, repetition_penalty=1.5)
    theirs = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(1.5), TemperatureLogitsWarper(0.7),
                                  TopKLogitsWarper(6), TopPLogitsWarper(0.8)])(ids, logits.clone())
    assert torch.equal(kept(mine), kept(theirs))
    torch.testing.assert_close(mine[kept(mine)], theirs[kept(theirs)], rtol=0, atol=1e-6)
    greedy = next_token_logits(logits, ids, False, temperature=0.7, top_k=1, top_p=0.1, repetition_penalty=1.5)
    assert torch.equal(greedy, repetition_penalty(logits, ids, 1.5)), "greedy search: the penalty only"


# ---------------------------------------------------------------- generate against transformers

@pytest.mark.parametrize("penalty", [1.0, 1.4])
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_equals_gpt2_generate(use_cache, penalty):
    model = make_gpt(seed=13, scale=0.6)
    hf = twin(model)
    prompt = prompts_of(3, 5, seed=11)
    given = prompt.clone()
    ours = generate(model, prompt, 16, repetition_penalty=penalty, use_cache=use_cache)
    theirs = hf.generate(prompt, **no_padding(prompt), max_new_tokens=16, do_sample=False,
                         repetition_penalty=penalty)
    assert ours.shape == (3, 21) and ours.dtype == torch.int64
    assert torch.equal(ours, theirs)
    assert torch.equal(prompt, given) and torch.equal(ours[:, :5], prompt)
    assert len(set(ours[:, 5:].flatten().tolist())) > 6, "the model does not just repeat one token"


SAMPLING = {"plain": dict(), "temperature 0.7": dict(temperature=0.7), "top-k 4": dict(top_k=4),
            "top-p 0.8": dict(top_p=0.8), "temperature 1.3, top-k 6, top-p 0.9, penalty 1.3":
            dict(temperature=1.3, top_k=6, top_p=0.9, repetition_penalty=1.3)}


@pytest.mark.parametrize("settings", list(SAMPLING.values()), ids=list(SAMPLING))
def test_sampling_equals_gpt2_sampling_and_the_cache_changes_no_token(settings):
    """Our generator and torch's global one, seeded alike, give the same draws from the same distributions."""
    model = make_gpt(seed=12)
    hf = twin(model)
    prompt = prompts_of(4, 3, seed=13)
    with_cache = generate(model, prompt, 18, sample=True, seed=21, **settings)
    without = generate(model, prompt, 18, sample=True, seed=21, use_cache=False, **settings)
    with torch_seed(21):
        theirs = hf.generate(prompt, **no_padding(prompt), max_new_tokens=18, do_sample=True,
                             **{"top_k": None, **settings})
    assert torch.equal(with_cache, without), "the KV cache changes no token"
    assert torch.equal(with_cache, theirs)


def test_sampling_is_reproducible_and_a_seed_matters():
    model = make_gpt(seed=14)
    prompt = prompts_of(2, 4, seed=15)
    settings = dict(sample=True, temperature=1.2, top_k=8, top_p=0.95, repetition_penalty=1.2)
    first = generate(model, prompt, 20, seed=3, **settings)
    torch.manual_seed(123)  # the global generator plays no part
    assert torch.equal(generate(model, prompt, 20, seed=3, **settings), first)
    assert not torch.equal(generate(model, prompt, 20, seed=4, **settings), first)
    state = torch.random.get_rng_state()
    generate(model, prompt, 5, seed=3, **settings)
    assert torch.equal(torch.random.get_rng_state(), state), "the global generator is left alone"
    assert torch.equal(generate(model, prompt, 20, sample=True, top_k=1, seed=9), generate(model, prompt, 20)), \
        "sampling from top-1 is greedy search"


def test_generation_past_the_context_reads_a_sliding_window():
    model = make_gpt(seed=16, context=8)
    prompt = prompts_of(2, 5, seed=17)
    out = generate(model, prompt, 12, use_cache=False)
    ids = prompt.clone()
    for _ in range(12):  # by hand: the last 8 tokens, the argmax of the last position
        logits, _ = model(ids[:, -8:])
        ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ids)
    assert torch.equal(generate(model, prompt, 4), out[:, :9]), "within the context the cache agrees"
    with pytest.raises(ValueError, match="do not fit the context of 8 with use_cache=True"):
        generate(model, prompt, 5)


def test_generation_eos_repeats_and_stops_and_edge_cases():
    model = make_gpt(seed=13, scale=0.6)
    prompt = prompts_of(3, 5, seed=11)
    free = generate(model, prompt, 12)

    def ended(eos, rows):
        out = free[rows].clone()
        for row in out:
            hits = (row[5:] == eos).nonzero()
            if len(hits):
                row[5 + int(hits[0]):] = eos
        return out

    assert torch.equal(generate(model, prompt, 12, eos=8), ended(8, [0, 1, 2])), "rows 0 and 1 end, row 2 goes on"
    assert (ended(8, [0, 1, 2]) != free).any() and (ended(8, [0, 1, 2])[2] == free[2]).all()
    assert torch.equal(generate(model, prompt[:2], 12, eos=0), ended(0, [0, 1])[:, :7]), \
        "both rows have ended after 2 new tokens: generation stops"
    assert torch.equal(generate(model, prompt, 0), prompt)
    model.train()
    generate(model, prompt, 2, use_cache=False)
    assert model.training, "the model's mode is restored"
    with pytest.raises(ValueError, match="prompt must be a"):
        generate(model, prompt[0], 2)
    with pytest.raises(ValueError, match="max_new_tokens must be a non-negative integer"):
        generate(model, prompt, -1)


def test_generate_calls_the_plugged_in_filters():
    model = make_gpt(seed=20)
    calls = []

    def top_k_fn(logits, temperature, k):
        calls.append(("k", temperature, k))
        return temperature_top_k(logits, temperature, k)

    def top_p_fn(logits, p):
        calls.append(("p", p))
        return top_p_filter(logits, p)

    out = generate(model, prompts_of(2, 3, seed=21), 3, sample=True, temperature=0.9, top_k=5, top_p=0.7,
                   top_k_fn=top_k_fn, top_p_fn=top_p_fn)
    assert calls == [("k", 0.9, 5), ("p", 0.7)] * 3
    assert torch.equal(out, generate(model, prompts_of(2, 3, seed=21), 3, sample=True, temperature=0.9, top_k=5,
                                     top_p=0.7))


def counting(calls: collections.Counter, name: str, function):
    """``function``, counting its calls in ``calls[name]``."""
    def counted(*args, **kwargs):
        calls[name] += 1
        return function(*args, **kwargs)
    return counted


def test_generate_decodes_the_reference_layers_fast_and_other_models_through_forward(monkeypatch):
    """The fast path (``GPT._decode``) runs for a GPT of the reference layers only, and gives the tokens of the
    general path (``forward`` with its cache), in float32 and float64, greedy and sampling."""
    from course_lib.testing import PlainCausalAttention

    decoded = collections.Counter()
    monkeypatch.setattr(GPT, "_decode", counting(decoded, "positions", GPT._decode))
    prompt = prompts_of(3, 5, seed=11)
    for dtype in (torch.float32, torch.float64):
        model = make_gpt(seed=13, scale=0.6, dtype=dtype)
        plugged = GPT(model.config, causal_attention_fn=PlainCausalAttention()).to(dtype).eval()
        plugged.load_state_dict(model.state_dict())
        for settings in (dict(), dict(sample=True, temperature=0.8, top_k=6, top_p=0.9, repetition_penalty=1.2)):
            decoded.clear()
            fast = generate(model, prompt, 12, seed=5, **settings)
            assert decoded["positions"] == 12, "the reference layers decode through GPT._decode"
            assert torch.equal(generate(plugged, prompt, 12, seed=5, **settings), fast)
            assert decoded["positions"] == 12, "a plugged-in attention runs through forward"
    hooked = collections.Counter()
    model.register_forward_hook(counting(hooked, "forward", lambda module, args, output: None))
    assert torch.equal(generate(model, prompt, 12), generate(plugged, prompt, 12))
    assert hooked["forward"] == 12 and decoded["positions"] == 12, "a model with a hook runs through forward"


def test_generate_checks_its_arguments_once_per_call_not_once_per_step(monkeypatch):
    """The argument checks do not run again at every step of the fast path (they do in the general one); bad
    arguments still get their clear errors."""
    from course_lib import checks
    from course_lib.testing import PlainCausalAttention
    from course_lib.transformer import scaled_attention

    calls = collections.Counter()
    for name in ("token_batch", "expect_tensor", "sequence_batch", "positive_int", "nonnegative_int"):
        monkeypatch.setattr(checks, name, counting(calls, name, getattr(checks, name)))
    monkeypatch.setattr(scaled_attention, "check_attention_inputs",
                        counting(calls, "check_attention_inputs", scaled_attention.check_attention_inputs))
    model = make_gpt(seed=13, scale=0.6)
    prompt = prompts_of(3, 5, seed=11)

    def checks_of(model, new: int) -> collections.Counter:
        calls.clear()
        generate(model, prompt, new)
        return collections.Counter(calls)

    assert checks_of(model, 3) == checks_of(model, 12), "the fast path checks once per call"
    assert checks_of(model, 12)["check_attention_inputs"] == 0
    plugged = GPT(model.config, causal_attention_fn=PlainCausalAttention()).eval()
    assert checks_of(plugged, 12)["token_batch"] > checks_of(plugged, 3)["token_batch"], \
        "through forward, every step checks its ids"
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 13\), got 0..13"):
        generate(model, torch.cat([prompt, torch.full((3, 1), VOCAB)], dim=1), 4)
    with pytest.raises(ValueError, match="prompt must hold at least one token"):
        generate(model, prompt[:, :0], 4)
    assert generate(model, prompt[:, :0], 0).shape == (3, 0)
    with pytest.raises(ValueError, match="prompt must be a"):
        generate(model, prompt.float(), 4)
    assert generate(model, prompt[:0], 4).shape == (0, 9), "an empty batch"


# ---------------------------------------------------------------- beam search

def model_log_prob(model, prompt, tokens) -> float:
    """``log p(tokens | prompt)`` from one full pass, summed in float64."""
    ids = torch.cat([prompt, torch.tensor(tokens, dtype=torch.int64)])[None]
    with torch.no_grad():
        logits, _ = model(ids[:, :-1])
    log_probs = torch.log_softmax(logits[0].double(), dim=-1)
    return sum(log_probs[len(prompt) - 1 + i, t].item() for i, t in enumerate(tokens))


@pytest.mark.parametrize("beam_width", [2, 3, 5, 8])
def test_beam_search_equals_gpt2_generate_with_num_beams(beam_width):
    model = make_gpt(seed=22)
    hf = twin(model)
    for row, prompt in enumerate(prompts_of(3, 4, seed=23)):
        tokens, log_prob = beam_search(model, prompt, beam_width, 10)
        theirs = hf.generate(prompt[None], **no_padding(prompt[None]), max_new_tokens=10, num_beams=beam_width,
                             do_sample=False, length_penalty=0.0)
        assert tokens == theirs[0, 4:].tolist(), f"prompt {row}"
        assert isinstance(log_prob, float) and log_prob == pytest.approx(model_log_prob(model, prompt, tokens),
                                                                         abs=1e-5)


def test_beam_of_width_one_is_greedy_search():
    model = make_gpt(seed=24)
    prompts = prompts_of(3, 5, seed=25)
    greedy = generate(model, prompts, 12)
    for prompt, row in zip(prompts, greedy):
        tokens, log_prob = beam_search(model, prompt, 1, 12)
        assert tokens == row[5:].tolist()
        assert log_prob == pytest.approx(model_log_prob(model, prompt, tokens), abs=1e-5)


def exhaustive_search(model, prompt, vocab: int, max_new_tokens: int, eos, alpha: float):
    """Every finished continuation, scored by hand: the best ``(tokens, log_prob)`` by ``log_prob / len^alpha``."""
    candidates = []
    for length in range(1, max_new_tokens + 1):
        for tokens in itertools.product(range(vocab), repeat=length):
            if eos is not None and eos in tokens[:-1]:
                continue
            if length < max_new_tokens and tokens[-1] != eos:
                continue  # not finished
            candidates.append(list(tokens))
    scored = [(tokens, model_log_prob(model, prompt, tokens)) for tokens in candidates]
    return max(scored, key=lambda s: s[1] / len(s[0]) ** alpha), scored


@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("eos", [1, None])
def test_a_wide_beam_is_exhaustive_search(eos, alpha):
    vocab, new = 4, 3
    model = make_gpt(seed=34, vocab=vocab, context=8, dtype=torch.float64, scale=1.0)
    lengths = set()
    for prompt in prompts_of(4, 2, seed=27, vocab=vocab):
        (best, best_log_prob), scored = exhaustive_search(model, prompt, vocab, new, eos, alpha)
        tokens, log_prob = beam_search(model, prompt, vocab ** new, new, eos=eos, alpha=alpha)
        assert tokens == best and log_prob == pytest.approx(best_log_prob, abs=1e-10)
        lengths.add(len(tokens))
        if eos is not None:
            assert len(scored) == 1 + 3 + 9 + 27, "finished hypotheses of 1, 2, 3 tokens and the 27 without eos"
    if eos is not None and alpha == 0.0:
        assert len(lengths) > 1, "the case has teeth: some best hypotheses end early with eos"


def test_alpha_changes_the_winner_of_the_tiny_model():
    vocab, new = 4, 3
    model = make_gpt(seed=34, vocab=vocab, context=8, dtype=torch.float64, scale=1.0)
    winners = [[beam_search(model, prompt, vocab ** new, new, eos=1, alpha=alpha)[0] for alpha in (0.0, 0.7)]
               for prompt in prompts_of(4, 2, seed=27, vocab=vocab)]
    assert any(len({tuple(w) for w in row}) > 1 for row in winners), winners


@pytest.mark.parametrize("beam_width", [1, 2, 4])
def test_beam_search_log_prob_is_the_models(beam_width):
    model = make_gpt(seed=28, dtype=torch.float64)
    for prompt in prompts_of(3, 3, seed=29):
        for eos in (None, 5):
            tokens, log_prob = beam_search(model, prompt, beam_width, 8, eos=eos, alpha=0.5)
            assert log_prob == pytest.approx(model_log_prob(model, prompt, tokens), abs=1e-10)
            assert 1 <= len(tokens) <= 8 and (eos not in tokens[:-1])
            assert len(tokens) == 8 or tokens[-1] == eos


def test_a_beam_of_width_v_finds_the_best_two_tokens():
    """With ``K = V`` every first token stays, so the best of all ``V^2`` pairs is among the extensions."""
    model = make_gpt(seed=30, dtype=torch.float64)
    for prompt in prompts_of(3, 4, seed=31):
        scored = {t: model_log_prob(model, prompt, list(t)) for t in itertools.product(range(VOCAB), repeat=2)}
        best = max(scored, key=scored.get)
        tokens, log_prob = beam_search(model, prompt, VOCAB, 2)
        assert tuple(tokens) == best and log_prob == pytest.approx(scored[best], abs=1e-10)


def test_reorder_cache_and_beam_errors():
    cache = [(torch.arange(3.0)[:, None, None, None].expand(3, 2, 4, 5), torch.arange(3.0)[:, None, None, None]
              .expand(3, 2, 4, 5) + 10)] * 2
    reordered = reorder_cache(cache, torch.tensor([2, 0, 0, 1]))
    assert len(reordered) == 2
    for keys, values in reordered:
        assert keys[:, 0, 0, 0].tolist() == [2, 0, 0, 1] and values[:, 0, 0, 0].tolist() == [12, 10, 10, 11]
    model = make_gpt(seed=32, context=8)
    prompt = torch.tensor([1, 2, 3])
    for bad in (prompt[None], prompt.int(), torch.tensor([], dtype=torch.int64), [1, 2, 3]):
        with pytest.raises(ValueError, match=r"prompt must be a non-empty \(T,\) int64 tensor"):
            beam_search(model, bad, 2, 3)
    with pytest.raises(ValueError, match="beam_width must be a positive integer"):
        beam_search(model, prompt, 0, 3)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        beam_search(model, prompt, 2, 0)
    with pytest.raises(ValueError, match="3 prompt tokens and 7 new ones do not fit the context of 8"):
        beam_search(model, prompt, 2, 7)
    assert len(beam_search(model, prompt, 2, 6)[0]) == 6, "T + new - 1 = context fits"


# ---------------------------------------------------------------- measures of generated text

def test_continuation_perplexity_by_hand():
    model = make_gpt(seed=33, dtype=torch.float64)
    ids = prompts_of(3, 10, seed=34)
    total = sum(model_log_prob(model, row[:4], row[4:].tolist()) for row in ids)
    assert continuation_perplexity(model, ids, 4) == pytest.approx(math.exp(-total / (3 * 6)), rel=1e-10)
    with pytest.raises(ValueError, match="prompt_length = 10 leaves nothing to score in 10 tokens"):
        continuation_perplexity(model, ids, 10)
    with pytest.raises(ValueError, match="prompt_length must be a positive integer"):
        continuation_perplexity(model, ids, 0)


def test_distinct_n_by_hand():
    assert distinct_n([[1, 2, 1, 2, 1]], 1) == pytest.approx(2 / 5)
    assert distinct_n([[1, 2, 1, 2, 1]], 2) == pytest.approx(2 / 4)
    assert distinct_n([[1, 2, 3], [1, 2, 4]], 2) == pytest.approx(3 / 4), "counted over all sequences together"
    assert distinct_n(["abcabc", "xy"], 3) == pytest.approx(3 / 4)
    assert distinct_n([np.array([5, 6, 7])], 3) == 1.0
    with pytest.raises(ValueError, match="the sequences hold no 3-gram"):
        distinct_n([[1, 2], [3]], 3)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        distinct_n([[1, 2]], 0)
    assert filters.check_logits(torch.zeros(1)) is not None
