"""Grading a class on a real Dask cluster (a scheduler and two workers, each its own process) into a
real PostgreSQL gradebook, incremental re-runs, and tasks that fail or lose their worker.

The reference is the same batch graded serially, in one process, into SQLite: the grades
nbgrader exports must be the same.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from conftest import run
from course_tools import ROOT, tool_env
from course_tools.grading.tasks import Result, Task, load_result, replay
from course_tools.grading.worker import run_task
from course_tools.grading.postgres import free_port, throwaway_postgres
from grading_helpers import answers, scratch_course, submit

pytestmark = pytest.mark.slow
ASSIGNMENT = "ps01_counts"
WRONG = ("np.log((1 + n_docs) / (1 + df)) + 1", "np.log((1 + n_docs) / (1 + df))")


def _class(course: Path, root: Path) -> None:
    """Five students: full marks, blank, a wrong tfidf, a wrong cosine and a broken notebook."""
    right = answers(root)
    submit(course, "ada", right)
    submit(course, "bo", {})
    submit(course, "cy", dict(right, tfidf=right["tfidf"].replace(*WRONG)))
    submit(course, "di", dict(right, cosine_similarity="def cosine_similarity(a, b):\n    return 0.5\n"))
    broken = course / "submitted" / "ed" / ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / f"{ASSIGNMENT}.ipynb").write_text('{"cells": [', encoding="utf-8")


class Cluster:
    """``dask scheduler`` and ``dask worker`` processes on this machine, as an instructor starts them."""

    def __init__(self, folder: Path, workers: int = 2):
        self.folder, self.processes = folder, {}
        dask = str(Path(sys.executable).with_name("dask"))
        file = folder / "scheduler.json"
        self.processes["scheduler"] = subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
            stdout=subprocess.DEVNULL, stderr=open(folder / "scheduler.log", "wb"), env=tool_env(), cwd=ROOT)
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.2)
        self.address = json.loads(file.read_text())["address"]
        for number in range(workers):  # no nanny: the worker is the process that grades
            self.processes[f"worker{number}"] = subprocess.Popen(
                [dask, "worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                 "--name", f"worker{number}"],
                stdout=subprocess.DEVNULL, stderr=open(folder / f"worker{number}.log", "wb"), env=tool_env(), cwd=ROOT)
        from distributed import Client

        with Client(self.address, timeout="60s") as client:
            client.wait_for_workers(workers, timeout=120)

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.close()


def _export(course: Path, **env) -> list[dict]:
    run(["-m", "nbgrader", "export", "--to", "grades.csv"], cwd=course, **env)
    with open(course / "grades.csv", newline="", encoding="utf-8") as f:
        return sorted(csv.DictReader(f), key=lambda row: row["student_id"])


def _results(course: Path) -> dict[str, Result]:
    folder = course / "_grading" / ASSIGNMENT / "results"
    return {p.stem: load_result(p) for p in folder.glob("*.json")}


def _class_read(url: str):
    """The class as the report reads it from the gradebook at ``url`` (course_tools.report.class_data)."""
    from course_tools.report import class_data

    engine = class_data.engine_for(url)
    try:
        with engine.connect() as connection:
            return class_data.load(connection, ASSIGNMENT)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def serial_sqlite(tmp_path_factory, root):
    course = scratch_course(tmp_path_factory.mktemp("serial"), root, ASSIGNMENT, env=tool_env())
    _class(course, root)
    graded = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--serial"], cwd=course, check=False)
    return course, graded, _export(course)


def test_serial_grades_are_what_each_submission_earns(serial_sqlite):
    _course, graded, grades = serial_sqlite
    scores = {row["student_id"]: float(row["raw_score"]) for row in grades}
    # 85 autograded points in all (15 more are graded by hand); tfidf is worth 25, cosine 20
    assert scores == {"ada": 85, "bo": 0, "cy": 60, "di": 65, "ed": 0}, graded.stdout
    assert "in this process" in graded.stdout.splitlines()[0]
    assert graded.returncode == 1  # ed's notebook could not be read: it needs the instructor's attention


def test_a_dask_cluster_grades_into_postgresql_what_serial_grading_gives_in_sqlite(serial_sqlite, cluster,
                                                                                  tmp_path, root):
    _, _, expected = serial_sqlite
    with throwaway_postgres() as url:
        course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env(NBGRADER_DB_URL=url))
        _class(course, root)
        graded = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--scheduler", cluster.address],
                     cwd=course, check=False, NBGRADER_DB_URL=url)
        assert not (course / "gradebook.db").exists(), "the gradebook is the PostgreSQL database"
        assert _export(course, NBGRADER_DB_URL=url) == expected, graded.stdout + graded.stderr
        # every verdict the workers decided is in PostgreSQL, as serial grading keeps them in SQLite
        read = _class_read(url)
        assert read.cases and read.hints and read == _class_read(f"sqlite:///{serial_sqlite[0] / 'gradebook.db'}")
        made = run(["-m", "course_tools", "report", ASSIGNMENT], cwd=course, NBGRADER_DB_URL=url)
        page = (course / "reports" / ASSIGNMENT / "index.html").read_text(encoding="utf-8")
        assert "report of ps01_counts" in made.stdout and "postgresql" in page and url.split("@")[0] not in page, \
            "the page names the gradebook without its password"
    assert f"on {cluster.address}" in graded.stdout.splitlines()[0]
    summary = graded.stdout.splitlines()[-1]
    assert summary.startswith("graded 5 in ") and "recorded by nbgrader in" in summary
    assert "per notebook on the workers" in summary and "slowest:" in summary
    workers = {r.worker for r in _results(course).values()}
    assert len(workers) == 2, f"both workers graded: {workers}"
    assert all(os.getpid() != int(w.split(":")[1]) for w in workers)


def test_a_batch_grades_only_what_changed_unless_asked_to_regrade(tmp_path, root):
    course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env())
    right = answers(root)
    submit(course, "ada", right)
    submit(course, "cy", dict(right, tfidf=right["tfidf"].replace(*WRONG)))
    grade = ["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--serial"]
    first = run(grade, cwd=course, check=False)
    assert "2 submission(s); 0 unchanged since they were graded, 2 to grade" in first.stdout, first.stdout
    before = {s: r.fingerprint for s, r in _results(course).items()}
    shutil.rmtree(course / "submitted" / "cy")  # cy fixes the mistake and submits again
    submit(course, "cy", right)
    again = run(grade, cwd=course, check=False)
    assert "2 submission(s); 1 unchanged since they were graded, 1 to grade" in again.stdout, again.stdout
    assert "85/100" in next(line for line in again.stdout.splitlines() if line.split()[:1] == ["cy"])
    after = _results(course)
    assert {s for s in before if before[s] != after[s].fingerprint} == {"cy"}
    saved = course / "_grading" / ASSIGNMENT / "results" / "ada.json"  # as a course_tools before verdicts were kept
    older = {k: v for k, v in json.loads(saved.read_text()).items() if k not in ("verdicts", "format")}
    saved.write_text(json.dumps(older))
    upgraded = run(grade, cwd=course, check=False)
    assert "2 submission(s); 1 unchanged since they were graded, 1 to grade" in upgraded.stdout, upgraded.stdout
    assert _results(course)["ada"].verdicts, "graded again, so that its verdicts reach the gradebook"
    everything = run(grade + ["--regrade"], cwd=course, check=False)
    assert "0 unchanged since they were graded, 2 to grade" in everything.stdout


def test_tasks_that_fail_are_reported_not_recorded_and_graded_next_time(tmp_path, root):
    """A coordinator whose release differs from the workers' course: every task refuses, saying why."""
    course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env())
    submit(course, "ada", answers(root))
    release = course / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    original = release.read_bytes()
    nb = nbformat.read(release, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("An instructor's late edit, not on the workers."))
    nbformat.write(nb, release)
    failed = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--workers", "1"], cwd=course,
                 check=False)
    assert failed.returncode == 1
    assert "not graded: the grading task failed (CourseMismatch" in failed.stdout
    assert "check out the same commit" in failed.stdout and "1 failed: ada" in failed.stdout
    assert not _results(course) and not (course / "autograded").exists(), "nothing recorded"
    release.write_bytes(original)
    graded = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments", "--workers", "1"], cwd=course,
                 check=False)
    assert "0 unchanged since they were graded, 1 to grade" in graded.stdout
    assert "85/100" in graded.stdout


def test_a_worker_killed_while_grading_loses_no_submission(tmp_path, root):
    """Two workers, each grading a slow notebook; one is killed: the scheduler gives its task to the other."""
    folder = tmp_path / "cluster"
    folder.mkdir()
    jobs = ROOT / "_grading" / ASSIGNMENT / "jobs"
    before = set(jobs.glob("*")) if jobs.exists() else set()
    cluster = Cluster(folder)
    try:
        course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env())
        slow = dict(answers(root))
        slow["one_hot"] = "import time\ntime.sleep(5)\n" + slow["one_hot"]
        for student in ("ada", "bo"):
            submit(course, student, slow)
        grading = subprocess.Popen([sys.executable, "-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments",
                                    "--scheduler", cluster.address], cwd=course, env=tool_env(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while len(set(jobs.glob("*")) - before) < 2 and time.time() < deadline:  # both workers are grading
            time.sleep(0.2)
        assert time.time() < deadline, "the workers never started grading"
        time.sleep(2)
        victim = cluster.processes["worker0"]
        os.kill(victim.pid, signal.SIGKILL)
        stdout, stderr = grading.communicate(timeout=300)
        assert victim.wait(timeout=10) == -signal.SIGKILL
        for student in ("ada", "bo"):
            line = next(line for line in stdout.splitlines() if line.split()[:1] == [student])
            assert "85/100" in line, stdout + stderr
        assert "failed" not in stdout.splitlines()[-1], stdout
        assert {r.worker for r in _results(course).values()} == {_results(course)["ada"].worker}, \
            "the surviving worker sent every result"
    finally:
        cluster.close()
        for job in set(jobs.glob("*")) - before:  # the killed worker's sandbox folder, left half done
            shutil.rmtree(job, ignore_errors=True)


def test_an_unreachable_scheduler_stops_the_batch_with_a_clear_error(tmp_path, root):
    course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env())
    submit(course, "ada", answers(root))
    address = f"tcp://127.0.0.1:{free_port()}"  # a port nobody listens on
    stopped = run(["-m", "course_tools", "grade", ASSIGNMENT, "--scheduler", address], cwd=course, check=False)
    assert stopped.returncode == 2
    assert f"could not reach the Dask scheduler at {address}" in stopped.stderr and "--serial" in stopped.stderr
    assert "Traceback" not in stopped.stderr and not (course / "autograded").exists()


def test_a_task_refuses_a_course_that_is_not_the_coordinators():
    task = Task(ASSIGNMENT, "ada", nbformat.writes(nbformat.v4.new_notebook()), {"student": "ada"}, False, True,
                {}, course="0" * 64)
    with pytest.raises(RuntimeError, match="check out the same commit"):
        run_task(task)


def test_a_result_is_replayed_only_into_the_notebook_it_was_made_from():
    made = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("x")])
    made.cells[1].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=2)]
    made.cells[1].execution_count = 2
    result = Result("ada", "f" * 64, nbformat.writes(made))
    same = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("x")])
    assert replay(same, result) and same.cells[1].outputs[0]["data"]["text/plain"] == "1"
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 2"), nbformat.v4.new_code_cell("x")])
    assert not replay(other, result) and other.cells[1].outputs == []
    # a locked cell's source is nbgrader's to restore (the hidden tests): only its id must match
    for nb in (made, same):
        nb.cells[1].metadata["nbgrader"] = {"grade_id": "test_x", "locked": True, "grade": True}
    same.cells[1].source = "x  # and the hidden tests"
    assert replay(same, Result("ada", "f" * 64, nbformat.writes(made)))
    same.cells[1].metadata["nbgrader"]["grade_id"] = "test_y"
    assert not replay(same, Result("ada", "f" * 64, nbformat.writes(made)))


def test_the_fingerprint_changes_with_the_submission_and_the_options():
    base = Task(ASSIGNMENT, "ada", "{}", {"student": "ada"}, False, True, {"cell_seconds": 1.0}, "c" * 64)
    assert base.fingerprint == Task(*vars(base).values()).fingerprint
    for change in ({"notebook": "{ }"}, {"experiments": True}, {"sandboxed": False},
                   {"limits": {"cell_seconds": 2.0}}, {"course": "d" * 64}):
        assert Task(**dict(vars(base), **change)).fingerprint != base.fingerprint, change


def test_a_task_stuck_outside_the_sandbox_becomes_a_failure_and_the_batch_goes_on(monkeypatch):
    """The grader's own process hanging (not the sandbox, whose limits end every run in it): the task is given
    up after its deadline, reported as a failure with the reason, and the next task is still graded."""
    import threading

    from course_tools.grading import cluster

    release = threading.Event()

    def run_task(task):
        if task.student == "stuck":
            release.wait(60)  # e.g. blocked on a read that never ends
        return Result(task.student, task.fingerprint, "{}")

    monkeypatch.setattr(cluster, "run_task", run_task)
    tasks = [Task(ASSIGNMENT, name, "{}", {"student": name}, False, True, {}, "c" * 64) for name in ("stuck", "next")]
    got = []
    started = time.time()
    failures = cluster.run_tasks(tasks, lambda r: got.append(r.student), serial=True, progress=False, deadline=1.0)
    release.set()
    assert [r for r in got] == ["next"] and list(failures) == ["stuck"], (got, failures)
    assert "no result after 1 s" in failures["stuck"] and time.time() - started < 30
