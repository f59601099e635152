"""Find the exercise functions in course_lib and the assignments they belong to.

An exercise function is a top-level function of a course_lib module (at any depth
of its subpackages) whose body contains nbgrader's markers ``### BEGIN SOLUTION`` /
``### END SOLUTION``. Its key is its dotted path below ``course_lib``, e.g.
``"vectors.counts.tfidf"``. It belongs to the assignment whose solution notebook
has an answer cell (nbgrader ``solution`` cell) tagged with metadata
``course_lib: "<key>"``.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import ROOT

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"  # nbgrader's own stub for Python


@dataclass(frozen=True)
class Exercise:
    module: str  # dotted path below course_lib, e.g. "vectors.counts"
    name: str  # e.g. "tfidf"
    path: Path  # the module's file
    start: int  # first line of the function (1-based, decorators included)
    end: int  # last line of the function

    @property
    def key(self) -> str:
        return f"{self.module}.{self.name}"

    def source(self) -> str:
        """The function's source, dedented, exactly as it stands in course_lib."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return textwrap.dedent("\n".join(lines[self.start - 1:self.end]))

    def solution_lines(self) -> list[str]:
        """The stripped lines between the markers: the answer itself."""
        inside, out = False, []
        for line in self.source().splitlines():
            if line.strip() == BEGIN:
                inside = True
            elif line.strip() == END:
                inside = False
            elif inside and line.strip():
                out.append(line.strip())
        return out


def library_dir(root: Path = ROOT) -> Path:
    return root / "course_lib"


def find_exercises(lib_dir: Path | None = None) -> dict[str, Exercise]:
    """All exercise functions of course_lib, keyed by ``"module.function"``.

    Raises ``ValueError`` for markers outside a top-level function or unbalanced markers.
    """
    lib_dir = lib_dir or library_dir()
    found = {}
    for path in sorted(lib_dir.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if BEGIN not in text:
            continue
        lines = text.splitlines()
        tree = ast.parse(text)
        covered = set()
        starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in tree.body]
        for node, start, next_start in zip(tree.body, starts, starts[1:] + [len(lines) + 1]):
            if not isinstance(node, ast.FunctionDef):
                continue
            # A function ends at its last statement for ast; its trailing ### END SOLUTION
            # comment comes after, so extend to the line before the next top-level statement.
            end = next_start - 1
            while end > node.end_lineno and (not lines[end - 1].strip() or not lines[end - 1].startswith((" ", "\t"))):
                end -= 1
            body = lines[start - 1:end]
            n_begin = sum(line.strip() == BEGIN for line in body)
            n_end = sum(line.strip() == END for line in body)
            if n_begin == 0:
                continue
            if n_begin != 1 or n_end != 1:
                raise ValueError(f"{path.relative_to(lib_dir)}: {node.name} must have exactly one {BEGIN} and one {END}")
            module = ".".join(path.relative_to(lib_dir).with_suffix("").parts)
            ex = Exercise(module, node.name, path, start, end)
            found[ex.key] = ex
            covered.update(range(start, end + 1))
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip() in (BEGIN, END) and number not in covered:
                raise ValueError(f"{path.relative_to(lib_dir)}:{number}: solution marker outside a top-level function")
    return found


def assignments(root: Path = ROOT) -> list[str]:
    """The assignment names, e.g. ``["ps01_counts"]``, in order."""
    return sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir() and p.name.startswith("ps"))


def solution_notebooks(assignment: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / "solutions" / assignment).glob("*.ipynb"))


def answer_cells(nb) -> list[tuple[int, str]]:
    """``(cell index, "module.function")`` of every answer cell tied to course_lib."""
    out = []
    for i, cell in enumerate(nb.cells):
        key = cell.metadata.get("course_lib")
        if key and cell.metadata.get("nbgrader", {}).get("solution"):
            out.append((i, key))
    return out


def owners(root: Path = ROOT) -> dict[str, str]:
    """Map each exercise key to the assignment whose notebook contains it."""
    owner = {}
    for assignment in assignments(root):
        for path in solution_notebooks(assignment, root):
            for _i, key in answer_cells(nbformat.read(path, as_version=4)):
                if key in owner and owner[key] != assignment:
                    raise ValueError(f"{key} is an exercise of both {owner[key]} and {assignment}")
                owner[key] = assignment
    return owner


def set_number(assignment: str) -> str:
    """``"ps03_rnn"`` -> ``"3"``."""
    match = re.match(r"ps0*(\d+)", assignment)
    return match.group(1) if match else assignment
