"""course_lib.transformer.tagger: the two synthetic tasks against loops written from their docstrings,
the model against torch.nn.TransformerEncoder with the same weights, causality, and the trainer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from course_lib.transformer import tagger
from course_lib.transformer.positions import sinusoidal_encoding

pytestmark = pytest.mark.usefixtures("one_thread")


def test_offset_copy_task_labels_the_token_offset_places_back():
    ids, labels = tagger.offset_copy_task(5, 12, np.random.default_rng(0), vocab_size=7, offset=3)
    assert ids.shape == labels.shape == (5, 12) and ids.dtype == labels.dtype == np.int64
    assert ids.min() >= 1 and ids.max() <= 6
    for b in range(5):
        for t in range(12):
            assert labels[b, t] == (ids[b, t - 3] if t >= 3 else tagger.IGNORE)


def test_recent_key_task_labels_the_last_key_so_far():
    ids, labels = tagger.recent_key_task(6, 20, np.random.default_rng(1), vocab_size=10, num_keys=3, key_rate=0.3)
    assert ids.min() >= 1 and ids.max() <= 9
    for b in range(6):
        last = tagger.IGNORE
        for t in range(20):
            if ids[b, t] <= 3:
                last = ids[b, t]
            assert labels[b, t] == last


@pytest.mark.parametrize("call", [
    lambda rng: tagger.offset_copy_task(2, 3, rng, offset=3),
    lambda rng: tagger.offset_copy_task(2, 5, rng, vocab_size=2),
    lambda rng: tagger.recent_key_task(2, 5, rng, vocab_size=5, num_keys=4),
    lambda rng: tagger.recent_key_task(2, 5, rng, key_rate=0.0),
])
def test_tasks_refuse_impossible_settings(call):
    with pytest.raises(ValueError):
        call(np.random.default_rng(0))


def test_tagger_equals_torch_transformer_encoder_with_the_same_weights():
    torch.manual_seed(0)
    model = tagger.Tagger(11, width=16, num_heads=4, ff_size=24, layers=2, positions="sinusoidal", max_len=9).eval()
    layer = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, batch_first=True, norm_first=True)
    reference = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False).eval()
    reference.load_state_dict(model.encoder.state_dict())
    ids = torch.randint(1, 11, (3, 9))
    with torch.no_grad():
        x = model.embedding.embedding(ids) * 16 ** 0.5 + sinusoidal_encoding(9, 16)
        future = torch.triu(torch.full((9, 9), float("-inf")), diagonal=1)
        expected = model.output(reference(x, mask=future))
        torch.testing.assert_close(model(ids), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["none", "sinusoidal", "learned", "rope", "alibi"])
def test_a_causal_tagger_does_not_read_the_future(kind):
    torch.manual_seed(0)
    model = tagger.Tagger(9, width=16, num_heads=2, ff_size=16, layers=2, positions=kind, max_len=10).eval()
    ids = torch.randint(1, 9, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(1, 9, (2, 4))
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[:, :6], model(changed)[:, :6])


def test_without_positions_or_mask_the_tagger_is_permutation_equivariant():
    torch.manual_seed(0)
    model = tagger.Tagger(9, width=16, num_heads=2, ff_size=16, layers=2, positions="none", causal=False).eval()
    ids = torch.randint(1, 9, (2, 7))
    permutation = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    with torch.no_grad():
        torch.testing.assert_close(model(ids[:, permutation]), model(ids)[:, permutation], atol=1e-5, rtol=1e-5)


class _Oracle(nn.Module):
    """Logits that put all weight on the token ``offset`` places back: a perfect model of the offset task."""

    vocab_size = 8

    def forward(self, ids):
        shifted = torch.roll(ids, 2, dims=1)
        return nn.functional.one_hot(shifted, self.vocab_size).float()


def test_position_accuracy_of_a_perfect_model_is_one_after_the_offset():
    accuracy = tagger.position_accuracy(_Oracle(), 10, count=16)
    assert accuracy.shape == (10,)
    assert np.isnan(accuracy[:2]).all() and (accuracy[2:] == 1.0).all()


def test_training_is_reproducible_and_lowers_the_loss():
    def run():
        torch.manual_seed(0)
        model = tagger.Tagger(8, width=16, num_heads=2, ff_size=16, layers=1, positions="rope")
        return tagger.train_tagger(model, 30, seq_len=8, batch_size=16, lr=1e-2, seed=3, progress=False)

    first, second = run(), run()
    assert len(first["loss"]) == len(first["grad_norm"]) == 30
    np.testing.assert_array_equal(first["loss"], second["loss"])
    assert first["loss"][-10:].mean() < 0.8 * first["loss"][:5].mean()
