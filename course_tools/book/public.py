"""The student-facing tree: everything the public may see, and nothing else.

``python3 tasks.py public [--out DIR]`` writes into ``_build/public/`` (default):

- the book's sources, as the table of contents names them: ``_config.yml``,
  ``_toc.yml``, the pages, ``chapters/`` (MyST sources) and ``exercises/`` (the
  nbgrader release), ``references.bib``, the local Sphinx extensions, ``_static/``;
- ``chapters/*.ipynb``: each chapter as a Jupyter notebook, made from its MyST
  source (outputs empty), with a first cell that installs course_lib on Colab or
  Binder (:mod:`course_tools.book.install_cells`). Colab opens only ``.ipynb`` files, and
  sphinx-book-theme points its launch buttons at ``<page>.ipynb`` when that file sits
  next to ``<page>.md`` (``_config.yml`` excludes these notebooks from the book, so
  each page is built once);
- ``_static/editions/``: the wheels of the student editions whose answers are revealed
  (:mod:`course_tools.authoring.wheels`), which the book serves at ``<book URL>/_static/editions/``;
- ``requirements-student.txt`` (what students install: the course's pinned packages and
  JupyterLab, nothing of the book build, the grader or the tests), at the top and in ``_static/``,
  where the book serves it (:mod:`course_tools.book.student_install`);
  ``requirements-nodeps.txt`` (packages installed without their dependencies, for their data),
  ``binder/`` (what Binder installs: the students' pinned packages and the newest edition),
  ``_generated/`` (text generated for the pages, such as the self-study page's install section)
  and a README for students. Not the repository's ``requirements.txt``: it is the maintainers'.

What is published follows the release calendar (:mod:`course_tools.book.course_calendar`,
``course.calendar`` in ``_config.yml``): the exercises of the released problem sets only
(an unreleased one's page is a short "not released yet" notebook at the same path, so the
table of contents and every link to it still hold), editions 0 to R where R problem sets
are revealed, and the chapter notebooks and Binder on edition R. The self-study calendar
releases and reveals everything.

Never ``solutions/``, ``answer_keys/``, course_lib's reference sources, ``course_tools/``,
hidden tests or tests. The tree is checked before the command succeeds: no forbidden
file, no leak (:mod:`course_tools.authoring.leaks`), no wheel that reveals an answer it should
not (:func:`course_tools.authoring.wheels.wheel_leaks`), no edition, exercise or link to a wheel
that the calendar does not publish, and install cells in sync with
``_config.yml``, where the course is published (:mod:`course_tools.site_config`).
"""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.authoring import leaks
from course_tools.authoring.edition import wheel_name
from course_tools.authoring.wheels import build_wheels, wheel_leaks
from course_tools.exercises import assignments, set_number
from course_tools.site_config import EDITIONS, PublicTreeError, read_config, read_site
from .chapter_notebooks import chapter_notebook, is_myst_notebook
from .course_calendar import Calendar, read_calendar
from .install_cells import stale_releases, sync_install_cells
from .public_files import binder_requirements, post_build as binder_post_build, readme
from .student_install import NO_DEPS_FILE, SERVED_AT, STUDENT_FILE, self_study_install

MARKER = ".course-public"  # marks a folder this command wrote, so that it may replace it
FORBIDDEN_DIRS = {"solutions", "course_lib", "course_tools", "tests", "benchmarks", "source", "submitted",
                  "autograded", "feedback", "release", "answer_keys", "_grading"}
FORBIDDEN_FILES = {"nbgrader_config.py", "tasks.py", "pyproject.toml", "gradebook.db", "CONTRIBUTING.md"}
RELEASES = "exercises"  # nbgrader's release folder, one subfolder per problem set
GENERATED = "_generated"  # Markdown the pages include ({include}), written for this build
SELF_STUDY_INSTALL = f"{GENERATED}/self_study_install.md"  # self_study.md's install section
WHEEL = re.compile(r"course_lib-[0-9.]+\+student(\d+)-py3-none-any\.whl")  # a link to an edition's wheel


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


def placeholder(assignment: str, calendar: Calendar, root: Path = ROOT):
    """The page that stands in for an unreleased problem set: its title, "not released yet", and when."""
    release = nbformat.read(root / RELEASES / assignment / f"{assignment}.ipynb", as_version=4)
    title = next((line for line in release.cells[0].source.splitlines() if line.startswith("# ")),
                 f"# Problem set {set_number(assignment)}")
    day = calendar.upcoming.get(assignment)
    when = f"It opens on {day:%A %d %B %Y}." if day else "It opens later in the course."
    text = (f"{title}\n\n**Not released yet.** {when} Its notebook appears on this page then, with the "
            "student edition of `course_lib` it runs on. Until then, read the chapter before it.")
    return nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(text, id="not-released")],
        metadata={"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                  "language_info": {"name": "python"}, "course_calendar": "not released"})


def _copy_sources(out: Path, root: Path, calendar: Calendar) -> list[Path]:
    """Copy what the book needs, the released problem sets only; return the MyST notebooks among the toc's files."""
    config = read_config(root)
    files = toc_files(root)
    for path in files:
        if path.parts[0] in FORBIDDEN_DIRS:
            raise PublicTreeError(f"_toc.yml names {path}, which students must not see")
    unreleased = set(assignments(root)) - set(calendar.released)

    def ignore(folder, names):
        """Junk, and the release folders of unreleased problem sets."""
        skip = _JUNK(folder, names)
        return skip | set(names) & unreleased if Path(folder) == root / RELEASES else skip

    top_files = {Path("_config.yml"), Path("_toc.yml")} | {p for p in files if len(p.parts) == 1}
    top_files |= {Path(b) for b in config.get("bibtex_bibfiles") or []}
    folders = {p.parts[0] for p in files if len(p.parts) > 1}
    folders |= set(((config.get("sphinx") or {}).get("local_extensions") or {}).values())
    if (root / "_static").is_dir():
        folders.add("_static")
    for name in sorted(folders):
        if Path(name).parts[0] in FORBIDDEN_DIRS:
            raise PublicTreeError(f"refusing to publish {name}/")
        shutil.copytree(root / name, out / name, ignore=ignore, dirs_exist_ok=True)
    for path in sorted(top_files):
        shutil.copyfile(root / path, out / path)
    for path in files:
        if path.parts[0] == RELEASES and path.parts[1] in unreleased:
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(placeholder(path.parts[1], calendar, root), out / path)
    return [p for p in files if p.suffix == ".md" and is_myst_notebook(root / p)]


def _check_calendar(out: Path, root: Path, wheels: dict[int, Path], calendar: Calendar) -> list[str]:
    """What the calendar forbids: an unreleased exercise, an unrevealed edition, a link to an unpublished wheel."""
    problems = []
    for name in sorted(set(assignments(root)) - set(calendar.released)):
        folder = out / RELEASES / name
        files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        if files and ([p.name for p in files] != [f"{name}.ipynb"]
                      or nbformat.read(files[0], as_version=4) != placeholder(name, calendar, root)):
            problems.append(f"{folder.relative_to(out)}: {name} is not released; only its placeholder page may be published")
    allowed = {wheel_name(number, root) for number in calendar.editions}
    shelf = out / EDITIONS
    for path in sorted(shelf.rglob("*")) if shelf.is_dir() else []:
        if path.is_file() and path.name not in allowed:
            problems.append(f"{path.relative_to(out)}: the calendar publishes editions 0 to {calendar.newest_edition} only")
    problems += [f"edition {number} is built but not revealed" for number in wheels if number not in calendar.editions]
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix in leaks.TEXT_SUFFIXES | {""} and ".git" not in path.relative_to(out).parts:
            linked = {int(n) for n in WHEEL.findall(path.read_text(encoding="utf-8", errors="replace"))}
            problems += [f"{path.relative_to(out)} links edition {n}, which the calendar does not publish"
                         for n in sorted(linked - set(calendar.editions))]
    return problems


def _check_tree(out: Path, root: Path, wheels: dict[int, Path], calendar: Calendar) -> list[str]:
    problems = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if rel.parts[0] == ".git":
            continue
        if any(part in FORBIDDEN_DIRS for part in rel.parts) or (path.is_file() and rel.name in FORBIDDEN_FILES):
            problems.append(f"{rel} must not be published")
    problems += [str(leak) for leak in leaks.find_leaks([out], root)]
    index = leaks._Index(leaks.signatures(root)) if wheels else None  # one index serves every wheel
    for number, wheel in sorted(wheels.items()):
        problems += [str(leak) for leak in wheel_leaks(wheel, number, root, index)]
    return problems + _check_calendar(out, root, wheels, calendar)



def _excluded(config: dict, rel: str) -> bool:
    from sphinx.util.matching import Matcher

    return Matcher(config.get("exclude_patterns") or [])(rel)


def build_public(out: Path | None = None, root: Path = ROOT, calendar: Calendar | None = None) -> Path:
    """Write the student-facing tree into ``out`` (default ``_build/public``) and check it; return ``out``.

    ``calendar`` (default: ``course.calendar`` of ``_config.yml``, today) says which problem sets
    and editions are published. Raises :class:`PublicTreeError` (and removes the tree) if it holds
    anything students must not see, or the calendar makes no sense.
    """
    root = Path(root).resolve()
    out = Path(out or root / "_build" / "public").resolve()
    site = read_site(root)
    config = read_config(root)
    calendar = calendar or read_calendar(root)
    if not assignments(root):
        raise PublicTreeError("no assignment in solutions/: nothing to publish")
    _prepare(out, root)
    try:
        notebooks = _copy_sources(out, root, calendar)
        wheels = build_wheels(out / EDITIONS, calendar.editions, root)
        newest = calendar.newest_edition
        for path in notebooks:
            target = (out / path).with_suffix(".ipynb")
            if not _excluded(config, target.relative_to(out).as_posix()):
                raise PublicTreeError(f"{target.relative_to(out)} would be a second source of page {path.with_suffix('')}: "
                                      "add its folder to exclude_patterns in _config.yml (e.g. chapters/*.ipynb)")
            nbformat.write(chapter_notebook(root / path, newest, root), target)
        shutil.copyfile(root / STUDENT_FILE, out / STUDENT_FILE)
        (out / SERVED_AT).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / STUDENT_FILE, out / SERVED_AT)
        shutil.copyfile(root / NO_DEPS_FILE, out / NO_DEPS_FILE)
        (out / SELF_STUDY_INSTALL).parent.mkdir(parents=True, exist_ok=True)
        (out / SELF_STUDY_INSTALL).write_text(self_study_install(site, calendar.editions, root), encoding="utf-8")
        (out / "binder").mkdir()
        (out / "binder" / "requirements.txt").write_text(binder_requirements(root), encoding="utf-8")
        (out / "binder" / "runtime.txt").write_text("python-3.11\n", encoding="utf-8")
        post_build = out / "binder" / "postBuild"
        post_build.write_text(binder_post_build(wheel_name(newest, root)), encoding="utf-8")
        post_build.chmod(post_build.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        (out / "README.md").write_text(readme(site, calendar, wheels, root), encoding="utf-8")
        (out / ".gitignore").write_text("_build/\n.ipynb_checkpoints/\n__pycache__/\n", encoding="utf-8")
        stale = sync_install_cells(check=True, root=root) + stale_releases(root)
        if stale:
            raise PublicTreeError("run `python3 tasks.py sync` and `python3 tasks.py release`:\n" + "\n".join(stale))
        problems = _check_tree(out, root, wheels, calendar)
        if problems:
            raise PublicTreeError("the public tree is not safe to publish:\n" + "\n".join(problems))
    except BaseException:
        _empty(out)  # nothing unchecked stays on disk
        raise
    return out
