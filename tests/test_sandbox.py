"""The grading sandbox itself, without nbgrader: one notebook that tries to get out, run as a submission is;
then its limits (CPU time, wall clock, memory as a whole) and an environment reached through a symbolic link.

The notebook's cells print what they could do; the test reads the executed notebook
the sandbox leaves behind. Needs bubblewrap (installed from Debian's packages when
missing and we are root); skipped with the reason where it cannot be had.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_tools.grading import autograde, memory_cgroup, sandbox

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
    shutil.copy(autograde.IN_SANDBOX / "sandbox_runner.py", job / "in")
    started = time.time()
    result = sandbox.run_notebook(job, autograde.edition_dir("ps01_counts"), sandbox.Limits(cell_seconds=60))
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


def _run_cells(job: Path, cells: dict[str, str], limits: sandbox.Limits):
    """Run a notebook of ``cells`` (name -> source) in the sandbox as a submission is run; return the
    run's result, the runner's ``grading_run`` status, and each cell's text output (errors by name)."""
    reason = sandbox.unavailable()
    if reason:
        pytest.skip(reason)
    (job / "in").mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"name": name}) for name, source in cells.items()]
    nbformat.write(nb, job / "in" / "notebook.ipynb")
    shutil.copy(autograde.IN_SANDBOX / "sandbox_runner.py", job / "in")
    result = sandbox.run_notebook(job, autograde.edition_dir("ps01_counts"), limits)
    path = job / "out" / "notebook.ipynb"
    out = nbformat.read(path, as_version=4) if path.exists() else nbformat.v4.new_notebook()
    text = {c.metadata["name"]: "".join(o.get("text", "") or o.get("ename", "") for o in c.outputs) for c in out.cells}
    positions = {c.metadata["name"]: i for i, c in enumerate(out.cells)}
    return result, out.metadata.get("grading_run", {}), text, positions


BUSY = "x = 0\nwhile True:\n    x += 1"


def test_cpu_time_limits_a_cell_and_the_notebook(tmp_path):
    """A cell is interrupted after its CPU seconds, counting the processes it starts; the run stops
    once the cells together used the notebook's. Wall clock (60 s) is far away: a busy machine changes nothing."""
    cells = {"loop": BUSY,
             "child": "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass'])",
             "rest": BUSY, "after": "print('ran after the notebook budget')"}
    limits = sandbox.Limits(cell_seconds=60, cell_cpu_seconds=2, notebook_cpu_seconds=6)
    result, status, text, at = _run_cells(tmp_path, cells, limits)
    assert not result.timed_out and status["timeouts"] == [], status
    assert status["cpu_timeouts"] == [at["loop"], at["child"]], status
    assert "KeyboardInterrupt" in text["loop"] and "KeyboardInterrupt" in text["child"], text
    assert status["stopped"]["cell"] == at["rest"] and status["stopped"]["limit"] == "notebook_cpu", status
    assert "ran after" not in text["after"]
    assert 5.5 <= status["cpu_seconds"], status  # the child's CPU time counted too
    nb, notes = _graders_notes(tmp_path, result, limits)
    assert f"cell {at['loop'] + 1} was stopped after 2 s of CPU time (the limit per cell)" in notes, notes
    assert any("used up its 6 s of CPU time" in n and f"cell {at['rest'] + 1}" in n for n in notes), notes
    assert "grading_wall_timeout" not in nb.metadata  # CPU limits are the submission's own: no second grading


def test_wall_clock_bounds_a_cell_and_a_deaf_kernel_is_killed(tmp_path):
    """With the CPU limit out of reach, the wall clock stops a cell that computes and one that sleeps (a
    kernel that ignores the interrupt, killed a moment later). Only the computing cell may have been slowed
    by a busy machine (``sandbox.computing``); the kernel run decides no points (the graded cells run in the
    probe runner, whose wall-clock stops flag a second grading), so it asks for none."""
    cells = {"spin": BUSY, "next": "print('next cell ran')",
             "deaf": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(1000)",
             "after": "print('ran after the kill')"}
    limits = sandbox.Limits(cell_seconds=4, cell_cpu_seconds=1000)
    result, status, text, at = _run_cells(tmp_path, cells, limits)
    assert status["timeouts"] == [at["spin"], at["deaf"]] and status["cpu_timeouts"] == [], status
    assert "KeyboardInterrupt" in text["spin"] and "next cell ran" in text["next"], text
    assert status["stopped"]["cell"] == at["deaf"] and "killed" in status["stopped"]["why"], status
    assert "ran after" not in text["after"] and not result.timed_out, text
    spin_cpu, deaf_cpu = status["timeout_cpu"]
    assert sandbox.computing(spin_cpu, 4) and not sandbox.computing(deaf_cpu, 4), status
    nb, notes = _graders_notes(tmp_path, result, limits)
    assert f"cell {at['spin'] + 1} was stopped after 4 s of wall clock (the limit per cell)" in notes, notes
    assert "grading_wall_timeout" not in nb.metadata


def _graders_notes(job: Path, result: sandbox.RunResult, limits: sandbox.Limits):
    """What the grader makes of a run (:func:`course_tools.grading.autograde._merge`): the notebook and the notes."""
    nb = nbformat.read(job / "in" / "notebook.ipynb", as_version=4)
    return nb, autograde._merge(nb, job, list(range(len(nb.cells))), result, limits, set())


FILL = """
import os
MIB = b"x" * 2 ** 20
def fill(folder, mib):  # files of 100 MiB (each file is limited to 200 MiB)
    written = 0
    try:
        for n in range(0, mib, 100):
            with open(os.path.join(folder, f"fill{n}"), "wb") as f:
                for _ in range(100):
                    f.write(MIB)
                    f.flush()
                    written += 1
    except OSError as error:
        print(folder, "refused after", written, "MiB", flush=True)
    else:
        print(folder, "took", written, "MiB", flush=True)
fill("/tmp", 300)
fill("/dev/shm", 300)
held = []
for n in range(8):
    fd = os.memfd_create(f"fill{n}")
    for _ in range(100):
        os.write(fd, MIB)
    held.append(fd)
print("memfds took", 100 * len(held), "MiB", flush=True)"""


def test_memory_in_tmpfs_shared_memory_and_memfds_counts_against_one_limit(tmp_path):
    """1.4 GiB asked for in /tmp, /dev/shm and memfds, none of it address space: the run's memory cgroup
    (512 MiB here) stops it, and the grader, outside it, goes on and says why, leaving no cgroup behind;
    without a cgroup the tmpfs sizes still hold."""
    limits = sandbox.Limits(cell_seconds=120, memory_total=512 * 2 ** 20)
    result, status, text, at = _run_cells(tmp_path / "job", {"fill": FILL, "after": "print('after')"}, limits)
    if sandbox.memory_unbounded() is None:
        assert any("went past its memory limit of 0.5 GiB" in note for note in result.notes), result.notes
        assert "memfds took" not in text.get("fill", ""), text
        assert result.memory_peak is not None and result.memory_peak <= limits.memory_total
        mine = f"{memory_cgroup.NAME_PREFIX}{os.getpid()}-*"
        left = [p for _v, parent in memory_cgroup._parents() for p in parent.glob(mine)]
        assert not left, f"cgroups left behind: {left}"
    else:  # the fallback bounds what it can: the two tmpfs mounts
        for folder, size in (("/tmp", sandbox.TMP_BYTES), ("/dev/shm", sandbox.SHM_BYTES)):
            refused = re.search(rf"^{folder} refused after (\d+) MiB", text["fill"], re.MULTILINE)
            assert refused and size // 2 ** 20 - 8 <= int(refused[1]) <= size // 2 ** 20, text


LINKED = """
import json, shutil, sys
from pathlib import Path
import nbformat
from course_tools.grading import autograde, sandbox
job = Path(sys.argv[1])
(job / "in").mkdir(parents=True)
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell("import os, sys, numpy\\nprint(sys.prefix, os.path.realpath(numpy.__file__))")]
nbformat.write(nb, job / "in" / "notebook.ipynb")
shutil.copy(autograde.IN_SANDBOX / "sandbox_runner.py", job / "in")
result = sandbox.run_notebook(job, autograde.edition_dir("ps01_counts"), sandbox.Limits())
out = nbformat.read(job / "out" / "notebook.ipynb", as_version=4)
print(json.dumps({"prefix": sys.prefix, "stderr": result.stderr[-300:],
                  "output": "".join(o.get("text", "") for o in out.cells[0].outputs)}))"""


def test_an_environment_reached_through_a_symbolic_link_grades(tmp_path, root):
    """A virtual environment reached through a symbolic link (a shared or conda environment): the kernel
    starts, Python in the sandbox sees the environment at the linked path, and that path leads to the one
    tree bound at the real path (so what the graded run hides there stays hidden through the link)."""
    if sandbox.unavailable():
        pytest.skip(sandbox.unavailable())
    link = tmp_path / "linked-env"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = link / "bin" / Path(sys.executable).name
    done = subprocess.run([str(python), "-c", LINKED, str(tmp_path / "job")], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(root)), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["prefix"] == str(link), report  # the grader really ran from the linked path
    prefix, numpy_file = report["output"].split()
    assert prefix == str(link) and Path(numpy_file).is_relative_to(Path(sys.prefix).resolve()), report
