"""Produce ``exercises/`` from ``solutions/`` with ``nbgrader generate_assignment``.

``exercises/`` is never edited by hand: :func:`release` regenerates it, and
:func:`drift` regenerates it in a scratch folder and lists every difference
from the committed copy.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course_tools import ROOT, tool_env
from course_tools.exercises import assignments


def generate(assignment: str, course_root: Path) -> None:
    """Run ``nbgrader generate_assignment`` in ``course_root`` (which holds nbgrader_config.py)."""
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"],
        cwd=course_root, capture_output=True, text=True, env=tool_env())
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result.stdout}{result.stderr}")


def release(names: list[str] | None = None, root: Path = ROOT) -> list[Path]:
    """Regenerate ``exercises/<assignment>`` for the given (default: all) assignments.

    Generation happens in a scratch course folder with its own gradebook, so the
    instructor's ``gradebook.db`` is not touched; the result replaces the old
    release folder whole (no stale files survive).
    """
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        fresh = regenerate(Path(scratch), names, root)
        for name in names or assignments(root):
            target = root / "exercises" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(fresh / name, target)
            out.append(target)
    return out


def regenerate(scratch: Path, names: list[str] | None = None, root: Path = ROOT) -> Path:
    """Generate the release of ``names`` in ``scratch``; return ``scratch/exercises``."""
    shutil.copy(root / "nbgrader_config.py", scratch / "nbgrader_config.py")
    for name in names or assignments(root):
        shutil.copytree(root / "solutions" / name, scratch / "solutions" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        generate(name, scratch)
    return scratch / "exercises"


def drift(root: Path = ROOT) -> list[str]:
    """Differences between the committed ``exercises/`` and a fresh release; empty if none."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = regenerate(Path(scratch), None, root)
        return _compare(fresh, root / "exercises", Path("exercises"))


def _compare(fresh: Path, committed: Path, label: Path) -> list[str]:
    if not committed.exists():
        return [f"{label} is missing; run `python3 tasks.py release`"]
    cmp = filecmp.dircmp(fresh, committed, ignore=["__pycache__", ".ipynb_checkpoints"])
    problems = [f"{label / n} is missing" for n in cmp.left_only]
    problems += [f"{label / n} is not produced by nbgrader (stale or hand-made)" for n in cmp.right_only]
    problems += [f"{label / n} differs from what nbgrader generates" for n in cmp.diff_files]
    _match, mismatch, errors = filecmp.cmpfiles(fresh, committed, cmp.common_files, shallow=False)
    problems += [f"{label / n} differs from what nbgrader generates" for n in mismatch if n not in cmp.diff_files]
    problems += [f"{label / n} could not be compared" for n in errors]
    for sub in cmp.common_dirs:
        problems += _compare(fresh / sub, committed / sub, label / sub)
    return problems
