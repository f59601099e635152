"""The names of the student editions: which edition a problem set uses, its version and its wheel's file name.

Apart from :mod:`course_tools.authoring.edition` (which writes editions) so that what only needs a name
(:mod:`course_tools.site_config`'s wheel URLs) does not import the writer, which reads the site's URL.
"""

from __future__ import annotations

import re
from pathlib import Path

from course_tools.exercises import assignments
from . import ROOT


def edition_number(assignment: str, root: Path = ROOT) -> int:
    """The edition that students and the grader of ``assignment`` use: all earlier ones revealed."""
    names = assignments(root)
    if assignment not in names:
        raise ValueError(f"unknown assignment {assignment!r}; the assignments are {names}")
    return names.index(assignment)


def edition_version(number: int, root: Path = ROOT) -> str:
    """The version of edition ``number``: course_lib's, with the local label ``+student<number>``."""
    import tomllib

    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return re.sub(r"[^0-9.]", "", project["version"]) + f"+student{number}"


def wheel_name(number: int, root: Path = ROOT) -> str:
    """The file name of the wheel of edition ``number`` (what ``pip wheel`` of the edition writes)."""
    return f"course_lib-{edition_version(number, root)}-py3-none-any.whl"
