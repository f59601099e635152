"""What the graded run of a submission executes (:mod:`course_tools.in_sandbox.probe_runner`), written by the grader.

The plan (``job/in/plan.json``) and the test inputs (``job/in/cases/<grade_id>.pkl``)
are everything the probe runner gets:

- ``setup``: the release's own locked code cells before the first answer (the imports);
  the staged notebook holds the release's copy of every locked cell, so this is no
  student's code, and it runs in the runner's parent process;
- ``student``: the submission's answer cells and the code cells the student added,
  *definitions only* (:func:`definitions_only`): imports, ``def``, ``class`` and
  assignments. A test cell needs the functions, not the student's experiments or prints,
  and every graded cell runs them again in its own process;
- ``cells``: per graded test cell, the function it tests, the library names it forbids,
  the scaffolds that stand in for the other exercises that function calls and the course's
  own implementations of the function itself, which may not be its answer
  (:mod:`course_tools.grading.scaffolds`);
- the limits: CPU seconds per cell and per notebook, wall-clock seconds per cell.

Inputs only: the expected values never enter the sandbox.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import cloudpickle

from course_tools.authoring import answer_keys
from course_tools.in_sandbox.forbid import WHOLE_LIBRARIES
from . import scaffolds

KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign,
        ast.AugAssign, ast.If, ast.Try)
"""The top-level statements of a student's cell that graded runs execute."""
SANDBOX_RUNNERS = ("probe_runner.py", "feedback_runner.py", "probe.py", "forbid.py", "sentinels.py")
"""The grader's own modules copied into each job, from :mod:`course_tools.in_sandbox` (they import nothing from
the course)."""


def definitions_only(source: str) -> str:
    """``source`` (IPython syntax allowed) with only its top-level imports, definitions and assignments.

    Raises ``SyntaxError`` for a cell that is not Python (as running it would)."""
    from IPython.core.inputtransformer2 import TransformerManager

    text = TransformerManager().transform_cell(source)
    tree = ast.parse(text)
    kept = [node for node in tree.body if isinstance(node, KEPT)]
    if len(kept) == len(tree.body):
        return text
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def _nbgrader(cell) -> dict:
    meta = cell.metadata.get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def setup_sources(release_nb) -> list[str]:
    """The release's locked, ungraded code cells that come before its first answer cell."""
    sources = []
    for cell in release_nb.cells:
        meta = _nbgrader(cell)
        if meta.get("solution"):
            break
        if cell.cell_type == "code" and meta.get("locked") and not meta.get("grade"):
            sources.append(cell.source)
    return sources


def _own_code_cells(nb, experiments: set[str]):
    """``(index, cell, label)`` of the submission's answer cells and the code cells the student added, in order
    (``experiments``: the sources of the release's ungraded experiment cells, which are not the student's)."""
    for index, cell in enumerate(nb.cells):
        meta = _nbgrader(cell)
        if cell.cell_type != "code" or meta.get("locked") or meta.get("grade") and not meta.get("solution"):
            continue
        if not meta.get("solution") and (not cell.source.strip() or cell.source.strip() in experiments):
            continue
        yield index, cell, str(meta.get("grade_id") if meta.get("solution") else f"cell {index + 1}")


def student_cells(nb, experiments: set[str]) -> tuple[list[dict], list[str]]:
    """The definitions of the submission's answer cells and added code cells, in order, and notes on cells left out."""
    cells, notes = [], []
    for _index, cell, label in _own_code_cells(nb, experiments):
        try:
            source = definitions_only(cell.source)
        except SyntaxError as error:
            source = f"raise SyntaxError({f'line {error.lineno}: {error.msg}'!r})"
        except (RecursionError, MemoryError, ValueError):
            notes.append(f"{label} could not be read (too deeply nested): left out of the graded runs")
            continue
        cells.append({"label": label, "source": source})
    return cells, notes


def masked_libraries(key: dict, setup: list[str]) -> list[str]:
    """Folders of whole libraries that some test forbids and the release's setup does not import:
    the graded run hides them, so they cannot be imported there at all."""
    wanted = {name for entry in key.values() for name in entry.get("forbidden", []) if name in WHOLE_LIBRARIES}
    imported = set()
    for source in setup:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    folders = []
    for name in sorted(wanted - imported - {"course_lib", "numpy"}):
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            folders.append(str(Path(location).resolve()))
    return folders


def feedback_cells(nb, experiments: set[str]) -> list[dict]:
    """The submission's answer cells and added code cells in full (IPython syntax turned into Python), with
    their index in ``nb``: what the feedback run executes when the experiments are not run."""
    from IPython.core.inputtransformer2 import TransformerManager

    cells = []
    for index, cell, label in _own_code_cells(nb, experiments):
        try:
            source = TransformerManager().transform_cell(cell.source)
        except Exception:  # noqa: BLE001 - left as it is: running it says what is wrong
            source = cell.source
        cells.append({"index": index, "label": label, "source": source})
    return cells


def write(job: Path, nb, release_nb, key: dict, assignment: str, limits, sandboxed: bool,
          experiments: set[str], feedback: bool = False) -> tuple[dict, list[str]]:
    """Write ``job/in/plan.json`` and the cases of every graded cell of ``nb``; return the plan and notes.

    ``feedback``: the runner also runs the submission's own cells in full afterwards (:func:`feedback_cells`)."""
    cases_dir = job / "in" / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    student, notes = student_cells(nb, experiments)
    cells = []
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type != "code" or grade_id not in key:
            continue
        entry = key[grade_id]
        with open(cases_dir / f"{grade_id}.pkl", "wb") as f:
            cloudpickle.dump(answer_keys.probe_inputs(entry), f, protocol=4)  # lambdas of visible tests by value
        cells.append({"grade_id": grade_id, "function": entry["function"], "forbidden": entry.get("forbidden", []),
                      "scaffolds": scaffolds.for_function(assignment, entry["function"]),
                      "stand_ins": list(scaffolds.stand_ins(assignment, entry["function"]))})
    plan = {"setup": setup_sources(release_nb), "student": student, "cells": cells, "sandboxed": sandboxed,
            "feedback": feedback_cells(nb, experiments) if feedback else [],
            "cases_dir": "/grading/in/cases" if sandboxed else str(cases_dir),
            "limits": {"cell_cpu_seconds": limits.cell_cpu_seconds, "notebook_cpu_seconds": limits.notebook_cpu_seconds,
                       "cell_seconds": limits.cell_seconds, "notebook_seconds": limits.notebook_seconds}}
    (job / "in" / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return plan, notes
