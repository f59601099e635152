"""Every verdict of a grading run, kept in the gradebook beside nbgrader's own tables.

nbgrader keeps one number per graded cell (``grade.auto_score``); what decided it (which test
case failed and why, the hint the student was shown, the notes on the run) would otherwise be
thrown away. :class:`SaveVerdicts`, nbgrader's autograde step after ``SaveAutoGrades``, writes it
into three tables of the course's, in the same database (SQLite or PostgreSQL) and through the
same writer as the grades, so nothing can drift:

- ``course_verdict``: one row per graded test cell of a submission (``grade_id`` is nbgrader's
  ``grade.id``): the function, visible or hidden, passed, the message, the hint shown (when one
  was), how many cases ran and failed; ``ran`` is false when the tests produced no case outcomes
  (a refused or crashed notebook);
- ``course_case``: one row per test case of that cell: its number (from 1), the call with its
  input shapes (:func:`course_tools.grading.verdicts.describe_call`, never a value) and what was
  wrong (``NULL`` when it passed);
- ``course_run``: one row per submitted notebook: the notes on its grading run (JSON), seconds, worker.

Rows are keyed by nbgrader's ids, so a regraded submission replaces its rows and a student
nbgrader removes takes them along (PostgreSQL's ``ON DELETE CASCADE``; on SQLite, which does not
enforce foreign keys for nbgrader, the next save purges them and readers join through nbgrader's
tables, so they are never read). ``course_schema`` holds the version of these tables;
:func:`ensure_schema` creates or migrates them, and only in a database that already holds
nbgrader's tables (nbgrader stamps its own migrations only on a database it finds empty).

Record format, as :func:`course_tools.grading.autograde.grade_notebook` makes it (plain JSON, so it
travels from a Dask worker in :class:`course_tools.grading.tasks.Result`): ``{"cell": grade_id,
"function": name, "kind": "visible" | "hidden", "passed": bool, "message": str, "hint": str | None,
"cases": [[call, problem | None], ...] | None}``.
"""

from __future__ import annotations

import datetime
import json

import sqlalchemy as sa
from nbgrader.preprocessors import NbGraderPreprocessor

SCHEMA_VERSION = 1
"""The version of the course's tables; :data:`MIGRATIONS` brings an older gradebook up to it."""
MIGRATIONS: dict[int, object] = {}
"""``version -> function(connection)`` that migrates the tables from ``version`` to ``version + 1``."""

metadata = sa.MetaData()
# nbgrader's tables, named only so that our foreign keys can point at them (never created here)
sa.Table("grade", metadata, sa.Column("id", sa.String(32), primary_key=True))
sa.Table("submitted_notebook", metadata, sa.Column("id", sa.String(32), primary_key=True))

schema = sa.Table("course_schema", metadata,
                  sa.Column("name", sa.String(64), primary_key=True),
                  sa.Column("version", sa.Integer, nullable=False))
verdict = sa.Table(
    "course_verdict", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("grade_id", sa.String(32), sa.ForeignKey("grade.id", ondelete="CASCADE"), nullable=False, unique=True),
    sa.Column("function", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("hint", sa.Text),
    sa.Column("ran", sa.Boolean, nullable=False),
    sa.Column("cases", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False))
case = sa.Table(
    "course_case", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("verdict_id", sa.Integer, sa.ForeignKey("course_verdict.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("call", sa.Text, nullable=False),
    sa.Column("problem", sa.Text))
run = sa.Table(
    "course_run", metadata,
    sa.Column("notebook_id", sa.String(32), sa.ForeignKey("submitted_notebook.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("notes", sa.Text, nullable=False),
    sa.Column("seconds", sa.Float),
    sa.Column("worker", sa.String(256)),
    sa.Column("graded_at", sa.DateTime, nullable=False))
OURS = [schema, verdict, case, run]
NAME = "verdicts"


class NotAGradebook(RuntimeError):
    """The database holds no nbgrader gradebook (or one written by a newer course_tools)."""


def ensure_schema(connection) -> None:
    """Create the course's tables in an nbgrader gradebook, or migrate them to :data:`SCHEMA_VERSION`."""
    names = set(sa.inspect(connection).get_table_names())
    if not {"grade", "submitted_notebook"} <= names:
        raise NotAGradebook("the database holds no nbgrader gradebook: grade an assignment first")
    if "course_schema" not in names:
        metadata.create_all(connection, tables=OURS)
        connection.execute(schema.insert().values(name=NAME, version=SCHEMA_VERSION))
        return
    version = connection.execute(sa.select(schema.c.version).where(schema.c.name == NAME)).scalar_one()
    if version > SCHEMA_VERSION:
        raise NotAGradebook(f"the gradebook's verdict tables are version {version}, newer than this "
                            f"course_tools ({SCHEMA_VERSION}): update the course")
    while version < SCHEMA_VERSION:
        MIGRATIONS[version](connection)
        version += 1
        connection.execute(schema.update().where(schema.c.name == NAME).values(version=version))


def save(connection, grades: dict[str, str], notebook_id: str, records: list[dict], notes: list[str],
         seconds: float | None = None, worker: str | None = None) -> int:
    """Replace the verdicts of one submitted notebook; returns how many were written.

    ``grades``: nbgrader's ``grade.id`` by cell name (grade_id) for this notebook; a record of a cell
    without a grade (not a graded cell of this assignment) is skipped."""
    ensure_schema(connection)
    _purge_orphans(connection)
    old = sa.select(verdict.c.id).where(verdict.c.grade_id.in_(list(grades.values())))
    connection.execute(case.delete().where(case.c.verdict_id.in_(old)))
    connection.execute(verdict.delete().where(verdict.c.grade_id.in_(list(grades.values()))))
    connection.execute(run.delete().where(run.c.notebook_id == notebook_id))
    written = 0
    for record in records:
        grade_id = grades.get(record.get("cell"))
        if grade_id is None:
            continue
        outcomes = record.get("cases")
        ran = isinstance(outcomes, list)
        outcomes = outcomes if ran else []
        row = connection.execute(verdict.insert().values(
            grade_id=grade_id, function=str(record.get("function", ""))[:128], kind=str(record.get("kind", ""))[:16],
            passed=bool(record.get("passed")), message=str(record.get("message", "")), hint=record.get("hint"),
            ran=ran, cases=len(outcomes), failed=sum(1 for _, problem in outcomes if problem is not None)))
        if outcomes:
            verdict_id = row.inserted_primary_key[0]
            connection.execute(case.insert(), [{"verdict_id": verdict_id, "number": number, "call": str(call),
                                                "problem": problem}
                                               for number, (call, problem) in enumerate(outcomes, start=1)])
        written += 1
    connection.execute(run.insert().values(notebook_id=notebook_id, notes=json.dumps([str(n) for n in notes]),
                                           seconds=seconds, worker=worker,
                                           graded_at=datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)))
    return written


def _purge_orphans(connection) -> None:
    """Delete rows whose nbgrader grade or notebook is gone (SQLite does not cascade nbgrader's deletes)."""
    grades = sa.table("grade", sa.column("id"))
    notebooks = sa.table("submitted_notebook", sa.column("id"))
    gone = sa.select(verdict.c.id).where(verdict.c.grade_id.not_in(sa.select(grades.c.id)))
    connection.execute(case.delete().where(case.c.verdict_id.in_(gone)))
    connection.execute(verdict.delete().where(verdict.c.grade_id.not_in(sa.select(grades.c.id))))
    connection.execute(run.delete().where(run.c.notebook_id.not_in(sa.select(notebooks.c.id))))


class SaveVerdicts(NbGraderPreprocessor):
    """nbgrader's autograde step after ``SaveAutoGrades``: record the run's verdicts and notes.

    :class:`course_tools.grading.autograde.SandboxedExecute` leaves them in
    ``resources["course_grading"]``; without them (a notebook graded by another execute step)
    nothing is written."""

    def preprocess(self, nb, resources):
        graded = resources.get("course_grading")
        info = resources.get("nbgrader", {})
        if not isinstance(graded, dict):
            return nb, resources
        from nbgrader.api import Gradebook

        with Gradebook(info["db_url"]) as gb:
            notebook = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
            grades = {grade.name: grade.id for grade in notebook.grades}
            save(gb.db.connection(), grades, notebook.id, graded.get("verdicts") or [], graded.get("notes") or [],
                 graded.get("seconds"), graded.get("worker"))
            gb.db.commit()
        return nb, resources


def notes_by_student(connection, assignment: str) -> dict[str, list[str]]:
    """``student -> notes`` of every recorded grading run of ``assignment`` (one notebook per assignment)."""
    from nbgrader.api import Assignment, SubmittedAssignment, SubmittedNotebook

    names = set(sa.inspect(connection).get_table_names())
    if "course_run" not in names:
        return {}
    rows = connection.execute(
        sa.select(SubmittedAssignment.student_id, run.c.notes)
        .join(SubmittedNotebook, SubmittedNotebook.id == run.c.notebook_id)
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
        .where(Assignment.name == assignment))
    out: dict[str, list[str]] = {}
    for student, notes in rows:
        out.setdefault(student, []).extend(json.loads(notes))
    return out
