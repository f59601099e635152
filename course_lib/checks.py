"""Argument checks shared by course_lib functions, for numpy arrays and torch tensors. All chapters.

Each check raises a ``ValueError`` or ``TypeError`` that names the argument,
the shape or type it expected and what it got, so that a wrong call fails at
the call and not three lines deeper. Shapes are given in the library's letters
(see :mod:`course_lib`) and in numbers, in one format:
``h_prev must have shape (B, H) = (4, 8), got (4, 7)``.

numpy: :func:`expect_shape`, :func:`matrix`, :func:`token_ids`, :func:`positive_int`.
torch: :func:`expect_tensor`, :func:`sequence_batch`, :func:`sequence_lengths`, :func:`token_batch`.
torch is imported only by the torch checks, so the numpy chapters do not load it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _describe(x) -> str:
    if sp.issparse(x):
        return f"a sparse matrix of shape {x.shape}"
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return f"a {type(x).__name__}"


def _numbers(shape: tuple) -> str:
    """``(4, ?)`` for ``(4, None)``; a 1-tuple keeps its comma."""
    return "(" + ", ".join("?" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _wrong_shape(got: tuple, shape: tuple) -> bool:
    return len(got) != len(shape) or any(want is not None and g != want for g, want in zip(got, shape))


def shape_message(name: str, symbols: str, shape: tuple, got: tuple) -> str:
    """The one wording of a shape error, e.g. ``h_prev must have shape (B, H) = (4, 8), got (4, 7)``. All chapters.

    Args:
        name: the argument's name.
        symbols: the expected shape in letters, e.g. ``"(B, H)"``.
        shape: the expected shape in numbers; ``None`` for an axis of any size (shown as ``?``).
        got: the shape that came.

    Returns:
        the message, a str.
    """
    return f"{name} must have shape {symbols} = {_numbers(shape)}, got {tuple(got)}"


def token_ids(ids, vocab_size: int, name: str = "ids") -> np.ndarray:
    """Return ``ids`` as a ``(N,)`` int64 array of valid word ids in ``[0, vocab_size)``. All chapters."""
    positive_int(vocab_size, "vocab_size")
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of word ids, got {_describe(arr)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integer word ids, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        bad = arr[(arr < 0) | (arr >= vocab_size)][0]
        raise ValueError(f"{name} holds id {bad}, outside the vocabulary [0, {vocab_size})")
    return arr


def positive_int(value, name: str) -> int:
    """Return ``value`` as an int, raising unless it is a positive integer. All chapters."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def even_int(value, name: str) -> int:
    """Return ``value`` as an int, raising unless it is a positive even integer. Chapter 6 on."""
    value = positive_int(value, name)
    if value % 2:
        raise ValueError(f"{name} must be even (sines and cosines come in pairs), got {value}")
    return value


def nonnegative_int(value, name: str) -> int:
    """Return ``value`` as an int, raising unless it is an integer ``>= 0``. All chapters."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def generator(rng, name: str = "rng") -> np.random.Generator:
    """Return ``rng``, raising unless it is a ``numpy.random.Generator``. All chapters."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (numpy.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    return rng


def matrix(x, name: str, *, allow_sparse: bool = True, nonnegative: bool = False):
    """Return ``x`` as a float64 ``(N, M)`` matrix, raising unless it is a 2-D numeric matrix. All chapters.

    Dense input must be finite (and, with ``nonnegative``, without negative
    entries); sparse input is accepted only if ``allow_sparse``. Returns a CSR
    float64 matrix for sparse input and a float64 ndarray otherwise, of the
    shape of ``x``.
    """
    if sp.issparse(x):
        if not allow_sparse:
            raise TypeError(f"{name} must be a dense numpy array, got {_describe(x)}; call .toarray()")
        out = sp.csr_matrix(x, dtype=np.float64)
        out.sum_duplicates()  # an entry stored twice is one entry, its values added
        values = out.data
    else:
        arr = np.asarray(x)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got {_describe(arr)}")
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
        out = arr.astype(np.float64, copy=False)
        values = out
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if nonnegative and values.size and values.min() < 0:
        raise ValueError(f"{name} must hold non-negative counts, found {values.min()}")
    return out


def expect_shape(x, name: str, shape: tuple, symbols: str) -> np.ndarray:
    """Return ``x`` as a float64 array, raising unless it has the expected shape. Chapter 3 on.

    A 2-D ``x`` is checked with :func:`matrix` (dense, numeric,
    finite). The message names the argument, the shape in the chapter's letters
    and in numbers, and the shape it got, e.g.
    ``h_prev must have shape (B, H) = (4, 8), got (4, 7)``.

    Args:
        x: array-like.
        name: the argument's name.
        shape: the expected shape, a tuple of ints; ``None`` accepts any size on that axis.
        symbols: the shape in letters, e.g. ``"(B, H)"``.

    Returns:
        float64 array of shape ``shape``.
    """
    if len(shape) == 2:
        arr = matrix(x, name, allow_sparse=False)
    else:
        arr = np.asarray(x)
        if not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        arr = arr.astype(np.float64, copy=False)
    if _wrong_shape(arr.shape, shape):
        raise ValueError(shape_message(name, symbols, shape, arr.shape))
    return arr


def expect_tensor(x, name: str, shape: tuple, symbols: str):
    """Return ``x`` unchanged, raising unless it is a torch tensor of the expected shape. Chapter 3 on.

    The torch twin of :func:`expect_shape`, with the same message:
    ``weight_hh must have shape (4*H, H) = (32, 8), got (32, 7)``.

    Args:
        x: the argument.
        name: its name.
        shape: the expected shape, a tuple of ints; ``None`` accepts any size on that axis.
        symbols: the shape in letters, e.g. ``"(B, H)"``.

    Returns:
        ``x``, a tensor of shape ``shape``.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {symbols}, got {type(x).__name__}")
    if _wrong_shape(tuple(x.shape), shape):
        raise ValueError(shape_message(name, symbols, shape, tuple(x.shape)))
    return x


def sequence_batch(x, name: str = "x"):
    """Return ``x``, raising unless it is a batch-first ``(B, T, I)`` float tensor with ``T >= 1``. Chapter 3 on."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, T, I), got {type(x).__name__}")
    if x.dim() != 3 or x.shape[1] == 0:
        raise ValueError(f"{name} must have shape (B, T, I) with T >= 1 (batch first), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a float tensor, got dtype {x.dtype}; embed token ids first")
    return x


def sequence_lengths(lengths, batch_size: int, steps: int):
    """Return ``lengths`` as a ``(B,)`` int64 CPU tensor with every length in ``[1, T]``. Chapter 3 on.

    ``None`` means every sequence fills all ``T = steps`` steps.
    """
    import torch

    if lengths is None:
        return torch.full((batch_size,), steps, dtype=torch.int64)
    lengths = torch.as_tensor(lengths)
    if lengths.shape != (batch_size,) or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be {batch_size} integers (one per sequence), got "
                         f"shape {tuple(lengths.shape)} and dtype {lengths.dtype}")
    lengths = lengths.to(torch.int64).cpu()
    if batch_size and (lengths.min() < 1 or lengths.max() > steps):
        raise ValueError(f"lengths must lie in [1, {steps}] for sequences of {steps} steps, "
                         f"got {lengths.min().item()}..{lengths.max().item()}")
    return lengths


def token_batch(ids, name: str = "ids"):
    """Return ``ids``, raising unless it is a ``(B, T)`` int64 tensor of token ids. Chapter 3 on."""
    import torch

    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.dtype != torch.int64:
        raise ValueError(f"{name} must be a (B, T) int64 tensor, got {getattr(ids, 'shape', type(ids).__name__)}"
                         + (f" of dtype {ids.dtype}" if isinstance(ids, torch.Tensor) else ""))
    return ids


def transformer_config(config, positive: tuple, fractions: tuple) -> None:
    """Check a Transformer's frozen size dataclass, and fill in ``ff_size`` (``None``: ``4 * width``). Chapters 7 and 8.

    The fields named in ``positive`` must be positive ints, ``width`` a multiple of
    ``num_heads``, and the fields named in ``fractions`` (dropout rates) in ``[0, 1)``.
    """
    for name in positive:
        positive_int(getattr(config, name), name)
    if config.width % config.num_heads:
        raise ValueError(f"width = {config.width} must be a multiple of num_heads = {config.num_heads}")
    if config.ff_size is None:
        object.__setattr__(config, "ff_size", 4 * config.width)
    positive_int(config.ff_size, "ff_size")
    for name in fractions:
        if not 0 <= getattr(config, name) < 1:
            raise ValueError(f"{name} must lie in [0, 1), got {getattr(config, name)!r}")
