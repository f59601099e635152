"""Masked language modelling's corruption: choose 15 % of the tokens; of those, 80 % become ``[MASK]``, 10 % a random token, 10 % stay. Chapter 8.

The model is trained to predict the original token at every chosen position from
both sides of its context (Devlin et al., 2019). Replacing every chosen token by
``[MASK]`` would teach the model that the tokens it must predict are always ``[MASK]``,
a token it never sees when it is used later; leaving some unchanged and replacing
some at random makes it keep a good vector for every token it reads. Special tokens
and padding are never chosen. See :doc:`/chapters/ch08_bert`. Tested by counting
over many draws.
"""

from __future__ import annotations

from typing import Sequence

import torch

from course_lib import checks

IGNORE = -100  # the label of a position that is not predicted (torch's cross_entropy ignore_index)


def special_token_mask(ids, special_ids: Sequence[int]):
    """``(B, T)`` bool, True where ``ids`` holds one of ``special_ids`` (``[CLS]``, ``[SEP]``, ``[PAD]``, ...). Chapter 8."""
    checks.token_batch(ids, "ids")
    return torch.isin(ids, torch.as_tensor(list(special_ids), dtype=torch.int64))


def mlm_mask(ids, special_ids: Sequence[int], mask_id: int, vocab_size: int, probability: float = 0.15,
             generator: torch.Generator | None = None):
    """BERT's corruption for masked language modelling: the model's inputs and the labels it must predict.

    Each position whose id is not in ``special_ids`` is chosen independently with
    ``probability``. A chosen position gets ``mask_id`` with probability 0.8, a token
    drawn uniformly from the ids in ``[0, vocab_size)`` that are not special with
    probability 0.1, and keeps its token with probability 0.1. The labels are the
    original ids at chosen positions and ``IGNORE`` (-100) elsewhere. All random draws
    come from ``generator``. ``ids`` is not modified. Chapter 8, exercise of ps08.

    Args:
        ids: ``(B, T)`` int64 token ids.
        special_ids: the ids never chosen (padding, ``[CLS]``, ``[SEP]``, ...), also never drawn as random tokens.
        mask_id: the id of ``[MASK]``.
        vocab_size: ``V``.
        probability: the chance that a non-special position is chosen.
        generator: a ``torch.Generator`` (``None``: torch's global one).

    Returns:
        ``(inputs (B, T), labels (B, T))``, both int64 tensors.
    """
    checks.token_batch(ids, "ids")
    vocab_size = checks.positive_int(vocab_size, "vocab_size")
    if not 0 <= probability <= 1:
        raise ValueError(f"probability must lie in [0, 1], got {probability!r}")
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"ids must lie in [0, {vocab_size}), got {ids.min().item()}..{ids.max().item()}")
    ### BEGIN SOLUTION
    special = special_token_mask(ids, special_ids)
    chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    fate = torch.rand(ids.shape, generator=generator)
    candidates = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)], dtype=torch.int64)
    random_tokens = candidates[torch.randint(len(candidates), ids.shape, generator=generator)]
    inputs = torch.where(chosen & (fate < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (fate >= 0.8) & (fate < 0.9), random_tokens, inputs)
    return inputs, labels
    ### END SOLUTION
