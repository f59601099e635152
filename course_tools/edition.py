"""Write the student edition of course_lib.

The student edition is course_lib with the body of every exercise function
that is not yet revealed replaced by nbgrader's stub (``raise
NotImplementedError()``), and the solution markers of revealed ones removed.
Edition N reveals the exercises of the first N assignments: students of
assignment N+1 install edition N, and so does the grader.
"""

from __future__ import annotations

import json
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
{package_data}"""


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


def edition_version(number: int, root: Path = ROOT) -> str:
    """The version of edition ``number``: course_lib's, with the local label ``+student<number>``."""
    import tomllib

    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return re.sub(r"[^0-9.]", "", project["version"]) + f"+student{number}"


def wheel_name(number: int, root: Path = ROOT) -> str:
    """The file name of the wheel of edition ``number`` (what ``pip wheel`` of the edition writes)."""
    return f"course_lib-{edition_version(number, root)}-py3-none-any.whl"


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
    for path in sorted(lib.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        dest = target / path.relative_to(lib)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix != ".py":  # package data, such as the book's figure style
            shutil.copyfile(path, dest)
            continue
        text = path.read_text(encoding="utf-8")
        here = [ex for ex in exercises.values() if ex.path == path]

        def keep(line_number, here=here):
            owner = next(ex for ex in here if ex.start <= line_number <= ex.end)
            return owner.key in reveal

        dest.write_text(transform(text, keep) if here else text, encoding="utf-8")
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    deps = "[" + ", ".join(f'"{d}"' for d in pyproject["project"]["dependencies"]) + "]"
    # course_lib's package data (the figure style) goes into the edition's wheel too
    data = {package: patterns for package, patterns in
            pyproject.get("tool", {}).get("setuptools", {}).get("package-data", {}).items()
            if package.split(".")[0] == "course_lib"}
    package_data = "".join(f"{package} = {json.dumps(patterns)}\n" for package, patterns in data.items())
    if package_data:
        package_data = "\n[tool.setuptools.package-data]\n" + package_data
    (out_dir / "pyproject.toml").write_text(
        PYPROJECT.format(version=edition_version(number, root), number=number, dependencies=deps,
                         package_data=package_data), encoding="utf-8")
    return out_dir
