"""Grading round trips with real nbgrader, a real gradebook and the real ps01 notebook.

One scratch course folder gets the repository's nbgrader_config.py and
solutions/, releases ps01 with ``nbgrader generate_assignment``, receives a
class of submissions made from the release the way students make them, and is
graded with ``python -m course_tools grade`` (which runs ``nbgrader autograde``).
"""

from __future__ import annotations

import csv
import html
import re
import shutil
import sqlite3
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import run
from course_tools.authoring import stated_results
from course_tools import tool_env
from grading_helpers import answers as _answers, scratch_course, submit as _submit

ASSIGNMENT = "ps01_counts"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
FUNCTIONS = ["one_hot", "tfidf", "ppmi", "cosine_similarity"]
POINTS = {"one_hot": 10, "tfidf": 25, "ppmi": 30, "cosine_similarity": 20}  # weighted by difficulty
WRITTEN = "written_ppmi_smoothing"  # the written question, 15 points, graded by hand
pytestmark = pytest.mark.slow


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.fixture(scope="module")
def course(tmp_path_factory, root):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(root / "nbgrader_config.py", course)
    shutil.copytree(root / "solutions", course / "solutions")
    shutil.copytree(root / "exercises", course / "exercises")
    shutil.copytree(root / "answer_keys", course / "answer_keys")
    # as the README's instructor section says: --force, because exercises/ is committed
    run(["-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], cwd=course)
    regenerated = course / "exercises" / ASSIGNMENT / NOTEBOOK
    assert regenerated.read_bytes() == (root / "exercises" / ASSIGNMENT / NOTEBOOK).read_bytes()
    answers = _answers(root)
    solution_text = answers["tfidf"]
    assert "np.log((1 + n_docs) / (1 + df)) + 1" in solution_text  # the line the wrong answer changes

    _submit(course, "full", answers)
    _submit(course, "blank", {})
    _submit(course, "wrong_tfidf", dict(answers, tfidf=solution_text.replace(
        "np.log((1 + n_docs) / (1 + df)) + 1", "np.log((1 + n_docs) / (1 + df))")))

    def edit_tests(nb):  # one_hot left undone, its tests "fixed" by the student
        _cell(nb, "test_one_hot").source = "print('one_hot: all visible tests passed')"
        _cell(nb, "hidden_one_hot").source = "pass"
    _submit(course, "edited_tests", {k: v for k, v in answers.items() if k != "one_hot"}, edit_tests)
    _submit(course, "imports_answer", dict(answers, cosine_similarity=(
        "from course_lib.vectors.counts import cosine_similarity  # the instructor's answer?")))
    broken = course / "submitted" / "broken_json" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / NOTEBOOK).write_text('{"cells": [{"cell_type": "code", "source": "x = 1"', encoding="utf-8")
    missing = course / "submitted" / "missing_notebook" / ASSIGNMENT
    missing.mkdir(parents=True)
    (missing / "notes.txt").write_text("I forgot to attach the notebook", encoding="utf-8")

    graded = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments"], cwd=course, check=False)
    return course, graded


def _scores(course: Path, student: str, assignment: str = ASSIGNMENT) -> dict[str, float]:
    """Autograded (and hand-graded) points per grade cell; a cell nobody has graded yet counts 0."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(assignment, assignment, student)
        return {grade.name: grade.score or 0.0 for grade in notebook.grades}


def _cell_points(root: Path, assignment: str, cell_type: str | None = None) -> dict[str, float]:
    """grade_id -> points of the graded cells of the solution notebook (of one ``cell_type``, if given)."""
    nb = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and cell_type in (None, c.cell_type)}


def _written_cells(root: Path, assignment: str) -> dict[str, float]:
    """grade_id -> points of the answer cells graded by hand (markdown solution cells)."""
    return _cell_points(root, assignment, "markdown")


def _grade_by_hand(course: Path, student: str, grade_id: str, points: float, assignment: str = ASSIGNMENT):
    """What the instructor does in nbgrader's formgrader: give a hand-graded cell its points."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(grade_id, assignment, assignment, student)
        assert grade.needs_manual_grade, f"{student}'s {grade_id} should wait for the instructor"
        grade.manual_score = points
        gb.db.commit()


def _total(course: Path, student: str, assignment: str = ASSIGNMENT) -> float:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission(assignment, student).score


def _function_points(scores: dict[str, float]) -> dict[str, float]:
    return {f: scores[f"test_{f}"] + scores[f"hidden_{f}"] for f in FUNCTIONS}


def test_points_follow_difficulty_and_add_up_to_100(course):
    course, _ = course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assignment = gb.find_assignment(ASSIGNMENT)
        assert assignment.max_score == 100
        cells = {c.name: c.max_score for c in assignment.notebooks[0].grade_cells}
    assert _function_points(cells) == POINTS
    assert all(cells[f"test_{f}"] == 0.4 * POINTS[f] for f in FUNCTIONS), "40 % visible, 60 % hidden"
    assert cells[WRITTEN] == 15


def test_solution_scores_full_marks_once_the_written_answer_is_graded_by_hand(course):
    course, _ = course
    assert sum(_scores(course, "full").values()) == 100 - 15, "the autograded points"
    _grade_by_hand(course, "full", WRITTEN, 15)
    assert _total(course, "full") == 100


def test_unmodified_release_scores_zero(course):
    course, _ = course
    assert sum(_scores(course, "blank").values()) == 0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        untouched = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, "blank")
        assert not untouched.needs_manual_grade and untouched.score == 0, "an answer left empty needs no grading"


def test_one_wrong_function_loses_exactly_its_points(course):
    course, _ = course
    points = _function_points(_scores(course, "wrong_tfidf"))
    assert points == dict(POINTS, tfidf=0)


def test_edited_locked_test_cells_are_graded_with_the_released_tests(course):
    course, _ = course
    points = _function_points(_scores(course, "edited_tests"))
    assert points == dict(POINTS, one_hot=0)
    autograded = nbformat.read(course / "autograded" / "edited_tests" / ASSIGNMENT / NOTEBOOK, as_version=4)
    assert "assert_close" in _cell(autograded, "test_one_hot").source
    assert "check_hidden" in _cell(autograded, "hidden_one_hot").source


def test_importing_the_instructors_answer_scores_zero_for_that_function(course):
    course, _ = course
    points = _function_points(_scores(course, "imports_answer"))
    assert points == dict(POINTS, cosine_similarity=0)
    autograded = nbformat.read(course / "autograded" / "imports_answer" / ASSIGNMENT / NOTEBOOK, as_version=4)
    errors = [o for o in _cell(autograded, "test_cosine_similarity").outputs if o.output_type == "error"]
    assert errors and "cosine_similarity is not implemented yet" in errors[0].evalue


def test_malformed_submissions_are_named_and_do_not_stop_the_batch(course):
    course, graded = course
    assert graded.returncode == 1, graded.stdout + graded.stderr
    lines = {line.split()[0]: line for line in graded.stdout.splitlines()[1:] if line.strip()}
    assert "not a readable notebook" in lines["broken_json"] and "not graded" in lines["broken_json"]
    assert f"{NOTEBOOK} is missing" in lines["missing_notebook"]
    assert "85/100" in lines["full"] and "15 points to grade by hand" in lines["full"]
    assert "60/100" in lines["wrong_tfidf"] and "0/100" in lines["blank"]
    # nothing was lost: the broken files are still where the students put them
    assert (course / "submitted" / "broken_json" / ASSIGNMENT / NOTEBOOK).read_text().startswith('{"cells"')
    assert (course / "submitted" / "missing_notebook" / ASSIGNMENT / "notes.txt").exists()


def test_feedback_and_export(course):
    course, _ = course
    if _total(course, "full") < 100:  # the hand-graded answer, if the test above did not run
        _grade_by_hand(course, "full", WRITTEN, 15)
    run(["-m", "nbgrader", "generate_feedback", ASSIGNMENT], cwd=course)
    feedback = course / "feedback" / "full" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert "100" in feedback.read_text(encoding="utf-8")
    run(["-m", "nbgrader", "export"], cwd=course)
    rows = (course / "grades.csv").read_text().splitlines()
    header = rows[0].split(",")
    full = dict(zip(header, next(r for r in rows if ",full," in r).split(",")))
    assert (full["score"], full["max_score"]) == ("100.0", "100.0")


def test_feedback_never_reveals_hidden_tests_or_expected_values(course, root):
    course, _ = course
    run(["-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--force"], cwd=course)
    page = (course / "feedback" / "wrong_tfidf" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    found = re.search(r"hidden test \d+ of \d+: tfidf\(", text)
    assert found and "gives a wrong result" in text, "the student sees which hidden case failed"
    assert "check_hidden" not in text and "BEGIN HIDDEN TESTS" not in text
    hidden_message = text[found.start():][:400]
    assert "expected" not in hidden_message.split("gives a wrong result")[1].split("Hint")[0]
    key_lines = [line for line in (root / "answer_keys" / f"{ASSIGNMENT}.key").read_text().splitlines() if len(line) > 20]
    assert not [line for line in key_lines if line in page]


def _auto_scores(course: Path, assignment: str = ASSIGNMENT) -> dict[tuple[str, str], float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {(sub.student_id, grade.name): grade.auto_score
                for sub in gb.find_assignment(assignment).submissions
                for notebook in sub.notebooks for grade in notebook.grades}


def _student_lines(report: str, but: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith("  ") and line.split()[0] != but]


def _verdict_rows(course: Path) -> tuple[int, int, int]:
    with sqlite3.connect(course / "gradebook.db") as db:
        return tuple(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("course_verdict", "course_case", "course_run"))


def test_the_gradebook_keeps_every_verdict_once_case_by_case(course, root):
    """One verdict per graded test cell of each recorded submission, one row per case where the cases ran, one
    run with its notes per submission; the wrong tfidf's failed hidden cases are those the key's cases fail."""
    from course_tools.authoring.answer_keys import load
    from course_tools.grading.verdicts import case_problems, outcomes_in_process

    course, _ = course
    key = load(ASSIGNMENT, course)
    verdicts, cases, runs = _verdict_rows(course)
    assert runs == 7 and verdicts == 7 * len(key)
    # cases ran for the five notebooks that were read (broken_json and missing_notebook ran nothing)
    assert cases == 5 * sum(len(entry["cases"]) for entry in key.values())

    from course_lib.vectors import counts

    namespace = dict(vars(counts))  # the wrong answer, defined where the reference lives
    exec(_answers(root)["tfidf"].replace("np.log((1 + n_docs) / (1 + df)) + 1", "np.log((1 + n_docs) / (1 + df))"),
         namespace)  # noqa: S102 - the test's own planted mistake
    entry = key["hidden_tfidf"]
    expected = [n for n, _ in case_problems(entry, outcomes_in_process(namespace["tfidf"], entry), True)]
    with sqlite3.connect(course / "gradebook.db") as db:
        failed = [n for (n,) in db.execute(
            "SELECT c.number FROM course_case c JOIN course_verdict v ON v.id = c.verdict_id "
            "JOIN grade g ON g.id = v.grade_id JOIN submitted_notebook n ON n.id = g.notebook_id "
            "JOIN submitted_assignment a ON a.id = n.assignment_id JOIN base_cell b ON b.id = g.cell_id "
            "WHERE a.student_id = 'wrong_tfidf' AND b.name = 'hidden_tfidf' AND c.problem IS NOT NULL ORDER BY 1")]
    assert expected and failed == expected


def test_grading_the_same_batch_twice_gives_the_same_gradebook(course):
    course, first = course
    before, rows = _auto_scores(course), _verdict_rows(course)
    submitted = sorted((p.relative_to(course), p.stat().st_size) for p in (course / "submitted").rglob("*"))
    again = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments"], cwd=course, check=False)
    assert _auto_scores(course) == before
    assert _verdict_rows(course) == rows, "the verdicts of a submission graded again replace its old ones"
    # the same report (but for "full", whose written answer another test graded by hand in between)
    assert _student_lines(again.stdout, but="full") == _student_lines(first.stdout, but="full")
    # nothing changed, so nothing was run again: the workers' results were recorded once more
    assert "7 unchanged since they were graded, 0 to grade" in again.stdout.splitlines()[0], again.stdout
    assert sorted((p.relative_to(course), p.stat().st_size) for p in (course / "submitted").rglob("*")) == submitted


@pytest.fixture(scope="module")
def class_report(course):
    """The class report of the batch (``tasks.py report``), made once the batch has been graded."""
    course, _ = course
    made = run(["-m", "course_tools", "report", ASSIGNMENT], cwd=course)
    return course, made, course / "reports" / ASSIGNMENT


def _nbgrader_view(course: Path) -> tuple[dict, dict]:
    """What nbgrader's own API says: ``student -> {cell: (score, max, waits for hand grading)}``, ``student -> total``."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        subs = gb.find_assignment(ASSIGNMENT).submissions
        return ({s.student_id: {g.name: (g.score, g.max_score, g.needs_manual_grade) for n in s.notebooks
                                for g in n.grades} for s in subs},
                {s.student_id: s.score - s.late_submission_penalty for s in subs})


@pytest.mark.parametrize("width", [1280, 400])
def test_the_class_report_shows_the_planted_mistakes_where_they_are(class_report, width):
    """Opened from disk in a real browser at a desktop's and a phone's width: no console error, nothing fetched,
    no page wider than the screen; each table and figure shows the batch's planted mistakes in their rows."""
    from report_browser import read_report

    course, _, folder = class_report
    seen = read_report(folder / "index.html", width)
    assert seen["errors"] == [] and seen["resources"] == [], "opens offline, with no error"
    assert seen["pageWidth"] <= seen["viewport"], "wide tables scroll in their own box"
    assert {f["layout"] for f in seen["figures"]} == {"wide" if width > 640 else "narrow"}
    assert len(seen["figures"]) == 2 and seen["smallestText"] >= 9, seen["smallestText"]  # labels readable
    grades, totals = _nbgrader_view(course)
    lost = {f: sum(cells[c][1] - cells[c][0] for cells in grades.values() for c in (f"test_{f}", f"hidden_{f}"))
            / len(grades) for f in FUNCTIONS}
    assert lost["tfidf"] == pytest.approx(4 * 25 / 7)  # blank, wrong_tfidf and the two notebooks not read
    functions = {row[0]: row for row in seen["tables"]["table-functions"]}
    for f in FUNCTIONS:
        assert float(functions[f][2]) == pytest.approx(lost[f], abs=0.005)
        drawn = seen["bars"][f"lost-{f}"]["width"] / seen["bars"][f"worth-{f}"]["width"]
        assert drawn == pytest.approx(lost[f] / POINTS[f], abs=0.02), f"{f}'s bar, as drawn"
    # the only function implemented and still wrong is wrong_tfidf's: its hidden cases, failed by 1 of the 4
    # submissions whose tfidf ran (full, wrong_tfidf, edited_tests, imports_answer); stubs are not counted
    cases = seen["tables"]["table-cases"]
    assert cases and {(row[0], row[3], row[4]) for row in cases} == {("tfidf", "1", "4")}
    assert all(row[2].startswith("tfidf(") and "expected" not in row[5] for row in cases)
    assert [(row[0], row[3]) for row in seen["tables"]["table-hints"]] == [("tfidf", "1")]
    notes = {row[0]: row[2] for row in seen["tables"]["table-notes"]}
    assert "not a readable notebook" in notes["broken_json"] and "is missing" in notes["missing_notebook"]
    waiting = sorted(s for s, cells in grades.items() if cells[WRITTEN][2])
    assert [row[3].split(", ") for row in seen["tables"]["table-pending"]] == [waiting]
    students = {row[0]: float(row[2]) for row in seen["tables"]["table-students"]}
    assert students == pytest.approx(totals)


def test_the_class_report_exports_csv_and_lms_grades(class_report):
    course, made, folder = class_report
    _, totals = _nbgrader_view(course)
    assert "canvas.csv" in made.stdout and "cases.csv" in made.stdout

    def read(name):
        with open(folder / name, newline="", encoding="utf-8-sig") as f:
            return list(csv.DictReader(f))
    canvas, moodle = read("canvas.csv"), read("moodle.csv")
    assert list(canvas[0])[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert {r["SIS User ID"]: float(r[ASSIGNMENT]) for r in canvas} == pytest.approx(totals)
    assert {r["Username"]: float(r[ASSIGNMENT]) for r in moodle} == pytest.approx(totals)
    cases = read("cases.csv")
    assert {r["function"] for r in cases} == {"tfidf"} and all(r["failed"] == "1" for r in cases)
    functions = {r["function"]: float(r["points"]) for r in read("functions.csv")}
    assert functions == dict(POINTS, **{"written answers": 15})


def _on_first_use_two_at_a_time(assignments: list[str], grade_one):
    """``assignment -> grade_one(assignment)``, all of them computed on the first call, two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    done = {}

    def get(assignment):
        if not done:
            with ThreadPoolExecutor(2) as pool:
                done.update(zip(assignments, pool.map(grade_one, assignments)))
        return done[assignment]
    return get


@pytest.fixture(scope="module")
def graded_with_experiments(tmp_path_factory, root):
    """``grade(assignment) -> (grading run, autograded notebook)``: a full-marks submission of each assignment
    graded with its experiments (the default). The courses are graded on the first call, two at a
    time (each grades one notebook, in its own process: ``--serial``), however many tests read them."""
    def grade_one(assignment):
        course = scratch_course(tmp_path_factory.mktemp(f"experiments_{assignment}"), root, assignment, env=tool_env())
        _submit(course, "full", _answers(root, assignment), assignment=assignment)
        graded = run(["-m", "course_tools", "grade", assignment, "--serial"], cwd=course)
        autograded = course / "autograded" / "full" / assignment / f"{assignment}.ipynb"
        return graded, nbformat.read(autograded, as_version=4)

    return _on_first_use_two_at_a_time(EXPERIMENTS, grade_one)


# The grader's experiment run, on two numpy assignments (one with stated results). Every problem set's experiment
# also runs, with the instructor's answers, where students run it (tests/test_student_path.py), which checks the
# same stated intervals; running all nine here as well would cost the suite minutes for no other claim.
EXPERIMENTS = [ASSIGNMENT, "ps03_rnn"]


@pytest.mark.parametrize("assignment", EXPERIMENTS)
def test_experiments_run_by_default_without_an_error_and_reach_the_feedback(graded_with_experiments, assignment):
    """Without --no-experiments the ungraded sections run too (in the sandbox), for the feedback:
    with the solution's answers every cell of the notebook runs without an error."""
    graded, autograded = graded_with_experiments(assignment)
    assert "85/100" in graded.stdout and "raised" not in graded.stdout, graded.stdout
    code = [c for c in autograded.cells if c.cell_type == "code"]
    errors = {i: o.get("evalue") for i, c in enumerate(code) for o in c.outputs if o.output_type == "error"}
    assert not errors, errors
    experiments = [c for c in code if not c.metadata.get("nbgrader")]
    assert experiments and all(c.outputs for c in experiments if "print(" in c.source)


@pytest.mark.parametrize("assignment", [a for a in EXPERIMENTS if a in stated_results.EXPERIMENTS])
def test_experiments_land_in_the_intervals_their_pages_state(graded_with_experiments, root, assignment):
    """Each experiment's page states the interval a correct answer lands in, measured over seeds of the reference
    answers (answer_keys/<assignment>.results.json, written by tasks.py measure; sync writes the page's text from it,
    which test_stated_results checks). The full-marks submission (the reference answers) graded in the sandbox,
    on this machine, prints values inside every interval."""
    release = nbformat.read(root / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    stated = stated_results.results_cells(release, assignment)
    assert stated and "intervals the course's tests check" in stated[0].source, "the release states the measured results"
    _graded, autograded = graded_with_experiments(assignment)
    assert stated_results.stated_result_problems(assignment, autograded, root) == []
    printed = "".join(o.get("text", "") for c in autograded.cells if c.cell_type == "code" and not c.metadata.get("nbgrader")
                      for o in c.outputs if o.output_type == "stream")
    assert "results: " in printed


def test_grading_refuses_without_a_sandbox_unless_asked(course, tmp_path):
    """Where bubblewrap cannot be had, grading says why and stops; --unsandboxed grades anyway."""
    import sys

    course, _ = course
    bare = tmp_path / "bin"  # a PATH with this Python and nothing else: no bwrap, no apt-get
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    refused = run(["-m", "course_tools", "grade", ASSIGNMENT], cwd=course, check=False, PATH=str(bare))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "grading refused" in refused.stderr and "bwrap" in refused.stderr and "--unsandboxed" in refused.stderr


def test_unsandboxed_grading_when_asked_gives_the_same_scores(tmp_path, root):
    """--unsandboxed: no isolation (a warning says so), the same probes and verdicts, the same scores."""
    shutil.copy(root / "nbgrader_config.py", tmp_path)
    for folder in ("solutions", "exercises", "answer_keys"):
        shutil.copytree(root / folder, tmp_path / folder)
    run(["-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], cwd=tmp_path)
    _submit(tmp_path, "full", _answers(root))
    _submit(tmp_path, "blank", {})
    graded = run(["-m", "course_tools", "grade", ASSIGNMENT, "--unsandboxed", "--no-experiments"], cwd=tmp_path)
    assert "WARNING: grading without a sandbox" in graded.stderr
    assert sum(_scores(tmp_path, "full").values()) == 85 and sum(_scores(tmp_path, "blank").values()) == 0


def test_gradebook_accepts_another_database_url(tmp_path, root):
    shutil.copy(root / "nbgrader_config.py", tmp_path)
    shutil.copytree(root / "solutions", tmp_path / "solutions")
    other = tmp_path / "elsewhere" / "class.db"
    other.parent.mkdir()
    run(["-m", "nbgrader", "generate_assignment", ASSIGNMENT], cwd=tmp_path,
        NBGRADER_DB_URL=f"sqlite:///{other}")
    assert not (tmp_path / "gradebook.db").exists()
    with Gradebook(f"sqlite:///{other}") as gb:
        assert gb.find_assignment(ASSIGNMENT).max_score == 100


LATER = ["ps02_word2vec", "ps03_rnn", "ps04_lstm", "ps05_attention", "ps06_transformer", "ps07_gpt", "ps08_bert",
         "ps09_fine_tuning"]
# One plausible mistake per assignment: (function, text of the answer, the mistaken text).
MISTAKES = {
    "ps02_word2vec": ("procrustes", "return u @ vt", "return vt.T @ u.T"),  # the inverse rotation
    "ps03_rnn": ("rnn_step", "h_prev @ U.T", "h_prev @ U"),  # the recurrent matrix not transposed
    "ps04_lstm": ("lstm_cell", "a_i, a_f, a_g, a_o = a.chunk", "a_f, a_i, a_g, a_o = a.chunk"),  # gates swapped
    "ps05_attention": ("general_attention", "keys @ weight.T", "keys @ weight"),  # q^T W^T k instead of q^T W k
    # no 1/sqrt(hs): the other parts' tests pass course_lib's attention, so only this function's points go
    "ps06_transformer": ("scaled_dot_product_attention", " / math.sqrt(query.shape[-1])", ""),
    # the mass before a sorted token counted with the token itself: the token that reaches p is dropped
    "ps07_gpt": ("top_p_filter", "before = ordered.cumsum(dim=-1) - ordered", "before = ordered.cumsum(dim=-1)"),
    # [MASK] and the random token swapped (10 % masked, 80 % kept): judged by counts, whatever the draws
    "ps08_bert": ("mlm_mask", "(fate < 0.8)", "(fate < 0.1)"),
    # Adam's first average not bias-corrected; the loop's tests step with PyTorch's AdamW, so they lose nothing
    "ps09_fine_tuning": ("adamw_step", "m_hat = m / (1 - beta1 ** step)", "m_hat = m"),
}


@pytest.fixture(scope="module")
def later_courses(tmp_path_factory, root):
    """``assignment -> (course, grading run)``: each later assignment released in a scratch course with a full,
    a blank and a one-mistake submission, graded in its own student edition (earlier answers revealed). The
    eight courses are graded on first use, two at a time, each in one process (``--serial``)."""
    def grade_one(assignment):
        course = tmp_path_factory.mktemp(assignment)
        shutil.copy(root / "nbgrader_config.py", course)
        shutil.copytree(root / "solutions", course / "solutions")
        shutil.copytree(root / "answer_keys", course / "answer_keys")
        run(["-m", "nbgrader", "generate_assignment", assignment], cwd=course)
        _submit(course, "full", _answers(root, assignment), assignment=assignment)
        _submit(course, "blank", {}, assignment=assignment)
        name, right, wrong = MISTAKES[assignment]
        answers = _answers(root, assignment)
        assert right in answers[name]
        _submit(course, "one_mistake", dict(answers, **{name: answers[name].replace(right, wrong)}),
                assignment=assignment)
        return course, run(["-m", "course_tools", "grade", assignment, "--no-experiments", "--serial"], cwd=course)

    return _on_first_use_two_at_a_time(LATER, grade_one)


@pytest.fixture(params=LATER)
def later_course(request, later_courses):
    """A later assignment, graded in its own student edition (earlier answers revealed)."""
    course, graded = later_courses(request.param)
    return request.param, course, graded


def test_later_assignment_grades_full_marks_and_zero(later_course, root):
    assignment, course, graded = later_course
    points, written = _cell_points(root, assignment), _written_cells(root, assignment)
    assert sum(points.values()) == 100 and sum(written.values()) == 15
    full, blank = _scores(course, "full", assignment), _scores(course, "blank", assignment)
    assert {k: v for k, v in full.items() if k not in written} == {k: v for k, v in points.items() if k not in written}, \
        "every autograded cell of the solution gets all its points"
    assert sum(blank.values()) == 0
    for grade_id, value in written.items():
        _grade_by_hand(course, "full", grade_id, value, assignment)
    assert _total(course, "full", assignment) == 100


def test_one_mistake_loses_exactly_that_functions_points(later_course, root):
    """The other functions' tests do not call the mistaken one, so nothing else is lost."""
    assignment, course, _ = later_course
    name = MISTAKES[assignment][0]
    points, written = _cell_points(root, assignment), _written_cells(root, assignment)
    scores = _scores(course, "one_mistake", assignment)
    assert scores[f"test_{name}"] == 0 and scores[f"hidden_{name}"] == 0, scores
    lost = points[f"test_{name}"] + points[f"hidden_{name}"]
    assert sum(scores.values()) == 100 - sum(written.values()) - lost, {k: v for k, v in scores.items() if v == 0}
