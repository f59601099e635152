"""The trainers agree: one result type, and no library call leaves global state changed.

Every training loop returns a ``TrainingHistory``; torch's global generator, torch's
thread count and numpy's BLAS threads are the same after the call as before it,
also when the call fails.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from course_lib import training
from course_lib.recurrent import elman_lm, elmo, language_model as lm
from course_lib.training import TrainingHistory
from course_lib.vectors import word2vec


def _blas_limits():
    return sorted((info["internal_api"], info["num_threads"]) for info in threadpool_info()
                  if info["user_api"] == "blas")


def _global_state():
    return torch.random.get_rng_state().clone(), torch.get_num_threads(), _blas_limits()


def _assert_same(before, after):
    assert torch.equal(before[0], after[0]), "torch's global random generator was changed"
    assert before[1:] == after[1:], "the thread counts were changed"


def test_history_holds_named_1d_arrays():
    history = TrainingHistory({"loss": [3.0, 2.0, 1.5], "valid_step": [2]})
    assert isinstance(history["loss"], np.ndarray) and history["loss"].tolist() == [3.0, 2.0, 1.5]
    assert "loss" in history and "grad_norm" not in history
    assert list(history.keys()) == ["loss", "valid_step"]
    assert repr(history) == "TrainingHistory(loss: 3, valid_step: 1)"
    with pytest.raises(KeyError, match=r"no record 'grad_norm'; this history has \['loss', 'valid_step'\]"):
        history["grad_norm"]
    with pytest.raises(ValueError, match="record 'loss' must be 1-D"):
        TrainingHistory({"loss": [[1.0, 2.0]]})


def test_torch_seed_is_reproducible_and_restores_the_callers_stream():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    with training.torch_seed(7):
        first = torch.rand(2)
    with training.torch_seed(7):
        second = torch.rand(2)
    assert torch.equal(first, second)
    assert torch.equal(torch.rand(3), expected_next), "the caller's random stream must continue as if untouched"


def test_thread_contexts_restore_even_after_an_error():
    before = _global_state()
    with pytest.raises(RuntimeError, match="inside"):
        with training.torch_threads(1), training.blas_threads(1):
            assert torch.get_num_threads() == 1
            assert all(n == 1 for _api, n in _blas_limits())
            raise RuntimeError("inside")
    _assert_same(before, _global_state())


def test_eval_mode_restores_training_mode():
    model = torch.nn.Dropout(0.5)
    with training.eval_mode(model):
        assert not model.training
    assert model.training


def _stream(n=400, vocab=7, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=n)


def _trainers():
    """name -> a call of that trainer; models and data are built here, before the global state is recorded."""
    counts = np.bincount(_stream(60), minlength=7) + 1
    language_model = lm.RecurrentLanguageModel(7, 3, 4, dropout=0.3)
    bilm = elmo.BiLanguageModel(7, 4, num_layers=1, dropout=0.3)
    layers = torch.randn(2, 10, 3, generator=torch.Generator().manual_seed(0))
    return {
        "train_sgns_numpy": lambda: word2vec.train_sgns_numpy([_stream(60)], counts, dim=4, epochs=1,
                                                              progress=False)[1],
        "train_sgns": lambda: word2vec.train_sgns([_stream(60)], counts, dim=4, epochs=1, threads=1,
                                                  progress=False)[1],
        "train_rnn_lm_numpy": lambda: elman_lm.train_rnn_lm_numpy(_stream(), 7, embed_dim=3, hidden_size=4,
                                                                  seq_len=5, batch_size=2, steps=3,
                                                                  progress=False)[1],
        "train_language_model": lambda: lm.train_language_model(language_model, _stream(), steps=3, seq_len=5,
                                                                batch_size=2, valid_ids=_stream(60, seed=1),
                                                                eval_every=2, progress=False),
        "train_bilm": lambda: elmo.train_bilm(bilm, _stream(), steps=2, seq_len=5, batch_size=2, progress=False),
        "fit_scalar_mix": lambda: elmo.fit_scalar_mix(layers, _stream(10, 3), 3, steps=3)[2],
    }


TRAINERS = ["train_sgns_numpy", "train_sgns", "train_rnn_lm_numpy", "train_language_model", "train_bilm",
            "fit_scalar_mix"]


@pytest.mark.parametrize("name", TRAINERS)
def test_every_trainer_returns_a_history_and_leaves_global_state_alone(name):
    torch.manual_seed(2024)
    call = _trainers()[name]
    before = _global_state()
    history = call()
    _assert_same(before, _global_state())
    assert isinstance(history, TrainingHistory)
    assert all(values.ndim == 1 and len(values) > 0 for values in history.records.values()), history
