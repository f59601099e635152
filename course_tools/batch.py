"""Grade a whole class: check every submission, autograde, and report in plain words.

``python -m course_tools grade ps01_counts`` (run from the course root):

1. checks each ``submitted/<student>/<assignment>/`` for missing notebooks and
   broken JSON and names each problem;
2. runs the real ``nbgrader autograde <assignment>``, which grades every
   readable submission and carries on past broken ones (its full log goes to
   ``autograded/<assignment>.log``);
3. prints each student's score from the gradebook beside any problem found, and the
   points still waiting for the instructor (written answers graded by hand).

Nothing in ``submitted/`` is changed or deleted. The exit status is 0 when every
submission was graded and 1 when some need the instructor's attention.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import tool_env
from .grading import check_submission


def _assignment_notebooks(course: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))


def grade(assignment: str, course: Path | None = None) -> int:
    course = Path(course or Path.cwd())
    notebooks = _assignment_notebooks(course, assignment)
    if not notebooks:
        print(f"no notebooks in solutions/{assignment}: is this the course root?", file=sys.stderr)
        return 2
    folders = sorted(p for p in (course / "submitted").glob(f"*/{assignment}") if p.is_dir())
    problems = {f.parent.name: check_submission(f, notebooks) for f in folders}
    log = course / "autograded" / f"{assignment}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        result = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment],
                                cwd=course, stdout=out, stderr=subprocess.STDOUT, env=tool_env())
    scores = _scores(course, assignment)
    print(f"{assignment}: {len(folders)} submission(s); nbgrader's log: {log.relative_to(course)}")
    for student in sorted(problems):
        score = scores.get(student)
        shown = f"{score[0]:g}/{score[1]:g}" if score and not problems[student] else "not graded"
        waiting = [f"{score[2]:g} points to grade by hand"] if score and score[2] and not problems[student] else []
        note = "; ".join(problems[student] + waiting)
        print(f"  {student:<20} {shown:>12}  {note}")
    troubled = [s for s, p in problems.items() if p]
    if result.returncode != 0 and not troubled:
        print(f"nbgrader autograde exited with status {result.returncode}; see {log}", file=sys.stderr)
        return 1
    return 1 if troubled else 0


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

