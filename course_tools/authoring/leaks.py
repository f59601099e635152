"""Find solution text where students can read it.

A leak is any of these, found in a file under the scanned paths:

- nbgrader's markers ``BEGIN SOLUTION`` or ``BEGIN HIDDEN TESTS``;
- a line of the answer of an exercise function (the lines between its markers
  in course_lib, at least ``MIN_LENGTH`` characters long, so that a lone
  ``return x`` does not count);
- a line of the embedded cases of a hidden test cell in ``solutions/``, or of an answer key;
- a line of the model answer of a written question (a markdown answer cell in ``solutions/``).

Text is compared after HTML tags are stripped, entities unescaped, notebook
JSON decoded and runs of white space folded, so syntax highlighting cannot hide a leak.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.exercises import assignments, find_exercises, solution_notebooks

MIN_LENGTH = 20
MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
TEXT_SUFFIXES = {".html", ".htm", ".ipynb", ".md", ".txt", ".py", ".js", ".json", ".tex", ".rst", ".xml"}


@dataclass(frozen=True)
class Leak:
    path: Path
    what: str

    def __str__(self) -> str:
        return f"leak in {self.path}: {self.what}"


def _fold(text: str) -> str:
    return " ".join(text.split())


def signatures(root: Path = ROOT) -> dict[str, str]:
    """Folded text that must never reach students, mapped to a description of it."""
    sigs = {}
    for key, ex in find_exercises().items():
        for line in ex.solution_lines():
            if len(_fold(line)) >= MIN_LENGTH:
                sigs[_fold(line)] = f"a line of the answer of {key}"
    for assignment in assignments(root):
        key = root / "answer_keys" / f"{assignment}.key"
        if key.exists():  # the answer keys: expected values of every graded test
            for line in key.read_text(encoding="ascii").splitlines():
                if len(line) >= MIN_LENGTH:
                    sigs[line] = f"a line of the answer key of {assignment}"
        for path in solution_notebooks(assignment, root):
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "markdown" and meta.get("solution"):  # a model answer graded by hand
                    for line in cell.source.splitlines():
                        if len(_fold(line)) >= MIN_LENGTH:
                            sigs[_fold(line)] = f"a line of the model answer of {meta.get('grade_id')} ({assignment})"
                    continue
                inside = False
                for line in cell.source.splitlines():
                    if "BEGIN HIDDEN TESTS" in line:
                        inside = True
                    elif "END HIDDEN TESTS" in line:
                        inside = False
                    elif inside and len(_fold(line)) >= MIN_LENGTH:
                        sigs[_fold(line)] = f"a line of the hidden tests of {assignment}"
    return sigs


def readable_text(path: Path) -> str:
    """What a reader of ``path`` sees, folded: tags stripped, entities and JSON decoded."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".html", ".htm"):
        raw = html.unescape(re.sub(r"<[^>]+>", "", raw))
    elif path.suffix in (".ipynb", ".json"):
        try:
            raw = "\n".join(_strings(json.loads(raw)))
        except json.JSONDecodeError:
            pass
    return _fold(raw)


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        if all(isinstance(x, str) for x in node):
            yield "".join(node)  # a notebook cell's source as a list of lines
        else:
            for x in node:
                yield from _strings(x)
    elif isinstance(node, dict):
        for x in node.values():
            yield from _strings(x)


GRAM = 10
STEP = MIN_LENGTH - GRAM + 1
"""The search samples the text every STEP characters: a signature (at least MIN_LENGTH long) that
occurs in it covers a sampled position, where GRAM characters of it start within its first STEP."""


class _Index:
    """Every signature found by its GRAM-character pieces at offsets 0 to STEP - 1: the text is then
    looked up only at every STEP-th position, and a signature is compared where a piece of it matched."""

    def __init__(self, sigs: dict[str, str]):
        self.pieces: dict[str, list[tuple[str, int]]] = {}
        for sig in sigs:
            if len(sig) < STEP + GRAM - 1:  # too short for sampling: never, as MIN_LENGTH is the floor
                raise ValueError(f"signature shorter than {STEP + GRAM - 1} characters: {sig!r}")
            for offset in range(STEP):
                self.pieces.setdefault(sig[offset:offset + GRAM], []).append((sig, offset))

    def found(self, text: str) -> set[str]:
        """The signatures that occur in ``text``."""
        hits, pieces = set(), self.pieces
        for position in range(0, len(text) - GRAM + 1, STEP):
            for sig, offset in pieces.get(text[position:position + GRAM], ()):
                if position >= offset and sig not in hits and text.startswith(sig, position - offset):
                    hits.add(sig)
        return hits


def find_leaks(paths: list[Path], root: Path = ROOT) -> list[Leak]:
    """Every leak in the text files under ``paths`` (files or folders)."""
    sigs = signatures(root)
    index = _Index(sigs)
    leaks = []
    files = []
    for p in paths:
        files += sorted(f for f in Path(p).rglob("*") if f.is_file()) if Path(p).is_dir() else [Path(p)]
    for f in files:
        if f.suffix.lower() not in TEXT_SUFFIXES:
            continue
        text = readable_text(f)
        for marker in MARKERS:
            if marker in text:
                leaks.append(Leak(f, f"nbgrader marker {marker!r}"))
        found = index.found(text)
        for sig, what in sigs.items():
            if sig in found:
                leaks.append(Leak(f, f"{what}: {sig[:60]!r}"))
    return leaks
