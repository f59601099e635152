"""Write the student edition of course_lib.

The student edition is course_lib with the body of every exercise function
that is not yet revealed replaced by a stub, and the solution markers of revealed
ones removed. The stub is nbgrader's ``# YOUR CODE HERE`` line followed by
``raise NotRevealed(...)`` (:class:`course_lib.unrevealed.NotRevealed`, a
``NotImplementedError``) whose message names the function, its problem set, the
edition and the wheel of the first edition that reveals it (:func:`stub`).
Edition N reveals the exercises of the first N assignments: students of
assignment N+1 install edition N, and so does the grader.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

from course_tools import ROOT
from course_tools.edition_names import edition_number, edition_version, wheel_name  # noqa: F401 (the names live there)
from course_tools.exercises import BEGIN, END, STUB, Exercise, assignments, find_exercises, library_dir, owners

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


IMPORT = "from course_lib.unrevealed import NotRevealed  # what the bodies left empty raise\n"


def transform(text: str, reveal, stub=lambda line_number: STUB) -> str:
    """Rewrite one module's text: stub the bodies between markers unless ``reveal(line_number)``.

    ``reveal`` is called with the 1-based line number of a ``### BEGIN SOLUTION``
    marker and says whether that answer stays; ``stub`` (same argument) gives the
    lines that replace it (by default nbgrader's ``raise NotImplementedError()``).
    """
    out, skipping = [], False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            skipping = not reveal(number)
            if skipping:
                out += [indent + stub_line + "\n" for stub_line in stub(number).splitlines()]
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


def stub(exercise: Exercise, number: int, owner: str, revealed_in: int, wheel: str | None = None) -> str:
    """The body of ``exercise`` in edition ``number``, which does not reveal it.

    nbgrader's ``# YOUR CODE HERE``, then ``raise NotRevealed(...)`` with the function's name,
    its problem set ``owner``, the edition, ``revealed_in`` (the first edition that reveals it)
    and that edition's ``wheel`` URL when known.
    """
    call = (f"raise NotRevealed({json.dumps(exercise.name)}, {json.dumps(owner)}, edition={number}, "
            f"module=__name__, revealed_in={revealed_in}")
    lines = ["# YOUR CODE HERE", call + ("," if wheel else ")")]
    if wheel:
        lines.append(" " * len("raise NotRevealed(") + f"wheel={json.dumps(wheel)})")
    return "\n".join(lines)


def with_import(text: str) -> str:
    """``text`` (a module) with :data:`IMPORT` after its docstring and ``__future__`` imports."""
    body = ast.parse(text).body
    at = 0
    for node in body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        if (is_doc and node is body[0]) or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            at = node.end_lineno
        else:
            break
    lines = text.splitlines(keepends=True)
    return "".join(lines[:at]) + ("\n" if at else "") + IMPORT + "".join(lines[at:])


def write_edition(out_dir: Path, number: int, root: Path = ROOT) -> Path:
    """Write edition ``number`` as an installable project (``pip install out_dir``).

    Returns ``out_dir``. Anything already at ``out_dir`` is replaced.
    """
    import tomllib

    from course_tools.site_config import PublicTreeError, read_site

    lib = library_dir(root)
    exercises = find_exercises(lib)
    reveal = revealed_keys(number, root)
    names, owner = assignments(root), owners(root)
    try:
        site = read_site(root)
    except (OSError, PublicTreeError):  # no book URL: the stubs name no wheel
        site = None
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

        def exercise_at(line_number, here=here):
            return next(ex for ex in here if ex.start <= line_number <= ex.end)

        def keep(line_number, exercise_at=exercise_at):
            return exercise_at(line_number).key in reveal

        def stub_at(line_number, exercise_at=exercise_at):
            exercise = exercise_at(line_number)
            revealed_in = names.index(owner[exercise.key]) + 1
            wheel = site.wheel_url(revealed_in, root) if site else None
            return stub(exercise, number, owner[exercise.key], revealed_in, wheel)

        if here and any(ex.key not in reveal for ex in here):
            text = with_import(transform(text, keep, stub_at))
        elif here:
            text = transform(text, keep)
        dest.write_text(text, encoding="utf-8")
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
