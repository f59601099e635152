"""A busy machine costs no points: a class graded while other processes keep every core busy gets the
gradebook it gets on a quiet machine (time limits are CPU time; wall clock is only a generous outer bound).

A scratch course (as in test_grading.py) receives two ps01 submissions (full marks, one wrong
function) and is graded twice with ``python -m course_tools grade --no-experiments --regrade``: once
as the machine is, once while one busy loop per core runs beside the batch. And a result that hit a
wall-clock limit while the machine was busy is graded again alone. Slow (about 70-100 s on 2 cores:
two batches, the second one on a machine loaded twice over, and one notebook graded again).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import asdict, replace

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import run
from course_tools.grading import batch
from course_tools import tool_env
from course_tools.grading.autograde import grading_dir
from course_tools.grading.tasks import Task, load_result, save_result
from course_tools.grading.worker import course_fingerprint
from grading_helpers import answers as _answers, scratch_course, submit

ASSIGNMENT = "ps01_counts"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory, root):
    course = scratch_course(tmp_path_factory.mktemp("loaded") / "course", root, ASSIGNMENT, env=tool_env())
    answers = _answers(root)
    submit(course, "full", answers)
    submit(course, "wrong_tfidf", dict(answers, tfidf=answers["tfidf"].replace(
        "np.log((1 + n_docs) / (1 + df)) + 1", "np.log((1 + n_docs) / (1 + df))")))
    return course, *_grade(course)  # graded once, on the machine as it is


def _grade(course) -> tuple[dict[str, dict[str, float]], str]:
    """Grade the whole class again; return each student's points per graded cell, and the batch's summary."""
    done = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--regrade"], cwd=course, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {student: {grade.name: grade.score or 0.0
                            for grade in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).grades}
                  for student in ("full", "wrong_tfidf")}
    summary = next(line for line in done.stdout.splitlines() if line.startswith("graded "))
    return scores, summary


@contextmanager
def busy_cores():
    """One busy loop per core, for as long as the block runs (ended by their own process ids)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_a_loaded_machine_gives_the_same_gradebook(course):
    course, quiet, quiet_summary = course
    with busy_cores():
        loaded, loaded_summary = _grade(course)
    print(f"\nquiet:  {quiet_summary}\nloaded: {loaded_summary}")
    assert loaded == quiet
    # and the gradebook is the right one, not merely the same twice
    full, wrong = (sum(quiet[s].values()) for s in ("full", "wrong_tfidf"))
    assert 0 < wrong < full, quiet
    assert {k: v for k, v in quiet["wrong_tfidf"].items() if "tfidf" not in k} == \
        {k: v for k, v in quiet["full"].items() if "tfidf" not in k}, quiet
    assert all(quiet["wrong_tfidf"][k] == 0 for k in quiet["wrong_tfidf"] if k.startswith("hidden_tfidf")), quiet
    per_notebook = re.search(r"([\d.]+) s per notebook", loaded_summary)
    assert per_notebook, loaded_summary


def test_a_wall_clock_timeout_on_a_busy_machine_is_graded_again_alone(course):
    """The result a worker sends when a wall-clock limit stopped a cell while others were graded beside it
    (``wall_timeout``, not ``alone``) is graded again in this process; the new result replaces it, says so,
    and grades the same notebook the same way."""
    work = grading_dir(course[0], ASSIGNMENT)
    first = load_result(work / "results" / "full.json")
    assert first is not None and first.wall_timeout is False
    staged = work / "staged" / "full" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    record = json.loads((work / "records" / "full.json").read_text())
    task = Task(ASSIGNMENT, "full", staged.read_text(encoding="utf-8"), record, False, True,
                asdict(batch._configured_limits(course[0])), course_fingerprint(ASSIGNMENT, course[0]))
    assert task.fingerprint == first.fingerprint  # the very task the batch graded
    flagged = replace(first, wall_timeout=True, alone=False,
                      notes=["cell 12 was stopped after 600 s of wall clock (the limit per cell)"])
    save_result(flagged, work / "results")
    again = batch.regrade_alone([task], {"full": flagged}, work / "results")
    assert list(again) == ["full"]
    saved = load_result(work / "results" / "full.json")
    assert saved == again["full"] and saved.alone and saved.notes[0] == batch.ALONE_NOTE, saved.notes
    assert saved.worker != first.worker or saved.seconds != first.seconds  # graded anew, in this process
    assert not any("600 s of wall clock" in note for note in saved.notes)
    assert _verdicts(saved) == _verdicts(first)
    assert batch.regrade_alone([task], {"full": saved}, work / "results") == {}  # once alone is enough


def _verdicts(result) -> dict[str, str]:
    """``grade_id -> verdict text`` of a result's graded cells."""
    nb = nbformat.reads(result.notebook, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: json.dumps(c.outputs, sort_keys=True) for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}
