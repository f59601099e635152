"""The course's verdict tables beside nbgrader's (course_tools.grading.verdict_store), on a real SQLite gradebook.

Made through nbgrader's own API: created only where nbgrader's tables are, versioned and migrated, replaced
when a submission is recorded again, and never read (then purged) once nbgrader removes the student.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from nbgrader.api import Gradebook

from course_tools.grading import verdict_store as store
from course_tools.report import class_data, page

RECORDS = [
    {"cell": "test_f", "function": "f", "kind": "visible", "passed": True, "message": "f: 2 test case(s) passed",
     "hint": None, "cases": [["f(array (2,))", None], ["f(array (3,))", None]]},
    {"cell": "hidden_f", "function": "f", "kind": "hidden", "passed": False, "message": "hidden test 2 of 3: ...",
     "hint": "mind the axis", "cases": [["f(array (2,))", None], ["f(array (4, 2))", "gives a wrong result: <b>"],
                                        ["f(array (1,))", None]]},
]


def _gradebook(path) -> str:
    url = f"sqlite:///{path / 'gradebook.db'}"
    with Gradebook(url) as gb:
        gb.add_assignment("ps01_counts")
        gb.add_notebook("ps01_counts", "ps01_counts")
        for name, points in (("test_f", 4), ("hidden_f", 6)):
            gb.add_grade_cell(name, "ps01_counts", "ps01_counts", max_score=points, cell_type="code")
        for student in ("ada", "bo"):
            gb.add_student(student)
            gb.add_submission("ps01_counts", student)
    return url


def _save(url: str, student: str, records=RECORDS, notes=("a <script>alert(1)</script> note",)) -> None:
    with Gradebook(url) as gb:
        notebook = gb.find_submission_notebook("ps01_counts", "ps01_counts", student)
        for grade in notebook.grades:
            grade.auto_score = grade.max_score if grade.name == "test_f" else 0
        gb.db.commit()
        store.save(gb.db.connection(), {g.name: g.id for g in notebook.grades}, notebook.id, list(records),
                   list(notes), 1.5, "here:1")
        gb.db.commit()


def _counts(url: str) -> tuple[int, int, int]:
    with sa.create_engine(url).connect() as c:
        return tuple(c.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                     for t in ("course_verdict", "course_case", "course_run"))


def _load(url: str) -> class_data.ClassData:
    with class_data.engine_for(url).connect() as connection:
        return class_data.load(connection, "ps01_counts")


def test_the_tables_are_made_only_in_an_nbgrader_gradebook(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with engine.begin() as connection, pytest.raises(store.NotAGradebook, match="no nbgrader gradebook"):
        store.ensure_schema(connection)
    assert sa.inspect(engine).get_table_names() == [], "nothing created before nbgrader's tables"
    with pytest.raises(FileNotFoundError, match="no gradebook"):
        class_data.engine_for(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()


def test_saving_again_replaces_and_a_removed_student_is_never_read(tmp_path):
    url = _gradebook(tmp_path)
    _save(url, "ada")
    _save(url, "bo")
    assert _counts(url) == (4, 10, 2)
    _save(url, "ada", notes=())  # recorded again: its rows are replaced, not added
    assert _counts(url) == (4, 10, 2)
    read = _load(url)
    assert [(c.function, c.number, c.call, c.failed, c.tried) for c in read.cases] == [("f", 2, "f(array (4, 2))", 2, 2)]
    assert [(h.hint, h.count) for h in read.hints] == [("mind the axis", 2)]
    assert [s.notes for s in read.submissions] == [[], ["a <script>alert(1)</script> note"]]
    with Gradebook(url) as gb:
        gb.remove_submission("ps01_counts", "bo")  # nbgrader deletes bo's grades; SQLite cascades nothing of ours
    assert [s.student for s in _load(url).submissions] == ["ada"] and _load(url).cases[0].failed == 1
    _save(url, "ada")
    assert _counts(url) == (2, 5, 1), "the next save purges the rows of grades nbgrader removed"


def test_an_older_version_is_migrated_and_a_newer_one_refused(tmp_path, monkeypatch):
    url = _gradebook(tmp_path)
    _save(url, "ada")
    engine = sa.create_engine(url)

    def add_reviewed(connection):  # a later version's change, as a migration would make it
        connection.execute(sa.text("ALTER TABLE course_verdict ADD COLUMN reviewed BOOLEAN"))
    monkeypatch.setattr(store, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(store.MIGRATIONS, 1, add_reviewed)
    with engine.begin() as connection:
        store.ensure_schema(connection)
        store.ensure_schema(connection)  # at the current version: nothing more to do
    with engine.connect() as connection:
        assert "reviewed" in {c["name"] for c in sa.inspect(connection).get_columns("course_verdict")}
        assert connection.execute(sa.text("SELECT version FROM course_schema")).scalar_one() == 2
    monkeypatch.setattr(store, "SCHEMA_VERSION", 1)
    with engine.begin() as connection, pytest.raises(store.NotAGradebook, match="newer than this"):
        store.ensure_schema(connection)


def test_text_from_submissions_is_escaped_on_the_page(tmp_path):
    url = _gradebook(tmp_path)
    _save(url, "ada", records=[dict(RECORDS[1], cases=[["f(<img src=x onerror=alert(1)>)", "raised <i>x</i>"]])])
    html = page.render(_load(url), [], "here", "today")
    assert "<script>alert" not in html and "<img src=x" not in html and "<i>x</i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
