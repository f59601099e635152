"""Copy answer cells from course_lib into the solution notebooks and write the answer keys.

In ``solutions/<assignment>/*.ipynb``:

- an answer cell (nbgrader ``solution`` cell) with metadata
  ``course_lib: "module.function"`` gets the function's source from course_lib;
- a hidden test cell with metadata ``course_lib_cases: "module.function"`` gets a
  short call that names its cases; the cases themselves (inputs and expected
  outcomes, visible and hidden) go to ``answer_keys/<assignment>.key``
  (:mod:`course_tools.authoring.answer_keys`), which no notebook contains.

``sync(check=True)`` changes nothing and returns what is out of date.

Answer keys are compared by what defines them, not byte for byte: the same
structure, types, shapes and dtypes, integers and strings equal, and floating-point
values equal within ``RTOL``/``ATOL``. BLAS and oneDNN round differently on
different CPUs, so recomputing a case on another machine changes its last bits;
that is not drift, and the key is then left as it is. A changed generator,
reference answer, visible test or case count is drift.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import numpy as np
import scipy.sparse as sp

from course_tools import ROOT
from course_tools.exercises import answer_cells, assignments, find_exercises, owners, solution_notebooks
from . import answer_keys, cases

RTOL, ATOL = 1e-9, 1e-12
"""How far a recomputed floating-point value may be from the embedded one and still be the same case.

Rounding differences between CPUs are around 1e-15; any change to a generator or a
reference answer that matters moves values by far more than 1e-9. These hold for float64;
float32 arrays (chapter 5 on) round at about 6e-8, and get :data:`RTOL32`, :data:`ATOL32`.
"""
RTOL32, ATOL32 = 1e-5, 1e-6
"""The drift tolerance of float32 (and float16) arrays: about a hundred of their units in the last place,
of each entry or of the array's largest one (:func:`course_tools.authoring.answer_keys.float32_atol`): a float32 sum
rounds relative to its terms, so an entry that cancels to near zero moves by units of its neighbours."""

HIDDEN_TEMPLATE = '''\
# Hidden tests for {name} ({points} points): {n} randomized cases, run when your notebook is graded.
### BEGIN HIDDEN TESTS
from course_tools.grading.verdicts import check_hidden  # the instructor's copy: cases in answer_keys/
check_hidden({name}, {grade_id!r})
### END HIDDEN TESTS'''


def hidden_cell_source(key: str, grade_id: str, points, n: int) -> str:
    return HIDDEN_TEMPLATE.format(name=key.split(".")[-1], points=points, n=n, grade_id=grade_id)


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
    if isinstance(old, (np.ndarray, np.generic)):  # Tensor markers of verdicts are arrays too
        if old.shape != new.shape or old.dtype != new.dtype:
            return f"{where}: {old.dtype} {old.shape} became {new.dtype} {new.shape}"
        if np.issubdtype(old.dtype, np.inexact):
            rtol, atol = (RTOL, ATOL) if old.dtype.itemsize >= 8 else (RTOL32, answer_keys.float32_atol(old, ATOL32))
            close = np.isclose(old, new, rtol=rtol, atol=atol, equal_nan=True)
            return None if np.all(close) else f"{where}: values differ (largest change {np.max(np.abs(old - new)):.3g})"
        return None if np.array_equal(old, new) else f"{where}: values differ"
    if isinstance(old, float):
        return None if np.isclose(old, new, rtol=RTOL, atol=ATOL, equal_nan=True) else f"{where}: {old!r} became {new!r}"
    if isinstance(old, (int, str, bytes, bool, type(None), complex)):
        return None if old == new else f"{where}: {old!r} became {new!r}"
    if type(old).__module__.startswith("torch") and hasattr(old, "detach"):  # a recorded tensor argument
        if old.requires_grad != new.requires_grad:
            return f"{where}: requires_grad changed"
        return case_difference(old.detach().numpy(), new.detach().numpy(), where)
    if isinstance(old, np.random.Generator):  # compared by the state it will draw from
        return case_difference(old.bit_generator.state, new.bit_generator.state, f"{where}.state")
    if type(old).__module__.startswith("torch") and hasattr(old, "get_state") and hasattr(old, "manual_seed"):
        # a torch.Generator (ps08's mlm_mask): compared by the state it will draw from
        return case_difference(old.get_state().numpy(), new.get_state().numpy(), f"{where}.state")
    if callable(old) and hasattr(old, "__code__"):  # a function a visible test passes: compared by its code
        return None if old.__code__.co_code == new.__code__.co_code else f"{where}: the function changed"
    if hasattr(old, "__dict__"):
        return case_difference(vars(old), vars(new), f"{where}.{type(old).__name__}")
    return None if old == new else f"{where}: {old!r} became {new!r}"


def key_difference(old: dict, new: dict) -> str | None:
    """Where two answer keys differ (by :func:`case_difference`); ``None`` if they are the same."""
    return case_difference(old, new, "answer key")


def sync_notebook(path: Path, exercises, check: bool, key: dict) -> list[str]:
    """Sync one notebook's answer and hidden cells; return a line per cell that was (or would be) changed."""
    nb = nbformat.read(path, as_version=4)
    changes = []
    for index, name in answer_cells(nb):
        if name not in exercises:
            raise ValueError(f"{path}: cell {index} names {name}, which is not an exercise function of course_lib")
        source = exercises[name].source()
        if nb.cells[index].source != source:
            changes.append(f"{path.relative_to(ROOT)}: answer cell of {name} differs from course_lib")
            nb.cells[index].source = source
    for cell in nb.cells:
        name = cell.metadata.get("course_lib_cases")
        if not name:
            continue
        if name not in cases.GENERATORS:
            raise ValueError(f"{path}: no hidden-case generator for {name}: add it to GENERATORS in "
                             f"course_tools/authoring/cases/{path.parent.name}.py")
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        points = cell.metadata.get("nbgrader", {}).get("points", "?")
        n = len(key.get(grade_id, {}).get("cases", []))
        source = hidden_cell_source(name, grade_id, points, n)
        if cell.source != source:
            changes.append(f"{path.relative_to(ROOT)}: hidden test cell of {name} is out of date")
            cell.source = source
    if changes and not check:
        nbformat.write(nb, path)
    return changes


def sync(check: bool = False, root: Path = ROOT) -> list[str]:
    """Sync every solution notebook. Returns the changes made (or, with ``check``, needed)."""
    exercises = find_exercises()
    changes = []
    for assignment in assignments(root):
        fresh = answer_keys.build(assignment, root)
        try:
            current = answer_keys.load(assignment, root)
        except Exception as error:  # a corrupt key file
            current, problem = None, f"cannot be decoded ({type(error).__name__})"
        else:
            problem = key_difference(current, fresh) if current else "is missing"
        if problem:
            changes.append(f"answer_keys/{assignment}.key {problem}")
            if not check:
                answer_keys.write(assignment, fresh, root)
        for path in solution_notebooks(assignment, root):
            changes += sync_notebook(path, exercises, check, fresh)
    for key in sorted(set(exercises) - set(owners(root))):
        changes.append(f"course_lib/{key.rsplit('.', 1)[0].replace('.', '/')}.py: exercise {key} has no answer cell in any assignment")
    return changes
