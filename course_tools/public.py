"""The student-facing tree: everything the public may see, and nothing else.

``python3 tasks.py public [--out DIR]`` writes into ``_build/public/`` (default):

- the book's sources, as the table of contents names them: ``_config.yml``,
  ``_toc.yml``, the pages, ``chapters/`` (MyST sources) and ``exercises/`` (the
  nbgrader release), ``references.bib``, the local Sphinx extensions, ``_static/``;
- ``chapters/*.ipynb``: each chapter as a Jupyter notebook, made from its MyST
  source (outputs empty), with a first cell that installs course_lib on Colab or
  Binder. Colab opens only ``.ipynb`` files, and sphinx-book-theme points its
  launch buttons at ``<page>.ipynb`` when that file sits next to ``<page>.md``
  (``_config.yml`` excludes these notebooks from the book, so each page is built once);
- ``_static/editions/``: one wheel per assignment, the student edition that
  assignment uses (edition N-1 for assignment N), which the book serves at
  ``<book URL>/_static/editions/``;
- ``requirements.txt`` (the repository's pins without the instructors' tools),
  ``binder/`` (what Binder installs: course_lib's pinned dependencies and the
  newest edition) and a README for students.

Never ``solutions/``, course_lib's reference sources, ``course_tools/``, hidden
tests or tests. The tree is checked before the command succeeds: no forbidden
file, and no leak (:mod:`course_tools.leaks`). A wheel of edition N reveals the
answers of the first N assignments on purpose, so it is checked against the
answers of the other assignments (:func:`edition_signatures`).

The one place that says where the course is published is ``_config.yml``:
``html.baseurl`` (the book) and ``repository.url`` / ``repository.branch`` (the
public repository, which holds this tree). The launch buttons and the repository
button are made from them by the theme; the wheel URLs in the install cells of the
notebooks come from :func:`read_site` (``tasks.py sync`` writes them,
``tasks.py check`` and the tests fail when they are out of date).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import ROOT, leaks
from .edition import edition_number, revealed_keys, wheel_name, write_edition
from .exercises import assignments, find_exercises, library_dir, owners, solution_notebooks

EDITIONS = "_static/editions"  # where the wheels live, in the tree and in the built book
MARKER = ".course-public"  # marks a folder this command wrote, so that it may replace it
FORBIDDEN_DIRS = {"solutions", "course_lib", "course_tools", "tests", "benchmarks", "source", "submitted",
                  "autograded", "feedback", "release"}
FORBIDDEN_FILES = {"nbgrader_config.py", "tasks.py", "pyproject.toml", "gradebook.db", "CONTRIBUTING.md"}
INSTRUCTOR_ONLY = {"nbgrader", "pytest"}  # pinned in requirements.txt, not needed by students
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
COLAB_LACKS = ("gensim",)  # course_lib's dependencies that Colab does not preinstall
NOTE, INSTALL = "note", "install"  # values of the cell metadata key "course_edition"


class PublicTreeError(RuntimeError):
    """The tree could not be written, or it holds something students must not see."""


@dataclass(frozen=True)
class Site:
    """Where the course is published, read from ``_config.yml``."""

    book_url: str  # html.baseurl, ending in "/"
    repository_url: str  # the public repository (holds the tree written here)
    branch: str

    @property
    def github(self) -> tuple[str, str]:
        """``(owner, name)`` of the public repository on GitHub."""
        match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", self.repository_url)
        if not match:
            raise PublicTreeError(f"repository.url must be a GitHub repository, got {self.repository_url!r}")
        return match.group(1), match.group(2)

    def page(self, docname: str) -> str:
        return f"{self.book_url}{docname}.html"

    def wheel_url(self, number: int, root: Path = ROOT) -> str:
        return f"{self.book_url}{EDITIONS}/{wheel_name(number, root)}"

    def colab_url(self, path: str) -> str:
        owner, name = self.github
        return f"https://colab.research.google.com/github/{owner}/{name}/blob/{self.branch}/{path}"

    def binder_url(self, path: str) -> str:
        owner, name = self.github
        return f"https://mybinder.org/v2/gh/{owner}/{name}/{self.branch}?urlpath=lab/tree/{path}"


def read_config(root: Path = ROOT) -> dict:
    import yaml

    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def read_site(root: Path = ROOT) -> Site:
    """The book's URL and the public repository, from ``_config.yml`` (the one place they are written)."""
    config = read_config(root)
    book_url = (config.get("html") or {}).get("baseurl") or ""
    repository = config.get("repository") or {}
    if not book_url.startswith("https://") or not repository.get("url"):
        raise PublicTreeError("_config.yml must set html.baseurl (https://...) and repository.url")
    site = Site(book_url.rstrip("/") + "/", repository["url"].rstrip("/"), repository.get("branch", "main"))
    site.github  # noqa: B018 (validates the repository URL)
    return site


# --- the install cells -------------------------------------------------------------------

_DETECT = ('"google.colab" in sys.modules or "BINDER_LAUNCH_HOST" in os.environ '
           'or "BINDER_REPO_URL" in os.environ')


def _pins(root: Path = ROOT) -> dict[str, str]:
    """``{normalized name: requirement line}`` of the pinned lines of requirements.txt."""
    pins = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"([A-Za-z0-9_.-]+)\s*==", line)
        if match:
            pins[_normalize(match.group(1))] = line
    return pins


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _set_number(assignment: str) -> str:
    """``"ps03_rnn"`` -> ``"3"``."""
    match = re.match(r"ps0*(\d+)", assignment)
    return match.group(1) if match else assignment


def _revealed_text(number: int, root: Path = ROOT) -> str:
    sets = [_set_number(name) for name in assignments(root)[:number]]
    if not sets:
        return "no answers revealed"
    if len(sets) == 1:
        return f"the answers of problem set {sets[0]} revealed"
    return f"the answers of problem sets {', '.join(sets[:-1])} and {sets[-1]} revealed"


def install_code(number: int, root: Path = ROOT, chapter: bool = False) -> str:
    """The first code cell of a notebook: installs student edition ``number`` on Colab or Binder only."""
    site = read_site(root)
    pins = _pins(root)
    colab = [pins[_normalize(name)] for name in COLAB_LACKS]
    where = "On your own computer" if chapter else "On your own computer and in the grader"
    lines = [
        f"# On Colab or Binder, this cell installs student edition {number} of course_lib",
        f"# (and, on Colab, {', '.join(COLAB_LACKS)}). {where} it installs nothing.",
        "import os",
        "import sys",
        "",
        f"if {_DETECT}:",
        "    import importlib",
        "    import subprocess",
        "",
        f'    wheel = "{site.wheel_url(number, root)}"',
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet"]',
        '    if "google.colab" in sys.modules:',
        f"        subprocess.run([*pip, {', '.join(json.dumps(c) for c in colab)}], check=True)",
        '    subprocess.run([*pip, "--no-deps", wheel], check=True)',
        "    importlib.invalidate_caches()",
        f'    print("student edition {number} of course_lib is installed")',
    ]
    if chapter:
        lines += [
            "",
            "import importlib.util",
            "",
            'if importlib.util.find_spec("myst_nb") is None:',
            "    # `glue` hands numbers to the book's text; outside a book build it only shows them",
            "    import types",
            "",
            "    from IPython.display import display as _show",
            "",
            '    sys.modules["myst_nb"] = types.ModuleType("myst_nb")',
            '    sys.modules["myst_nb"].glue = lambda name, variable, display=True: _show(variable) if display else None',
        ]
    return "\n".join(lines)


def install_note(assignment: str, root: Path = ROOT) -> str:
    """The markdown cell above the install cell of ``assignment``: its wheel and how to install it."""
    site = read_site(root)
    number = edition_number(assignment, root)
    wheel = wheel_name(number, root)
    return "\n".join([
        "## Installing course_lib",
        "",
        f"This problem set runs on **student edition {number}** of `course_lib` "
        f"({_revealed_text(number, root)}): [{wheel}]({site.wheel_url(number, root)}).",
        "",
        "- **On Colab or Binder**, run the next cell: it installs the edition for you.",
        "- **On your own computer**, in a Python 3.11 environment with the course's pinned packages",
        f"  (`pip install -r requirements.txt` from the [course repository]({site.repository_url})),",
        f"  download the file and run `pip install {wheel}`, then restart the kernel.",
        "  The next cell does nothing there.",
        "- **When your notebook is graded**, it runs with this same edition.",
        "",
        f"Working on your own? The [self-study guide]({site.page('self_study')}) says how to check your work.",
    ])


def _install_cells(note: str, code: str, assignment: bool = True) -> list:
    """The note and the install cell; in an assignment, the install cell is a locked nbgrader cell
    (students cannot change it, and grading restores it)."""
    note_cell = nbformat.v4.new_markdown_cell(note, id="course-edition-note", metadata={"course_edition": NOTE})
    metadata = {"course_edition": INSTALL}
    if assignment:
        metadata["nbgrader"] = {"grade": False, "grade_id": "install_course_lib", "locked": True,
                                "schema_version": 3, "solution": False}
    return [note_cell, nbformat.v4.new_code_cell(code, id="course-edition-install", metadata=metadata)]


def _with_install_cells(nb, cells: list):
    """``nb`` with ``cells`` right after its first (introduction) cell, replacing earlier copies."""
    body = [c for c in nb.cells if "course_edition" not in c.metadata]
    at = 1 if body and body[0].cell_type == "markdown" else 0
    new = nbformat.from_dict(json.loads(json.dumps(nb)))
    new.cells = body[:at] + cells + body[at:]
    return new


def sync_install_cells(check: bool = False, root: Path = ROOT) -> list[str]:
    """Put the install note and install cell of each assignment into its solution notebook.

    Returns the notebooks changed (or, with ``check``, that need a change).
    """
    changes = []
    for assignment in assignments(root):
        number = edition_number(assignment, root)
        cells = _install_cells(install_note(assignment, root), install_code(number, root))
        for path in solution_notebooks(assignment, root):
            nb = nbformat.read(path, as_version=4)
            new = _with_install_cells(nb, cells)
            if nbformat.writes(new) != nbformat.writes(nb):
                changes.append(f"{path.relative_to(root)}: install cell of edition {number} is out of date")
                if not check:
                    nbformat.write(new, path)
    return changes


# --- the chapter notebooks -----------------------------------------------------------------

def chapter_notebook(path: Path, number: int, root: Path = ROOT):
    """The MyST chapter at ``path`` as a notebook with empty outputs, for Colab and Binder.

    A note and an install cell (edition ``number``) come first; the chapter's cells follow unchanged.
    """
    from myst_nb.core.read import read_myst_markdown_notebook

    site = read_site(root)
    text = path.read_text(encoding="utf-8")
    nb = read_myst_markdown_notebook(text, path=path)
    for index, cell in enumerate(nb.cells):
        cell.id = f"cell-{index:03d}"  # the same notebook at every build
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
    docname = path.relative_to(root).with_suffix("").as_posix()
    found = find_exercises(library_dir(root))
    revealed, owner = revealed_keys(number, root), owners(root)
    unrevealed = sorted({key.rsplit(".", 1)[1] for key in found if key not in revealed
                         and re.search(rf"\b{re.escape(key.rsplit('.', 1)[1])}\(", text)})
    note = [
        f"*The code of the chapter [{title}]({site.page(docname)}) of the book "
        f"[From one-hot to BERT]({site.book_url}), as a notebook. Read the chapter in the book: "
        "cross-references, citations and the numbers in the text appear only there.*",
        "",
        f"Run the first code cell: on Colab or Binder it installs course_lib (student edition {number}, "
        f"{_revealed_text(number, root)}).",
    ]
    if unrevealed:
        sets = sorted({_set_number(owner[key]) for key in found if key.rsplit(".", 1)[1] in unrevealed and key in owner})
        names = [f"`{n}`" for n in unrevealed]
        names = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        where = f"problem set {sets[0]}" if len(sets) == 1 else f"problem sets {', '.join(sets)}"
        note += ["", f"This chapter calls {names}, which you write in {where}. Their answers are not "
                     "published, so the cells that call them stop with `NotImplementedError`; "
                     "the book shows what they print."]
    cells = _install_cells("\n".join(note), install_code(number, root, chapter=True), assignment=False)
    nb.cells = cells + nb.cells
    nb.metadata = {"kernelspec": nb.metadata.get("kernelspec", {"display_name": "Python 3", "language": "python",
                                                                   "name": "python3"}),
                   "language_info": {"name": "python"}}
    nbformat.validate(nb)
    return nb


def _is_myst_notebook(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return False
    front = text.split("---", 2)[1]
    return "kernelspec" in front


# --- the tree ----------------------------------------------------------------------------------

def _toc_entries(node) -> list[str]:
    out = []
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                out.append(node[key])
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key) or []:
                out += _toc_entries(child)
    return out


def toc_files(root: Path = ROOT) -> list[Path]:
    """The files the table of contents names, relative to ``root``, in reading order."""
    import yaml

    files = []
    for entry in _toc_entries(yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))):
        for candidate in (entry, entry + ".md", entry + ".ipynb", entry + ".rst"):
            if (root / candidate).is_file():
                files.append(Path(candidate))
                break
        else:
            raise PublicTreeError(f"_toc.yml names {entry!r}, which does not exist")
    return files


_JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store")


def _prepare(out: Path, root: Path) -> None:
    """Empty ``out`` (keeping a ``.git`` folder), refusing any folder this command did not write."""
    if out == root or out in root.parents:
        raise PublicTreeError(f"refusing to write the public tree into {out}: it holds the repository")
    if out.exists():
        entries = {p.name for p in out.iterdir()}
        if entries - {".git"} and MARKER not in entries:
            raise PublicTreeError(f"{out} is not empty and was not written by `tasks.py public`; choose another folder")
        _empty(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("Written by `python3 tasks.py public` of the course repository;\n"
                              "replaced whole at every run (a .git folder is kept).\n", encoding="utf-8")


def _empty(out: Path) -> None:
    """Remove everything in ``out`` but a ``.git`` folder (the tree may live in a clone of the public repository)."""
    for entry in out.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _copy_sources(out: Path, root: Path) -> list[Path]:
    """Copy what the book needs; return the MyST notebooks among the toc's files."""
    config = read_config(root)
    files = toc_files(root)
    for path in files:
        if path.parts[0] in FORBIDDEN_DIRS:
            raise PublicTreeError(f"_toc.yml names {path}, which students must not see")
    top_files = {Path("_config.yml"), Path("_toc.yml")} | {p for p in files if len(p.parts) == 1}
    top_files |= {Path(b) for b in config.get("bibtex_bibfiles") or []}
    folders = {p.parts[0] for p in files if len(p.parts) > 1}
    folders |= set(((config.get("sphinx") or {}).get("local_extensions") or {}).values())
    if (root / "_static").is_dir():
        folders.add("_static")
    for name in sorted(folders):
        if Path(name).parts[0] in FORBIDDEN_DIRS:
            raise PublicTreeError(f"refusing to publish {name}/")
        shutil.copytree(root / name, out / name, ignore=_JUNK, dirs_exist_ok=True)
    for path in sorted(top_files):
        shutil.copyfile(root / path, out / path)
    return [p for p in files if p.suffix == ".md" and _is_myst_notebook(root / p)]


_BUILD_WHEELS = """\
import contextlib, io, os, sys
import setuptools.build_meta as backend
out = sys.argv[1]
for project in sys.argv[2:]:
    os.chdir(project)
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        print(backend.build_wheel(out), file=sys.__stdout__)
"""


def build_wheels(out_dir: Path, root: Path = ROOT) -> dict[str, Path]:
    """One wheel per assignment, the edition it uses, into ``out_dir``; ``{assignment: wheel}``.

    Each edition is written by :func:`course_tools.edition.write_edition` and built
    offline by setuptools' PEP 517 backend (what ``pip wheel --no-build-isolation`` calls),
    all in one process; fixed timestamps make the same edition the same wheel, byte for byte.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH="315532800")
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as scratch:
        numbers = {assignment: edition_number(assignment, root) for assignment in assignments(root)}
        projects = [write_edition(Path(scratch) / f"edition{n}", n, root) for n in numbers.values()]
        built = Path(scratch) / "wheels"
        result = subprocess.run([sys.executable, "-c", _BUILD_WHEELS, str(built), *map(str, projects)],
                                capture_output=True, text=True, env=env)
        wheels = {}
        for assignment, number in numbers.items():
            wheel = built / wheel_name(number, root)
            if result.returncode != 0 or not wheel.exists():
                raise PublicTreeError(f"building the wheel of edition {number} failed:\n{result.stdout}{result.stderr}")
            wheels[assignment] = Path(shutil.copyfile(wheel, out_dir / wheel.name))
    return wheels


def edition_signatures(number: int, root: Path = ROOT) -> dict[str, str]:
    """What must not appear in edition ``number``: every answer line but those of the revealed answers,
    and the hidden tests of every assignment."""
    found = find_exercises(library_dir(root))
    revealed = {" ".join(line.split()) for key in revealed_keys(number, root) for line in found[key].solution_lines()}
    return {sig: what for sig, what in leaks.signatures(root).items() if sig not in revealed}


def wheel_leaks(wheel: Path, number: int, root: Path = ROOT) -> list[leaks.Leak]:
    """Leaks in the wheel of edition ``number``: markers, hidden tests, answers it does not reveal,
    and any file outside course_lib."""
    sigs = edition_signatures(number, root)
    found = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            top = member.split("/", 1)[0]
            if top != "course_lib" and not top.endswith(".dist-info"):
                found.append(leaks.Leak(Path(f"{wheel}!{member}"), "a file outside course_lib"))
        archive.extractall(scratch)
        for path in sorted(Path(scratch).rglob("*")):
            if not path.is_file() or path.suffix.lower() not in leaks.TEXT_SUFFIXES:
                continue
            text = leaks.readable_text(path)
            where = Path(f"{wheel}!{path.relative_to(scratch).as_posix()}")
            found += [leaks.Leak(where, f"nbgrader marker {m!r}") for m in leaks.MARKERS if m in text]
            found += [leaks.Leak(where, f"{what}: {sig[:60]!r}") for sig, what in sigs.items() if sig in text]
    return found


def _requirements(root: Path) -> tuple[str, str]:
    """``requirements.txt`` for students and ``binder/requirements.txt``, from the repository's pins."""
    import tomllib

    pins = _pins(root)
    student = [line for name, line in pins.items() if name not in INSTRUCTOR_ONLY]
    dependencies = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    runtime = []
    for dependency in dependencies:
        name = _normalize(re.match(r"[A-Za-z0-9_.-]+", dependency).group(0))
        if name not in pins:
            raise PublicTreeError(f"course_lib depends on {name}, which requirements.txt does not pin")
        runtime.append(pins[name])
    head = ("# The course's pinned packages (from the course repository). torch comes from PyTorch's CPU\n"
            "# index: the course needs no GPU, and the default torch wheel for Linux carries gigabytes of CUDA.\n"
            f"--extra-index-url {TORCH_CPU_INDEX}\n")
    binder = ("# What Binder installs: course_lib's dependencies at the course's pinned versions.\n"
              "# torch comes from PyTorch's CPU index (Binder has no GPU). binder/postBuild then installs\n"
              "# course_lib's student edition.\n"
              f"--extra-index-url {TORCH_CPU_INDEX}\n")
    return head + "\n".join(student) + "\n", binder + "\n".join(runtime) + "\n"


def _post_build(newest: str) -> str:
    return (
        "#!/bin/bash\n"
        "# Binder runs this once, after installing binder/requirements.txt: it installs the newest\n"
        "# student edition of course_lib, which the chapters run on. The first cell of each problem\n"
        "# set installs the edition that problem set uses.\n"
        "set -euo pipefail\n"
        f"python -m pip install --no-deps {EDITIONS}/{newest}\n"
    )


def _readme(site: Site, wheels: dict[str, Path], newest: int, root: Path) -> str:
    rows = "\n".join(
        f"| `{assignment}` | {edition_number(assignment, root)} ({_revealed_text(edition_number(assignment, root), root)}) "
        f"| [`{EDITIONS}/{wheel.name}`]({EDITIONS}/{wheel.name}) |"
        for assignment, wheel in wheels.items())
    first = next(iter(wheels.values())).name
    return f"""\
# From one-hot to BERT: the students' repository

An open course on how machines represent words and sentences, from one-hot vectors to BERT.
**Read the book at {site.book_url}.** This repository holds what a student needs to work
through it: the chapters as notebooks, the problem sets, and the student editions of
`course_lib`, the course's library. It holds no answers and no hidden tests.

| Path | What it is |
|---|---|
| `chapters/*.ipynb` | each chapter's code as a notebook (outputs empty; the book shows them) |
| `chapters/*.md` | each chapter's source, the text of the book page (MyST Markdown) |
| `exercises/psNN_name/` | the problem sets: notebooks with the functions to write and their visible tests |
| `{EDITIONS}/` | the student editions of `course_lib`, one wheel per problem set |
| `requirements.txt` | the course's pinned packages |
| `binder/` | what Binder installs: the pinned packages and the newest edition |
| the rest | the book's sources (`_config.yml`, `_toc.yml`, pages, `references.bib`) |

## Which edition for which problem set

A student edition is `course_lib` with the bodies of the functions you write left empty
(`raise NotImplementedError()`). Edition N also contains the answers of the first N problem
sets, which later problem sets build on; so the edition of the next problem set lets you
check your work once you have finished one.

| Problem set | Student edition | Wheel |
|---|---|---|
{rows}

## In the browser

Each page of the book has a launch button (the rocket) that opens its notebook on Colab or
Binder. The first code cell of every notebook installs the right edition there; run it
first. The chapter notebooks use edition {newest}.

## On your own computer

With Python 3.11, from a clone of this repository:

```bash
python3.11 -m venv .venv && source .venv/bin/activate
pip install -r requirements.txt jupyterlab
pip install {EDITIONS}/{first}    # the wheel of the problem set you work on
jupyter lab exercises/
```

Install another problem set's wheel the same way when you move on (it replaces the one
installed). Fill in each `raise NotImplementedError()`, run the visible tests as you go, then
run the whole notebook from the top. Working without a class? Read
[working on your own]({site.page('self_study')}).

The book's HTML is built by the course team: its chapters execute with the complete
`course_lib`, which is not published.
"""


def _check_tree(out: Path, root: Path, wheels: dict[str, Path]) -> list[str]:
    problems = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if rel.parts[0] == ".git":
            continue
        if any(part in FORBIDDEN_DIRS for part in rel.parts) or (path.is_file() and rel.name in FORBIDDEN_FILES):
            problems.append(f"{rel} must not be published")
    problems += [str(leak) for leak in leaks.find_leaks([out], root)]
    for assignment, wheel in wheels.items():
        problems += [str(leak) for leak in wheel_leaks(wheel, edition_number(assignment, root), root)]
    return problems


def _stale_releases(root: Path) -> list[str]:
    """Releases whose install cell differs from the solution's (``tasks.py release`` mends them)."""
    stale = []
    for assignment in assignments(root):
        expected = install_code(edition_number(assignment, root), root)
        for path in sorted((root / "exercises" / assignment).glob("*.ipynb")):
            cells = [c for c in nbformat.read(path, as_version=4).cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == "install_course_lib"]
            if [c.source for c in cells] != [expected]:
                stale.append(f"{path.relative_to(root)}: its install cell is not the solution's")
    return stale


def _excluded(config: dict, rel: str) -> bool:
    from sphinx.util.matching import Matcher

    return Matcher(config.get("exclude_patterns") or [])(rel)


def build_public(out: Path | None = None, root: Path = ROOT) -> Path:
    """Write the student-facing tree into ``out`` (default ``_build/public``) and check it; return ``out``.

    Raises :class:`PublicTreeError` (and removes the tree) if it holds anything students must not see.
    """
    root = Path(root).resolve()
    out = Path(out or root / "_build" / "public").resolve()
    site = read_site(root)
    config = read_config(root)
    _prepare(out, root)
    try:
        notebooks = _copy_sources(out, root)
        wheels = build_wheels(out / EDITIONS, root)
        if not wheels:
            raise PublicTreeError("no assignment in solutions/: nothing to publish")
        newest = max(edition_number(a, root) for a in wheels)
        for path in notebooks:
            target = (out / path).with_suffix(".ipynb")
            if not _excluded(config, target.relative_to(out).as_posix()):
                raise PublicTreeError(f"{target.relative_to(out)} would be a second source of page {path.with_suffix('')}: "
                                      "add its folder to exclude_patterns in _config.yml (e.g. chapters/*.ipynb)")
            nbformat.write(chapter_notebook(root / path, newest, root), target)
        student, binder = _requirements(root)
        (out / "requirements.txt").write_text(student, encoding="utf-8")
        (out / "binder").mkdir()
        (out / "binder" / "requirements.txt").write_text(binder, encoding="utf-8")
        (out / "binder" / "runtime.txt").write_text("python-3.11\n", encoding="utf-8")
        post_build = out / "binder" / "postBuild"
        post_build.write_text(_post_build(wheel_name(newest, root)), encoding="utf-8")
        post_build.chmod(post_build.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (out / "README.md").write_text(_readme(site, wheels, newest, root), encoding="utf-8")
        (out / ".gitignore").write_text("_build/\n.ipynb_checkpoints/\n__pycache__/\n", encoding="utf-8")
        stale = sync_install_cells(check=True, root=root) + _stale_releases(root)
        if stale:
            raise PublicTreeError("run `python3 tasks.py sync` and `python3 tasks.py release`:\n" + "\n".join(stale))
        problems = _check_tree(out, root, wheels)
        if problems:
            raise PublicTreeError("the public tree is not safe to publish:\n" + "\n".join(problems))
    except BaseException:
        _empty(out)  # nothing unchecked stays on disk
        raise
    return out
