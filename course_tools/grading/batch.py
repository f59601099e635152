"""Grade a whole class: stage every submission, grade each in a sandbox in parallel, record, report.

``python3 tasks.py grade ps01_counts [--no-experiments] [--unsandboxed] [--workers N | --scheduler ADDRESS
| --serial] [--regrade]`` (from the course root):

1. refuses, saying why, when no sandbox can be had here (:func:`course_tools.grading.sandbox.unavailable`),
   unless ``--unsandboxed`` asks to grade without isolation;
2. stages each ``submitted/<student>/<assignment>/`` (:mod:`course_tools.grading.staging`) into
   ``_grading/<assignment>/staged``: only notebooks the grader wrote reach nbgrader; a local cluster
   starts meanwhile (:func:`course_tools.grading.cluster.connect`);
3. makes one task per submission (:mod:`course_tools.grading.tasks`) and runs those without an
   up-to-date result in ``_grading/<assignment>/results`` (all of them with ``--regrade``) on a
   local Dask cluster, one worker per core (``--workers N``), on the cluster of ``--scheduler``, or
   in this process (``--serial``) (:mod:`course_tools.grading.cluster`); each result is saved as it comes;
   a submission whose computing code hit a wall-clock limit (:func:`course_tools.grading.sandbox.computing`)
   while the machine was busy (graded side by side with others, or with the load average at or
   above the number of cores) is then graded again alone, in this
   process with nothing else of the batch running, and that result replaces the first
   (:func:`regrade_alone`): time limits are CPU time, wall clock only a generous outer bound, and a
   busy machine must not cost a student points;
4. records each submission that has a result in the gradebook as soon as its result is saved, while the
   others still grade: the real nbgrader autograde (``Autograde``, as ``nbgrader autograde <assignment>
   --student <student> --force`` runs it), in one process of its own for the batch
   (:mod:`course_tools.grading.recording`), whose execute step records the workers' outputs and verdicts
   (:mod:`course_tools.grading.autograde`): the gradebook has one writer; nbgrader's full log goes to
   ``_grading/<assignment>/autograde.log``;
5. prints each student's score from the gradebook with the notes on their submission and the
   points still waiting for the instructor (written answers graded by hand), then a summary:
   how many were graded, the failed tasks with their reasons, time per notebook, the slowest.

Nothing in ``submitted/`` is changed. ``--no-experiments`` skips the ungraded experiment
sections (faster; the feedback then lacks their outputs). Grading the same batch twice
gives the same gradebook. A task that failed is not recorded and is graded again next time.
The exit status is 0 when every submission was graded without a note that needs attention,
1 otherwise, 2 when grading was refused.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from course_tools import tool_env
from .autograde import grading_dir
from .cluster import ClusterUnavailable, connect, run_tasks
from .recording import Recorder
from .tasks import RESULT_FORMAT, Result, Task, load_result, save_result
from .worker import course_fingerprint
from .sandbox import Limits, memory_unbounded, unavailable
from .staging import save_record, stage
from . import verdict_store

ALONE_NOTE = "graded again alone after a wall-clock limit was hit while the machine was busy"


def grade(assignment: str, course: Path | None = None, experiments: bool = True, sandboxed: bool = True,
          workers: int | None = None, scheduler: str | None = None, serial: bool = False,
          regrade: bool = False, progress: bool | None = None) -> int:
    course = Path(course or Path.cwd())
    releases = sorted((course / "exercises" / assignment).glob("*.ipynb"))
    if not releases or not (course / "answer_keys" / f"{assignment}.key").exists():
        print(f"no release or answer key for {assignment}: is this the course root? "
              f"(exercises/{assignment}/, answer_keys/{assignment}.key)", file=sys.stderr)
        return 2
    if sandboxed:
        reason = unavailable()
        if reason:
            print(f"grading refused: {reason}.\nTo grade without a sandbox (submissions then run with your "
                  f"rights and can read and change your files), add --unsandboxed.", file=sys.stderr)
            return 2
        if (unbounded := memory_unbounded()) is not None:
            print(f"WARNING: {unbounded}.", file=sys.stderr)
    else:
        print("WARNING: grading without a sandbox: every submission runs with your rights.", file=sys.stderr)
    started = time.time()
    # the local cluster starts while the submissions are staged (it takes a second or two)
    connection = None if serial else connect(workers, scheduler)
    try:
        return _grade(assignment, course, releases, experiments, sandboxed, workers, scheduler, serial, regrade,
                      progress, started, connection)
    finally:
        if connection is not None:
            connection.close()


def _grade(assignment: str, course: Path, releases: list[Path], experiments: bool, sandboxed: bool,
           workers: int | None, scheduler: str | None, serial: bool, regrade: bool, progress: bool | None,
           started: float, connection) -> int:
    """:func:`grade` once grading may go ahead, with the cluster ``connection`` being made (``None``: serial)."""
    work = grading_dir(course, assignment)
    for name in ("staged", "records", "notes", "recorded"):  # notes/: where notes went before the gradebook kept them
        shutil.rmtree(work / name, ignore_errors=True)
    folders = sorted(p for p in (course / "submitted").glob(f"*/{assignment}")
                     if p.is_dir() or p.is_symlink())
    records, tasks = {}, []
    common = course_fingerprint(assignment, course)
    limits = asdict(_configured_limits(course))
    for folder in folders:
        student = folder.parent.name
        staged = work / "staged" / student / assignment
        record = stage(folder, releases[0], staged)
        save_record(record, work / "records" / f"{student}.json")
        records[student] = record
        tasks.append(Task(assignment, student, (staged / releases[0].name).read_text(encoding="utf-8"),
                          asdict(record), experiments, sandboxed, limits, common))
    results = work / "results"
    kept = {t.student: r for t in tasks if (r := load_result(results / f"{t.student}.json"))
            and r.fingerprint == t.fingerprint and r.format == RESULT_FORMAT and not regrade}
    todo = [t for t in tasks if t.student not in kept]
    for task in todo:  # a stale result must never be recorded, even if this task fails
        (results / f"{task.student}.json").unlink(missing_ok=True)
    where = ("in this process" if serial else f"on {scheduler}" if scheduler
             else f"on {workers or os.cpu_count() or 1} local worker(s)")
    print(f"{assignment}: {len(folders)} submission(s); {len(kept)} unchanged since they were graded, "
          f"{len(todo)} to grade {where}", flush=True)
    fresh: dict[str, Result] = {}
    cores = os.cpu_count() or 1
    # one writer to the gradebook, recording each submission as its result comes in (course_tools.grading.recording)
    recorded = work / "recorded"
    env = dict(tool_env(), COURSE_GRADE_EXPERIMENTS="1" if experiments else "0",
               COURSE_GRADE_UNSANDBOXED="0" if sandboxed else "1", COURSE_GRADE_RESULTS=str(results.resolve()))
    recorder = Recorder(course, assignment, recorded.relative_to(course).as_posix(), env, work / "autograde.log")

    def record(student: str) -> None:
        if not (recorded / student).exists():
            shutil.copytree(work / "staged" / student, recorded / student)
        recorder.record(student)

    def on_result(result: Result) -> None:
        result.alone = serial and result.load < cores  # by itself, on a machine not busier than its cores
        save_result(result, results)
        fresh[result.student] = result
        record(result.student)

    with recorder:
        for student in sorted(kept):
            record(student)
        try:
            failures = run_tasks(todo, on_result, serial=serial, workers=workers, scheduler=scheduler,
                                 progress=progress, deadline=task_deadline(limits), connection=connection)
        except ClusterUnavailable as error:
            print(f"grading stopped: {error}", file=sys.stderr)
            return 2
        recorder.wait()  # nothing of the batch may run beside the submissions graded again alone
        regraded = regrade_alone([t for t in tasks if t.student not in failures], {**kept, **fresh}, results)
        fresh.update(regraded)
        for student in regraded:
            kept.pop(student, None)
            recorder.record(student)
        waiting = time.time()
        returncode = recorder.close()
    recording = time.time() - waiting
    log = work / "autograde.log"
    scores, notes = _scores(course, assignment)
    attention = _report(records, scores, notes, failures)
    print(_summary(fresh, kept, failures, time.time() - started, recording, len(regraded),
                   recorder.seconds / max(1, len(recorder.recorded) + len(recorder.failed)))
          + f"; nbgrader's log: {log.relative_to(course)}")
    if returncode != 0:
        print(f"nbgrader autograde exited with status {returncode} (not recorded: "
              f"{', '.join(sorted(recorder.failed)) or 'see the log'}); see {log}", file=sys.stderr)
        return 1
    return 1 if attention else 0


def _report(records: dict, scores: dict, recorded_notes: dict[str, list[str]], failures: dict[str, str]) -> bool:
    """Print one line per student: score and notes (as the gradebook holds them). True when any submission needs
    the instructor's attention."""
    attention = bool(failures)
    for student in sorted(records):
        score = scores.get(student) if student not in failures else None
        shown = f"{score[0]:g}/{score[1]:g}" if score else "not graded"
        notes = recorded_notes.get(student) or records[student].notes
        if student in failures:
            notes = [f"not graded: the grading task failed ({failures[student]}); it is graded again next time"]
        elif records[student].refused and not any(n.startswith("not graded") for n in notes):
            notes = [f"not graded: {records[student].refused}"] + notes
        if score and score[2]:
            notes = notes + [f"{score[2]:g} points to grade by hand"]
        attention |= bool(records[student].refused) or score is None
        print(f"  {student:<20} {shown:>12}  {'; '.join(notes)}")
    return attention


def _configured_limits(course: Path) -> Limits:
    """The sandbox limits ``nbgrader_config.py`` sets (``c.SandboxedExecute.cell_seconds`` ...): the
    workers apply them, since they run outside nbgrader."""
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    from .autograde import SandboxedExecute

    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    except ConfigFileNotFound:
        config = None
    return SandboxedExecute(config=config).limits()


def task_deadline(limits: dict) -> float:
    """Seconds after which a grading task that has not come back is given up as stuck (outside the sandbox,
    whose own limits end every run in it): the graded run and the feedback run at their wall-clock bounds,
    with room for staging, the edition and the verdicts."""
    return 2 * float(limits["notebook_seconds"]) + 300


def regrade_alone(tasks: list[Task], results: dict[str, Result], folder: Path) -> dict[str, Result]:
    """Grade again, one after another in this process, every task whose result hit a wall-clock limit while
    the machine was busy (``wall_timeout`` and not ``alone``); each new result, with a note saying so,
    replaces the first in ``folder``. Returns the new results by student. Called once the batch's parallel
    tasks have ended, so nothing else of the batch runs beside them."""
    again = [t for t in tasks if (r := results.get(t.student)) is not None and r.wall_timeout and not r.alone]
    if not again:
        return {}
    print(f"{len(again)} submission(s) hit a wall-clock limit while the machine was busy: grading them again "
          f"alone", flush=True)
    done: dict[str, Result] = {}

    def on_result(result: Result) -> None:
        result.alone = True
        result.notes = [ALONE_NOTE] + result.notes
        save_result(result, folder)
        done[result.student] = result

    failures = run_tasks(again, on_result, serial=True, progress=False, deadline=task_deadline(again[0].limits))
    for student, why in failures.items():  # the first grading stands, and says so
        first = results[student]
        first.alone = True
        first.notes = [f"{ALONE_NOTE}, but that failed ({why}): the first grading stands"] + first.notes
        save_result(first, folder)
        done[student] = first
    return done


def _summary(fresh: dict[str, Result], kept: dict[str, Result], failures: dict[str, str], seconds: float,
             recording: float, regraded: int = 0, per_record: float = 0.0) -> str:
    """One paragraph for the instructor: what was graded, what failed, how long it took (``recording``: the
    seconds nbgrader still took after the last result; ``per_record``: its seconds per notebook)."""
    parts = [f"graded {len(fresh)} in {seconds:.0f} s (recorded by nbgrader in {recording:.1f} s after the last "
             f"result, {per_record:.2f} s to record each)"]
    if regraded:
        parts.append(f"{regraded} graded again alone after a wall-clock limit on a busy machine")
    if fresh:
        times = sorted(fresh.values(), key=lambda r: -r.seconds)
        parts.append(f"{sum(r.seconds for r in times) / len(times):.1f} s per notebook on the workers")
        parts.append("slowest: " + ", ".join(f"{r.student} {r.seconds:.1f} s" for r in times[:3]))
    if kept:
        parts.append(f"{len(kept)} unchanged (graded before; --regrade grades them again)")
    if failures:
        parts.append(f"{len(failures)} failed: " + "; ".join(f"{s} ({why})" for s, why in sorted(failures.items())))
    return "; ".join(parts)


def _scores(course: Path, assignment: str) -> tuple[dict[str, tuple[float, float, float]], dict[str, list[str]]]:
    """``student -> (score, max score, points waiting to be graded by hand)`` for the graded submissions, and
    ``student -> notes`` on their grading runs (:func:`course_tools.grading.verdict_store.notes_by_student`)."""
    from nbgrader.api import Gradebook, MissingEntry

    out: dict[str, tuple[float, float, float]] = {}
    with Gradebook(gradebook_url(course)) as gb:
        notes = verdict_store.notes_by_student(gb.db.connection(), assignment)
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            return out, notes
        for sub in submissions:
            waiting = sum(grade.max_score for notebook in sub.notebooks for grade in notebook.grades
                          if grade.needs_manual_grade)
            out[sub.student_id] = (sub.score, sub.max_score, waiting)
    return out, notes


def gradebook_url(course: Path) -> str:
    """The gradebook nbgrader uses in ``course``: ``$NBGRADER_DB_URL``, else ``gradebook.db`` there (SQLite)."""
    return os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{course / 'gradebook.db'}"
