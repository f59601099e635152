"""Stage a class's submissions for grading: read each one safely, repair what students break by accident.

``submitted/`` is never changed. Each ``submitted/<student>/<assignment>/`` becomes
``_grading/<assignment>/staged/<student>/<assignment>/<notebook>``, the folder
``nbgrader autograde`` is then pointed at, holding only a notebook the grader wrote:

- only regular files are read (a symbolic link, to a system file or to a classmate's
  work, is refused, and so is a student or assignment folder that is a link), at most
  :data:`MAX_BYTES`; what is not a notebook is refused;
- a notebook under another name is graded when it is the only one; extra notebooks
  are ignored; each case gets a note;
- the cells are rebuilt from the release: every locked cell (setup, tests, questions)
  comes from the assignment itself, in its place; the student's answer cells are
  matched by ``grade_id`` (unless the cell defines another answer's function: metadata
  copied with a cell) or, when the metadata was lost, by the function they define, and
  a written answer by its place after its question (a written answer typed in a code
  cell is kept as text); cells the student added stay after the cell they followed, as
  plain cells, so a duplicated, re-labelled or invented graded cell can neither stop
  the batch nor add points; metadata of the wrong type counts as no metadata;
- nbformat 3 is upgraded; the kernel spec is the course's; text that cannot be written
  as UTF-8 (lone surrogates) is replaced;
- ``timestamp.txt`` is copied when it is a small regular file holding a date (nbgrader
  stops on anything else); otherwise it is left out, with a note.

Nothing a submission holds stops the batch: an unexpected error refuses that one
submission with the error as its reason. The result per student is a :class:`Staged`
record (``refused`` with its reason, or not, and notes in plain words), saved in
``_grading/<assignment>/records/`` for the grader.
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
        raise ValueError(f"{path.name} is {info.st_size / 2 ** 20:.1f} MB, more than the {MAX_BYTES // 2 ** 20} MB allowed")
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
    except Exception:  # noqa: BLE001 - SyntaxError, and RecursionError or MemoryError on pathological code
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def _nbgrader(cell) -> dict:
    """The cell's nbgrader metadata; ``{}`` when it is missing or not a dict (students edit metadata)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell) -> str | None:
    grade_id = _nbgrader(cell).get("grade_id")
    return grade_id if isinstance(grade_id, str) else None


def _answer_identity(cell) -> str | None:
    return _grade_id(cell) if _nbgrader(cell).get("solution") else None


def _text(source) -> str:
    """A cell's source as one string that can be written as UTF-8 (a lone surrogate becomes ``?``)."""
    text = "".join(map(str, source)) if isinstance(source, list) else str(source)
    return text.encode("utf-8", "replace").decode("utf-8")


def _by_function(defined: set[str], functions: dict, taken: dict) -> str | None:
    return next((g for g, names in functions.items() if g not in taken and names and names <= defined), None)


def rebuild(student_nb, release_nb, notes: list[str]):
    """The notebook to grade: the release's locked cells, the student's answers and added cells."""
    cells = release_nb.cells
    release_answers = {_answer_identity(c): i for i, c in enumerate(cells) if _answer_identity(c)}
    functions = {gid: _defined_functions(cells[i].source) for gid, i in release_answers.items()
                 if cells[i].cell_type == "code"}
    locked_sources, locked_ids = {}, {}  # source or grade_id -> index of the release's locked cell
    for i, c in enumerate(cells):
        if not _answer_identity(c):
            locked_sources.setdefault(c.source, i)
            if _grade_id(c):
                locked_ids.setdefault(_grade_id(c), i)
    questions = {cells[i - 1].source: gid for gid, i in release_answers.items()
                 if cells[i].cell_type == "markdown" and i > 0}  # a written answer follows its question
    answers = {}  # grade_id -> the student's source
    recognised, as_text, added = [], [], []  # added: (index of the release cell it follows, source)
    anchor, previous = None, None
    for cell in student_nb.cells:
        kind = cell.get("cell_type") if isinstance(cell, dict) else None
        if kind not in ("code", "markdown", "raw"):
            continue
        source = _text(cell.get("source", ""))
        gid = _answer_identity(cell)
        defined = _defined_functions(source) if kind == "code" else set()
        match = None
        if gid in release_answers and gid not in answers:
            wanted = cells[release_answers[gid]].cell_type
            if wanted == "markdown" and kind != "markdown":
                match = gid
                as_text.append(gid)
            elif wanted == kind:
                match = gid
                if functions.get(gid) and not functions[gid] <= defined:  # metadata copied with another answer
                    other = _by_function(defined, functions, answers)
                    if other:
                        match = other
                        recognised.append(other)
        if match is None and kind == "code":
            match = _by_function(defined, functions, answers)
            if match:
                recognised.append(match)
        if match is None and kind == "markdown" and questions.get(previous) not in (None, *answers) \
                and source not in locked_sources:
            match = questions[previous]
            recognised.append(match)
        previous = source
        if match:
            answers[match] = source
            anchor = release_answers[match]
            continue
        position = locked_sources.get(source, locked_ids.get(_grade_id(cell)))
        if position is not None or _nbgrader(cell).get("locked"):
            anchor = position if position is not None else anchor
            continue  # a locked cell, perhaps edited: the release's own copy is used
        if kind == "code" and source.strip():
            added.append((anchor, source))
    lost = sorted(g for g in release_answers if g not in answers)
    if lost and len(lost) < len(release_answers):
        notes.append(f"no answer found for {', '.join(lost)} (cell deleted?): graded as not answered")
    elif lost:
        notes.append("no answer cells found: the notebook was graded as not answered")
    if recognised:
        notes.append(f"answers found without their grading metadata (lost or copied from another cell), by the "
                     f"functions they define or their place: {', '.join(recognised)}")
    if as_text:
        notes.append(f"the written answer {', '.join(as_text)} was in a code cell: kept as text")
    rebuilt = nbformat.v4.new_notebook(metadata=release_nb.metadata)
    follow = {}
    for position, source in added:
        follow.setdefault(position, []).append(source)
    rebuilt.cells += [nbformat.v4.new_code_cell(s) for s in follow.get(None, [])]
    for index, cell in enumerate(cells):
        copy = nbformat.from_dict(json.loads(json.dumps(cell)))
        gid = _answer_identity(cell)
        if gid in answers:
            copy.source = answers[gid]
        rebuilt.cells.append(copy)
        rebuilt.cells += [nbformat.v4.new_code_cell(s) for s in follow.get(index, [])]
    if added:
        notes.append(f"{len(added)} cell(s) you added were kept and run")
    return rebuilt


def _timestamp(folder: Path, target: Path, notes: list[str]) -> None:
    """Copy ``timestamp.txt`` when it is a small regular file holding a date nbgrader can read."""
    from nbgrader.utils import parse_utc

    path = folder / "timestamp.txt"
    if not os.path.lexists(path):
        return
    try:
        text = _read_regular(path)[:200].decode("utf-8").strip()
        if len(text) > 100:
            raise ValueError("too long")
        parse_utc(text)
    except Exception:  # noqa: BLE001 - a link, a folder, not text, not a date: nbgrader would stop on it
        notes.append("timestamp.txt is not a plain file holding a date: left out (no late penalty was "
                     "computed; check the submission time by hand)")
        return
    (target / "timestamp.txt").write_text(text + "\n", encoding="utf-8")


def stage(folder: Path, release: Path, target: Path) -> Staged:
    """Stage ``submitted/<student>/<assignment>`` (``folder``) into ``target`` from the release notebook ``release``."""
    record = Staged(folder.parent.name)
    name = release.name
    release_nb = nbformat.read(release, as_version=4)
    target.mkdir(parents=True, exist_ok=True)
    staged = target / name
    try:
        if os.path.islink(folder) or os.path.islink(folder.parent) or not folder.is_dir():
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
        _timestamp(folder, target, record.notes)
    except (ValueError, OSError) as error:
        record.refused = str(error)
    except Exception as error:  # noqa: BLE001 - one submission must not stop the batch
        record.refused = f"the grader could not read this submission ({type(error).__name__}: {str(error)[:200]})"
    if record.refused:
        nb = release_nb  # graded as the unanswered release: every test fails with the reason
        (target / "timestamp.txt").unlink(missing_ok=True)
    nbformat.write(nb, staged)
    return record


def save_record(record: Staged, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(record)))


def load_record(path: Path) -> Staged | None:
    try:
        return Staged(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
