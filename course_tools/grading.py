"""nbgrader integration: every notebook runs in a sandbox, and every test's verdict is decided outside it.

``nbgrader_config.py`` replaces nbgrader's ``Execute`` preprocessor in autograding
with :class:`SandboxedExecute`. For each (staged, :mod:`course_tools.staging`) notebook:

1. every graded test cell, visible or hidden, is replaced by a *probe* that only runs
   the student's function on the inputs of its answer key (:mod:`course_tools.answer_keys`)
   and writes what came out as plain data (:mod:`course_tools.probe`); a first cell
   turns ``exit()`` into an error instead of the end of the kernel;
2. the notebook runs in the sandbox (:mod:`course_tools.sandbox`) with the student
   edition of course_lib first on the kernel's path; the ungraded experiment cells
   run only when feedback wants them (``COURSE_GRADE_EXPERIMENTS=0`` skips them);
3. back in the grader, each test cell gets the verdict of :func:`course_tools.verdicts.judge`
   as its only output: nothing else, so nbgrader's score is exactly the verdicts.

``tasks.py grade`` runs these steps on Dask workers, one task per submission
(:mod:`course_tools.grading_tasks`, :mod:`course_tools.cluster`); nbgrader's execute step then
only records each worker's result (``COURSE_GRADE_RESULTS``, :func:`course_tools.grading_tasks.replay`),
so that one process writes the gradebook. A notebook without a fitting result is graded here.

The expected values never enter the sandbox, so nothing a submission does in its
kernel (monkeypatching numpy or the checks, hooks, catching exceptions, always-equal
objects, reading files) can turn a failed verdict into a pass. Notes for the
instructor go to ``_grading/<assignment>/notes/<student>.json``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import cloudpickle
import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float

from . import ROOT, answer_keys, grading_tasks, sandbox, staging, verdicts
from .edition import edition_number, write_edition
from .sandbox_runner import MAX_NOTEBOOK, _trim

MAX_RUN_BYTES = 50 * 2 ** 20
"""The largest executed notebook read back from a sandbox; a larger one counts as not run."""
MAX_NOTES = 20

PREAMBLE = '''\
import probe as __course_probe__
def __course_no_exit(*args, **kwargs):
    raise RuntimeError("exit() and quit() would end the kernel; when grading they are ignored")
exit = quit = __course_no_exit'''


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


def grading_notebook(nb, key: dict, job: Path, skip: set[str], sandboxed: bool):
    """The notebook the sandbox runs, and ``grading cell index -> original index`` (``None`` for the preamble)."""
    cases_dir = job / "in" / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    where = ("", "") if sandboxed else (f", {str(cases_dir)!r}", f", {str(job / 'out')!r}")
    run = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    run.cells.append(nbformat.v4.new_code_cell(PREAMBLE))
    origin: list[int | None] = [None]
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        if grade_id in key:
            entry = key[grade_id]
            inputs = answer_keys.probe_inputs(entry)
            with open(cases_dir / f"{grade_id}.pkl", "wb") as f:
                cloudpickle.dump(inputs, f, protocol=4)  # inputs only; lambdas of visible tests by value
            source = f"__course_probe__.probe({grade_id!r}, {entry['function']!r}{where[0]}{where[1]})"
        elif not grade_id and cell.source.strip() in skip:
            continue
        else:
            source = cell.source
        run.cells.append(nbformat.v4.new_code_cell(source))
        origin.append(index)
    return run, origin


def grade_notebook(nb, assignment: str, student: str, course: Path, experiments: bool = True,
                   sandboxed: bool = True, limits: sandbox.Limits | None = None,
                   record: staging.Staged | None = None) -> list[str]:
    """Run ``nb`` (a staged notebook, modified in place) and put the verdicts in its test cells.

    ``record`` is the submission's staging record (a refused one is not run: every test fails).
    Returns the notes for the instructor; ``nb.metadata["grading_seconds"]`` is the sandboxed run's time.
    """
    key = answer_keys.load(assignment, course)
    limits = limits or sandbox.Limits()
    notes = list(record.notes) if record else []
    if record and record.refused:
        notes.insert(0, f"not graded: {record.refused}")
        _apply_verdicts(nb, key, None)  # every test fails, with the reason in the notes
        return notes
    canonical = set()
    for path in (course / "exercises" / assignment).glob("*.ipynb"):
        canonical |= experiment_sources(nbformat.read(path, as_version=4))
    job = Path(tempfile.mkdtemp(prefix=f"{student}-", dir=_jobs(course, assignment)))
    try:
        run_nb, origin = grading_notebook(nb, key, job, set() if experiments else canonical, sandboxed)
        nbformat.write(run_nb, job / "in" / "notebook.ipynb")
        for name in ("probe.py", "sandbox_runner.py"):
            shutil.copy(Path(__file__).with_name(name), job / "in" / name)
        result = sandbox.run_notebook(job, edition_dir(assignment), limits, sandboxed)
        nb.metadata["grading_seconds"] = round(result.seconds, 2)
        notes += _merge(nb, job, origin, result, limits, canonical)
        _apply_verdicts(nb, key, job / "out")
    finally:
        shutil.rmtree(job, ignore_errors=True)
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
        if path.stat().st_size > MAX_RUN_BYTES:
            raise ValueError("too large")
        ran = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - missing, broken or too large: nothing ran that we can show
        ran = None
    status = ran.metadata.get("grading_run", {}) if ran is not None else {}
    budget = [MAX_NOTEBOOK]
    if result.timed_out:
        notes.append(f"the notebook was stopped after {limits.notebook_seconds:.0f} s: later cells did not run")
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
                  and o.get("ename") != "NotImplementedError"]
        if errors and not target.metadata.get("nbgrader", {}).get("grade") \
                and target.source.strip() not in experiments:
            label = target.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"
            notes.append(f"{label} raised {str(errors[0].get('ename'))[:40]}: {str(errors[0].get('evalue'))[:120]}")
        if isinstance(stopped, dict) and stopped.get("cell") == position:
            label = target.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"
            notes.append(f"{str(stopped.get('why', 'the run stopped'))[:200]} in {label}: later cells did not run")
    timeouts = status.get("timeouts", []) if isinstance(status, dict) else []
    for position in sorted({p for p in timeouts if isinstance(p, int)} if isinstance(timeouts, list) else set()):
        if 0 <= position < len(origin) and origin[position] is not None:
            notes.append(f"cell {origin[position] + 1} was stopped after {limits.cell_seconds:.0f} s")
    if ran is None:
        notes.append("the notebook could not be run" + (f" ({result.stderr.strip()[-200:]})" if result.stderr.strip() else ""))
    return [n[:300] for n in notes[:MAX_NOTES]] + ([f"... and {len(notes) - MAX_NOTES} more"] if len(notes) > MAX_NOTES else [])


def _apply_verdicts(nb, key: dict, results_dir: Path | None) -> None:
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or grade_id not in key:
            continue
        entry = key[grade_id]
        results = verdicts.read_results(results_dir / f"{grade_id}.json") if results_dir else None
        cell.outputs = [_verdict_output(verdicts.judge(entry, results, secret=entry["kind"] == "hidden"))]


class SandboxedExecute(NbGraderPreprocessor):
    """nbgrader's execute step for the course: sandboxed run, verdicts decided by the grader.

    Its time limits can be set in ``nbgrader_config.py``, e.g. ``c.SandboxedExecute.cell_seconds = 60``.
    """

    cell_seconds = Float(sandbox.Limits.cell_seconds, help="wall-clock seconds one cell may run").tag(config=True)
    notebook_seconds = Float(sandbox.Limits.notebook_seconds,
                             help="wall-clock seconds a whole notebook may run").tag(config=True)

    def preprocess(self, nb, resources):
        """Grade ``nb``: replay a worker's result from ``$COURSE_GRADE_RESULTS/<student>.json`` when
        there is one for this very notebook (:mod:`course_tools.batch`), else run it in a sandbox here."""
        info = resources.get("nbgrader", {})
        assignment, student = info.get("assignment"), info.get("student")
        course = Path.cwd()
        experiments = os.environ.get("COURSE_GRADE_EXPERIMENTS", "1") != "0"
        sandboxed = os.environ.get("COURSE_GRADE_UNSANDBOXED") != "1"
        results = os.environ.get("COURSE_GRADE_RESULTS")
        try:
            result = grading_tasks.load_result(Path(results) / f"{student}.json") if results else None
            if result is not None and grading_tasks.replay(nb, result):
                notes = result.notes  # graded by a worker (course_tools.cluster): recorded here
                how = f"recorded the result of worker {result.worker} ({result.seconds} s)"
            else:
                if result is not None:
                    self.log.warning("the result for %s does not fit nbgrader's notebook: grading it here", student)
                limits = sandbox.Limits(cell_seconds=self.cell_seconds, notebook_seconds=self.notebook_seconds)
                record = staging.load_record(grading_dir(course, assignment) / "records" / f"{student}.json")
                notes = grade_notebook(nb, assignment, student, course, experiments, sandboxed, limits, record)
                how = f"ran it in the sandbox here in {nb.metadata.pop('grading_seconds', None)} s"
        except Exception as error:  # noqa: BLE001 - one notebook's trouble must not stop the batch
            self.log.exception("grading %s of %s failed", assignment, student)
            notes = [f"the grader failed on this notebook ({type(error).__name__}: {str(error)[:200]}); "
                     f"its tests were marked failed: see the log"]
            _apply_verdicts(nb, answer_keys.load(assignment, course), None)
            how = "failed"
        self.log.info("%s of %s: %s", assignment, student, how)
        folder = grading_dir(course, assignment) / "notes"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{student}.json").write_text(json.dumps(notes))
        return nb, resources
