"""nbgrader integration: every notebook runs in a sandbox, and every test's verdict is decided outside it.

``nbgrader_config.py`` replaces nbgrader's ``Execute`` preprocessor in autograding
with :class:`SandboxedExecute`. For each (staged, :mod:`course_tools.grading.staging`) notebook:

1. the *graded run* (:mod:`course_tools.grading.probe_plan`, :mod:`course_tools.in_sandbox.probe_runner`, in the
   sandbox of :mod:`course_tools.grading.sandbox` with the student edition of course_lib): each graded
   test cell, visible or hidden, runs in a fresh process of its own, where the call recorder
   (:mod:`course_tools.in_sandbox.probe`) and the forbidden-function sentinels (:mod:`course_tools.in_sandbox.forbid`)
   are in place before any code of the submission runs; that process loads the definitions of
   the student's cells, puts course scaffolds in place of the other exercises the tested function
   calls (:mod:`course_tools.grading.scaffolds`: one mistake, one function), runs the function on the
   inputs of its answer key (:mod:`course_tools.authoring.answer_keys`) and sends what came out, as plain
   data, through a pipe that only the grader reads. Time limits count CPU time; wall clock is a
   generous outer bound;
2. the *feedback run*, which decides nothing: without the experiments, the runner runs the
   student's cells in full in one more process, for their outputs and the instructor's notes;
   with them (``COURSE_GRADE_EXPERIMENTS=1``, the default), the whole notebook runs in a kernel
   (:mod:`course_tools.in_sandbox.sandbox_runner`) with its graded cells doing nothing;
3. back in the grader, each test cell gets the verdict of :func:`course_tools.grading.verdicts.judge`
   as its only output: nothing else, so nbgrader's score is exactly the verdicts.

``tasks.py grade`` runs these steps on Dask workers, one task per submission
(:mod:`course_tools.grading.tasks`, :mod:`course_tools.grading.cluster`); nbgrader's execute step then
only records each worker's result (``COURSE_GRADE_RESULTS``, :func:`course_tools.grading.tasks.replay`),
so that one process writes the gradebook. A notebook without a fitting result is graded here.

The expected values never enter the sandbox, and nothing the sandbox can write on disk is
trusted (:func:`course_tools.grading.verdicts.read_untrusted`), so nothing a submission does
(monkeypatching numpy, the checks or the probe, hooks, catching exceptions, always-equal
objects, threads, forged files) can turn a failed verdict into a pass. The notes for the instructor
and every verdict, case by case, go to the gradebook with the grades
(:class:`course_tools.grading.verdict_store.SaveVerdicts`, the step after nbgrader's ``SaveAutoGrades``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float

from course_tools import ROOT
from course_tools.authoring import answer_keys
from course_tools.authoring.edition import edition_number, write_edition
from course_tools.in_sandbox import sandbox_runner
from course_tools.in_sandbox.sandbox_runner import MAX_NOTEBOOK, _trim
from . import probe_plan, sandbox, staging, tasks, verdicts

IN_SANDBOX = Path(sandbox_runner.__file__).parent
"""The modules copied into each job: they run in the student's process and import nothing of the course."""
MAX_RUN_BYTES = 50 * 2 ** 20
"""The largest executed notebook read back from a sandbox; a larger one counts as not run."""
MAX_NOTES = 20

PREAMBLE = '''\
def __course_no_exit(*args, **kwargs):
    raise RuntimeError("exit() and quit() would end the kernel; when grading they are ignored")
exit = quit = __course_no_exit'''
GRADED_ELSEWHERE = "# graded in a process of its own (course_tools.in_sandbox.probe_runner), not in this notebook"


@functools.lru_cache(maxsize=None)
def edition_dir(assignment: str, root: Path = ROOT) -> Path:
    """Build (once per content) the student edition used to grade ``assignment``; return its folder.

    The folder name carries a hash of the edition's files, so concurrent graders
    and repeated runs reuse a finished edition and never see a half-written one.
    """
    number = edition_number(assignment, root)
    with tempfile.TemporaryDirectory(dir=_editions(root)) as scratch:
        fresh = write_edition(Path(scratch) / "edition", number, root)
        digest = hashlib.sha256()
        for path in sorted(fresh.rglob("*")):
            if path.is_file():
                digest.update(str(path.relative_to(fresh)).encode() + path.read_bytes())
        final = _editions(root) / f"edition{number}-{digest.hexdigest()[:12]}"
        if not final.exists():
            try:
                os.replace(fresh, final)
            except OSError:  # another grader finished the same edition first
                if not final.exists():
                    raise
    return final


def _editions(root: Path) -> Path:
    path = root / "_build" / "editions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def grading_dir(course: Path, assignment: str) -> Path:
    return course / "_grading" / assignment


def experiment_sources(release_nb) -> set[str]:
    """The sources of the release's ungraded code cells (the experiment sections)."""
    return {c.source.strip() for c in release_nb.cells
            if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("grade_id")}


def _verdict_output(verdict: verdicts.Verdict):
    if verdict.passed:
        return nbformat.v4.new_output("stream", name="stdout", text=verdict.message + "\n")
    return nbformat.v4.new_output("error", ename="AssertionError", evalue=verdict.message,
                                  traceback=[f"AssertionError: {verdict.message}"])


def grading_notebook(nb, key: dict, skip: set[str]):
    """The notebook the sandbox runs for feedback (outputs, experiments): its graded test cells do nothing,
    since they are graded in processes of their own; and ``run cell index -> original index``
    (``None`` for the preamble)."""
    run = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    run.cells.append(nbformat.v4.new_code_cell(PREAMBLE))
    origin: list[int | None] = [None]
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        if grade_id in key:
            source = GRADED_ELSEWHERE
        elif not grade_id and cell.source.strip() in skip:
            continue
        else:
            source = cell.source
        run.cells.append(nbformat.v4.new_code_cell(source))
        origin.append(index)
    return run, origin


def _release(course: Path, assignment: str):
    paths = sorted((course / "exercises" / assignment).glob("*.ipynb"))
    return nbformat.read(paths[0], as_version=4)


def grade_notebook(nb, assignment: str, student: str, course: Path, experiments: bool = True,
                   sandboxed: bool = True, limits: sandbox.Limits | None = None,
                   record: staging.Staged | None = None) -> list[str]:
    """Run ``nb`` (a staged notebook, modified in place) and put the verdicts in its test cells.

    ``record`` is the submission's staging record (a refused one is not run: every test fails).
    Returns the notes for the instructor; ``nb.metadata["grading_seconds"]`` is the sandboxed run's time and
    ``nb.metadata["course_verdicts"]`` every test cell's verdict record (:mod:`course_tools.grading.verdict_store`).
    """
    key = answer_keys.load(assignment, course)
    limits = limits or sandbox.Limits()
    notes = list(record.notes) if record else []
    if record and record.refused:
        notes.insert(0, f"not graded: {record.refused}")
        nb.metadata["course_verdicts"] = _apply_verdicts(nb, key, None)  # every test fails, the reason in the notes
        return notes
    release_nb = _release(course, assignment)
    canonical = experiment_sources(release_nb)
    job = Path(tempfile.mkdtemp(prefix=f"{student}-", dir=_jobs(course, assignment)))
    try:
        edition = edition_dir(assignment)
        plan, plan_notes = probe_plan.write(job, nb, release_nb, key, assignment, limits, sandboxed, canonical,
                                            feedback=not experiments)
        for name in probe_plan.SANDBOX_RUNNERS:
            shutil.copy(IN_SANDBOX / name, job / "in" / name)
        graded = sandbox.run_probes(job, edition, limits, sandboxed,
                                    probe_plan.masked_libraries(key, plan["setup"]) if sandboxed else ())
        first, _, rest = graded.stdout.partition(b"\n")
        report = read_report(first)
        cells = report.get("cells", {}) if isinstance(report.get("cells"), dict) else {}
        seconds = graded.seconds
        notes += plan_notes + _probe_notes(nb, key, report, graded, limits)
        if not experiments:
            notes += _feedback(nb, plan, rest.split(b"\n"), graded, limits)
        # only the graded run decides points: a graded cell the wall clock stopped while it computed may have been
        # slowed by a busy machine, and course_tools.grading.batch grades the notebook again alone
        wall = graded.timed_out or any(isinstance(c, dict) and c.get("wall_timeout") and sandbox.computing(
            float(c.get("cpu", 0)), float(c.get("wall", 1))) for c in cells.values())
        if experiments:  # the whole notebook again, for its outputs and experiments (feedback, never grades)
            run_nb, origin = grading_notebook(nb, key, set())
            nbformat.write(run_nb, job / "in" / "notebook.ipynb")
            shutil.copy(IN_SANDBOX / "sandbox_runner.py", job / "in" / "sandbox_runner.py")
            result = sandbox.run_notebook(job, edition, limits, sandboxed)
            seconds += result.seconds
            notes += _merge(nb, job, origin, result, limits, canonical)
        nb.metadata["grading_seconds"] = round(seconds, 2)
        if wall:
            nb.metadata["grading_wall_timeout"] = True
        nb.metadata["course_verdicts"] = _apply_verdicts(nb, key, cells)
    finally:
        shutil.rmtree(job, ignore_errors=True)
    return notes


def read_report(data: bytes) -> dict:
    """The probe runner's report (what came through its pipe), decoded as untrusted data: an empty report
    when it is not a JSON object, or nests too deeply for the decoder (RecursionError)."""
    try:
        report = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError, MemoryError):
        return {}
    return report if isinstance(report, dict) else {}


def _feedback(nb, plan: dict, lines: list[bytes], graded: sandbox.RunResult, limits: sandbox.Limits) -> list[str]:
    """Put the feedback run's outputs (:func:`course_tools.in_sandbox.probe_runner.run_feedback`) into the student's cells
    of ``nb``; return notes on errors, cells stopped by a limit and a run that ended early."""
    def text(value, limit: int) -> str:  # as UTF-8 can hold it (a lone surrogate becomes "?")
        return str(value)[:limit].encode("utf-8", "replace").decode("utf-8")

    notes, labels = [], {c["index"]: c["label"] for c in plan["feedback"]}
    for line in lines:
        record = read_report(line) if line.strip() else {}
        index = record.get("index", record.get("died"))
        if not isinstance(index, int) or index not in labels:
            continue
        label = labels[index]
        if "died" in record:
            notes.append(f"{str(record.get('why'))[:80]} in {label}: later cells did not run")
            continue
        target, outputs = nb.cells[index], []
        if isinstance(record.get("text"), str) and record["text"]:
            outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text(record["text"], 20_000)))
        error = record.get("error")
        if isinstance(error, list) and len(error) == 2:
            ename, evalue = text(error[0], 100), text(error[1], 2000)
            outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]))
            if ename not in ("NotImplementedError", "NotRevealed"):  # a stub, the notebook's or the edition's
                notes.append(f"{label} raised {ename[:40]}: {evalue[:120]}")
        if record.get("stopped"):
            notes.append(f"{label} was {str(record['stopped'])[:80]}")
        target.outputs = outputs
    if graded.timed_out:
        notes.append(f"the notebook was stopped after {limits.notebook_seconds:.0f} s: later cells did not run")
    return notes


def _probe_notes(nb, key: dict, report: dict, graded: sandbox.RunResult, limits: sandbox.Limits) -> list[str]:
    """Notes on the graded run: cells stopped by a limit and forbidden calls."""
    notes = list(graded.notes)  # e.g. the memory limit's kill
    if not report:
        notes.append("the graded run produced no report" + (f" ({graded.stderr.strip()[-200:]})"
                                                           if graded.stderr.strip() else ""))
    cells = report.get("cells", {}) if isinstance(report.get("cells"), dict) else {}
    for grade_id, result in cells.items():
        if not isinstance(result, dict) or grade_id not in key:
            continue
        if result.get("stopped"):
            notes.append(f"{grade_id}: {str(result['stopped'])[:200]}")
        forbidden = result.get("forbidden")
        if isinstance(forbidden, list) and forbidden:
            notes.append(f"{grade_id}: called {', '.join(map(str, forbidden[:3]))}, which its test forbids")
    return notes


def _jobs(course: Path, assignment: str) -> Path:
    path = grading_dir(course, assignment) / "jobs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _merge(nb, job: Path, origin, result: sandbox.RunResult, limits: sandbox.Limits, experiments: set[str]) -> list[str]:
    """Copy the sandbox's outputs into ``nb``'s ungraded cells; return notes on how the run ended.

    Errors are noted for the student's own cells (answers and added cells), not for the
    release's experiment cells (which fail whenever an answer does) nor for answers left
    as the stub (their tests say "not implemented")."""
    notes = []
    path = job / "out" / "notebook.ipynb"
    try:  # written in the sandbox, so as untrusted as the rest: bounded, trimmed, checked
        raw = verdicts.read_untrusted(path, MAX_RUN_BYTES)
        ran = nbformat.reads(raw.decode("utf-8", "replace"), as_version=4) if raw is not None else None
    except Exception:  # noqa: BLE001 - broken or too deeply nested (RecursionError): nothing ran that we can show
        ran = None
    status = ran.metadata.get("grading_run", {}) if ran is not None else {}
    budget = [MAX_NOTEBOOK]
    if result.timed_out:
        notes.append(f"the notebook was stopped after {limits.notebook_seconds:.0f} s of wall clock: later cells did not run")
    notes += result.notes  # from outside the sandbox: its memory cgroup's OOM kills
    stopped = status.get("stopped") if isinstance(status, dict) else None
    for position, index in enumerate(origin):
        if ran is None or position >= len(ran.cells):
            break
        cell = ran.cells[position]
        if index is None:
            continue
        target = nb.cells[index]
        if not target.metadata.get("nbgrader", {}).get("grade"):
            outputs = cell.get("outputs", [])
            cell["outputs"] = [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []
            try:
                _trim(cell, budget)
                target.outputs = [nbformat.from_dict(o) for o in cell["outputs"]]
            except Exception:  # noqa: BLE001 - outputs of a shape nbformat does not know: dropped
                target.outputs = []
            count = cell.get("execution_count")
            target.execution_count = count if isinstance(count, int) else None
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"
                  and o.get("ename") not in ("NotImplementedError", "NotRevealed")]
        if errors and not target.metadata.get("nbgrader", {}).get("grade") \
                and target.source.strip() not in experiments:
            label = target.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"
            notes.append(f"{label} raised {str(errors[0].get('ename'))[:40]}: {str(errors[0].get('evalue'))[:120]}")
        if isinstance(stopped, dict) and stopped.get("cell") == position:
            label = target.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"
            notes.append(f"{str(stopped.get('why', 'the run stopped'))[:200]} in {label}: later cells did not run")
    for name, limit in (("timeouts", f"{limits.cell_seconds:.0f} s of wall clock"),
                        ("cpu_timeouts", f"{limits.cell_cpu_seconds:g} s of CPU time")):
        timeouts = status.get(name, []) if isinstance(status, dict) else []
        for position in sorted({p for p in timeouts if isinstance(p, int)} if isinstance(timeouts, list) else set()):
            if 0 <= position < len(origin) and origin[position] is not None:
                notes.append(f"cell {origin[position] + 1} was stopped after {limit} (the limit per cell)")
    if ran is None:
        notes.append("the notebook could not be run" + (f" ({result.stderr.strip()[-200:]})" if result.stderr.strip() else ""))
    return [n[:300] for n in notes[:MAX_NOTES]] + ([f"... and {len(notes) - MAX_NOTES} more"] if len(notes) > MAX_NOTES else [])


def _apply_verdicts(nb, key: dict, results: dict | None) -> list[dict]:
    """Put each graded cell's verdict in it and return their records for the gradebook
    (:func:`course_tools.grading.verdicts.verdict_record`); ``results``: the probe runner's ``grade_id -> outcome``."""
    records = []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or grade_id not in key:
            continue
        entry = key[grade_id]
        outcome = results.get(grade_id) if results else None
        verdict, record = verdicts.verdict_record(grade_id, entry, outcome if isinstance(outcome, dict) else None,
                                                  secret=entry["kind"] == "hidden")
        cell.outputs = [_verdict_output(verdict)]
        records.append(record)
    return records


class SandboxedExecute(NbGraderPreprocessor):
    """nbgrader's execute step for the course: sandboxed run, verdicts decided by the grader.

    Its time limits can be set in ``nbgrader_config.py``, e.g. ``c.SandboxedExecute.cell_cpu_seconds = 60``
    (CPU time, which a busy machine does not change; ``cell_seconds`` and ``notebook_seconds`` are wall clock).
    """

    cell_seconds = Float(sandbox.Limits.cell_seconds, help="wall-clock seconds one cell may run").tag(config=True)
    cell_cpu_seconds = Float(sandbox.Limits.cell_cpu_seconds, help="CPU seconds one cell may use").tag(config=True)
    notebook_cpu_seconds = Float(sandbox.Limits.notebook_cpu_seconds,
                                 help="CPU seconds all of a notebook's cells may use").tag(config=True)
    notebook_seconds = Float(sandbox.Limits.notebook_seconds,
                             help="wall-clock seconds a whole notebook may run").tag(config=True)

    def limits(self) -> sandbox.Limits:
        """The sandbox's limits as configured (the others at their defaults)."""
        return sandbox.Limits(cell_seconds=self.cell_seconds, notebook_seconds=self.notebook_seconds,
                              cell_cpu_seconds=self.cell_cpu_seconds, notebook_cpu_seconds=self.notebook_cpu_seconds)

    def preprocess(self, nb, resources):
        """Grade ``nb``: replay a worker's result from ``$COURSE_GRADE_RESULTS/<student>.json`` when
        there is one for this very notebook (:mod:`course_tools.grading.batch`), else run it in a sandbox here."""
        info = resources.get("nbgrader", {})
        assignment, student = info.get("assignment"), info.get("student")
        course = Path.cwd()
        experiments = os.environ.get("COURSE_GRADE_EXPERIMENTS", "1") != "0"
        sandboxed = os.environ.get("COURSE_GRADE_UNSANDBOXED") != "1"
        results = os.environ.get("COURSE_GRADE_RESULTS")
        graded = {"seconds": None, "worker": None}
        try:
            result = tasks.load_result(Path(results) / f"{student}.json") if results else None
            if result is not None and result.format == tasks.RESULT_FORMAT and tasks.replay(nb, result):
                notes, records = result.notes, result.verdicts  # graded by a worker (course_tools.grading.cluster)
                graded.update(seconds=result.seconds, worker=result.worker)
                how = f"recorded the result of worker {result.worker} ({result.seconds} s)"
            else:
                if result is not None:
                    self.log.warning("the result for %s does not fit nbgrader's notebook: grading it here", student)
                limits = self.limits()
                record = staging.load_record(grading_dir(course, assignment) / "records" / f"{student}.json")
                notes = grade_notebook(nb, assignment, student, course, experiments, sandboxed, limits, record)
                records = nb.metadata.pop("course_verdicts", [])
                graded["seconds"] = nb.metadata.pop("grading_seconds", None)
                how = f"ran it in the sandbox here in {graded['seconds']} s"
        except Exception as error:  # noqa: BLE001 - one notebook's trouble must not stop the batch
            self.log.exception("grading %s of %s failed", assignment, student)
            notes = [f"the grader failed on this notebook ({type(error).__name__}: {str(error)[:200]}); "
                     f"its tests were marked failed: see the log"]
            records = _apply_verdicts(nb, answer_keys.load(assignment, course), None)
            how = "failed"
        self.log.info("%s of %s: %s", assignment, student, how)
        resources["course_grading"] = dict(graded, notes=notes, verdicts=records)  # for SaveVerdicts
        return nb, resources
