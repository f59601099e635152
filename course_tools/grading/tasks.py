"""The unit of grading work: one task per (student, assignment), its result, and what makes it up to date.

A :class:`Task` carries everything a worker needs that is particular to one submission:
the staged notebook's text (:mod:`course_tools.grading.staging`), its staging record and the
options. What is common to the class (the answer key, the release, the student edition
of course_lib) the worker takes from its own copy of the course, after checking that it
is the coordinator's (:func:`course_tools.grading.worker.course_fingerprint`): a worker on
another machine at another commit refuses the task, saying so, instead of grading with other keys.

:func:`course_tools.grading.worker.run_task` is what a worker runs: the sandboxed grading of
:func:`course_tools.grading.autograde.grade_notebook`, which returns the notebook with its
outputs and verdicts; no gradebook is touched on a worker. The coordinator keeps each
:class:`Result` in ``_grading/<assignment>/results/<student>.json`` and records them all
with one ``nbgrader autograde`` run (:mod:`course_tools.grading.batch`). A result whose
:attr:`Task.fingerprint` still matches is reused by the next batch: re-running grades only
what changed (a new submission, a new key or edition, other options).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat



class CourseMismatch(RuntimeError):
    """A worker's course files (answer key, release, student edition) are not the coordinator's."""


@dataclass(frozen=True)
class Task:
    """The grading of one staged submission."""

    assignment: str
    student: str
    notebook: str  # the staged notebook, as nbformat JSON text
    record: dict  # its staging record (course_tools.grading.staging.Staged as a dict)
    experiments: bool
    sandboxed: bool
    limits: dict  # course_tools.grading.sandbox.Limits as a dict
    course: str  # course_fingerprint() on the coordinator

    @property
    def fingerprint(self) -> str:
        """What decides the result: the same fingerprint, the same grades."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


@dataclass
class Result:
    """What a worker sends back: the graded notebook (outputs and verdicts), notes, time, where; whether a
    wall-clock limit stopped something (``wall_timeout``), the machine's load average when it ended
    (``load``), and whether it was graded alone (``alone``: by itself, on a machine not busier than its
    cores), which the coordinator sets; every test cell's verdict record (``verdicts``,
    :mod:`course_tools.grading.verdict_store`) and the result's ``format``. Fields added later have
    defaults, so older result files still load (and are graded again: :data:`RESULT_FORMAT`)."""

    student: str
    fingerprint: str
    notebook: str
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    worker: str = ""
    wall_timeout: bool = False
    load: float = 0.0
    alone: bool = False
    verdicts: list = field(default_factory=list)
    format: int = 1


RESULT_FORMAT = 2
"""The format of a :class:`Result` this course_tools writes (2: it carries ``verdicts``, each test cell's
record for the gradebook); a saved result of another format is graded again, never recorded."""


def save_result(result: Result, folder: Path) -> None:
    """Write ``result`` to ``folder/<student>.json`` atomically (a crash leaves the old file or the new)."""
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".{result.student}.json.tmp"
    scratch.write_text(json.dumps(asdict(result)), encoding="utf-8")
    os.replace(scratch, folder / f"{result.student}.json")


def load_result(path: Path) -> Result | None:
    """The result saved at ``path``; None when there is none or it cannot be read."""
    try:
        return Result(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _same_cell(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same cell: same type and nbgrader id, and the same source unless
    the cell is locked (nbgrader restores locked cells, the hidden tests with them, before grading)."""
    meta_a, meta_b = a.metadata.get("nbgrader", {}), b.metadata.get("nbgrader", {})
    return (a.cell_type == b.cell_type and meta_a.get("grade_id") == meta_b.get("grade_id")
            and (bool(meta_a.get("locked")) or a.source == b.source))


def replay(nb, result: Result) -> bool:
    """Copy a worker's outputs and execution counts into ``nb`` (nbgrader's copy of the same staged
    notebook). False, changing nothing, when the two notebooks' cells differ."""
    graded = nbformat.reads(result.notebook, as_version=4)
    if len(graded.cells) != len(nb.cells) or not all(_same_cell(a, b) for a, b in zip(graded.cells, nb.cells)):
        return False
    for target, source in zip(nb.cells, graded.cells):
        if target.cell_type == "code":
            target.outputs = source.outputs
            target.execution_count = source.execution_count
    return True
