"""The synthetic gradebook (course_tools.report.synthetic) reads back through class_data as it was written."""

import os
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from nbgrader.api import Gradebook

from course_tools.report import class_data, synthetic

ASSIGNMENTS = ["ps01_counts", "ps02_word2vec"]


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch):
    """nbgrader's Gradebook runs alembic, which must be on PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def test_synthetic_gradebook_reads_back(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    made = synthetic.make_gradebook(url, 12, ASSIGNMENTS, seed=3)
    assert made["students"] == 12 and made["verdicts"] > 0 and made["cases"] > made["verdicts"]
    engine = sa.create_engine(url)
    with engine.connect() as connection, Gradebook(url) as gb:
        for assignment in ASSIGNMENTS:
            data = class_data.load(connection, assignment)
            assert sorted(s.student for s in data.submissions) == sorted(made["records"][assignment])
            for s in data.submissions:
                assert abs(s.score - gb.find_submission(assignment, s.student).score) < 1e-9
            cells = synthetic.grade_cells(assignment)
            records = made["records"][assignment]
            function_of = {r["cell"]: r["function"] for r in next(iter(records.values()))}
            points = {}
            for name, p, cell_type in cells:
                f = function_of.get(name, class_data.WRITTEN if cell_type == "markdown" else name)
                points[f] = points.get(f, 0) + p
            assert {f.function: f.points for f in data.functions} == points
            expected = {}
            for recs in records.values():
                failing_stub = {r["function"] for r in recs if r["cases"] and r["cases"][0][1] == "not implemented"}
                for r in recs:
                    if r["kind"] == "hidden" and r["cases"] and r["function"] not in failing_stub:
                        for number, (_, problem) in enumerate(r["cases"], start=1):
                            if problem is not None:
                                expected[(r["cell"], number)] = expected.get((r["cell"], number), 0) + 1
            assert expected, "no hidden case failed: the synthetic class is too good to test anything"
            assert {(c.cell, c.number): c.failed for c in data.cases} == expected
        assert [d.assignment for d in class_data.history(connection, "ps02_word2vec")] == ASSIGNMENTS


def test_earlier_assignments_stand_beside_the_report_at_a_phones_width(tmp_path):
    """The report of the second assignment of a made-up class shows the first beside it, read in a browser."""
    from course_tools.report.class_report import write_report
    from report_browser import read_report

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    synthetic.make_gradebook(url, 40, ASSIGNMENTS, seed=5)
    files = write_report(ASSIGNMENTS[1], tmp_path, url)
    with sa.create_engine(url).connect() as connection:
        classes = [class_data.load(connection, a) for a in ASSIGNMENTS]
    seen = read_report(files[0], 400)
    assert seen["errors"] == [] and seen["resources"] == [] and seen["pageWidth"] <= seen["viewport"]
    assert [row[0] for row in seen["tables"]["table-history"]] == ASSIGNMENTS
    assert [float(row[4]) for row in seen["tables"]["table-history"]] == pytest.approx(
        [c.summary()["median"] for c in classes], abs=0.05)
    assert {f"history-{a}" for a in ASSIGNMENTS} <= set(seen["bars"]), "a box per assignment in the figure"
    assert f"table-functions-{ASSIGNMENTS[0]}" in seen["tables"] and seen["smallestText"] >= 9


def test_an_assignment_without_submissions_or_unknown_gets_a_page_or_a_clear_refusal(tmp_path, monkeypatch, capsys):
    """Mid-term: ps02 is in the gradebook but nobody has handed it in; ps05 is not there at all."""
    from course_tools.report.class_report import main, write_report

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    synthetic.make_gradebook(url, 6, ASSIGNMENTS[:1], seed=1)
    with Gradebook(url) as gb:
        gb.add_assignment(ASSIGNMENTS[1])
    files = write_report(ASSIGNMENTS[1], tmp_path, url)
    html = files[0].read_text(encoding="utf-8")
    assert "No submission of ps02_word2vec has been graded" in html and 'id="figure-scores"' not in html
    assert 'id="table-history"' in html and "<td><code>ps01_counts</code></td>" in html  # the earlier one still shown
    assert "<td><code>ps02_word2vec</code></td>" not in html  # an empty assignment is no row of the history
    out = tmp_path / "unknown"
    monkeypatch.chdir(tmp_path)
    assert main("ps05_attention", url, str(out)) == 2
    assert "no assignment 'ps05_attention'" in capsys.readouterr().err and not out.exists()
