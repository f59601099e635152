"""The grading sandbox itself, without nbgrader: one notebook that tries to get out, run as a submission is.

The notebook's cells print what they could do; the test reads the executed notebook
the sandbox leaves behind. Needs bubblewrap (installed from Debian's packages when
missing and we are root); skipped with the reason where it cannot be had.
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_tools import grading, sandbox

pytestmark = pytest.mark.slow
MARKER = "course-sandbox-test-daemon"

CELLS = {
    "who": "import os; print('uid', os.getuid(), 'pid', os.getpid())",
    "network": """
import socket
for host in [("127.0.0.1", {port}), ("pypi.org", 443)]:
    try:
        socket.create_connection(host, timeout=2).sendall(b"secret"); print("reached", host)
    except OSError as error:
        print("unreachable", host[0], type(error).__name__)""",
    "files": """
import ast
import os
for path in {paths!r}:
    print("visible" if os.path.exists(path) else "invisible", path)""",
    "home": """
import ast
import os
home = {home!r}
print(sorted(os.listdir(home)) if os.path.isdir(home) else "invisible")""",
    "write": """
import os, sys
for folder in [sys.prefix, "/grading/in", "/grading/edition"]:
    try:
        open(os.path.join(folder, "planted.txt"), "w").write("x"); print("wrote", folder)
    except OSError as error:
        print("read-only", folder, type(error).__name__)""",
    "processes": """
import ast
import os
children = 0
try:
    for _ in range(500):
        if os.fork() == 0:
            import time; time.sleep(30); os._exit(0)
        children += 1
except OSError as error:
    print("fork refused after", children, type(error).__name__)
else:
    print("forked", children)""",
    "daemon": f"""
import subprocess
subprocess.Popen(["sleep", "1000", "{MARKER}"], start_new_session=True)
print("daemon started")""",
    "memory": """
try:
    block = bytearray(50 * 2 ** 30); print("allocated 50 GB")
except MemoryError:
    print("memory refused")""",
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory, root):
    reason = sandbox.unavailable()
    if reason:
        pytest.skip(reason)
    received = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
                received.append(connection.recv(100))
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    paths = [str(root / "solutions"), str(root / "gradebook.db"), str(root / "course_lib" / "vectors" / "counts.py"),
             str(Path.home()), "/grading/edition/course_lib", sys.prefix]
    job = tmp_path_factory.mktemp("job")
    (job / "in").mkdir()
    nb = nbformat.v4.new_notebook()
    for name, source in CELLS.items():
        nb.cells.append(nbformat.v4.new_code_cell(source.format(port=listener.getsockname()[1], paths=paths, home=str(Path.home())),
                                                  metadata={"name": name}))
    nbformat.write(nb, job / "in" / "notebook.ipynb")
    shutil.copy(Path(grading.__file__).with_name("sandbox_runner.py"), job / "in")
    started = time.time()
    result = sandbox.run_notebook(job, grading.edition_dir("ps01_counts"), sandbox.Limits(cell_seconds=60))
    stop.set()
    out = nbformat.read(job / "out" / "notebook.ipynb", as_version=4)
    text = {c.metadata["name"]: "".join(o.get("text", "") for o in c.outputs) for c in out.cells}
    return text, received, result, time.time() - started


def test_the_kernel_runs_as_a_user_of_its_own_in_its_own_process_space(executed):
    text, _received, result, _seconds = executed
    assert not result.timed_out, result.stderr
    if os.geteuid() == 0:
        uid = int(text["who"].split()[1])
        assert uid in sandbox.SANDBOX_UIDS, text["who"]


def test_no_network_not_even_the_graders_loopback(executed):
    text, received, _result, _seconds = executed
    assert "reached" not in text["network"] and text["network"].count("unreachable") == 2, text["network"]
    assert received == []


def test_the_course_and_the_instructors_files_are_invisible(executed, root):
    text, _received, _result, _seconds = executed
    lines = dict(line.split(" ", 1)[::-1] for line in text["files"].splitlines())
    for hidden in [root / "solutions", root / "gradebook.db", root / "course_lib" / "vectors" / "counts.py"]:
        assert lines[str(hidden)] == "invisible", text["files"]
    # of the instructor's home, at most the way to the Python installation (pyenv's, here) shows
    home = text["home"].strip()
    if home != "invisible":
        python = Path(sys.base_prefix).resolve()
        assert all(Path.home() / name in [python, *python.parents] for name in ast.literal_eval(home)), home
    assert lines["/grading/edition/course_lib"] == "visible" and lines[sys.prefix] == "visible"


def test_the_environment_and_the_inputs_are_read_only(executed):
    text, _received, _result, _seconds = executed
    assert "wrote" not in text["write"] and text["write"].count("read-only") == 3, text["write"]
    assert not (Path(sys.prefix) / "planted.txt").exists()


def test_limits_hold_and_nothing_outlives_the_run(executed):
    text, _received, _result, _seconds = executed
    assert "fork refused" in text["processes"], text["processes"]
    assert "memory refused" in text["memory"], text["memory"]
    alive = []
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if MARKER.encode() in status.read_bytes():
                alive.append(status.parent.name)
        except OSError:
            pass
    assert not alive, f"processes left behind: {alive}"
