"""Stage a class's submissions for grading: read each one safely, repair what students break by accident.

``submitted/`` is never changed. Each ``submitted/<student>/<assignment>/`` becomes
``_grading/<assignment>/staged/<student>/<assignment>/<notebook>``, the folder
``nbgrader autograde`` is then pointed at, holding only a notebook the grader wrote:

- only regular files are read (a symbolic link, to a system file or to a classmate's
  work, is refused), at most :data:`MAX_BYTES`; what is not a notebook is refused;
- a notebook under another name is graded when it is the only one; extra notebooks
  are ignored; each case gets a note;
- the cells are rebuilt from the release: every locked cell (setup, tests, questions)
  comes from the assignment itself, in its place; the student's answer cells are
  matched by ``grade_id`` or, when the metadata was lost, by the function they define;
  cells the student added stay where they were, as plain cells, so a duplicated,
  re-labelled or invented graded cell can neither stop the batch nor add points;
- nbformat 3 is upgraded; the kernel spec is the course's.

The result per student is a :class:`Staged` record (``refused`` with its reason, or not,
and notes in plain words), saved in ``_grading/<assignment>/records/`` for the grader.
"""

from __future__ import annotations

import ast
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

MAX_BYTES = 20 * 2 ** 20


@dataclass
class Staged:
    student: str
    refused: str | None = None
    notes: list[str] = field(default_factory=list)


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link) of at most MAX_BYTES; else ValueError."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise ValueError(f"{path.name} is a symbolic link, not a notebook; submit the notebook file itself")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name} is not a regular file")
    if info.st_size > MAX_BYTES:
        raise ValueError(f"{path.name} is {info.st_size / 2 ** 20:.0f} MB, more than the {MAX_BYTES // 2 ** 20} MB allowed")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_BYTES + 1)


def _parse(raw: bytes, name: str):
    try:
        text = raw.decode("utf-8")
        nb = nbformat.reads(text, as_version=4)
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not a notebook (not text)") from None
    except Exception as error:  # nbformat raises many types for broken JSON or schema
        raise ValueError(f"{name} is not a readable notebook ({type(error).__name__}: {str(error)[:120]})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{name} is not a notebook")
    return nb


def _defined_functions(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def _answer_identity(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if isinstance(meta, dict) and meta.get("solution") else None


def rebuild(student_nb, release_nb, notes: list[str]):
    """The notebook to grade: the release's locked cells, the student's answers and added cells."""
    answers = {}  # grade_id -> the student's cell
    release_answers = {c.metadata["nbgrader"]["grade_id"]: c for c in release_nb.cells
                       if c.metadata.get("nbgrader", {}).get("solution")}
    functions = {gid: _defined_functions(c.source) for gid, c in release_answers.items() if c.cell_type == "code"}
    locked_sources = {c.source for c in release_nb.cells if not c.metadata.get("nbgrader", {}).get("solution")}
    added = []  # (index of the release answer it follows, cell)
    last_answer = None
    for cell in student_nb.cells:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        gid = _answer_identity(cell)
        if gid in release_answers and gid not in answers and cell.get("cell_type") == release_answers[gid].cell_type:
            answers[gid] = source
            last_answer = gid
            continue
        defined = _defined_functions(source) if cell.get("cell_type") == "code" else set()
        match = next((g for g, names in functions.items() if g not in answers and names and names <= defined), None)
        if match:
            answers[match] = source
            last_answer = match
            continue
        if source in locked_sources or cell.get("metadata", {}).get("nbgrader", {}).get("locked"):
            continue  # a locked cell: the release's own copy is used
        if cell.get("cell_type") == "code" and source.strip():
            added.append((last_answer, source))
    lost = sorted(g for g in release_answers if g not in answers)
    if lost and len(lost) < len(release_answers):
        notes.append(f"no answer found for {', '.join(lost)} (cell deleted?): graded as not answered")
    elif lost:
        notes.append("no answer cells found: the notebook was graded as not answered")
    rebuilt = nbformat.v4.new_notebook(metadata=release_nb.metadata)
    follow = {}
    for gid, source in added:
        follow.setdefault(gid, []).append(source)
    if follow.get(None):
        rebuilt.cells += [nbformat.v4.new_code_cell(s) for s in follow[None]]
    for cell in release_nb.cells:
        copy = nbformat.from_dict(json.loads(json.dumps(cell)))
        gid = _answer_identity(cell)
        if gid in answers:
            copy.source = answers[gid]
        rebuilt.cells.append(copy)
        if gid in follow:
            rebuilt.cells += [nbformat.v4.new_code_cell(s) for s in follow[gid]]
    if added:
        notes.append(f"{len(added)} cell(s) you added were kept and run")
    return rebuilt


def stage(folder: Path, release: Path, target: Path) -> Staged:
    """Stage ``submitted/<student>/<assignment>`` (``folder``) into ``target`` from the release notebook ``release``."""
    record = Staged(folder.parent.name)
    name = release.name
    release_nb = nbformat.read(release, as_version=4)
    target.mkdir(parents=True, exist_ok=True)
    staged = target / name
    try:
        if os.path.islink(folder) or not folder.is_dir():
            raise ValueError("the submission folder is a link or not a folder")
        present = sorted(p.name for p in folder.iterdir() if p.suffix == ".ipynb")
        chosen = name if name in present else (present[0] if len(present) == 1 else None)
        if chosen is None:
            raise ValueError(f"{name} is missing" + (f" (found {', '.join(present)})" if present else ""))
        if chosen != name:
            record.notes.append(f"graded {chosen} as {name} (the only notebook submitted)")
        extra = [p for p in present if p != chosen]
        if extra:
            record.notes.append(f"ignored {', '.join(extra)}: only {name} is graded")
        student_nb = _parse(_read_regular(folder / chosen), chosen)
        if not student_nb.cells:
            raise ValueError(f"{chosen} has no cells")
        nb = rebuild(student_nb, release_nb, record.notes)
    except (ValueError, OSError) as error:
        record.refused = str(error)
        nb = release_nb  # graded as the unanswered release: every test fails with the reason
    nbformat.write(nb, staged)
    timestamp = folder / "timestamp.txt"
    if timestamp.is_file() and not timestamp.is_symlink() and timestamp.stat().st_size < 200:
        (target / "timestamp.txt").write_text(timestamp.read_text(encoding="utf-8", errors="replace"))
    return record


def save_record(record: Staged, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(record)))


def load_record(path: Path) -> Staged | None:
    try:
        return Staged(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
