"""Grade a whole class: stage every submission, autograde in sandboxes, report in plain words.

``python3 tasks.py grade ps01_counts [--no-experiments] [--unsandboxed]`` (from the course root):

1. refuses, saying why, when no sandbox can be had here (:func:`course_tools.sandbox.unavailable`),
   unless ``--unsandboxed`` asks to grade without isolation;
2. stages each ``submitted/<student>/<assignment>/`` (:mod:`course_tools.staging`) into
   ``_grading/<assignment>/staged``: only notebooks the grader wrote reach nbgrader;
3. runs the real ``nbgrader autograde <assignment> --force`` on the staged folder, whose
   execute step runs each notebook in its sandbox and decides the verdicts outside it
   (:mod:`course_tools.grading`); nbgrader's full log goes to ``_grading/<assignment>/autograde.log``;
4. prints each student's score from the gradebook with the notes on their submission,
   and the points still waiting for the instructor (written answers graded by hand).

Nothing in ``submitted/`` is changed. ``--no-experiments`` skips the ungraded experiment
sections (faster; the feedback then lacks their outputs). Grading the same batch twice
gives the same gradebook. The exit status is 0 when every submission was graded without
a note that needs attention, 1 otherwise, 2 when grading was refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import tool_env
from .grading import grading_dir
from .sandbox import unavailable
from .staging import save_record, stage


def grade(assignment: str, course: Path | None = None, experiments: bool = True, sandboxed: bool = True) -> int:
    course = Path(course or Path.cwd())
    releases = sorted((course / "exercises" / assignment).glob("*.ipynb"))
    if not releases or not (course / "answer_keys" / f"{assignment}.key").exists():
        print(f"no release or answer key for {assignment}: is this the course root? "
              f"(exercises/{assignment}/, answer_keys/{assignment}.key)", file=sys.stderr)
        return 2
    if sandboxed:
        reason = unavailable()
        if reason:
            print(f"grading refused: {reason}.\nTo grade without a sandbox (submissions then run with your "
                  f"rights and can read and change your files), add --unsandboxed.", file=sys.stderr)
            return 2
    else:
        print("WARNING: grading without a sandbox: every submission runs with your rights.", file=sys.stderr)
    work = grading_dir(course, assignment)
    shutil.rmtree(work / "staged", ignore_errors=True)
    shutil.rmtree(work / "records", ignore_errors=True)
    shutil.rmtree(work / "notes", ignore_errors=True)
    folders = sorted(p for p in (course / "submitted").glob(f"*/{assignment}")
                     if p.is_dir() or p.is_symlink())
    records = {}
    for folder in folders:
        student = folder.parent.name
        record = stage(folder, releases[0], work / "staged" / student / assignment)
        save_record(record, work / "records" / f"{student}.json")
        records[student] = record
    log = work / "autograde.log"
    env = dict(tool_env(), COURSE_GRADE_EXPERIMENTS="1" if experiments else "0",
               COURSE_GRADE_UNSANDBOXED="0" if sandboxed else "1")
    staged = (work / "staged").relative_to(course).as_posix()
    with open(log, "w", encoding="utf-8") as out:
        result = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force",
                                 f"--CourseDirectory.submitted_directory={staged}"],
                                cwd=course, stdout=out, stderr=subprocess.STDOUT, env=env)
    scores = _scores(course, assignment)
    print(f"{assignment}: {len(folders)} submission(s); nbgrader's log: {log.relative_to(course)}")
    attention = False
    for student in sorted(records):
        score = scores.get(student)
        shown = f"{score[0]:g}/{score[1]:g}" if score else "not graded"
        notes = _notes(work, student) or records[student].notes
        if records[student].refused and not any(n.startswith("not graded") for n in notes):
            notes = [f"not graded: {records[student].refused}"] + notes
        if score and score[2]:
            notes = notes + [f"{score[2]:g} points to grade by hand"]
        attention |= bool(records[student].refused) or score is None
        print(f"  {student:<20} {shown:>12}  {'; '.join(notes)}")
    if result.returncode != 0:
        print(f"nbgrader autograde exited with status {result.returncode}; see {log}", file=sys.stderr)
        return 1
    return 1 if attention else 0


def _notes(work: Path, student: str) -> list[str]:
    try:
        notes = json.loads((work / "notes" / f"{student}.json").read_text())
        return [str(n) for n in notes] if isinstance(notes, list) else []
    except (OSError, ValueError):
        return []


def _scores(course: Path, assignment: str) -> dict[str, tuple[float, float, float]]:
    """``student -> (score, max score, points waiting to be graded by hand)`` for the graded submissions."""
    from nbgrader.api import Gradebook, MissingEntry

    url = os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
    out = {}
    with Gradebook(url) as gb:
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            return out
        for sub in submissions:
            waiting = sum(grade.max_score for notebook in sub.notebooks for grade in notebook.grades
                          if grade.needs_manual_grade)
            out[sub.student_id] = (sub.score, sub.max_score, waiting)
    return out
