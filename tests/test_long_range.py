"""course_lib.recurrent.long_range: the memory tasks of chapter 4.

What is checked, for "remember the first tokens" and "remember the token after
the marker": the shapes and id ranges the docstrings promise, the same batch for
the same seed, labels that are a function of the early tokens alone (recomputed
by naive loops, and unchanged when every later token is redrawn), the promised
number of tokens after the answer, classes that are all used and balanced, and
clear errors for wrong arguments.
"""

from __future__ import annotations

import numpy as np
import pytest

from course_lib.recurrent import long_range


def test_shapes_dtypes_and_id_ranges():
    ids, labels = long_range.first_tokens_task(16, 30, np.random.default_rng(0), num_keys=3, num_distractors=5)
    assert ids.shape == (16, 31) and labels.shape == (16,)
    assert ids.dtype == np.int64 and labels.dtype == np.int64
    assert ids.min() >= 0 and ids.max() < long_range.vocabulary_size(3, 5) == 8
    assert labels.min() >= 0 and labels.max() < long_range.num_classes(3) == 3


def test_prefix_makes_longer_sequences_and_more_classes():
    ids, labels = long_range.first_tokens_task(500, 7, np.random.default_rng(1), num_keys=3, prefix=2)
    assert ids.shape == (500, 9)
    assert long_range.num_classes(3, prefix=2) == 9
    assert set(labels.tolist()) == set(range(9)), "with 500 sequences every one of the 9 classes appears"


def test_zero_delay_is_just_the_keys():
    ids, labels = long_range.first_tokens_task(5, 0, np.random.default_rng(2))
    assert ids.shape == (5, 1)
    np.testing.assert_array_equal(ids[:, 0], labels)


def test_same_seed_same_batch_and_other_seed_other_batch():
    first = long_range.first_tokens_task(8, 20, np.random.default_rng(42), prefix=2)
    again = long_range.first_tokens_task(8, 20, np.random.default_rng(42), prefix=2)
    other = long_range.first_tokens_task(8, 20, np.random.default_rng(43), prefix=2)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])


def test_labels_are_the_keys_read_in_base_num_keys():
    num_keys, prefix = 4, 3
    ids, labels = long_range.first_tokens_task(200, 10, np.random.default_rng(3), num_keys=num_keys, prefix=prefix)
    for row, label in zip(ids, labels):
        value = 0
        for token in row[:prefix]:  # naive: Horner's rule over the keys, left to right
            value = value * num_keys + int(token)
        assert value == label


def test_keys_only_at_the_start_and_distractors_only_after():
    num_keys, prefix = 4, 2
    ids, _ = long_range.first_tokens_task(300, 25, np.random.default_rng(4), num_keys=num_keys,
                                          num_distractors=6, prefix=prefix)
    assert (ids[:, :prefix] < num_keys).all(), "the first tokens are keys"
    assert (ids[:, prefix:] >= num_keys).all(), "no key appears after the prefix: the late tokens carry no answer"
    assert set(np.unique(ids[:, prefix:]).tolist()) == set(range(num_keys, num_keys + 6))


def test_the_answer_is_determined_by_the_early_tokens_only():
    ids, labels = long_range.first_tokens_task(400, 50, np.random.default_rng(5), num_keys=4)
    # Redraw every distractor: the labels, a function of the first token, cannot change.
    redrawn = ids.copy()
    redrawn[:, 1:] = np.random.default_rng(6).integers(4, 12, size=(400, 50))
    answer_from_first_token = redrawn[:, 0]
    np.testing.assert_array_equal(answer_from_first_token, labels)
    # And the late tokens are independent of the label: the distractor frequencies
    # are about the same in every class (a chi-square test would be overkill here).
    for label in range(4):
        share = np.bincount(ids[labels == label, 1:].ravel() - 4, minlength=8) / ids[labels == label, 1:].size
        assert np.abs(share - 1 / 8).max() < 0.03


def test_labels_are_balanced():
    _, labels = long_range.first_tokens_task(4000, 5, np.random.default_rng(7), num_keys=4)
    assert np.abs(np.bincount(labels, minlength=4) / 4000 - 0.25).max() < 0.03


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(batch_size=0), ValueError, "batch_size must be a positive integer, got 0"),
    (dict(delay=-1), ValueError, "delay must be a non-negative integer, got -1"),
    (dict(delay=2.5), ValueError, "delay must be a non-negative integer, got 2.5"),
    (dict(rng=0), TypeError, "rng must be a numpy.random.Generator"),
    (dict(num_keys=1), ValueError, "num_keys must be at least 2"),
    (dict(num_distractors=0), ValueError, "num_distractors must be a positive integer, got 0"),
    (dict(prefix=0), ValueError, "prefix must be a positive integer, got 0"),
])
def test_clear_errors(kwargs, error, message):
    arguments = dict(batch_size=4, delay=10, rng=np.random.default_rng(0))
    arguments.update(kwargs)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        long_range.first_tokens_task(**arguments)


def test_sizes_check_their_arguments():
    with pytest.raises(ValueError, match="num_distractors must be a positive integer"):
        long_range.vocabulary_size(4, 0)
    with pytest.raises(ValueError, match="prefix must be a positive integer"):
        long_range.num_classes(4, prefix=-1)


# "Remember the token after the marker"


def test_marked_shapes_dtypes_and_one_marker_per_row():
    ids, labels = long_range.marked_token_task(64, 20, np.random.default_rng(0), num_keys=4, max_start=5)
    assert ids.shape == (64, 5 + 2 + 20) and labels.shape == (64,)
    assert ids.dtype == np.int64 and labels.dtype == np.int64
    assert ids.min() >= 0 and ids.max() <= 4
    assert ((ids == 4).sum(axis=1) == 1).all(), "exactly one marker (id num_keys) per sequence"
    assert labels.min() >= 0 and labels.max() < 4


def test_marked_label_is_the_key_after_the_marker_and_delay_tokens_follow():
    delay, max_start = 12, 7
    ids, labels = long_range.marked_token_task(300, delay, np.random.default_rng(1), num_keys=3, max_start=max_start)
    starts = []
    for row, label in zip(ids, labels):
        start = [t for t, token in enumerate(row) if token == 3][0]  # naive search for the marker
        starts.append(start)
        assert start <= max_start
        assert row[start + 1] == label
        assert len(row) - (start + 2) >= delay, "at least `delay` tokens follow the key"
    assert set(starts) == set(range(max_start + 1)), "the marker takes every allowed position"


def test_marked_answer_depends_only_on_the_marker_and_the_next_token():
    ids, labels = long_range.marked_token_task(400, 30, np.random.default_rng(2), num_keys=4)
    start = np.argmax(ids == 4, axis=1)
    redrawn = np.random.default_rng(3).integers(0, 4, size=ids.shape)  # every token redrawn ...
    rows = np.arange(len(ids))
    redrawn[rows, start] = 4  # ... except the marker
    redrawn[rows, start + 1] = ids[rows, start + 1]  # and the key after it
    np.testing.assert_array_equal(redrawn[rows, np.argmax(redrawn == 4, axis=1) + 1], labels)
    # The later tokens look exactly like keys and say nothing about the label.
    for label in range(4):
        later = np.concatenate([row[s + 2:] for row, s in zip(ids[labels == label], start[labels == label])])
        assert np.abs(np.bincount(later, minlength=5)[:4] / later.size - 0.25).max() < 0.03


def test_marked_zero_start_and_zero_delay():
    ids, labels = long_range.marked_token_task(6, 0, np.random.default_rng(4), max_start=0)
    assert ids.shape == (6, 2)
    assert (ids[:, 0] == 4).all()
    np.testing.assert_array_equal(ids[:, 1], labels)


def test_marked_same_seed_same_batch_and_balanced_labels():
    first = long_range.marked_token_task(4000, 5, np.random.default_rng(5))
    again = long_range.marked_token_task(4000, 5, np.random.default_rng(5))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert np.abs(np.bincount(first[1], minlength=4) / 4000 - 0.25).max() < 0.03


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(batch_size=-2), ValueError, "batch_size must be a positive integer, got -2"),
    (dict(delay=True), ValueError, "delay must be a non-negative integer, got True"),
    (dict(rng=np.random.RandomState(0)), TypeError, "rng must be a numpy.random.Generator"),
    (dict(num_keys=1), ValueError, "num_keys must be at least 2"),
    (dict(max_start=-1), ValueError, "max_start must be a non-negative integer, got -1"),
])
def test_marked_clear_errors(kwargs, error, message):
    arguments = dict(batch_size=4, delay=10, rng=np.random.default_rng(0))
    arguments.update(kwargs)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        long_range.marked_token_task(**arguments)
