#!/usr/bin/env python3
"""The course's commands. Needs only Python 3.11; everything else is installed into .venv.

    python3 tasks.py book      set up .venv if needed, then build the book (from the public tree) into _build/html;
                               it publishes what course.calendar in _config.yml releases and reveals
                               [--self-study: every problem set and answer] [--date YYYY-MM-DD: a calendar
                               of dates on that day]
    python3 tasks.py test      set up .venv if needed, then run the whole test suite

For maintainers and instructors (see README.md):

    python3 tasks.py sync      copy answer cells from course_lib into solutions/, write the answer keys,
                               write each assignment's install cell (its edition's wheel URL)
    python3 tasks.py release   regenerate exercises/ from solutions/ with nbgrader
    python3 tasks.py check     fail on drift between course_lib, solutions/ and exercises/, or leaks
    python3 tasks.py edition N write student edition N of course_lib (first N assignments revealed)
    python3 tasks.py public    write what students may see into _build/public (--out DIR), leak-checked;
                               the calendar as for book (--self-study, --date)
    python3 tasks.py grade A   stage all submissions of assignment A, grade each in a sandbox, report
                               [--no-experiments: graded cells only] [--unsandboxed: no isolation]
    python3 tasks.py report A  the class report of assignment A from the gradebook: reports/A/index.html,
                               its tables as CSV, canvas.csv and moodle.csv [--db URL] [--out DIR]
    python3 tasks.py chapter F execute one chapter alone (no book build); figures go to _build/chapter/
    python3 tasks.py measure A run problem set A's experiment with the reference answers over 5 seeds
                               [--seeds N]; write answer_keys/A.results.json, whose results sync states
    python3 tasks.py bench     run every benchmark, one at a time, and write one table of the ratios
                               against the reference implementations to _build/benchmarks.md [--quick]
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".course-installed"
UNWANTED = "rfc3987-syntax"
"""Installed by pip as a dependency, removed again by :func:`setup` (the reason is there)."""


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]), **extra)
    env.pop("PYTHONPATH", None)
    return env


def _run(*cmd, env_extra: dict | None = None, **kwargs) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, env=_env(**(env_extra or {})), **kwargs)


def _base_python() -> str:
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if not found:
        sys.exit("This course needs Python 3.11 (the pinned torch wheel is built for it); "
                 "run this script with python3.11.")
    return found


def setup() -> None:
    """Create .venv and install requirements.txt, course_lib (editable) and requirements-nodeps.txt (without dependencies), once per change."""
    wanted = hashlib.sha256((ROOT / "requirements.txt").read_bytes() + (ROOT / "requirements-nodeps.txt").read_bytes()
                            + (ROOT / "pyproject.toml").read_bytes() + UNWANTED.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted and PYTHON.exists():
        return
    started = time.time()
    if not PYTHON.exists():
        _run(_base_python(), "-m", "venv", VENV)
    # pip compiles every file it installs to bytecode on one core (half its time here); compileall then does
    # the same work on every core
    _run(PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
         "-r", ROOT / "requirements.txt", "-e", ROOT)
    _run(PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile", "--no-deps",
         "-r", ROOT / "requirements-nodeps.txt")
    # jsonschema (which nbformat validates notebooks with) imports rfc3987-syntax when it is installed
    # (jupyter-events asks for it through jsonschema's "format-nongpl" extra), and that package builds 35 Earley
    # parsers when imported: 1.4 s of CPU in every process that imports nbformat (each nbgrader command, grading
    # task, worker and build). No notebook or Jupyter schema uses the "iri" formats
    # it checks; without it jsonschema leaves them unchecked (python-jsonschema/jsonschema issue 1428).
    _run(PYTHON, "-m", "pip", "uninstall", "--quiet", "--yes", UNWANTED)
    site_packages = subprocess.run([str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    print(f"+ compileall -j 0 {site_packages}", flush=True)
    subprocess.run([str(PYTHON), "-m", "compileall", "-q", "-j", "0", site_packages], cwd=ROOT, env=_env(),
                   stdout=subprocess.DEVNULL, check=False)  # a file that does not compile is also skipped by pip
    STAMP.write_text(wanted)
    print(f"environment ready in {time.time() - started:.0f} s", flush=True)


def _library_fingerprint() -> str:
    digest = hashlib.sha256()
    # the students' requirements too: the self-study book executes in the environment they make
    for path in sorted((ROOT / "course_lib").rglob("*.py")) + [ROOT / "requirements-student.txt"]:
        digest.update(path.relative_to(ROOT).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def build_book(calendar_args: list[str]) -> None:
    """Build the book with -W from the public tree (``tasks.py public``: what students may see,
    leak-checked, with the chapter notebooks for Colab and the wheels of course_lib's student editions
    that the release calendar reveals in ``_static/editions/``, which the book then serves), into
    ``_build/html``. ``calendar_args`` (``--self-study``, ``--date D``) go to ``tasks.py public``.

    ``_build/html`` is emptied first: Sphinx never deletes what an earlier build left there, and
    a class's site must not keep a wheel or page of an earlier build (the self-study one, say).

    The execution cache is keyed by each chapter's code only, so it is dropped whenever
    course_lib changes: every number in the book comes from the current library. The chapters
    missing from the cache are executed first, two at a time (``course_tools/book/book_execution.py``),
    so that jupyter-book, which executes one after another, finds every chapter in the cache."""
    started = time.time()
    cache, stamp = ROOT / "_build" / ".jupyter_cache", ROOT / "_build" / ".course_lib.sha256"
    fingerprint = _library_fingerprint()
    if not stamp.exists() or stamp.read_text() != fingerprint:
        shutil.rmtree(cache, ignore_errors=True)
    public = ROOT / "_build" / "public"
    _run(PYTHON, "-m", "course_tools", "public", "--out", public, *calendar_args)
    # Everything revealed (self-study): the chapters execute in the students' environment, made from the
    # pages' install lines (course_tools/book/student_env.py); the stdout is its kernel folder, or empty.
    print("+ python -m course_tools.book.student_env", public, flush=True)
    kernels = subprocess.run([str(PYTHON), "-m", "course_tools.book.student_env", str(public)], cwd=ROOT, check=True,
                             stdout=subprocess.PIPE, text=True, env=_env()).stdout.strip()
    execution = {"JUPYTER_PATH": os.pathsep.join([kernels, os.environ.get("JUPYTER_PATH", "")])} if kernels else {}
    _run(PYTHON, "-m", "course_tools.book.book_execution", public,  # in ROOT too: the cache path is relative to it
         env_extra=execution)
    # the chapter notebooks again, now with the numbers the executed chapters glued (the download button's file)
    _run(PYTHON, "-m", "course_tools.book.chapter_notebooks", public)
    shutil.rmtree(ROOT / "_build" / "html", ignore_errors=True)
    # --path-output: the HTML goes to _build/html; the cache path in _config.yml is relative to ROOT (the cwd)
    _run(BIN / "jupyter-book", "build", public, "--path-output", ROOT, "--all", "--builder", "html",
         "-W", "--keep-going")
    stamp.write_text(fingerprint)
    print(f"book built in {time.time() - started:.0f} s: open {ROOT / '_build' / 'html' / 'index.html'}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    setup()
    try:
        if command == "setup":
            return 0
        if command == "book":
            build_book(rest)
        elif command == "test":
            _run(PYTHON, "-m", "pytest", *rest)
        elif command == "bench":
            _run(PYTHON, str(ROOT / "benchmarks" / "all.py"), *rest)
        elif command in ("sync", "release", "check", "edition", "public", "grade", "report", "leaks", "chapter", "measure"):
            _run(PYTHON, "-m", "course_tools", command, *rest)
        else:
            print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
            return 2
    except subprocess.CalledProcessError as error:
        return error.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
