"""The answer keys: every graded test cell's cases and expected outcomes, kept outside every notebook.

``answer_keys/<assignment>.key`` (written by ``tasks.py sync``) maps each graded test
cell's ``grade_id`` to::

    {"function": "rnn_step", "key": "recurrent.elman.rnn_step", "kind": "visible" | "hidden",
     "forbidden": ["torch", ...], "hint": "...",
     "cases": [{"args", "kwargs", "torch", "grad", "rtol", "atol",
                "expected": <the reference's outcome, plain data from course_tools.in_sandbox.probe.run_case>}]}

- **Hidden** cases come from the generators of :mod:`course_tools.authoring.cases`.
- **Visible** cases (and those of hidden cells written by hand, without a generator) are
  *recorded*: the solution notebook's test cell runs (in this process, with torch seeded)
  with each exercise function replaced by a recorder that keeps every call's arguments,
  so grading replays exactly the calls the test makes, with the reference's outcomes as
  the expected ones. The names a visible test forbids (``assert_own_code``) are recorded too.

When a notebook is graded, only the arguments enter the sandbox; the expected outcomes
stay here, in the grader's process (:mod:`course_tools.grading.autograde`). The key file is never
published (``course_tools.authoring.leaks`` guards it).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import importlib
import io
import pickle
import types
import zlib
from pathlib import Path

import nbformat
import numpy as np

from course_tools import ROOT
from course_tools.exercises import solution_notebooks
from course_tools.in_sandbox.probe import run_case
from . import cases as hidden_cases
from course_lib.testing import quiet

MAX_RECORDED = 12
"""At most this many calls of one function are kept from one visible test cell (evenly spaced)."""
VISIBLE_TOLERANCE = {"rtol": 1e-5, "atol": 1e-8}
"""Visible tests compare against PyTorch or hand-computed values within about 1e-6; the replay
compares against the reference a little more loosely, so an answer that passes them passes it."""


FLOAT32_SCALE = 1e-6
"""Entries of an array of fewer than 64 bits may also differ by this times the array's largest magnitude
(about 16 units in its last place): see :func:`float32_atol`."""


def float32_atol(expected, atol: float) -> float:
    """The absolute tolerance for an array of ``expected`` values of fewer than 64 bits: ``atol``, or
    :data:`FLOAT32_SCALE` times the array's largest finite magnitude if that is more.

    A float32 matrix product or sum rounds relative to its terms, not to its result: an entry that
    cancels to near zero carries errors of the size of its neighbours' last bits, and two CPUs (or two
    correct orders of summation) differ there by far more than ``rtol`` of the entry itself: a few
    units in the last place of the array's largest entries, well inside this tolerance."""
    finite = np.abs(np.asarray(expected, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return max(atol, FLOAT32_SCALE * float(finite.max())) if finite.size else atol



def key_path(assignment: str, root: Path = ROOT) -> Path:
    return root / "answer_keys" / f"{assignment}.key"


def load(assignment: str, root: Path = ROOT) -> dict:
    """The answer key of ``assignment`` (``grade_id -> entry``); empty if there is none."""
    path = key_path(assignment, root)
    return decode(path.read_text(encoding="ascii")) if path.exists() else {}


def encode(key) -> str:
    """An answer key as printable text: compressed cloudpickle (so that the functions a visible test
    passes, ``lambda z: ...``, are stored by value), base64, lines of 76 characters."""
    import cloudpickle

    raw = base64.b64encode(zlib.compress(cloudpickle.dumps(key, protocol=4), 9)).decode("ascii")
    return "\n".join(raw[i:i + 76] for i in range(0, len(raw), 76))


MOVED = {"course_tools.verdicts": "course_tools.authoring.plain_values",
         "course_tools.plain_values": "course_tools.authoring.plain_values"}
"""Modules that keys written before course_tools was laid out by part name for the plain-data markers."""


class _KeyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        return super().find_class(MOVED.get(module, module), name)


def decode(text: str):
    """Inverse of :func:`encode` (white space anywhere is ignored); reads keys of the old layout too (:data:`MOVED`)."""
    return _KeyUnpickler(io.BytesIO(zlib.decompress(base64.b64decode("".join(text.split()))))).load()


def probe_inputs(entry: dict) -> list[dict]:
    """What enters the sandbox for one test cell: the cases without their expected outcomes, with the
    names the probe must always record (not secret) and, for random functions, a request to run twice."""
    return [{**{k: v for k, v in case.items() if k != "expected"}, "forbidden": entry.get("forbidden", []),
             "twice": bool(entry.get("property"))} for case in entry["cases"]]


def _reference(key: str):
    module, name = key.rsplit(".", 1)
    return getattr(importlib.import_module(f"course_lib.{module}"), name)


def expected_outcome(reference, case: dict) -> dict:
    """The reference's outcome on ``case``, as the probe would report the student's."""
    from .plain_values import from_plain

    with quiet():
        outcome = run_case(reference, case)
    outcome.pop("calls", None)
    # stored decoded, so that the drift check compares numbers with a tolerance, not bytes
    return {k: (v if k == "error" else from_plain(v)) for k, v in outcome.items()}


def hidden_entry(key: str) -> list[dict]:
    """The hidden cases of exercise ``key`` with their expected outcomes.

    The generator is seeded from ``"<module file>.<function>"`` (``"counts.tfidf"``), so
    moving a module between parts keeps its cases. For differentiable torch exercises
    (:data:`course_tools.authoring.cases.GRADIENTS`) each case also asks for the gradients of
    a random weighted sum of the outputs.
    """
    reference = _reference(key)
    module, name = key.rsplit(".", 1)
    rng = np.random.default_rng(zlib.crc32(f"{module.rsplit('.', 1)[-1]}.{name}".encode()))
    cases = []
    for args, kwargs in hidden_cases.GENERATORS[key](rng):
        case = {"args": args, "kwargs": kwargs}
        if key in hidden_cases.TORCH:
            case.update(torch=True, rtol=1e-5, atol=1e-7)
        if key in hidden_cases.GRADIENTS:
            shapes = [np.shape(v) for v in _tensor_outputs(expected_outcome(reference, case))]
            case["grad"] = {"inputs": list(hidden_cases.GRADIENTS[key]),
                            "weights": [rng.normal(size=s) for s in shapes]}
        case["expected"] = expected_outcome(reference, case)
        cases.append(case)
    return cases


def _tensor_outputs(outcome):
    from .plain_values import Tensor

    def leaves(x):
        if isinstance(x, (tuple, list)):
            for v in x:
                yield from leaves(v)
        elif isinstance(x, dict):
            for v in x.values():
                yield from leaves(v)
        elif isinstance(x, Tensor) and x.dtype.kind == "f":
            yield x

    return list(leaves(outcome["value"]))


def _snapshot(x):
    """A copy of an argument that can be stored and replayed: tensors detached (keeping requires_grad),
    functions frozen with the values their globals have now (not when the key is written)."""
    if isinstance(x, types.FunctionType):
        import cloudpickle

        return cloudpickle.loads(cloudpickle.dumps(x))
    if hasattr(x, "detach") and hasattr(x, "requires_grad"):
        return x.detach().clone().requires_grad_(x.requires_grad and x.is_floating_point())
    if isinstance(x, dict):
        return {k: _snapshot(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_snapshot(v) for v in x)
    return copy.deepcopy(x)


@contextlib.contextmanager
def torch_state():
    """Leave torch's default dtype, thread count and random state as they were (setup cells change them)."""
    import torch

    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    state = torch.random.get_rng_state()
    try:
        yield torch
    finally:
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.random.set_rng_state(state)


def record_visible(nb, functions: dict[str, str]) -> dict[str, dict]:
    """Run the setup and visible test cells of solution notebook ``nb`` with recorders.

    Args:
        nb: the solution notebook.
        functions: ``function name -> course_lib key`` of its exercises.

    Returns:
        ``grade_id -> {"function", "key", "forbidden", "calls": [(args, kwargs), ...]}`` for
        each visible test cell (``test_<function>``).
    """
    namespace: dict = {"__name__": "__main__"}
    recorded: dict[str, dict] = {}
    with torch_state() as torch, quiet(), contextlib.redirect_stdout(io.StringIO()):
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            grade_id = meta.get("grade_id", "")
            if cell.cell_type != "code" or not grade_id or grade_id == "install_course_lib":
                continue
            if meta.get("solution") or cell.metadata.get("course_lib_cases"):
                continue
            if not meta.get("grade"):  # the setup cell: imports
                exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)  # noqa: S102 - our own notebook
                continue
            function = grade_id.removeprefix("test_").removeprefix("hidden_")
            entry = recorded[grade_id] = {"function": function, "key": functions[function], "forbidden": [],
                                          "calls": [], "hidden": "BEGIN HIDDEN TESTS" in cell.source}
            reference = _reference(functions[function])

            def recorder(*args, _reference=reference, _entry=entry, **kwargs):
                _entry["calls"].append((_snapshot(args), _snapshot(kwargs)))
                return _reference(*args, **kwargs)

            def own_code(fn, forbidden, what, hint="", _entry=entry):
                _entry["forbidden"] = sorted(set(_entry["forbidden"]) | set(forbidden))

            for name, key in functions.items():
                namespace[name] = _reference(key)
            namespace[function] = recorder
            namespace["assert_own_code"] = own_code
            torch.manual_seed(0)
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)  # noqa: S102
    return recorded


def visible_entry(recorded: dict) -> list[dict]:
    """Cases (at most :data:`MAX_RECORDED`, evenly spaced) and expected outcomes of one recorded cell."""
    calls = recorded["calls"]
    if len(calls) > MAX_RECORDED:
        keep = np.linspace(0, len(calls) - 1, MAX_RECORDED).round().astype(int)
        calls = [calls[i] for i in sorted(set(keep))]
    reference = _reference(recorded["key"])
    rng = np.random.default_rng(zlib.crc32(recorded["key"].encode()))
    cases = []
    for args, kwargs in calls:
        case = {"args": args, "kwargs": kwargs, **VISIBLE_TOLERANCE}
        differentiable = [i for i, a in enumerate(args) if getattr(a, "requires_grad", False)]
        if differentiable:  # the visible test backpropagates through these: so does the replay
            shapes = [np.shape(v) for v in _tensor_outputs(expected_outcome(reference, case))]
            case["grad"] = {"inputs": differentiable, "weights": [rng.normal(size=s) for s in shapes]}
        case["expected"] = expected_outcome(reference, case)
        if recorded["key"] in hidden_cases.PROPERTIES and "value" in case["expected"]:
            case["expected"]["value"] = None  # judged by its property: the reference's draws are not kept
        cases.append(case)
    return cases


def build(assignment: str, root: Path = ROOT) -> dict:
    """The answer key of ``assignment``, computed from course_lib and its solution notebook."""
    key: dict = {}
    for path in solution_notebooks(assignment, root):
        nb = nbformat.read(path, as_version=4)
        functions = {c.metadata["course_lib"].rsplit(".", 1)[-1]: c.metadata["course_lib"]
                     for c in nb.cells if c.metadata.get("course_lib")}
        recorded = record_visible(nb, functions)
        forbidden = {r["function"]: r["forbidden"] for r in recorded.values() if r["forbidden"]}
        for grade_id, entry in recorded.items():
            key[grade_id] = {"function": entry["function"], "key": entry["key"],
                             "kind": "hidden" if entry["hidden"] else "visible",
                             "property": entry["key"] in hidden_cases.PROPERTIES,
                             "forbidden": entry["forbidden"], "hint": hidden_cases.HINTS.get(entry["key"], ""),
                             "cases": visible_entry(entry)}
        for cell in nb.cells:
            exercise = cell.metadata.get("course_lib_cases")
            if exercise:
                function = exercise.rsplit(".", 1)[-1]
                key[cell.metadata["nbgrader"]["grade_id"]] = {
                    "function": function, "key": exercise, "kind": "hidden",
                    "property": exercise in hidden_cases.PROPERTIES,
                    "forbidden": forbidden.get(function, []), "hint": hidden_cases.HINTS.get(exercise, ""),
                    "cases": hidden_entry(exercise)}
    return key


def write(assignment: str, key: dict, root: Path = ROOT) -> Path:
    path = key_path(assignment, root)
    path.parent.mkdir(exist_ok=True)
    path.write_text(encode(key) + "\n", encoding="ascii")
    return path
