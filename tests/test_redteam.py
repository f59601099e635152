"""Red team: hostile, broken and accidental ps01 submissions, graded in one batch with real nbgrader and the real sandbox.

One scratch course (as in ``tests/test_grading.py``) receives the corpus of
``tests/redteam_submissions.py``, about fifty students, and is graded once with
``python -m course_tools grade ps01_counts --no-experiments``. The tests then check,
from that one batch: every student's score (exactly what their real work earns) and
the words of the grader's note; that the batch did not crash; that nothing outside
the grader's own folders changed (a snapshot of the course, which holds a copy of
course_lib for the vandal to delete: the repository itself is never a target; the
student edition; the venv's site-packages); that no process outlived grading; that the TCP listener the
test runs on 127.0.0.1 received nothing; what the hostile cells printed about what
they could reach; and that the autograded notebooks stay small. (That grading a
batch twice gives the same gradebook is checked in ``tests/test_grading.py``.)

The scratch course's ``nbgrader_config.py`` shortens the sandbox's time limits
(:data:`CELL_SECONDS`, :data:`NOTEBOOK_SECONDS`) so that the sleeping and looping
submissions cost seconds, not minutes. A case marked ``xfail(strict=True)`` is a
known bug of the grader: it turns into a failure ("XPASS(strict)") once fixed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import stat
import sysconfig
import threading
import time
import uuid
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbgrader.api import Gradebook

import redteam_submissions as rt
from conftest import run
from course_tools.grading.sandbox import SANDBOX_UIDS

pytestmark = pytest.mark.slow

CELL_SECONDS = 10
NOTEBOOK_SECONDS = 30
SHORT_LIMITS = f"""

# Red-team test only: short sandbox time limits, so that sleeping and looping submissions cost seconds.
c.SandboxedExecute.cell_seconds = {CELL_SECONDS}
c.SandboxedExecute.notebook_seconds = {NOTEBOOK_SECONDS}
"""
EXCLUDED = {"_grading", "autograded", "feedback", "gradebook.db", ".nbgrader.log"}
"""What grading may write in the course folder; everything else must stay as it was."""
MAX_NOTEBOOK_BYTES = 5 * 2 ** 20


class Listener:
    """A TCP (and UDP) listener on 127.0.0.1 that records whatever reaches it."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.tcp.settimeout(0.2)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.udp.bind(("127.0.0.1", self.port))
            self.udp.settimeout(0.2)
        except OSError:
            self.udp.close()
            self.udp = None
        self.received: list = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, address = self.tcp.accept()
                with conn:
                    conn.settimeout(2)
                    self.received.append(("tcp", address, conn.recv(1024)))
            except OSError:  # timeouts included
                pass
            if self.udp is not None:
                try:
                    self.received.append(("udp",) + self.udp.recvfrom(1024)[::-1])
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join()
        self.tcp.close()
        if self.udp is not None:
            self.udp.close()


def snapshot(top: Path, excluded: set[str] = frozenset()) -> dict:
    """``relative path -> (kind, mode, size, sha256 | link target)`` of everything under ``top``,
    without following links or opening anything but regular files; ``excluded`` top-level names and
    Python's ``__pycache__`` folders skipped."""
    out = {}
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        if here == top:
            dirs[:] = [d for d in dirs if d not in excluded]
            files = [f for f in files if f not in excluded]
        for name in dirs + files:
            path = here / name
            info = os.lstat(path)
            key = str(path.relative_to(top))
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                out[key] = ("link", mode, 0, os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                out[key] = ("file", mode, info.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
            elif stat.S_ISDIR(info.st_mode):
                out[key] = ("dir", mode, 0, "")
            else:
                out[key] = ("special", stat.S_IFMT(info.st_mode), 0, "")
    return out


def processes() -> list[tuple[int, int, str]]:
    """``(pid, uid, command line)`` of every process (read from /proc; psutil is not needed)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:")), -1)
        out.append((int(pid), uid, command))
    return out


def _gradebook(course: Path) -> dict:
    """``student -> {"score", "max", "cells": {grade_id: (auto, manual, needs manual grade)}}``."""
    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.find_assignment(rt.ASSIGNMENT).submissions:
            cells = {}
            for notebook in sub.notebooks:
                for grade in notebook.grades:
                    cells[grade.name] = (grade.auto_score, grade.manual_score, bool(grade.needs_manual_grade))
            out[sub.student_id] = {"score": sub.score, "max": sub.max_score, "cells": cells}
    return out


def _lines(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line for line in stdout.splitlines() if line.startswith("  ") and line.strip()}


@dataclasses.dataclass
class Grading:
    stdout: str
    stderr: str
    returncode: int
    seconds: float
    lines: dict
    gradebook: dict
    snapshot: dict
    editions: dict
    leftovers: list


@dataclasses.dataclass
class Batch:
    course: Path
    ctx: rt.Ctx
    before: dict
    editions_before: dict
    first: Grading
    listener: list
    build_seconds: float
    new_tmp_folders: set

    def autograded(self, student: str) -> Path:
        return self.course / "autograded" / student / rt.ASSIGNMENT / rt.NOTEBOOK

    def outputs(self, student: str) -> str:
        """Every text output of the student's autograded notebook, joined."""
        nb = nbformat.read(self.autograded(student), as_version=4)
        texts = []
        for c in nb.cells:
            for o in c.get("outputs", []):
                texts.append(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"]))
                texts.append(str(o.get("evalue", "")))
        return "\n".join(texts)


def _editions(root: Path) -> dict:
    return {p.name: snapshot(p) for p in sorted((root / "_build" / "editions").glob("edition*-*")) if p.is_dir()}


def _leftovers(course: Path, token: str, sandbox_users_before: set[int]) -> list:
    """Processes of this batch still alive: the daemon's token or the course in the command line, or
    new processes of a sandbox's user (unless another grader is running now and may own them)."""
    deadline = time.time() + 5
    while True:
        found = [p for p in processes() if token in p[2] or str(course) in p[2]]
        others_grading = any(("autograde" in c or "course_tools grade" in c) and str(course) not in c
                             for _, _, c in processes())
        if not others_grading:
            found += [p for p in processes() if p[1] in SANDBOX_UIDS and p[0] not in sandbox_users_before and p not in found]
        if not found or time.time() > deadline:
            return found
        time.sleep(0.5)


def _clean_up(ctx: rt.Ctx) -> None:
    """Undo what a submission could do only if the sandbox failed open (the tests then fail, saying what)."""
    for pid, _uid, command in processes():
        if f"redteam-daemon-{ctx.token}" in command:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    if ctx.sentinel.exists():
        ctx.sentinel.rename(ctx.sentinel.with_suffix(".found"))  # kept as evidence, no longer a .pth


@pytest.fixture(scope="module")
def batch(tmp_path_factory, root):
    course = tmp_path_factory.mktemp("redteam")
    shutil.copy(root / "nbgrader_config.py", course)
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write(SHORT_LIMITS)
    for name in ("solutions", "exercises", "answer_keys", "course_lib"):  # course_lib: a decoy for the vandal
        shutil.copytree(root / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    run(["-m", "nbgrader", "generate_assignment", rt.ASSIGNMENT, "--force"], cwd=course)
    solution = nbformat.read(root / "solutions" / rt.ASSIGNMENT / rt.NOTEBOOK, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    listener = Listener()
    ctx = rt.Ctx(course=course, repo=root, answers=answers, port=listener.port, token=uuid.uuid4().hex[:12],
                 site_packages=Path(sysconfig.get_paths()["purelib"]))
    started = time.time()
    rt.build_all(ctx)
    build_seconds = time.time() - started
    before, editions_before = snapshot(course, EXCLUDED), _editions(root)
    sandbox_users_before = {p[0] for p in processes() if p[1] in SANDBOX_UIDS}
    tmp_before = set(Path("/tmp").glob("course-sandbox-*"))

    def grade() -> Grading:
        started = time.time()
        result = run(["-m", "course_tools", "grade", rt.ASSIGNMENT, "--no-experiments"], cwd=course, check=False)
        seconds = time.time() - started
        return Grading(result.stdout, result.stderr, result.returncode, seconds, _lines(result.stdout),
                       _gradebook(course), snapshot(course, EXCLUDED), _editions(root),
                       _leftovers(course, ctx.token, sandbox_users_before))

    try:
        first = grade()
    finally:
        listener.close()
        _clean_up(ctx)
    print(f"\nred team: {len(rt.CASES)} submissions written in {build_seconds:.1f} s, graded in {first.seconds:.0f} s")
    new_tmp_folders = set(Path("/tmp").glob("course-sandbox-*")) - tmp_before
    return Batch(course, ctx, before, editions_before, first, listener.received, build_seconds, new_tmp_folders)


def _param(c: rt.Case):
    marks = [pytest.mark.xfail(strict=True, reason=c.bug)] if c.bug else []
    return pytest.param(c, id=c.student, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in rt.CASES])
def test_each_submission_gets_what_its_work_earns(batch, case):
    grading = batch.first
    assert case.student in grading.lines, f"{case.student} is missing from the report:\n{grading.stdout}"
    line = grading.lines[case.student]
    assert len(line) < 2000, f"{case.student}'s line is {len(line)} characters long: {line[:300]}..."
    entry = grading.gradebook.get(case.student)
    assert entry is not None, f"{case.student} is not in the gradebook: {line}"
    cells = {k: (v[0] or 0) + (v[1] or 0) for k, v in entry["cells"].items() if k != rt.WRITTEN}
    functions = {f: cells[f"test_{f}"] + cells[f"hidden_{f}"] for f in rt.FUNCTIONS}
    assert (sum(cells.values()), entry["max"]) == (case.score, 100), (case.what, line, functions)
    assert f" {case.score:g}/100 " in line, line
    if case.functions is not None:
        assert functions == case.functions, (case.what, line)
    for word in case.note:  # "a|b": either may be the note
        assert any(w in line for w in word.split("|")), f"{case.what}: {word!r} is not in the note: {line}"


def test_the_batch_does_not_crash_and_reports_everyone(batch):
    for grading in (batch.first,):
        assert grading.returncode in (0, 1), grading.stdout + grading.stderr
        assert "Traceback" not in grading.stdout + grading.stderr, grading.stdout + grading.stderr
        assert sorted(grading.lines) == sorted(c.student for c in rt.CASES), grading.stdout
        failed = [s for s, line in grading.lines.items() if "the grader failed" in line]
        assert not failed, "the grader failed on: " + ", ".join(failed)
    log = (batch.course / "_grading" / rt.ASSIGNMENT / "autograde.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:log.index("Traceback") + 3000]


def test_nothing_outside_the_graders_folders_changed(batch):
    for grading in (batch.first,):
        changed = sorted(k for k in set(batch.before) | set(grading.snapshot)
                         if batch.before.get(k) != grading.snapshot.get(k))
        assert not changed, changed[:20]
    for earlier, later in ((batch.editions_before, batch.first.editions),):
        for name in set(earlier) & set(later):  # editions are named by their content: one never changes
            assert earlier[name] == later[name], f"the student edition {name} changed"


def test_site_packages_unchanged(batch):
    found = batch.ctx.sentinel.with_suffix(".found")
    assert not batch.ctx.sentinel.exists() and not found.exists(), f"a submission wrote {batch.ctx.sentinel}"
    assert "write into site-packages: failed" in batch.outputs("vandal")


def test_the_vandal_could_change_nothing(batch):
    text = batch.outputs("vandal")
    attempts = [line for line in text.splitlines() if ": failed (" in line or ": DONE" in line]
    assert len(attempts) == 15, text[:3000]
    assert not [line for line in attempts if "DONE" in line]


def test_no_process_outlives_grading(batch):
    assert "daemon started" in batch.outputs("daemon")
    for grading in (batch.first,):
        assert not grading.leftovers, grading.leftovers


def test_no_network(batch):
    assert batch.listener == [], batch.listener
    text = batch.outputs("network")
    assert "the test's listener: failed" in text and "pypi.org: failed" in text, text[:2000]
    assert "CONNECTED" not in text


def test_the_kernel_cannot_read_the_answers(batch):
    text = batch.outputs("reads_secrets")
    for label in ("course solution", "course gradebook", "course answer key", "classmate's notebook",
                  "reference counts.py", "course's copy of counts.py", "repository solution", "repository answer key", "relative answer key",
                  "reference module"):
        assert f"{label}: not readable" in text, f"{label}:\n{text[:3000]}"
    assert "READABLE" not in text
    assert "grader visible: False" in text and "environment leaks: []" in text, text[:3000]


def test_the_sandbox_holds_no_expected_values(batch):
    assert "expected values in the cases: False" in batch.outputs("reads_cases")
    assert "case files read: 8" in batch.outputs("reads_cases")
    assert "expected values found in frames or memory: none" in batch.outputs("frame_reader")


def test_autograded_notebooks_stay_small(batch):
    assert batch.autograded("print_100mb").stat().st_size < MAX_NOTEBOOK_BYTES
    sizes = {c.student: batch.autograded(c.student).stat().st_size for c in rt.CASES
             if batch.autograded(c.student).exists()}
    large = {s: n for s, n in sizes.items() if n >= MAX_NOTEBOOK_BYTES and s != "forged_run_output"}
    assert not large, large


def test_forged_runner_output_is_limited_outside_the_sandbox(batch):
    assert batch.autograded("forged_run_output").stat().st_size < MAX_NOTEBOOK_BYTES


def test_the_sandbox_leaves_no_folders_in_tmp(batch):
    if os.geteuid() != 0:
        pytest.skip("the private mount points are made only when grading as root")
    assert not batch.new_tmp_folders, f"{len(batch.new_tmp_folders)} left, e.g. {sorted(batch.new_tmp_folders)[:3]}"


def test_written_answers_reach_the_instructor(batch):
    for student in ("full_a", "no_metadata", "written_as_code"):
        cells = batch.first.gradebook[student]["cells"]
        assert cells[rt.WRITTEN][2], f"{student}'s written answer should wait for the instructor"
        nb = nbformat.read(batch.autograded(student), as_version=4)
        written = rt.cell(nb, rt.WRITTEN)
        assert written.cell_type == "markdown" and "YOUR ANSWER HERE" not in written.source, written


# --- without the sandbox: the probe's record of library calls, which later assignments' forbidden lists rely on


def _sneaky_norm(x):
    import sys

    sys.setprofile(None)  # the grader's call recorder, switched off by the student's own code
    return np.linalg.norm(x)


def _threaded_norm(x):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # a thread the recorder does not follow
        return pool.submit(np.linalg.norm, x).result()


def _plain_norm(x):
    return np.linalg.norm(x)


def test_the_probe_records_a_forbidden_call():
    from course_tools.in_sandbox import probe
    from course_tools.grading import verdicts

    outcome = probe.run_case(_plain_norm, {"args": (np.ones(3),), "kwargs": {}}, record_calls=True)
    assert verdicts.forbidden_calls(outcome["calls"], ["norm"])


@pytest.mark.parametrize("fn", [_sneaky_norm, _threaded_norm], ids=["setprofile_off", "thread"])
def test_a_forbidden_call_cannot_be_hidden_from_the_probe(fn):
    from course_tools.in_sandbox import probe
    from course_tools.grading import verdicts

    outcome = probe.run_case(fn, {"args": (np.ones(3),), "kwargs": {}}, record_calls=True)
    assert verdicts.forbidden_calls(outcome.get("calls", []), ["norm"]) or "error" in outcome
