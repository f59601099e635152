"""Chapter 9's families of Transformers: their attention masks, and T5's span corruption.

``course_lib.transfer.masks`` on hand-written matrices, at the ends of the prefix, against
chapter 6's and chapter 7's causal masks, chapter 6's ``attention_mask`` and ``transformers``'
``masking_utils.sdpa_mask`` (bidirectional, causal, causal or-ed with a block for the prefix, with
padding), and by what attention with a prefix mask lets a position read.
``course_lib.transfer.span_corruption`` on the T5 paper's Figure 2, hand cases, the numbers of
dropped tokens and spans over many lengths and seeds, the uniformity of the masks over the
possible ones (chi-square), reproducibility by seed, reassembling the text from inputs and
targets, and against an independent implementation of T5's rule (``noise_span_to_unique_sentinel``
for the inputs, the same on the kept tokens for the targets). Grouped-query attention is tested in
``test_grouped_query_attention.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from course_lib.attention.masking import padding_mask
from course_lib.gpt.causal_attention import causal_mask_after
from course_lib.transfer.masks import cross_mask, decoder_mask, encoder_mask, prefix_lm_mask
from course_lib.transfer.span_corruption import (corrupt_spans, noise_mask, random_span_lengths,
                                                 span_counts)
from course_lib.transformer.multi_head import attention_mask
from course_lib.transformer.scaled_attention import causal_mask, scaled_dot_product_attention
from torch_helpers import randn

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from transformers.masking_utils import (bidirectional_mask_function, blockwise_overlay,  # noqa: E402
                                        causal_mask_function, or_masks, sdpa_mask)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one torch thread (conftest.py)


# ---------------------------------------------------------------- masks

def test_the_four_masks_by_hand_for_four_positions_and_a_prefix_of_two():
    assert encoder_mask(4).tolist() == [[True] * 4] * 4
    assert decoder_mask(4).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert prefix_lm_mask(4, 2).int().tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert prefix_lm_mask(4, 3).int().tolist() == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert cross_mask(2, 3).tolist() == [[True] * 3] * 2
    assert decoder_mask(3, lengths=[2, 3]).int().tolist() == [[[[1, 0, 0], [1, 1, 0], [1, 1, 0]]],
                                                              [[[1, 0, 0], [1, 1, 0], [1, 1, 1]]]]
    assert cross_mask(2, 3, lengths=torch.tensor([1, 3])).int().tolist() == [[[[1, 0, 0], [1, 0, 0]]],
                                                                             [[[1, 1, 1], [1, 1, 1]]]]
    for mask in (encoder_mask(4), decoder_mask(4), prefix_lm_mask(4, 2), cross_mask(2, 3)):
        assert mask.dtype == torch.bool


@pytest.mark.parametrize("steps", [1, 2, 5, 8])
def test_a_prefix_of_zero_is_the_decoder_and_of_t_the_encoder_and_course_libs_causal_masks_agree(steps):
    assert torch.equal(prefix_lm_mask(steps, 0), decoder_mask(steps))
    assert torch.equal(prefix_lm_mask(steps, steps), encoder_mask(steps))
    assert torch.equal(decoder_mask(steps), causal_mask(steps))  # chapter 6, the mask course_lib.gpt uses
    assert torch.equal(decoder_mask(steps), causal_mask_after(0, steps))  # chapter 7's mask after a cache
    for prefix in range(steps + 1):  # the equation, entry by entry
        expected = [[j <= i or j < prefix for j in range(steps)] for i in range(steps)]
        assert prefix_lm_mask(steps, prefix).tolist() == expected


LENGTHS = torch.tensor([3, 6, 1, 5])


def _reference(mask_function, target_steps, source_steps, lengths):
    return sdpa_mask(len(lengths), target_steps, source_steps, mask_function=mask_function,
                     attention_mask=padding_mask(lengths, source_steps), allow_is_causal_skip=False,
                     allow_is_bidirectional_skip=False)


@pytest.mark.parametrize("prefix", [0, 2, 4, 6])
def test_masks_with_padding_equal_transformers_sdpa_mask(prefix):
    steps = 6
    prefix_blocks = torch.where(torch.arange(steps) < prefix, 0, -1).expand(len(LENGTHS), steps)  # one block
    cases = {"encoder": (encoder_mask(steps, LENGTHS), bidirectional_mask_function),
             "decoder": (decoder_mask(steps, LENGTHS), causal_mask_function),
             "prefix LM": (prefix_lm_mask(steps, prefix, LENGTHS),
                           or_masks(causal_mask_function, blockwise_overlay(prefix_blocks)))}
    for name, (ours, function) in cases.items():
        assert ours.shape == (4, 1, steps, steps)
        assert torch.equal(ours, _reference(function, steps, steps, LENGTHS)), name
    assert torch.equal(cross_mask(3, steps, LENGTHS), _reference(bidirectional_mask_function, 3, steps, LENGTHS))
    padding = padding_mask(LENGTHS, steps)  # chapter 6's way of combining padding and causality
    assert torch.equal(decoder_mask(steps, LENGTHS), attention_mask(padding, causal=True, steps=steps))
    assert torch.equal(encoder_mask(steps, LENGTHS), attention_mask(padding).expand(4, 1, steps, steps))


def test_with_a_prefix_mask_the_prefix_reads_only_itself_and_later_positions_read_all_before_them():
    steps, prefix = 6, 3
    x = randn(1, steps, 4, seed=1)
    attend = (lambda x: scaled_dot_product_attention(x, x, x, prefix_lm_mask(steps, prefix))[0])
    base = attend(x)
    for changed in range(steps):
        y = x.clone()
        y[0, changed] += 1.0
        moved = (attend(y) - base).abs().amax(dim=-1)[0] > 1e-9  # (T,) which outputs changed
        readers = [i for i in range(steps) if changed < prefix or changed <= i]
        assert moved.nonzero().flatten().tolist() == readers, f"changing position {changed}"


MASK_ERRORS = {
    "negative prefix": (lambda: prefix_lm_mask(4, -1), ValueError, r"prefix must be a non-negative integer"),
    "prefix beyond T": (lambda: prefix_lm_mask(4, 5), ValueError, r"prefix must lie in \[0, T\] = \[0, 4\], got 5"),
    "prefix a float": (lambda: prefix_lm_mask(4, 1.0), ValueError, r"prefix must be a non-negative integer"),
    "no steps": (lambda: encoder_mask(0), ValueError, r"steps must be a positive integer"),
    "steps not an int": (lambda: decoder_mask(2.5), ValueError, r"steps must be a positive integer"),
    "no source": (lambda: cross_mask(2, 0), ValueError, r"source_steps must be a positive integer"),
    "length beyond T": (lambda: decoder_mask(3, [2, 4]), ValueError, r"lengths must lie in \[1, 3\]"),
    "length zero": (lambda: encoder_mask(3, [0, 2]), ValueError, r"lengths must lie in \[1, 3\]"),
    "lengths of rank 2": (lambda: encoder_mask(3, [[1, 2]]), ValueError, r"lengths must be \(B,\)"),
    "float lengths": (lambda: cross_mask(2, 3, [1.0, 2.0]), ValueError, r"lengths must be 2 integers"),
}


@pytest.mark.parametrize("call, error, match", list(MASK_ERRORS.values()), ids=list(MASK_ERRORS))
def test_mask_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------- span corruption

SENTENCE = "Thank you for inviting me to your party last week .".split()


def _words(ids, names):
    return " ".join(names[i] for i in ids.tolist())


def test_the_t5_papers_figure_2():
    names = dict(enumerate(SENTENCE)) | {100: "<X>", 101: "<Y>", 102: "<Z>"}
    ids = torch.arange(len(SENTENCE))
    mask = torch.tensor([word in ("for", "inviting", "last") for word in SENTENCE])
    inputs, targets = corrupt_spans(ids, mask, [100, 101, 102])
    assert _words(inputs, names) == "Thank you <X> me to your party <Y> week ."
    assert _words(targets, names) == "<X> for inviting <Y> last <Z>"
    assert inputs.dtype == targets.dtype == torch.int64


def test_corrupt_spans_by_hand():
    ids, sentinels = torch.tensor([11, 12, 13, 14, 15]), [90, 91, 92]
    cases = [([0, 0, 0, 1, 1], [11, 12, 13, 90], [90, 14, 15]),  # ends with a dropped span: no final sentinel
             ([1, 1, 0, 0, 1], [90, 13, 14, 91], [90, 11, 12, 91, 15]),  # starts with a dropped span
             ([0, 1, 0, 1, 0], [11, 90, 13, 91, 15], [90, 12, 91, 14, 92]),
             ([0, 0, 0, 0, 0], [11, 12, 13, 14, 15], [90]),
             ([1, 1, 1, 1, 1], [90], [90, 11, 12, 13, 14, 15])]
    for mask, inputs, targets in cases:
        got = corrupt_spans(ids, torch.tensor(mask, dtype=torch.bool), sentinels)
        assert [t.tolist() for t in got] == [inputs, targets], mask
    empty = corrupt_spans(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.bool), [])
    assert [t.tolist() for t in empty] == [[], []]


def test_span_counts_by_hand():
    assert span_counts(100) == (15, 5)
    assert span_counts(512) == (77, 26)  # 76.8 -> 77 tokens, 25.7 -> 26 spans (T5's inputs of 512 tokens)
    assert span_counts(10) == (2, 1)  # 1.5 rounds to 2
    assert span_counts(30) == (4, 1)  # 4.5 rounds half to even, to 4
    assert span_counts(2) == (1, 1) and span_counts(3) == (1, 1)  # at least one token dropped
    assert span_counts(4, noise_density=0.9) == (3, 1)  # at least one kept
    assert span_counts(10, noise_density=0.9) == (9, 1)  # 3 spans would need 3 kept tokens between them
    assert span_counts(40, noise_density=0.5, mean_span_length=1) == (20, 20)


def _runs(mask):
    """``[(value, length), ...]`` of the runs of equal values."""
    return [(bool(value), len(list(group))) for value, group in itertools.groupby(mask.tolist())]


@pytest.mark.parametrize("density, mean", [(0.15, 3.0), (0.3, 2.0), (0.5, 1.0), (0.05, 8.0)])
def test_noise_masks_have_the_counts_and_spans_of_t5_for_many_lengths_and_seeds(density, mean):
    for length in range(2, 120, 3):
        noise = min(max(int(np.round(length * density)), 1), length - 1)  # numpy's rounding, as transformers
        spans = min(max(int(np.round(noise / mean)), 1), length - noise)
        for seed in range(5):
            mask = noise_mask(length, density, mean, generator=torch.Generator().manual_seed(seed))
            runs = _runs(mask)
            assert mask.shape == (length,) and mask.dtype == torch.bool
            assert int(mask.sum()) == noise, (length, seed)
            assert [value for value, _ in runs] == [False, True] * spans, (length, seed)  # kept first, dropped last


def test_the_same_seed_gives_the_same_mask_and_other_seeds_others():
    masks = [noise_mask(200, generator=torch.Generator().manual_seed(seed)) for seed in (7, 7, 8, 9)]
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(masks[0], masks[2]) and not torch.equal(masks[2], masks[3])


def test_every_mask_with_the_counts_is_equally_likely():
    # 10 tokens, 4 dropped in 2 spans: 3 ways to split the dropped ones, 5 the kept ones, 15 masks.
    generator = torch.Generator().manual_seed(0)
    counts = {}
    for _ in range(3000):
        key = tuple(noise_mask(10, 0.4, 2.0, generator=generator).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 15
    assert stats.chisquare(list(counts.values())).pvalue > 0.001
    splits = [tuple(random_span_lengths(5, 3, generator).tolist()) for _ in range(600)]
    assert set(splits) == {s for s in itertools.product(range(1, 4), repeat=3) if sum(s) == 5}  # the 6 splits
    assert stats.chisquare([splits.count(s) for s in set(splits)]).pvalue > 0.001


def _reassemble(inputs, targets, sentinels):
    """The text back from T5's inputs and targets: each sentinel of the inputs replaced by its span."""
    sentinels = set(sentinels)
    spans, current = {}, None
    for token in targets.tolist():
        if token in sentinels:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    return [t for token in inputs.tolist() for t in (spans[token] if token in sentinels else [token])]


def _t5_rule(ids, mask, sentinels):
    """T5's ``noise_span_to_unique_sentinel`` as a loop: each run of masked tokens becomes the next sentinel."""
    out, used = [], 0
    for i, token in enumerate(ids.tolist()):
        if not mask[i]:
            out.append(token)
        elif i == 0 or not mask[i - 1]:
            out.append(sentinels[used])
            used += 1
    return out


def test_inputs_and_targets_give_back_the_text_and_follow_t5s_rule():
    sentinels = list(range(1000, 1100))
    for seed, length in itertools.product(range(4), [2, 3, 7, 20, 64, 101]):
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 50, (length,), generator=generator)
        masks = [noise_mask(length, 0.15, 3.0, generator), noise_mask(length, 0.4, 1.5, generator),
                 torch.rand(length, generator=generator) < 0.3]  # and any mask, kept first or not
        masks[2][0] = False
        for mask in masks:
            inputs, targets = corrupt_spans(ids, mask, sentinels)
            assert _reassemble(inputs, targets, sentinels) == ids.tolist()
            assert inputs.tolist() == _t5_rule(ids, mask, sentinels)
            assert targets.tolist() == _t5_rule(ids, ~mask, sentinels)  # T5's targets: the kept spans become sentinels
            spans = sum(dropped for dropped, _ in _runs(mask))
            assert len(inputs) + len(targets) == length + 2 * spans + int(not mask[-1])  # a sentinel per span, twice


def _ids(n=4):
    return torch.arange(n)


SPAN_ERRORS = {
    "density 0": (lambda: noise_mask(10, 0.0), ValueError, r"noise_density must lie in \(0, 1\), got 0.0"),
    "density 1": (lambda: noise_mask(10, 1.0), ValueError, r"noise_density must lie in \(0, 1\)"),
    "negative density": (lambda: noise_mask(10, -0.1), ValueError, r"noise_density must lie in \(0, 1\)"),
    "density above 1": (lambda: span_counts(10, 1.5), ValueError, r"noise_density must lie in \(0, 1\)"),
    "span shorter than 1": (lambda: noise_mask(10, 0.15, 0.5), ValueError, r"mean_span_length must be at least 1"),
    "one token": (lambda: noise_mask(1), ValueError, r"length must be at least 2"),
    "no tokens": (lambda: noise_mask(0), ValueError, r"length must be a positive integer"),
    "split too fine": (lambda: random_span_lengths(3, 4), ValueError, r"cannot split 3 items into 4 non-empty parts"),
    "too few sentinels": (lambda: corrupt_spans(_ids(), torch.tensor([False, True, False, False]), [7]), ValueError,
                          r"1 dropped spans need 2 sentinels, got 1"),
    "mask of other length": (lambda: corrupt_spans(_ids(), torch.zeros(3, dtype=torch.bool), [7]), ValueError,
                             r"mask must have shape \(N,\) = \(4,\), got \(3,\)"),
    "mask of ints": (lambda: corrupt_spans(_ids(), torch.zeros(4, dtype=torch.int64), [7]), TypeError,
                     r"mask must be a bool tensor"),
    "ids of floats": (lambda: corrupt_spans(torch.zeros(4), torch.zeros(4, dtype=torch.bool), [7]), TypeError,
                      r"ids must be an int64 tensor"),
    "ids a list": (lambda: corrupt_spans([1, 2], torch.zeros(2, dtype=torch.bool), [7]), TypeError,
                   r"ids must be a torch.Tensor of shape \(N,\)"),
    "ids of rank 2": (lambda: corrupt_spans(torch.zeros(1, 4, dtype=torch.int64), torch.zeros(4, dtype=torch.bool),
                                            [7]), ValueError, r"ids must have shape \(N,\)"),
}


@pytest.mark.parametrize("call, error, match", list(SPAN_ERRORS.values()), ids=list(SPAN_ERRORS))
def test_span_corruption_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
