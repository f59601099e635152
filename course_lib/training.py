"""What every training loop returns, and the contexts that keep global state as it was. All chapters.

- :class:`TrainingHistory`: the one result type of the training loops
  (:func:`course_lib.vectors.word2vec.train_sgns`,
  :func:`course_lib.recurrent.elman_lm.train_rnn_lm_numpy`,
  :func:`course_lib.recurrent.language_model.train_language_model`, ...): named
  records, each a 1-D numpy array, read as ``history["loss"]``.
- :func:`torch_seed`, :func:`torch_threads`, :func:`blas_threads`: a library
  function that needs torch's global random generator or a number of threads
  sets them inside one of these contexts, which restore the caller's state on exit,
  so calling a course_lib function never changes the notebook that called it.
- :func:`eval_mode` and :func:`optimizer_step`: the two steps every PyTorch loop of the course shares.
"""

from __future__ import annotations

import contextlib
from typing import Mapping, Sequence

import numpy as np


class TrainingHistory:
    """The records of one training run: named 1-D arrays, read as ``history["loss"]``. All chapters.

    Per-step records (``"loss"``, ``"grad_norm"``, ...) have one entry per
    optimizer step, ``(steps,)``; periodic ones (``"valid_step"``,
    ``"valid_perplexity"``) one entry per evaluation, ``(n_eval,)``; per-epoch ones
    one per epoch. Which records a loop keeps is listed in its docstring.

    Args:
        records: name -> sequence of numbers; each becomes a 1-D numpy array.
    """

    def __init__(self, records: Mapping[str, Sequence[float]]):
        self.records = {name: np.asarray(values) for name, values in records.items()}
        for name, values in self.records.items():
            if values.ndim != 1:
                raise ValueError(f"record {name!r} must be 1-D, got shape {values.shape}")

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.records[name]
        except KeyError:
            raise KeyError(f"no record {name!r}; this history has {sorted(self.records)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.records

    def __iter__(self):
        return iter(self.records)

    def keys(self):
        """The names of the records."""
        return self.records.keys()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}: {len(values)}" for name, values in self.records.items())
        return f"TrainingHistory({sizes})"


@contextlib.contextmanager
def torch_seed(seed: int):
    """Run the block with torch's global generator seeded by ``seed``, then restore the caller's state. Chapter 3 on.

    Module initialization and dropout draw from torch's global generator; this
    makes them reproducible without changing the random stream of the code
    that called the library function.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def torch_threads(threads: int):
    """Run the block with torch using ``threads`` CPU threads, then restore the caller's number. Chapter 2 on."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def blas_threads(threads: int):
    """Run the block with numpy's BLAS limited to ``threads`` threads, then restore the limit. Chapter 3 on.

    Small matrix products are fastest on one thread; several threads that wait by
    spinning slow a training loop down by an order of magnitude on a busy machine.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(threads), user_api="blas"):
        yield


@contextlib.contextmanager
def eval_mode(model):
    """Run the block with ``model`` (a ``torch.nn.Module``) in evaluation mode, then restore its mode. Chapter 3 on."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def optimizer_step(model, optimizer, loss, max_norm: float | None) -> float:
    """Backpropagate ``loss``, clip the gradients' global norm to ``max_norm``, step; return the norm. Chapter 3 on.

    The global norm ``||g|| = sqrt(sum_p ||g_p||^2)`` is measured before clipping, as
    ``torch.nn.utils.clip_grad_norm_`` does; ``max_norm=None`` clips nothing.

    Args:
        model: the ``torch.nn.Module`` whose parameters ``optimizer`` updates.
        optimizer: a ``torch.optim`` optimizer.
        loss: a scalar tensor ``()``.
        max_norm: the largest global gradient norm, or ``None``.

    Returns:
        the gradient's global norm before clipping, a float.
    """
    import torch

    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm else float("inf"))
    optimizer.step()
    return float(norm)
