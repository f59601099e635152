"""What a grading worker runs for one task: check that its course is the coordinator's, then grade.

:func:`run_task` grades one :class:`~course_tools.grading.tasks.Task` with
:func:`course_tools.grading.autograde.grade_notebook` in this process's copy of the course, after
:func:`course_fingerprint` shows that copy (answer key, release, student edition) is the
coordinator's. Kept apart from :mod:`course_tools.grading.tasks` (the tasks and results as data,
which :mod:`course_tools.grading.autograde` reads back) so that no two grading modules import each other.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import nbformat

from course_tools import ROOT
from .autograde import edition_dir, grade_notebook
from .tasks import RESULT_FORMAT, CourseMismatch, Result, Task
from .sandbox import Limits
from .staging import Staged


def course_fingerprint(assignment: str, root: Path = ROOT) -> str:
    """A digest of what grades ``assignment``: the answer key and release notebooks of the course at
    ``root`` and the student edition of this installation's course_lib, which runs the submissions."""
    digest = hashlib.sha256()
    paths = [root / "answer_keys" / f"{assignment}.key", *sorted((root / "exercises" / assignment).glob("*.ipynb"))]
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update(edition_dir(assignment).name.encode())  # its name carries its content's hash
    return digest.hexdigest()


def run_task(task: Task) -> Result:
    """Grade one submission in this process's course (a Dask worker's, or the coordinator's)."""
    started = time.time()
    mine = course_fingerprint(task.assignment, ROOT)
    if mine != task.course:
        raise CourseMismatch(f"the course at {ROOT} on {socket.gethostname()} grades {task.assignment} with other "
                             f"files than the coordinator's (answer key, release or course_lib differ): "
                             f"check out the same commit there and restart the worker")
    nb = nbformat.reads(task.notebook, as_version=4)
    notes = grade_notebook(nb, task.assignment, task.student, ROOT, task.experiments, task.sandboxed,
                           Limits(**task.limits), Staged(**task.record))
    nb.metadata.pop("grading_seconds", None)
    wall = bool(nb.metadata.pop("grading_wall_timeout", False))
    records = nb.metadata.pop("course_verdicts", [])
    return Result(task.student, task.fingerprint, nbformat.writes(nb), notes, round(time.time() - started, 2),
                  f"{socket.gethostname()}:{os.getpid()}", wall_timeout=wall, load=round(os.getloadavg()[0], 2),
                  verdicts=records, format=RESULT_FORMAT)
