"""A made-up class in an nbgrader gradebook, for measuring the class report's cost (and testing it).

:func:`make_gradebook` writes, through nbgrader's own API, the real assignments (grade cells, names and
points of ``solutions/<a>/<a>.ipynb``), made-up students and their submissions, and through
:func:`course_tools.grading.verdict_store.save` the verdicts grading would keep, built from each
assignment's real answer key: a student's skill and a function's difficulty decide what fails.
"""

from __future__ import annotations

import random
import time
import warnings
from pathlib import Path

import nbformat
import sqlalchemy as sa
from nbgrader.api import Grade, Gradebook

from course_tools import ROOT
from course_tools.authoring import answer_keys
from course_tools.grading import verdict_store
from course_tools.grading.verdicts import describe_call

FIRST = ["Ada", "Ben", "Chloe", "Dmitri", "Esra", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
LAST = ["Adams", "Baker", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Huang", "Ivanova", "Jensen"]
ERRORS = ["ValueError: operands could not be broadcast together with shapes (3,4) (4,3)",
          "IndexError: index 4 is out of bounds for axis 1 with size 4", "TypeError: 'NoneType' object is not iterable"]


def grade_cells(assignment: str, root: Path = ROOT) -> list[tuple[str, float, str]]:
    """``(grade_id, points, cell_type)`` of every grade cell of the solution notebook, in order."""
    nb = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"]["points"]), c.cell_type)
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


def _problem(rng: random.Random) -> str:
    n = rng.choice([4, 6, 12, 20])
    return rng.choice([f"gives a wrong result: the result differs in {rng.randint(1, n)} of {n} entries, "
                       f"first at index (0, {rng.randint(0, 3)})", f"raised {rng.choice(ERRORS)}",
                       "passes wrong gradients back (the gradient differs in 2 of 6 entries, first at index (1,))"])


def student_records(key: dict, skill: float, difficulty: dict, rng: random.Random, stopped_after: int | None) -> list[dict]:
    """The verdict records of one submission (the format of :mod:`course_tools.grading.verdict_store`).

    Each function is right, wrong or left as the stub; test cells from number ``stopped_after`` on have
    no results (the notebook was stopped)."""
    state = {}
    for function in dict.fromkeys(e["function"] for e in key.values()):  # in key order: the same draws every run
        draw = rng.random()
        state[function] = ("stub" if draw < 0.04 else "wrong" if draw < 0.04 + difficulty[function] * (1.2 - skill)
                           else "right")
    wrong_cases = {}
    records = []
    for number, (cell, entry) in enumerate(key.items()):
        name, cases, kind = entry["function"], entry["cases"], entry["kind"]
        label = "hidden test" if kind == "hidden" else "test"
        calls = [describe_call(name, c["args"], c.get("kwargs", {})) for c in cases]
        if stopped_after is not None and number >= stopped_after:
            records.append({"cell": cell, "function": name, "kind": kind, "passed": False, "hint": None, "cases": None,
                            "message": f"{name}: the {label}s produced no results (the notebook stopped before this cell)"})
            continue
        problems = [None] * len(cases)
        if state[name] == "stub":
            problems = ["not implemented"] * len(cases)
        elif state[name] == "wrong" and (kind == "hidden" or rng.random() < 0.6):
            failing = wrong_cases.setdefault(name, _problem(rng))
            for i in rng.sample(range(len(cases)), rng.randint(1, len(cases))):
                problems[i] = failing
        failed = [(i, p) for i, p in enumerate(problems, start=1) if p]
        if not failed:
            message = f"{name}: {len(cases)} {label} case(s) passed"
        elif failed[0][1] == "not implemented":
            message = f"{name} is not implemented yet."
        else:
            also = f" ({len(failed) - 1} other case(s) failed too)" if len(failed) > 1 else ""
            hint = f" Hint: {entry['hint']}" if entry.get("hint") else ""
            message = f"{label} {failed[0][0]} of {len(cases)}: {calls[failed[0][0] - 1]} {failed[0][1]}.{also}{hint}"
        hinted = bool(failed) and failed[0][1] != "not implemented" and bool(entry.get("hint"))
        records.append({"cell": cell, "function": name, "kind": kind, "passed": not failed, "message": message,
                        "hint": entry["hint"] if hinted else None, "cases": [list(x) for x in zip(calls, problems)]})
    return records


def make_gradebook(url: str, students: int, assignments: list[str], seed: int = 0, root: Path = ROOT) -> dict:
    """Write a made-up class of ``students`` on ``assignments`` into the gradebook at ``url``.

    Returns ``{"students", "assignments", "verdicts", "cases", "seconds", "records"}``; ``records`` is
    ``{assignment: {student: records written}}`` (kept so that tests can count what was written)."""
    started = time.perf_counter()
    rng = random.Random(seed)
    ids = [f"student{n:04d}" for n in range(students)]
    skills = {s: rng.betavariate(5, 2) for s in ids}
    written: dict[str, dict[str, list[dict]]] = {}
    verdicts = cases = 0
    with Gradebook(url) as gb, warnings.catch_warnings():
        # nbgrader's add_submission warns of its own autoflush ("not in session"); the rows it writes are right
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        for n, student in enumerate(ids):
            first, last = FIRST[n % len(FIRST)], LAST[(n // len(FIRST)) % len(LAST)]
            gb.add_student(student, first_name=first, last_name=f"{last}{n // 120 or ''}",
                           email=f"{student}@example.edu", lms_user_id=str(100000 + n))
        for assignment in assignments:
            cells = grade_cells(assignment, root)
            key = answer_keys.load(assignment, root)
            gb.add_assignment(assignment)
            gb.add_notebook(assignment, assignment)
            for name, points, cell_type in cells:
                gb.add_grade_cell(name, assignment, assignment, max_score=points, cell_type=cell_type)
            difficulty = {e["function"]: rng.uniform(0.05, 0.6) for e in key.values()}
            updates, per_notebook = [], []
            for student in ids:
                submission = gb.add_submission(assignment, student)
                notebook = submission.notebooks[0]
                grades = {g.name: g.id for g in notebook.grades}
                draw = rng.random()
                stopped = rng.randint(0, len(key) - 1) if draw < 0.02 else 0 if draw < 0.03 else None
                notes = (["the notebook was stopped after 1800 s of wall clock: later cells did not run"] if draw < 0.02
                         else [f"not graded: {assignment}.ipynb is not a readable notebook (JSONDecodeError: "
                               f"Expecting value: line 1 column 1 (char 0))"] if draw < 0.03 else [])
                records = student_records(key, skills[student], difficulty, rng, stopped)
                passed = {r["cell"]: r["passed"] for r in records}
                for name, points, cell_type in cells:
                    row = {"id": grades[name], "needs_manual_grade": False, "manual_score": None,
                           "auto_score": points if passed.get(name) else 0.0}
                    if cell_type == "markdown":
                        hand = rng.random() < 0.3 and stopped is None
                        row.update(auto_score=None, needs_manual_grade=not hand,
                                   manual_score=round(points * rng.uniform(0.3, 1) * 2) / 2 if hand else None)
                    updates.append(row)
                per_notebook.append((notebook.id, grades, records, notes, student))
            gb.db.execute(sa.update(Grade), updates)
            gb.db.commit()
            connection = gb.db.connection()
            for notebook_id, grades, records, notes, student in per_notebook:
                verdict_store.save(connection, grades, notebook_id, records, notes, rng.uniform(3, 40), "synthetic")
                verdicts += len(records)
                cases += sum(len(r["cases"] or []) for r in records)
                written.setdefault(assignment, {})[student] = records
            gb.db.commit()
    return {"students": students, "assignments": len(assignments), "verdicts": verdicts, "cases": cases,
            "seconds": time.perf_counter() - started, "records": written}
