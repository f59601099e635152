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


@pytest.fixture(scope="session")
def html(root) -> Path:
    """The book, built once per test session with the README's command (``tasks.py book``)."""
    result = run([str(root / "tasks.py"), "book"], cwd=root, check=False)
    assert result.returncode == 0, f"the book build failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    return root / "_build" / "html"
