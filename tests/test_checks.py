"""The one argument-check API: each check names the argument and says what was expected and what came."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib import checks


def test_shape_message_has_letters_numbers_and_what_came():
    assert checks.shape_message("h_prev", "(B, H)", (4, 8), (4, 7)) == "h_prev must have shape (B, H) = (4, 8), got (4, 7)"
    assert checks.shape_message("b", "(H,)", (None,), (2, 3)) == "b must have shape (H,) = (?,), got (2, 3)"


def test_numpy_and_torch_checks_word_shape_errors_alike():
    with pytest.raises(ValueError) as numpy_error:
        checks.expect_shape(np.zeros((4, 7)), "h_prev", (4, 8), "(B, H)")
    with pytest.raises(ValueError) as torch_error:
        checks.expect_tensor(torch.zeros(4, 7), "h_prev", (4, 8), "(B, H)")
    assert str(numpy_error.value) == str(torch_error.value) == "h_prev must have shape (B, H) = (4, 8), got (4, 7)"
    with pytest.raises(TypeError, match=r"h must be a torch.Tensor of shape \(B, H\), got list"):
        checks.expect_tensor([[1.0]], "h", (1, 1), "(B, H)")


@pytest.mark.parametrize("value, ok", [(0, True), (3, True), (np.int64(2), True), (-1, False), (2.0, False),
                                       (True, False), ("3", False)])
def test_nonnegative_int(value, ok):
    if ok:
        assert checks.nonnegative_int(value, "delay") == int(value)
    else:
        with pytest.raises(ValueError, match=f"delay must be a non-negative integer, got {value!r}"):
            checks.nonnegative_int(value, "delay")


def test_generator_and_lengths():
    rng = np.random.default_rng(0)
    assert checks.generator(rng) is rng
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator .*got RandomState"):
        checks.generator(np.random.RandomState(0))
    assert checks.sequence_lengths(None, 3, 5).tolist() == [5, 5, 5]
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 5\]"):
        checks.sequence_lengths([0, 5, 5], 3, 5)
    with pytest.raises(ValueError, match=r"ids must be a \(B, T\) int64 tensor"):
        checks.token_batch(torch.zeros(2, 3))
