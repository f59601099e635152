"""nbgrader integration: grade in the student edition, and check a batch before grading.

``nbgrader_config.py`` replaces nbgrader's ``Execute`` preprocessor in autograding
with :class:`StudentEditionExecute`, so every notebook is run by a kernel that
imports the *student edition* of course_lib for its assignment: a submission that
imports the instructor's answer from course_lib gets the stub, and what passes
on a student's laptop passes in the grader.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import nbformat
from nbformat.reader import NotJSONError
from nbgrader.preprocessors import Execute
from nbgrader.utils import setenv

from . import ROOT
from .edition import edition_number, write_edition


@functools.lru_cache(maxsize=None)
def edition_dir(assignment: str, root: Path = ROOT) -> Path:
    """Build (once per content) the student edition used to grade ``assignment``; return its folder.

    The folder name carries a hash of the edition's files, so concurrent graders
    and repeated runs reuse a finished edition and never see a half-written one.
    Within one grading process the edition is built once, not once per notebook.
    """
    number = edition_number(assignment, root)
    with tempfile.TemporaryDirectory(dir=_editions(root)) as scratch:
        fresh = write_edition(Path(scratch) / "edition", number, root)
        digest = hashlib.sha256()
        for path in sorted(fresh.rglob("*.py")):
            digest.update(str(path.relative_to(fresh)).encode() + path.read_bytes())
        final = _editions(root) / f"edition{number}-{digest.hexdigest()[:12]}"
        if not final.exists():
            try:
                os.replace(fresh, final)
            except OSError:  # another grader finished the same edition first
                if not final.exists():
                    raise
    return final


def _editions(root: Path) -> Path:
    path = root / "_build" / "editions"
    path.mkdir(parents=True, exist_ok=True)
    return path


class StudentEditionExecute(Execute):
    """nbgrader's ``Execute``, with the student edition of course_lib first on the kernel's path."""

    def preprocess(self, nb, resources, *args, **kwargs):
        assignment = resources.get("nbgrader", {}).get("assignment")
        if not assignment:
            return super().preprocess(nb, resources, *args, **kwargs)
        edition = edition_dir(assignment)
        path = os.pathsep.join(p for p in [str(edition), os.environ.get("PYTHONPATH", "")] if p)
        self.log.info("Grading %s with student edition %s", assignment, edition.name)
        with setenv(PYTHONPATH=path):
            return super().preprocess(nb, resources, *args, **kwargs)


def check_submission(folder: Path, expected_notebooks: list[str]) -> list[str]:
    """Problems that would stop a submission from being graded, in plain words.

    Args:
        folder: ``submitted/<student>/<assignment>``.
        expected_notebooks: notebook file names the assignment has.

    Returns:
        one sentence per problem; empty if the submission can be graded.
    """
    problems = []
    for name in expected_notebooks:
        path = folder / name
        if not path.exists():
            problems.append(f"{name} is missing from {folder}")
            continue
        try:
            nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
        except (NotJSONError, UnicodeDecodeError) as error:
            problems.append(f"{name} is not a readable notebook (broken JSON: {str(error)[:200]})")
        except Exception as error:  # nbformat's validation errors have many types
            problems.append(f"{name} is not a valid notebook ({type(error).__name__}: {str(error)[:200]})")
    return problems


