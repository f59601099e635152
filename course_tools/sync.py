"""Copy answer cells from course_lib into the solution notebooks and embed hidden test cases.

In ``solutions/<assignment>/*.ipynb``:

- an answer cell (nbgrader ``solution`` cell) with metadata
  ``course_lib: "module.function"`` gets the function's source from course_lib;
- a hidden test cell with metadata ``course_lib_cases: "module.function"`` gets
  randomized inputs from :mod:`course_tools.hidden_cases` and the reference's
  outputs on them, embedded as text.

``sync(check=True)`` changes nothing and returns what is out of date.
"""

from __future__ import annotations

import copy
import importlib
import zlib
from pathlib import Path

import nbformat
import numpy as np

from . import ROOT, hidden_cases
from .exercises import answer_cells, assignments, find_exercises, owners, solution_notebooks
from course_lib.testing import encode_cases, quiet, to_numpy, to_torch

HIDDEN_TEMPLATE = '''\
# Hidden tests for {name} ({points} points): {n} randomized cases, run when your notebook is graded.
### BEGIN HIDDEN TESTS
from course_lib.testing import check_cases
check_cases({name}, """
{blob}
""")
### END HIDDEN TESTS'''


def hidden_cases_for(key: str) -> list[dict]:
    """Run the generator of ``key`` (seeded from its name) and the reference on its inputs."""
    module, name = key.split(".")
    reference = getattr(importlib.import_module(f"course_lib.{module}"), name)
    rng = np.random.default_rng(zlib.crc32(key.encode()))
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


def hidden_cell_source(key: str, points) -> str:
    cases = hidden_cases_for(key)
    return HIDDEN_TEMPLATE.format(name=key.split(".")[1], points=points, n=len(cases),
                                  blob=encode_cases(cases))


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
        source = hidden_cell_source(key, cell.metadata.get("nbgrader", {}).get("points", "?"))
        if cell.source != source:
            changes.append(f"{path.relative_to(ROOT)}: hidden tests of {key} are out of date")
            cell.source = source
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
        changes.append(f"course_lib/{key.split('.')[0]}.py: exercise {key} has no answer cell in any assignment")
    return changes
