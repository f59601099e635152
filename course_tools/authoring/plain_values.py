"""Plain data back into values: what :func:`course_tools.in_sandbox.probe.to_plain` wrote, decoded without running anything.

:func:`from_plain` builds only numbers, strings, containers, numeric numpy arrays
(:class:`Tensor` for what was a torch tensor), scipy CSR matrices and :class:`Unsupported`
markers. The grader's verdicts (:mod:`course_tools.grading.verdicts`) and the answer keys
(:mod:`course_tools.authoring.answer_keys`, :mod:`course_tools.authoring.cases`) share it, so none of them
imports another for it.
"""

from __future__ import annotations

import base64

import numpy as np
import scipy.sparse as sp


class Unsupported:
    """A value the probe could not turn into plain data (an object of another type)."""

    def __init__(self, what: str):
        self.what = what

    def __eq__(self, other):
        return isinstance(other, Unsupported) and other.what == self.what

    def __repr__(self):
        return f"<{self.what}>"


class Tensor(np.ndarray):
    """A numpy array that was a torch tensor in the sandbox (so "tensor or array" can be checked)."""


def _array(plain) -> np.ndarray:
    dtype = np.dtype(str(plain["dtype"]))
    if dtype.kind not in "biufc":
        raise ValueError(f"unexpected dtype {dtype}")
    shape = tuple(int(n) for n in plain["shape"])
    raw = base64.b64decode(plain["array"], validate=True)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def from_plain(x):
    """Decode :func:`course_tools.in_sandbox.probe.to_plain` data into numbers, strings, tuples, lists, dicts,
    numpy arrays (:class:`Tensor` for tensors), scipy CSR matrices and :class:`Unsupported` markers."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return [from_plain(v) for v in x]
    if not isinstance(x, dict) or len(x) == 0:
        raise ValueError("not plain data")
    if "array" in x:
        return _array(x)
    if "scalar" in x:
        return _array(x["scalar"])[()]
    if "tuple" in x:
        return tuple(from_plain(v) for v in x["tuple"])
    if "dict" in x:
        return {from_plain(k): from_plain(v) for k, v in x["dict"]}
    if "tensor" in x:
        return np.asarray(from_plain(x["tensor"])).view(Tensor)
    if "sparse" in x:
        return sp.csr_matrix(from_plain(x["sparse"]))
    if "unsupported" in x:
        return Unsupported(str(x["unsupported"])[:100])
    raise ValueError("not plain data")
