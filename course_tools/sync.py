"""Copy answer cells from course_lib into the solution notebooks and embed hidden test cases.

In ``solutions/<assignment>/*.ipynb``:

- an answer cell (nbgrader ``solution`` cell) with metadata
  ``course_lib: "module.function"`` gets the function's source from course_lib;
- a hidden test cell with metadata ``course_lib_cases: "module.function"`` gets
  randomized inputs from :mod:`course_tools.hidden_cases` and the reference's
  outputs on them, embedded as text.

``sync(check=True)`` changes nothing and returns what is out of date.

Hidden cases are compared by what defines them, not byte for byte: the same
structure, types, shapes and dtypes, integers and strings equal, and floating-point
values equal within ``RTOL``/``ATOL``. BLAS and oneDNN round differently on
different CPUs, so recomputing a case on another machine changes its last bits;
that is not drift, and the embedded cases are then left as they are. A changed
generator, reference answer or case count is drift.
"""

from __future__ import annotations

import copy
import importlib
import re
import zlib
from pathlib import Path

import nbformat
import numpy as np
import scipy.sparse as sp

from . import ROOT, hidden_cases
from .exercises import answer_cells, assignments, find_exercises, owners, solution_notebooks
from course_lib.testing import decode_cases, encode_cases, quiet, to_numpy, to_torch

RTOL, ATOL = 1e-9, 1e-12
"""How far a recomputed floating-point value may be from the embedded one and still be the same case.

Rounding differences between CPUs are around 1e-15; any change to a generator or a
reference answer that matters moves values by far more than 1e-9.
"""

HIDDEN_TEMPLATE = '''\
# Hidden tests for {name} ({points} points): {n} randomized cases, run when your notebook is graded.
### BEGIN HIDDEN TESTS
from course_lib.testing import check_cases
check_cases({name}, """
{blob}
""")
### END HIDDEN TESTS'''


def hidden_cases_for(key: str) -> list[dict]:
    """Run the generator of ``key`` and the reference on its inputs.

    The generator is seeded from ``"<module file>.<function>"`` (``"counts.tfidf"`` for
    ``"vectors.counts.tfidf"``), so moving a module between parts keeps its cases.
    """
    module, name = key.rsplit(".", 1)
    reference = getattr(importlib.import_module(f"course_lib.{module}"), name)
    seed_name = f"{module.rsplit('.', 1)[-1]}.{name}"
    rng = np.random.default_rng(zlib.crc32(seed_name.encode()))
    cases = []
    uses_torch = key in hidden_cases.TORCH
    for args, kwargs in hidden_cases.GENERATORS[key](rng):
        call_args, call_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
        if uses_torch:  # cases hold numpy arrays; the function gets tensors
            call_args, call_kwargs = to_torch(call_args), to_torch(call_kwargs)
        with quiet():
            expected = reference(*call_args, **call_kwargs)
        if uses_torch:
            expected = to_numpy(expected)
        case = {"args": args, "kwargs": kwargs, "expected": expected}
        if uses_torch:
            case.update(torch=True, rtol=1e-5, atol=1e-7)
        cases.append(case)
    return cases


def hidden_cell_source(key: str, points, cases: list[dict] | None = None) -> str:
    cases = hidden_cases_for(key) if cases is None else cases
    return HIDDEN_TEMPLATE.format(name=key.split(".")[-1], points=points, n=len(cases),
                                  blob=encode_cases(cases))


_BLOB = re.compile(r'"""\n(.*?)\n"""', re.S)


def case_difference(old, new, where: str = "cases") -> str | None:
    """Where two decoded hidden cases (or any nested values in them) differ; ``None`` if they are the same.

    Containers must have the same type and keys or length; arrays the same shape and
    dtype; integers, booleans, strings and ``None`` must be equal; floating-point
    numbers and arrays equal within ``RTOL``/``ATOL`` (NaN equals NaN). Other
    objects are compared by type and attributes.
    """
    if type(old) is not type(new):
        return f"{where}: {type(old).__name__} became {type(new).__name__}"
    if isinstance(old, dict):
        if list(old) != list(new):
            return f"{where}: keys {list(old)} became {list(new)}"
        return next((d for k in old if (d := case_difference(old[k], new[k], f"{where}[{k!r}]"))), None)
    if isinstance(old, (list, tuple)):
        if len(old) != len(new):
            return f"{where}: length {len(old)} became {len(new)}"
        return next((d for i, (a, b) in enumerate(zip(old, new))
                     if (d := case_difference(a, b, f"{where}[{i}]"))), None)
    if sp.issparse(old):
        if old.shape != new.shape or old.format != new.format:
            return f"{where}: sparse {old.format} {old.shape} became {new.format} {new.shape}"
        return case_difference(old.toarray(), new.toarray(), where)
    if isinstance(old, (np.ndarray, np.generic)):
        if old.shape != new.shape or old.dtype != new.dtype:
            return f"{where}: {old.dtype} {old.shape} became {new.dtype} {new.shape}"
        if np.issubdtype(old.dtype, np.inexact):
            close = np.isclose(old, new, rtol=RTOL, atol=ATOL, equal_nan=True)
            return None if np.all(close) else f"{where}: values differ (largest change {np.max(np.abs(old - new)):.3g})"
        return None if np.array_equal(old, new) else f"{where}: values differ"
    if isinstance(old, float):
        return None if np.isclose(old, new, rtol=RTOL, atol=ATOL, equal_nan=True) else f"{where}: {old!r} became {new!r}"
    if isinstance(old, (int, str, bytes, bool, type(None), complex)):
        return None if old == new else f"{where}: {old!r} became {new!r}"
    if isinstance(old, np.random.Generator):  # compared by the state it will draw from
        return case_difference(old.bit_generator.state, new.bit_generator.state, f"{where}.state")
    if hasattr(old, "__dict__"):
        return case_difference(vars(old), vars(new), f"{where}.{type(old).__name__}")
    return None if old == new else f"{where}: {old!r} became {new!r}"


def hidden_cell_is_current(source: str, key: str, points, cases: list[dict]) -> str | None:
    """``None`` if the hidden cell ``source`` holds ``cases`` (up to rounding); else what differs."""
    match = _BLOB.search(source)
    if match is None:
        return "the cell has no embedded cases"
    expected = hidden_cell_source(key, points, cases)
    if _BLOB.sub('"""\n\n"""', source) != _BLOB.sub('"""\n\n"""', expected):
        return "the text around the cases changed"
    try:
        embedded = decode_cases(match.group(1))
    except Exception as error:  # corrupt text in the cell
        return f"the embedded cases cannot be decoded ({type(error).__name__})"
    return case_difference(embedded, cases)


def sync_notebook(path: Path, exercises, check: bool) -> list[str]:
    """Sync one notebook; return a line per cell that was (or would be) changed."""
    nb = nbformat.read(path, as_version=4)
    changes = []
    for index, key in answer_cells(nb):
        if key not in exercises:
            raise ValueError(f"{path}: cell {index} names {key}, which is not an exercise function of course_lib")
        source = exercises[key].source()
        if nb.cells[index].source != source:
            changes.append(f"{path.relative_to(ROOT)}: answer cell of {key} differs from course_lib")
            nb.cells[index].source = source
    for cell in nb.cells:
        key = cell.metadata.get("course_lib_cases")
        if not key:
            continue
        if key not in hidden_cases.GENERATORS:
            raise ValueError(f"{path}: no hidden-case generator for {key} in course_tools/hidden_cases.py")
        points = cell.metadata.get("nbgrader", {}).get("points", "?")
        cases = hidden_cases_for(key)
        difference = hidden_cell_is_current(cell.source, key, points, cases)
        if difference:
            changes.append(f"{path.relative_to(ROOT)}: hidden tests of {key} are out of date ({difference})")
            cell.source = hidden_cell_source(key, points, cases)
    if changes and not check:
        nbformat.write(nb, path)
    return changes


def sync(check: bool = False, root: Path = ROOT) -> list[str]:
    """Sync every solution notebook. Returns the changes made (or, with ``check``, needed)."""
    exercises = find_exercises()
    changes = []
    for assignment in assignments(root):
        for path in solution_notebooks(assignment, root):
            changes += sync_notebook(path, exercises, check)
    for key in sorted(set(exercises) - set(owners(root))):
        changes.append(f"course_lib/{key.rsplit('.', 1)[0].replace('.', '/')}.py: exercise {key} has no answer cell in any assignment")
    return changes
