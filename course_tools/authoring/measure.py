"""Measure a problem set's experiment: ``python3 tasks.py measure ps06_transformer [--seeds 5]``.

Runs the solution notebook (the reference answers; its graded test cells are skipped) once per
seed, each in a fresh kernel, with the experiment's ``SEED = 0`` line set to the seed, and reads
the values from the experiment's ``results:`` line (:mod:`course_tools.authoring.stated_results`). The wall
clock and CPU time of the experiment cells are measured in the kernel around them. Writes
``answer_keys/<assignment>.results.json``: each seed's values and times, the mean, least and
largest value, the interval a correct answer lands in, and the machine; ``tasks.py sync`` then
writes the page's text from it. Run it after a change to an experiment or to the code it runs,
and commit the file; after a change of a margin only, ``measure --restate`` recomputes the intervals
from the runs in the file.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_tools import ROOT
from course_tools.exercises import solution_notebooks
from .stated_results import EXPERIMENTS, RESULTS_PREFIX, SEED_LINE, interval, load_results, parse_results, results_path

_TIMER = "_measure_clock"
_START = f"import time as _measure_time\n{_TIMER} = (_measure_time.perf_counter(), _measure_time.process_time())"
_STOP = (f'print("measure-clock:", _measure_time.perf_counter() - {_TIMER}[0], '
         f'_measure_time.process_time() - {_TIMER}[1])')


def machine() -> str:
    """The CPU model and number of cores of this machine, as a page names it."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def experiment_cells(nb) -> list[int]:
    """Indices of the experiment's code cells: the code cells nbgrader does not know (as the grader sees them)."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "nbgrader" not in c.metadata
            and "course_edition" not in c.metadata]


def seeded_notebook(nb, seed: int | None):
    """The notebook ``measure`` runs: no graded test cells, the experiment's seed set to ``seed``,
    and clock cells around the experiment cells."""
    nb = copy.deepcopy(nb)
    experiments = experiment_cells(nb)
    if not experiments:
        raise ValueError("the notebook has no experiment cells")
    if seed is not None:
        seeded = [i for i in experiments if SEED_LINE.search(nb.cells[i].source)]
        if len(seeded) != 1:
            raise ValueError(f"exactly one experiment cell must set the seed with a line `SEED = 0`; found {len(seeded)}")
        cell = nb.cells[seeded[0]]
        cell.source = SEED_LINE.sub(f"SEED = {seed}", cell.source, count=1)
    first, last = experiments[0], experiments[-1]
    cells = []
    for i, cell in enumerate(nb.cells):
        if i == first:
            cells.append(nbformat.v4.new_code_cell(_START))
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            cells.append(cell)
        if i == last:
            cells.append(nbformat.v4.new_code_cell(_STOP))
    nb.cells = cells
    return nb


def run_once(path: Path, seed: int | None, timeout: int = 1800) -> dict:
    """Run the solution notebook at ``path`` with ``seed``; its values and times."""
    nb = seeded_notebook(nbformat.read(path, as_version=4), seed)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    found = parse_results(text)
    if not found:
        raise RuntimeError(f"{path.name}: the experiment printed no line starting with {RESULTS_PREFIX!r}")
    values = {}
    for one in found:
        values.update(one)
    clock = [line.split()[1:] for line in text.splitlines() if line.startswith("measure-clock:")]
    wall, cpu = map(float, clock[-1])
    return {"seed": seed, "values": values, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}


def measure(assignment: str, seeds: int = 5, root: Path = ROOT, log=print) -> dict:
    """Run ``assignment``'s experiment over ``seeds`` seeds (0, 1, ...; once if it has no seed) with the
    reference answers, and write ``answer_keys/<assignment>.results.json``. Returns what it wrote."""
    experiment = EXPERIMENTS.get(assignment)
    if experiment is None:
        raise ValueError(f"{assignment} has no experiment whose results its page states "
                         f"(course_tools.authoring.stated_results.EXPERIMENTS: {', '.join(EXPERIMENTS)})")
    path, = solution_notebooks(assignment, root)
    runs = []
    for seed in (range(seeds) if experiment.seeded else [None]):
        started = time.perf_counter()
        run = run_once(path, seed)
        log(f"{assignment} seed {seed}: {json.dumps(run['values'])}; experiment {run['wall_seconds']:.0f} s "
            f"({run['cpu_seconds']:.0f} s CPU), {time.perf_counter() - started:.0f} s with the kernel")
        runs.append(run)
    results = {
        "assignment": assignment,
        "what": "the experiment of the solution notebook (the reference answers), once per seed; "
                "written by python3 tasks.py measure, read by tasks.py sync and the tests",
        "measured_on": datetime.date.today().isoformat(),
        "machine": machine(),
        "runs": runs,
    }
    return write_results(assignment, results, root)


def write_results(assignment: str, results: dict, root: Path = ROOT) -> dict:
    """Add the summary (mean, least, largest value), margins and intervals of ``results["runs"]`` with the
    current margins of :data:`~course_tools.authoring.stated_results.EXPERIMENTS`, and write the results file."""
    experiment = EXPERIMENTS[assignment]
    summary, intervals = {}, {}
    for value in experiment.values:
        measured = [run["values"][value.key] for run in results["runs"]]
        summary[value.key] = {"mean": float(f"{statistics.fmean(measured):.6g}"), "min": min(measured), "max": max(measured)}
        intervals[value.key] = list(interval(value, measured))
    results = {**results, "summary": summary, "margins": {value.key: value.margin for value in experiment.values},
               "intervals": intervals}
    results_path(assignment, root).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return results


def restate(assignment: str, root: Path = ROOT) -> dict:
    """Recompute the intervals of ``assignment``'s results file from its runs with the current margins
    (after a margin changed), without running anything."""
    results = load_results(assignment, root)
    if results is None:
        raise FileNotFoundError(f"{results_path(assignment, root)} does not exist: measure {assignment} first")
    return write_results(assignment, {k: v for k, v in results.items() if k not in ("summary", "margins", "intervals")},
                         root)
