"""course_lib by part of the course: who may import whom, and modules small enough to read.

The parts, in the order the course teaches them: ``text`` < ``vectors`` (chapters 1-2)
< ``recurrent`` (3-4) < ``attention`` (5) < ``transformer`` (6) < ``gpt`` (7) < ``bert`` (8). A part imports the
shared top level and earlier parts only; the shared top level imports no part. The
rule is read from the source (``import`` statements, also inside functions), so it
holds in every module, imported or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from course_tools import ROOT

LIB = ROOT / "course_lib"
PARTS = ["text", "vectors", "recurrent", "attention", "transformer", "gpt", "bert"]
MAX_LINES = 350


def _modules() -> dict[str, Path]:
    """Dotted name below course_lib -> file, for every module of the library."""
    out = {}
    for path in sorted(LIB.rglob("*.py")):
        parts = path.relative_to(LIB).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"] = path
    return out


def _imported(path: Path, package: str) -> set[str]:
    """The course_lib modules and packages ``path`` imports, as dotted names below course_lib."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if package else []
                module = ".".join(["course_lib", *base] + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return {name.removeprefix("course_lib.") for name in found
            if name.startswith("course_lib.") and name.split(".")[1] in PARTS}


def _part(name: str) -> str | None:
    head = name.split(".")[0]
    return head if head in PARTS else None


def _violations(name: str, path: Path) -> list[str]:
    here = _part(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if package == "__init__":
        package = ""
    allowed = set(PARTS[:PARTS.index(here) + 1]) if here else set()
    return sorted(f"course_lib.{name} imports course_lib.{target}" for target in _imported(path, package)
                  if _part(target) not in allowed)


MODULES = _modules()


def test_the_parts_exist_and_hold_the_modules():
    assert {"text.corpus", "vectors.counts", "recurrent.elman", "checks", "training", "testing"} <= set(MODULES)
    top = {name for name in MODULES if "." not in name and name != "__init__" and name not in PARTS}
    assert top == {"activations", "checks", "diagrams", "plotting", "progress", "testing", "training",
                   "unrevealed", "notebook", "seeds"}, \
        "the shared top level is for code every part uses; put a new concept in its part"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_part_imports_the_shared_top_level_and_earlier_parts_only(name):
    problems = _violations(name, MODULES[name])
    assert not problems, "\n".join(problems) + "\n(the order is " + " < ".join(PARTS) + ")"


def test_the_import_rule_catches_a_later_part_and_a_part_in_the_shared_level(tmp_path):
    later = tmp_path / "counts.py"
    later.write_text("def f():\n    from course_lib.recurrent.cells import lstm_cell\n")
    assert _violations("vectors.counts", later) == ["course_lib.vectors.counts imports course_lib.recurrent.cells",
                                                     "course_lib.vectors.counts imports course_lib.recurrent.cells.lstm_cell"]
    shared = tmp_path / "plotting.py"
    shared.write_text("from course_lib.text import vocabulary\nfrom . import checks\n")
    assert _violations("plotting", shared) == ["course_lib.plotting imports course_lib.text",
                                               "course_lib.plotting imports course_lib.text.vocabulary"]
    relative = tmp_path / "word2vec.py"
    relative.write_text("from ..recurrent import elmo\nfrom ..text.vocabulary import Vocabulary\n")
    assert _violations("vectors.word2vec", relative) == ["course_lib.vectors.word2vec imports course_lib.recurrent",
                                                         "course_lib.vectors.word2vec imports course_lib.recurrent.elmo"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"course_lib.{name} has {lines} lines; split it by concept (at most {MAX_LINES})"
