"""Shared helpers of the test suite."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import Future
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


def pytest_configure(config):
    """The whole suite (every test, nothing deselected): the build starts before collection, which takes a
    core for some seconds importing the libraries; otherwise once the tests that read the book are collected."""
    whole = [Path(arg).resolve() for arg in config.args] == [Path(__file__).parent]
    chosen = config.option.keyword or config.option.markexpr or config.getoption("deselect") \
        or config.getoption("lf", False) or config.option.collectonly
    if whole and not chosen and not hasattr(config, "workerinput"):
        _start_book()


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(_uses_book(item) for item in session.items):
        _start_book()
        selected = {item.path.name for item in session.items}
        for job in _JOBS:
            if job.module in selected:
                _STARTED.append(job)
                threading.Thread(target=job.run, name=f"after-book {job.name}", daemon=True).start()


class _AfterBook:
    """A piece of work that needs only the built book, run in a background thread as soon as the build ends."""

    def __init__(self, fn, module: str, last: bool):
        self.fn, self.module, self.name, self.last = fn, module, fn.__name__, last
        self.future: Future = Future()
        self._lock = threading.Lock()

    def run(self) -> None:
        """Wait for the book, then do the work once (a second caller waits for the first)."""
        with self._lock:
            if self.future.done():
                return
            if _start_book().wait() != 0:
                self.future.set_exception(RuntimeError(f"the book build failed (log: {BOOK_LOG})"))
                return
            if self.last:  # after every other job of the session: it builds the book again
                for job in _STARTED:
                    if not job.last:
                        job.run()
            try:
                self.future.set_result(self.fn(ROOT / "_build" / "html"))
            except BaseException as error:  # noqa: BLE001 - handed to the test that reads it
                self.future.set_exception(error)

    def result(self):
        """The work's result: done in the background already, or being done (wait), or done here and now."""
        self.run()
        return self.future.result()


_JOBS: list[_AfterBook] = []  # every job the collected modules registered
_STARTED: list[_AfterBook] = []  # the jobs of this session, which the tests that read the book wait for


def after_book(fn=None, *, last: bool = False):
    """Decorator: ``fn(html)`` runs in a background thread as soon as the session's book build ends, while
    the tests that do not read the book still run on the core the build has freed; a fixture or test reads
    its result with ``.result()`` (which does the work there and then when no session started it). Only for
    work that shares nothing with the tests that may run beside it (no environment variables, no gradebook,
    no sandbox): the students' problem sets in the students' environment with kernels of their own, the pages
    read by a browser of its own. ``last``: after every other such job (it builds the book again). The tests
    that read the book wait for every job of the session (:func:`html`)."""
    def register(fn):
        job = _AfterBook(fn, Path(sys.modules[fn.__module__].__file__).name, last)
        _JOBS.append(job)
        return job
    return register(fn) if fn is not None else register


def _start_book() -> subprocess.Popen:
    """``tasks.py book`` in the background, its output into :data:`BOOK_LOG`."""
    if "process" not in _book:
        BOOK_LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(BOOK_LOG, "w", encoding="utf-8") as log:
            _book["process"] = subprocess.Popen([sys.executable, str(ROOT / "tasks.py"), "book"], cwd=ROOT,
                                                stdout=log, stderr=subprocess.STDOUT, env=tool_env(),
                                                start_new_session=True)
    return _book["process"]


def pytest_unconfigure(config):
    """A session that ends before its build does (an error in collection, Ctrl-C) stops the build and everything
    it started, instead of leaving it to write into _build/ beside the next command."""
    process = _book.get("process")
    if process is not None and process.poll() is None:
        import os
        import signal

        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=30)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="session")
def html(root) -> Path:
    """The book, built once per test session with the README's command (``tasks.py book``), in the
    background from the start of the session; this waits for it."""
    process = _start_book()
    returncode = process.wait()
    output = BOOK_LOG.read_text(encoding="utf-8", errors="replace")
    assert returncode == 0, f"the book build failed (log: {BOOK_LOG}):\n{output[-8000:]}"
    for job in _STARTED:  # done before any test reads the book, since one of them builds it again
        job.run()
    return root / "_build" / "html"
