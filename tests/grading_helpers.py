"""Helpers shared by the grading tests and the grading benchmarks: a scratch course and submissions
made from the release the way students make them."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat


def answers(root: Path, assignment: str = "ps01_counts") -> dict[str, str]:
    """``grade_id -> source`` of the answer cells of ``assignment``'s solution notebook."""
    nb = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def submit(course: Path, student: str, answers: dict[str, str], edit=None, assignment: str = "ps01_counts") -> None:
    """Write a submission: the released notebook with ``answers`` typed into its answer cells."""
    notebook = f"{assignment}.ipynb"
    nb = nbformat.read(course / "exercises" / assignment / notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    if edit:
        edit(nb)
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / notebook)


_RELEASED: dict[str, Path] = {}  # assignment -> a course folder in which real nbgrader released it, this session
_RELEASING = threading.Lock()


def _released(root: Path, assignment: str, env: dict | None) -> Path:
    """A course folder with ``assignment`` released by ``nbgrader generate_assignment --force`` (once per session
    and assignment; the grading tests copy it instead of releasing the same files again)."""
    with _RELEASING:
        if assignment not in _RELEASED:
            folder = Path(tempfile.mkdtemp(prefix=f"released_{assignment}_")) / "course"
            atexit.register(shutil.rmtree, folder.parent, True)
            _new_course(folder, root, assignment, env)
            _RELEASED[assignment] = folder
        return _RELEASED[assignment]


def _new_course(course: Path, root: Path, assignment: str, env: dict | None) -> None:
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "nbgrader_config.py", course)
    for folder in ("solutions", "exercises", "answer_keys"):
        shutil.copytree(root / folder, course / folder)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course,
                   check=True, capture_output=True, env=env)


def scratch_course(course: Path, root: Path, assignment: str, env: dict | None = None) -> Path:
    """Make ``course`` an instructor's course folder: the repository's nbgrader_config.py, solutions/,
    exercises/ and answer keys, with ``assignment`` released by real nbgrader (``--force``, as the README says).

    The release is made once per session and assignment and copied (its SQLite gradebook included); a course
    whose gradebook is elsewhere (``NBGRADER_DB_URL`` in ``env``) is released in place."""
    if env and env.get("NBGRADER_DB_URL"):
        _new_course(course, root, assignment, env)
    else:
        shutil.copytree(_released(root, assignment, env), course, dirs_exist_ok=True)
    return course


def edition_namespace(edition: str, setup: list[str]) -> dict:
    """In a forked child: make ``edition`` (a student edition's folder) this process's course_lib and run the
    release's ``setup`` cells in a fresh namespace, as the probe runner's parent does; return the namespace."""
    import builtins
    import sys

    sys.path.insert(0, edition)
    for module in [m for m in sys.modules if m == "course_lib" or m.startswith("course_lib.")]:
        del sys.modules[module]
    namespace = {"__builtins__": builtins, "__name__": "__main__"}
    for source in setup:
        exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102 - the release's own locked cells
    return namespace
