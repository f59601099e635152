"""The self-study page's scoring table, written from the problem sets' nbgrader points.

``tasks.py sync`` writes, between two marker comments of ``self_study.md``, a table with one row
per problem set: the points of each function (its visible and hidden tests) and of the written
question graded by hand, and the total, all read from the graded cells of ``solutions/``
(:func:`points`). ``sync --check`` and ``tasks.py check`` fail when the page and the notebooks
disagree, so the page never states a score that the grader does not give.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.exercises import assignments, solution_notebooks

PAGE = "self_study.md"
BEGIN = "<!-- scoring: written by tasks.py sync from the problem sets' nbgrader points; do not edit -->"
END = "<!-- end of scoring -->"


@dataclass(frozen=True)
class SetPoints:
    """The points of one problem set: per function ``(visible, hidden)``, the written questions', its title."""

    title: str
    functions: dict[str, tuple[int, int]]
    written: int

    @property
    def total(self) -> int:
        return sum(v + h for v, h in self.functions.values()) + self.written


def points(assignment: str, root: Path = ROOT) -> SetPoints:
    """The points of ``assignment``'s graded cells: ``test_<name>`` (visible), ``hidden_<name>``, written answers."""
    path, = solution_notebooks(assignment, root)
    nb = nbformat.read(path, as_version=4)
    functions: dict[str, list[int]] = {}
    written = 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade"):
            continue
        grade_id, value = meta["grade_id"], int(meta.get("points", 0))
        kind, _, name = grade_id.partition("_")
        if cell.cell_type == "markdown":
            written += value
        elif kind in ("test", "hidden"):
            functions.setdefault(name, [0, 0])[kind == "hidden"] += value
        else:
            raise ValueError(f"{path.name}: graded cell {grade_id!r} is neither test_<function>, hidden_<function> "
                             f"nor a written answer")
    heading = next((c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("# ")),
                   f"# {assignment}")
    title = re.sub(r"^#\s*", "", heading)
    return SetPoints(title, {name: (v, h) for name, (v, h) in functions.items()}, written)


def scoring_text(root: Path = ROOT) -> str:
    """The scoring section's generated part: a sentence and the table."""
    sets = [points(a, root) for a in assignments(root)]
    visible = sum(v for s in sets for v, _ in s.functions.values())
    hidden = sum(h for s in sets for _, h in s.functions.values())
    share = round(100 * visible / (visible + hidden)) if visible + hidden else 0
    lines = [
        "When a problem set is graded, each function earns the points of its visible tests and of its hidden "
        f"tests (over all problem sets, {share} % of a function's points come from its visible tests and "
        f"{100 - share} % from its hidden ones); the written question is graded by hand. Each problem set's "
        "page shows the same points in its table:",
        "",
        "| problem set | points per function (visible + hidden) | written question (by hand) | total |",
        "|---|---|---|---|",
    ]
    for s in sets:
        functions = ", ".join(f"`{name}` {v + h} ({v} + {h})" for name, (v, h) in s.functions.items())
        lines.append(f"| {s.title} | {functions} | {s.written} | {s.total} |")
    return "\n".join(lines)


def sync_scoring(check: bool = False, root: Path = ROOT) -> list[str]:
    """Write :func:`scoring_text` between the markers of ``self_study.md``; return what changed (or would)."""
    page = root / PAGE
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return [f"{PAGE}: the scoring markers are missing ({BEGIN} ... {END})"]
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{scoring_text(root)}\n{END}{tail}"
    if new == text:
        return []
    if not check:
        page.write_text(new, encoding="utf-8")
    return [f"{PAGE}: the scoring table differs from the problem sets' points"]
