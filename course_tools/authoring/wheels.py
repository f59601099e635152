"""The student editions as wheels, built offline, and scanned for leaks.

Assignment N uses edition N-1 (:mod:`course_tools.authoring.edition`). :func:`build_wheels`
builds the editions a build publishes (those whose answers the release calendar has
revealed, :mod:`course_tools.book.course_calendar`); the public tree
(:mod:`course_tools.book.public`) puts them in ``_static/editions/``, where the book serves
them. A wheel of edition N reveals the answers of the first N assignments on purpose,
so it is checked against the answers of the other assignments only
(:func:`edition_signatures`, :func:`wheel_leaks`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from course_tools import ROOT
from course_tools.exercises import find_exercises, library_dir
from course_tools.site_config import PublicTreeError
from . import leaks
from .edition import revealed_keys, wheel_name, write_edition

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


def build_wheels(out_dir: Path, numbers, root: Path = ROOT) -> dict[int, Path]:
    """The wheels of editions ``numbers`` into ``out_dir``; ``{edition number: wheel}``.

    Each edition is written by :func:`course_tools.authoring.edition.write_edition` and built
    offline by setuptools' PEP 517 backend (what ``pip wheel --no-build-isolation`` calls),
    all in one process; fixed timestamps make the same edition the same wheel, byte for byte.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH="315532800")
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory() as scratch:
        numbers = sorted(set(numbers))
        projects = [write_edition(Path(scratch) / f"edition{n}", n, root) for n in numbers]
        built = Path(scratch) / "wheels"
        result = subprocess.run([sys.executable, "-c", _BUILD_WHEELS, str(built), *map(str, projects)],
                                capture_output=True, text=True, env=env)
        wheels = {}
        for number in numbers:
            wheel = built / wheel_name(number, root)
            if result.returncode != 0 or not wheel.exists():
                raise PublicTreeError(f"building the wheel of edition {number} failed:\n{result.stdout}{result.stderr}")
            wheels[number] = Path(shutil.copyfile(wheel, out_dir / wheel.name))
    return wheels


def edition_signatures(number: int, root: Path = ROOT) -> dict[str, str]:
    """What must not appear in edition ``number``: every answer line but those of the revealed answers,
    and the hidden tests of every assignment."""
    found = find_exercises(library_dir(root))
    revealed = {" ".join(line.split()) for key in revealed_keys(number, root) for line in found[key].solution_lines()}
    return {sig: what for sig, what in leaks.signatures(root).items() if sig not in revealed}


def wheel_leaks(wheel: Path, number: int, root: Path = ROOT, index=None) -> list[leaks.Leak]:
    """Leaks in the wheel of edition ``number``: markers, hidden tests, answers it does not reveal,
    and any file outside course_lib.

    ``index`` (``leaks._Index`` of :func:`course_tools.authoring.leaks.signatures`), when given, is reused:
    building it takes a second, and one serves every edition."""
    sigs = edition_signatures(number, root)
    index = index or leaks._Index(leaks.signatures(root))
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
            found += [leaks.Leak(where, f"{sigs[sig]}: {sig[:60]!r}") for sig in sorted(index.found(text)) if sig in sigs]
    return found
