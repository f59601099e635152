"""Write the student edition of course_lib.

The student edition is course_lib with the body of every exercise function
that is not yet revealed replaced by nbgrader's stub (``raise
NotImplementedError()``), and the solution markers of revealed ones removed.
Edition N reveals the exercises of the first N assignments: students of
assignment N+1 install edition N, and so does the grader.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from . import ROOT
from .exercises import BEGIN, END, STUB, assignments, find_exercises, library_dir, owners

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "course-lib"
version = "{version}"
description = "Student edition {number} of course_lib (exercises of the first {number} assignments revealed)"
requires-python = ">=3.11"
dependencies = {dependencies}

[tool.setuptools.packages.find]
include = ["course_lib", "course_lib.*"]
"""


def transform(text: str, reveal) -> str:
    """Rewrite one module's text: stub the bodies between markers unless ``reveal(line_number)``.

    ``reveal`` is called with the 1-based line number of a ``### BEGIN SOLUTION``
    marker and says whether that answer stays.
    """
    out, skipping = [], False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            skipping = not reveal(number)
            if skipping:
                out += [indent + stub_line + "\n" for stub_line in STUB.splitlines()]
            continue
        if stripped == END:
            skipping = False
            continue
        if not skipping:
            out.append(line)
    return "".join(out)


def revealed_keys(number: int, root: Path = ROOT) -> set[str]:
    """Exercise keys owned by the first ``number`` assignments."""
    first = set(assignments(root)[:number])
    return {key for key, assignment in owners(root).items() if assignment in first}


def edition_number(assignment: str, root: Path = ROOT) -> int:
    """The edition that students and the grader of ``assignment`` use: all earlier ones revealed."""
    names = assignments(root)
    if assignment not in names:
        raise ValueError(f"unknown assignment {assignment!r}; the assignments are {names}")
    return names.index(assignment)


def write_edition(out_dir: Path, number: int, root: Path = ROOT) -> Path:
    """Write edition ``number`` as an installable project (``pip install out_dir``).

    Returns ``out_dir``. Anything already at ``out_dir`` is replaced.
    """
    import tomllib

    lib = library_dir(root)
    exercises = find_exercises(lib)
    reveal = revealed_keys(number, root)
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    target = out_dir / "course_lib"
    target.mkdir(parents=True)
    for path in sorted(lib.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        here = [ex for ex in exercises.values() if ex.path == path]

        def keep(line_number, here=here):
            owner = next(ex for ex in here if ex.start <= line_number <= ex.end)
            return owner.key in reveal

        dest = target / path.relative_to(lib)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(transform(text, keep) if here else text, encoding="utf-8")
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = "[" + ", ".join(f'"{d}"' for d in project["dependencies"]) + "]"
    version = re.sub(r"[^0-9.]", "", project["version"]) + f"+student{number}"
    (out_dir / "pyproject.toml").write_text(
        PYPROJECT.format(version=version, number=number, dependencies=deps), encoding="utf-8")
    return out_dir
