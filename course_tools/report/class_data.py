"""What a class did on one assignment, read from the gradebook: scores, points lost, failed cases, hints, notes.

:func:`load` reads nbgrader's tables (scores as nbgrader computes them: a hand-given score
replaces the autograder's, late penalties subtracted) and the course's verdict tables beside them
(:mod:`course_tools.grading.verdict_store`), through SQLAlchemy, from SQLite or PostgreSQL alike. It
only reads: a gradebook graded before verdicts were kept still gives scores, and says how many
submissions have no verdicts (``missing_verdicts``: grade them again with ``--regrade``).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import sqlalchemy as sa
from nbgrader.api import Assignment, Grade, GradeCell, Student, SubmittedAssignment, SubmittedNotebook

from course_tools.grading import verdict_store as store

WRITTEN = "written answers"
"""The function name under which the answers graded by hand are counted."""


@dataclass
class Submission:
    student: str
    name: str  # "Last, First" as nbgrader holds it, or the student id
    email: str
    lms_id: str
    score: float  # nbgrader's score less the late penalty
    max_score: float
    pending: float  # points still to be graded by hand
    notes: list[str] = field(default_factory=list)


@dataclass
class FunctionLoss:
    function: str
    points: float  # what its cells are worth
    mean_lost: float  # points lost per submission, on average
    lost_by: int  # submissions that lost some of them
    visible_failed: int  # submissions whose visible test cell failed
    hidden_failed: int
    not_implemented: int  # submissions that left it as the stub


@dataclass
class CaseFailure:
    function: str
    cell: str
    number: int
    call: str  # the input shapes, never a value
    failed: int  # submissions that implemented the function and failed this case
    tried: int  # submissions that implemented it
    problem: str  # what was wrong most often


@dataclass
class HintCount:
    function: str
    cell: str
    hint: str
    count: int


@dataclass
class Pending:
    student: str
    cell: str
    points: float


@dataclass
class ClassData:
    """One assignment's class, as :func:`load` reads it."""

    assignment: str
    submissions: list[Submission]
    functions: list[FunctionLoss]
    cases: list[CaseFailure]
    hints: list[HintCount]
    pending: list[Pending]
    missing_verdicts: int  # submissions graded without verdicts kept

    @property
    def percents(self) -> list[float]:
        """Each submission's score as a percentage of its maximum."""
        return [100 * s.score / s.max_score if s.max_score else 0.0 for s in self.submissions]

    def summary(self) -> dict:
        """Count, mean, median, quartiles of the percentages; the function that lost most points."""
        values = sorted(self.percents)
        worst = max(self.functions, key=lambda f: f.mean_lost, default=None)
        quartiles = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
        return {"assignment": self.assignment, "submissions": len(values),
                "mean": statistics.fmean(values) if values else 0.0,
                "q1": quartiles[0] if values else 0.0, "median": statistics.median(values) if values else 0.0,
                "q3": quartiles[2] if values else 0.0,
                "most_lost": f"{worst.function} ({worst.mean_lost:.1f} of {worst.points:g})" if worst else ""}


def engine_for(url: str) -> sa.Engine:
    """An engine on the gradebook at ``url``; refuses a SQLite file that does not exist (nothing is created)."""
    if url.startswith("sqlite:///"):
        from pathlib import Path

        if not Path(url[len("sqlite:///"):]).is_file():
            raise FileNotFoundError(f"no gradebook at {url[len('sqlite:///'):]}: grade an assignment first")
    return sa.create_engine(url)


def assignments(connection) -> list[str]:
    """The assignments of the gradebook that have submissions, by name."""
    return sorted(connection.execute(sa.select(Assignment.name).join(
        SubmittedAssignment, SubmittedAssignment.assignment_id == Assignment.id).distinct()).scalars())


def load(connection, assignment: str) -> ClassData:
    """The class's results on ``assignment``."""
    tables = set(sa.inspect(connection).get_table_names())
    if "grade" not in tables:
        raise store.NotAGradebook("the database holds no nbgrader gradebook")
    found = connection.execute(sa.select(Assignment.id).where(Assignment.name == assignment)).first()
    if found is None:
        raise KeyError(f"the gradebook has no assignment {assignment!r}")
    subs = {row.student: row for row in connection.execute(
        sa.select(SubmittedAssignment.student_id.label("student"), SubmittedAssignment.score.label("score"),
                  SubmittedAssignment.max_score.label("max_score"),
                  SubmittedAssignment.late_submission_penalty.label("penalty"),
                  Student.first_name, Student.last_name, Student.email, Student.lms_user_id)
        .join(Student, Student.id == SubmittedAssignment.student_id)
        .where(SubmittedAssignment.assignment_id == found.id))}
    grades = connection.execute(
        sa.select(SubmittedAssignment.student_id.label("student"), GradeCell.name.label("cell"),
                  GradeCell.max_score, GradeCell.cell_type, Grade.score.label("score"), Grade.needs_manual_grade,
                  Grade.id)
        .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
        .join(GradeCell, GradeCell.id == Grade.cell_id)
        .where(SubmittedAssignment.assignment_id == found.id)).all()
    kept = "course_verdict" in tables
    verdicts = _verdicts(connection, found.id) if kept else {}
    notes = store.notes_by_student(connection, assignment) if kept else {}
    submissions = [Submission(student, _name(row), row.email or "", row.lms_user_id or "",
                              float(row.score or 0) - float(row.penalty or 0), float(row.max_score or 0),
                              sum(float(g.max_score or 0) for g in grades if g.student == student and g.needs_manual_grade),
                              notes.get(student, []))
                   for student, row in sorted(subs.items())]
    functions_of = {v["cell"]: v["function"] for v in verdicts.values()}
    graded_students = {v["student"] for v in verdicts.values()}
    return ClassData(assignment, submissions, _function_losses(grades, verdicts, functions_of, len(subs)),
                     _case_failures(connection, found.id) if kept else [], _hints(verdicts),
                     [Pending(g.student, g.cell, float(g.max_score or 0)) for g in sorted(grades, key=lambda g: (g.student, g.cell))
                      if g.needs_manual_grade],
                     len(set(subs) - graded_students))


def _name(row) -> str:
    parts = [p for p in (row.last_name, row.first_name) if p]
    return ", ".join(parts) if parts else row.student


def _graded(assignment_id):
    """The join from the course's verdicts through nbgrader's grades to one assignment's submissions."""
    return (sa.select().select_from(store.verdict)
            .join(Grade, Grade.id == store.verdict.c.grade_id)
            .join(GradeCell, GradeCell.id == Grade.cell_id)
            .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)
            .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
            .where(SubmittedAssignment.assignment_id == assignment_id))


def _verdicts(connection, assignment_id) -> dict[str, dict]:
    """``grade id -> verdict`` (with the student and the cell's name) for one assignment."""
    v = store.verdict.c
    query = _graded(assignment_id).add_columns(
        v.grade_id, v.function, v.kind, v.passed, v.hint, v.ran, v.message,
        SubmittedAssignment.student_id.label("student"), GradeCell.name.label("cell"))
    return {row.grade_id: dict(row._mapping) for row in connection.execute(query)}


def _function_losses(grades, verdicts: dict, functions_of: dict[str, str], count: int) -> list[FunctionLoss]:
    by_function: dict[str, dict] = defaultdict(lambda: {"points": 0.0, "lost": defaultdict(float), "visible": set(),
                                                        "hidden": set(), "stub": set()})
    cells_seen: dict[str, set] = defaultdict(set)
    for g in grades:
        function = functions_of.get(g.cell) or (WRITTEN if g.cell_type == "markdown" else g.cell)
        entry = by_function[function]
        if g.cell not in cells_seen[function]:
            cells_seen[function].add(g.cell)
            entry["points"] += float(g.max_score or 0)
        if not g.needs_manual_grade:
            entry["lost"][g.student] += float(g.max_score or 0) - float(g.score or 0)
        v = verdicts.get(g.id)
        if v is not None and not v["passed"]:
            entry[v["kind"] if v["kind"] in ("visible", "hidden") else "hidden"].add(g.student)
            if v["message"].endswith("is not implemented yet."):
                entry["stub"].add(g.student)
    out = [FunctionLoss(function, e["points"], sum(e["lost"].values()) / max(count, 1),
                        sum(1 for lost in e["lost"].values() if lost > 1e-9), len(e["visible"]), len(e["hidden"]),
                        len(e["stub"]))
           for function, e in by_function.items()]
    return sorted(out, key=lambda f: (f.function == WRITTEN, -f.mean_lost, f.function))


def _case_failures(connection, assignment_id) -> list[CaseFailure]:
    """Hidden cases by how many submissions that implemented the function failed them (at least one)."""
    c, v = store.case.c, store.verdict.c
    implemented = sa.or_(c.problem.is_(None), c.problem != "not implemented")
    query = (_graded(assignment_id).join(store.case, c.verdict_id == v.id)
             .add_columns(v.function, GradeCell.name.label("cell"), c.number, c.call, c.problem)
             .where(v.kind == "hidden", implemented))
    tried: Counter = Counter()
    failures: dict[tuple, Counter] = defaultdict(Counter)
    calls: dict[tuple, str] = {}
    for row in connection.execute(query):
        key = (row.function, row.cell, row.number)
        tried[key] += 1
        calls.setdefault(key, row.call)
        if row.problem is not None:
            failures[key][row.problem] += 1
    out = [CaseFailure(key[0], key[1], key[2], calls[key], sum(problems.values()), tried[key],
                       problems.most_common(1)[0][0]) for key, problems in failures.items()]
    return sorted(out, key=lambda f: (-f.failed / max(f.tried, 1), -f.failed, f.function, f.number))


def _hints(verdicts: dict) -> list[HintCount]:
    """Each hint shown, by function, with the number of submissions shown it (in a visible or hidden cell)."""
    shown: dict[tuple, set] = defaultdict(set)
    cells: dict[tuple, set] = defaultdict(set)
    for v in verdicts.values():
        if v["hint"]:
            shown[(v["function"], v["hint"])].add(v["student"])
            cells[(v["function"], v["hint"])].add(v["cell"])
    return [HintCount(f, ", ".join(sorted(cells[(f, hint)])), hint, len(students)) for (f, hint), students in
            sorted(shown.items(), key=lambda item: (-len(item[1]), item[0]))]


def history(connection, upto: str) -> list[ClassData]:
    """The graded assignments of the gradebook before ``upto`` (by name, which orders ps01 ... ps09), then ``upto``
    itself, last even with nothing graded yet; each loaded once."""
    return [load(connection, name) for name in assignments(connection) if name < upto] + [load(connection, upto)]

