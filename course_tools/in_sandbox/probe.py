"""The grader's probe: runs a student's function on test inputs inside the sandbox and writes what came out.

This file is copied into each grading sandbox and imported by the probe runner
(:mod:`course_tools.in_sandbox.probe_runner`), which installs its call recorder in each graded
cell's process before any code of the submission runs (:func:`install`); it imports
nothing from the course (only numpy, and torch when a case asks for it). It decides
nothing: for each case it reports the function's outputs, its arguments after the call, the
gradients of a fixed weighted sum of the outputs (where the case asks) and the
library functions the call reached, all as plain data (:func:`to_plain`: JSON
with arrays as base64 bytes, never a pickled object). The grader compares them
with the expected values, which never enter the sandbox (``course_tools.grading.verdicts``).

The same module computes the expected values when the instructor syncs
(:func:`run_case` on the reference), so student and reference are measured alike.
"""

from __future__ import annotations

import base64
import copy
import sys
import threading

import numpy as np

LIBRARIES = ("torch", "numpy", "scipy", "sklearn", "jax", "tensorflow", "autograd", "gensim", "pandas", "math",
             "transformers", "tokenizers", "sentence_transformers")
"""Modules whose functions a call reaching them is recorded (the grader judges shortcuts from these)."""
MAX_CALLS = 400
ESCAPES = {"setprofile", "settrace", "start_new_thread", "start_joinable_thread", "fork", "_exit"}
"""Calls that would take the rest of the call out of the recording; the grader refuses them."""
SWITCHES = {"setprofile", "settrace"}
"""Of those, the ones that switch the recording off whenever they are called."""
MAX_BYTES = 8_000_000
"""The largest array data one probe writes; a larger result is reported as too large."""


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "numpy")


def _array(a: np.ndarray) -> dict:
    a = a.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into shape (1,))
    return {"array": base64.b64encode(a.tobytes()).decode("ascii"), "dtype": a.dtype.str, "shape": list(a.shape)}


def to_plain(x, budget: list[int] | None = None):
    """``x`` as JSON-ready plain data: numbers, strings, lists and dicts, arrays as base64 bytes.

    Tuples, dicts, numpy arrays and scalars, torch tensors and scipy sparse matrices
    keep what tells them apart (``{"tuple": [...]}``, ``{"tensor": ...}``...); any
    other object becomes ``{"unsupported": "<type name>"}``: its methods never run
    outside the sandbox.
    """
    budget = [MAX_BYTES] if budget is None else budget
    if x is None or isinstance(x, (bool, str)):
        return x if not isinstance(x, str) else x[:2000]
    if isinstance(x, int) and not isinstance(x, bool) and type(x) is int:
        return x if abs(x) < 2 ** 62 else float(x)
    if type(x) is float:
        return x
    if isinstance(x, tuple) and type(x) is tuple:
        return {"tuple": [to_plain(v, budget) for v in x]}
    if type(x) is list:
        return [to_plain(v, budget) for v in x]
    if type(x) is dict:
        return {"dict": [[to_plain(k, budget), to_plain(v, budget)] for k, v in x.items()]}
    if _is_tensor(x):
        data = x.detach().cpu()
        return {"tensor": to_plain(data.numpy(), budget), "requires_grad": bool(x.requires_grad)}
    module = type(x).__module__
    if module.startswith("scipy.sparse") and hasattr(x, "toarray"):
        return {"sparse": to_plain(np.asarray(x.toarray()), budget), "format": str(getattr(x, "format", "?"))}
    if type(x) is np.ndarray or isinstance(x, np.generic):
        a = np.asarray(x)
        if a.dtype.kind not in "biufc":
            return {"unsupported": f"array of {a.dtype}"}
        budget[0] -= a.nbytes
        if budget[0] < 0:
            return {"unsupported": "too large"}
        plain = _array(a)
        return plain if type(x) is np.ndarray else {"scalar": plain}
    return {"unsupported": type(x).__name__}


def _reseeded(x):
    """``x`` (the arguments, a list or dict) with every random generator in it replaced by one of another seed."""
    def other(value):
        if isinstance(value, np.random.Generator):
            return np.random.default_rng(int(value.integers(2 ** 31)) + 1)
        if type(value).__module__.startswith("torch") and hasattr(value, "manual_seed") and hasattr(value, "get_state"):
            return type(value)().manual_seed(value.initial_seed() + 1)
        return value
    if isinstance(x, dict):
        return {k: other(v) for k, v in x.items()}
    return [other(v) for v in x]


def _to_torch(x, torch):
    if isinstance(x, dict):
        return {k: _to_torch(v, torch) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_to_torch(v, torch) for v in x)
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x.copy())
    return x


def _leaves(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


class _Calls:
    """Records which library functions a call reaches (``sys.setprofile``), not counting the student's own.

    Installed for one call (:func:`run_case`), or for the whole life of a grading child before any code
    of the submission runs (:func:`install`): then it records calls only while ``armed`` (during a test
    case), and the calls that would switch recording off at any time (``escapes``)."""

    def __init__(self, forbidden=(), armed: bool = True):
        self.names: list[str] = []
        self.escapes: list[str] = []
        self.forbidden = set(forbidden)
        self.armed = armed

    def _add(self, module, name):
        if not isinstance(module, str):
            module = getattr(module, "__name__", "") if isinstance(module, type(sys)) else ""
        if not module or module.split(".")[0] not in LIBRARIES:
            return
        dotted = f"{module}.{name}"
        # past MAX_CALLS names, only those that matter (a forbidden part) are still kept
        if dotted not in self.names and (len(self.names) < MAX_CALLS or self.forbidden & set(dotted.split("."))):
            self.names.append(dotted)

    def __call__(self, frame, event, arg):
        try:
            if frame.f_code.co_filename == __file__:
                return  # the probe's own calls (switching the recording off at the end)
            name = getattr(arg, "__name__", "") if event == "c_call" else ""
            # switching the recording off is refused; a thread or process started before the test (while the
            # recorder is installed but not armed) is recorded like the rest, so it is no escape
            if name in ESCAPES and (self.armed or name in SWITCHES):
                self.escapes.append(f"course_probe.{name}")
                self.names.append(f"course_probe.{name}")
            if not self.armed:
                return
            if event == "call":
                self._add(frame.f_globals.get("__name__", ""), frame.f_code.co_name)
            elif event == "c_call":
                module = getattr(arg, "__module__", None)
                owner = getattr(arg, "__self__", None)
                if not module and owner is not None:
                    module = owner.__name__ if isinstance(owner, type(sys)) else type(owner).__module__
                self._add(module or "", getattr(arg, "__name__", "?"))
        except Exception:  # noqa: BLE001 - recording must never break the student's code
            pass


def install(forbidden=()) -> _Calls:
    """Record library calls in this process and every thread it starts from now on (a grading child,
    before any code of the submission runs); the recorder is armed by :func:`run_case`."""
    calls = _Calls(forbidden, armed=False)
    threading.setprofile(calls)
    sys.setprofile(calls)
    return calls


def run_case(fn, case: dict, record_calls: bool = False, recorder: _Calls | None = None) -> dict:
    """Call ``fn`` on one case; return its outcome as plain data.

    ``case``: ``args`` (tuple), ``kwargs`` (dict), optional ``torch`` (arrays become
    tensors for the call) and ``grad`` (``{"inputs": [argument indices], "weights":
    [one array per output tensor]}``: the gradients of ``sum_k sum(weights_k * output_k)``
    with respect to those arguments are reported).

    Returns ``{"value", "args_after"}`` (plain data) and, when asked, ``"grads"`` and
    ``"calls"``; or ``{"error": "<Type>: <message>"}`` when the call raised.
    """
    args, kwargs = copy.deepcopy(case["args"]), copy.deepcopy(case.get("kwargs", {}))
    grad = case.get("grad")
    if case.get("torch"):
        import torch

        args, kwargs = _to_torch(args, torch), _to_torch(kwargs, torch)
        if grad:
            for i in grad["inputs"]:
                args[i].requires_grad_(True)
    installed = recorder is not None
    calls = recorder if installed else _Calls(case.get("forbidden", ()))
    calls.names = list(calls.escapes)
    outcome: dict = {}
    previous = sys.getprofile()
    try:
        if record_calls and not installed:
            threading.setprofile(calls)  # threads started during the call are recorded too
            sys.setprofile(calls)
        calls.armed = True
        try:
            value = fn(*args, **kwargs)
        finally:
            calls.armed = False
            if record_calls and not installed:
                sys.setprofile(previous)
                threading.setprofile(None)
    except BaseException as error:  # noqa: BLE001 - the student's code may raise anything, SystemExit included
        if isinstance(error, KeyboardInterrupt):
            raise
        outcome["error"] = f"{type(error).__name__}: {str(error)[:300]}"
        if record_calls:
            outcome["calls"] = calls.names
        return outcome
    outcome["value"] = to_plain(value)
    if case.get("twice"):  # a function that draws at random: the same seed must give the same draws
        again_args, again_kwargs = copy.deepcopy(case["args"]), copy.deepcopy(case.get("kwargs", {}))
        if case.get("torch"):  # as the first call's
            import torch

            again_args, again_kwargs = _to_torch(again_args, torch), _to_torch(again_kwargs, torch)
        try:
            outcome["same_again"] = to_plain(fn(*again_args, **again_kwargs)) == outcome["value"]
        except Exception:  # noqa: BLE001
            outcome["same_again"] = False
        other_args, other_kwargs = _reseeded(again_args), _reseeded(again_kwargs)
        if other_args != again_args or other_kwargs != again_kwargs:  # ... and another seed other draws
            try:
                outcome["other_seed_same"] = to_plain(fn(*other_args, **other_kwargs)) == outcome["value"]
            except Exception:  # noqa: BLE001
                outcome["other_seed_same"] = None
    if grad:
        import torch

        outcome["grads"] = _gradients(value, args, grad, torch)
    after = [a.detach() if _is_tensor(a) else a for a in args]
    outcome["args_after"] = to_plain(tuple(after))
    if record_calls:
        outcome["calls"] = calls.names
    return outcome


def _gradients(value, args, grad, torch):
    outputs = [v for v in _leaves(value) if _is_tensor(v) and v.is_floating_point()]
    if len(outputs) != len(grad["weights"]) or any(tuple(o.shape) != np.shape(w) for o, w in zip(outputs, grad["weights"])):
        return {"unsupported": "outputs of unexpected shapes"}
    if not any(o.requires_grad for o in outputs):
        return {"unsupported": "the result is detached from its inputs (no gradient flows back)"}
    total = sum((o * torch.from_numpy(np.asarray(w, dtype=np.float64)).to(o.dtype)).sum()
                for o, w in zip(outputs, grad["weights"]) if o.requires_grad)
    inputs = [args[i] for i in grad["inputs"]]
    try:
        grads = torch.autograd.grad(total, inputs, allow_unused=True)
    except Exception as error:  # noqa: BLE001
        return {"unsupported": f"backward failed: {type(error).__name__}"}
    return to_plain(tuple(None if g is None else g.detach() for g in grads))
