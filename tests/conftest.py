"""Shared helpers of the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from course_tools import ROOT, tool_env


def run(args, cwd: Path, check: bool = True, **env) -> subprocess.CompletedProcess:
    """Run a command of this environment (``python -m ...``) and capture its output."""
    result = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                            env=tool_env(**env))
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread for a module's tests (``pytestmark = pytest.mark.usefixtures("one_thread")``):
    tiny matrices gain nothing from threads, and on a busy machine waking a second one costs milliseconds."""
    from course_lib.training import torch_threads

    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


BOOK_LOG = ROOT / "_build" / "book-for-tests.log"
"""What the book build of a test session printed (``tasks.py book``)."""
_book: dict = {}  # "process": the build of this session, started when the tests that read it are collected


GRADING_FILES = {"test_redteam.py", "test_redteam_later.py"}
"""The red team's batches run after the book is built: beside the background build, one hostile submission's
feedback run was seen to end early once (its score unchanged). The other grading tests run while it builds,
as a busy grading machine would."""


def _uses_book(item) -> bool:
    return "html" in getattr(item, "fixturenames", ())


def _order(item) -> int:
    """0: runs while the book builds; 1: reads the built book; 2: the red team, once the build is done."""
    if _uses_book(item):
        return 1
    return 2 if item.path.name in GRADING_FILES else 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The build starts in the background as soon as the tests that read the book are collected
    (:func:`pytest_collection_finish`); the other tests run meanwhile, on the core the build leaves idle
    while pip installs the students' environment, Sphinx writes the pages or only one chapter is left to
    execute; then the tests that read the book; then the red team's batches (:data:`GRADING_FILES`), on a
    machine the build no longer loads. The order within each group is kept."""
    if any(_uses_book(item) for item in items):
        items[:] = sorted(items, key=_order)  # stable


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(_uses_book(item) for item in session.items):
        _start_book()


def _start_book() -> subprocess.Popen:
    """``tasks.py book`` in the background, its output into :data:`BOOK_LOG`."""
    if "process" not in _book:
        BOOK_LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(BOOK_LOG, "w", encoding="utf-8") as log:
            _book["process"] = subprocess.Popen([sys.executable, str(ROOT / "tasks.py"), "book"], cwd=ROOT,
                                                stdout=log, stderr=subprocess.STDOUT, env=tool_env())
    return _book["process"]


@pytest.fixture(scope="session")
def html(root) -> Path:
    """The book, built once per test session with the README's command (``tasks.py book``), in the
    background from the start of the session; this waits for it."""
    process = _start_book()
    returncode = process.wait()
    output = BOOK_LOG.read_text(encoding="utf-8", errors="replace")
    assert returncode == 0, f"the book build failed (log: {BOOK_LOG}):\n{output[-8000:]}"
    return root / "_build" / "html"
