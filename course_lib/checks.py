"""Argument checks shared by course_lib functions.

Each check raises a ``ValueError`` or ``TypeError`` that names the argument,
the shape or type it expected and what it got, so that a wrong call fails at
the call and not three lines deeper.
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


def matrix(x, name: str, *, allow_sparse: bool = True, nonnegative: bool = False):
    """Check that ``x`` is a 2-D numeric matrix (dense, or sparse if allowed). All chapters.

    Returns a CSR float64 matrix for sparse input and a float64 ndarray otherwise.
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
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        numbers = ", ".join("?" if n is None else str(n) for n in shape) + ("," if len(shape) == 1 else "")
        raise ValueError(f"{name} must have shape {symbols} = ({numbers}), got {arr.shape}")
    return arr
