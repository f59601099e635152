"""The results and scores a page states come from measurements and from the grader's points, never typed.

Cheap (well under a second each): no experiment runs here. The experiments run, with the reference answers,
in test_grading's graded_with_experiments, whose values test_grading checks with
``stated_result_problems``; ``tasks.py measure`` writes the measured results these tests read.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from course_tools.authoring import measure, scoring, stated_results
from course_tools.exercises import assignments, solution_notebooks

MEASURED = sorted(stated_results.EXPERIMENTS)


def _executed(root, assignment: str, values: dict):
    """The release of ``assignment`` as if executed: its experiment cells' output holds the results line
    that the reference run of seed 0 printed, with ``values`` in it."""
    nb = nbformat.read(root / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    cells = measure.experiment_cells(nb)
    assert cells, f"{assignment} has experiment cells"
    line = stated_results.RESULTS_PREFIX + json.dumps(values) + "\n"
    nb.cells[cells[-1]].outputs = [nbformat.v4.new_output("stream", name="stdout", text="something else\n" + line)]
    return nb


@pytest.mark.parametrize("assignment", MEASURED)
def test_the_measured_results_hold_every_seed_and_the_page_states_them(root, assignment):
    """The results file's intervals are the range over its seeds widened by the stated margins (recomputed here),
    and the solution's and the release's results cells say exactly what sync writes from the file."""
    results = stated_results.load_results(assignment, root)
    assert results, f"answer_keys/{assignment}.results.json is missing: run python3 tasks.py measure {assignment}"
    experiment = stated_results.EXPERIMENTS[assignment]
    assert len(results["runs"]) == (5 if experiment.seeded else 1)
    for value in experiment.values:
        measured = [run["values"][value.key] for run in results["runs"]]
        assert tuple(results["intervals"][value.key]) == stated_results.interval(value, measured)
        low, high = results["intervals"][value.key]
        assert all(low <= m <= high for m in measured)
    text = stated_results.results_text(assignment, results)
    for path in [*solution_notebooks(assignment, root), root / "exercises" / assignment / f"{assignment}.ipynb"]:
        cells = stated_results.results_cells(nbformat.read(path, as_version=4), assignment)
        assert [c.source for c in cells] == [text], f"{path}: run tasks.py sync and release"
    for value in experiment.values:
        low, high = results["intervals"][value.key]
        assert f"between {value.show(low)} and {value.show(high)}" in text


def test_sync_check_finds_nothing_out_of_date(root):
    assert stated_results.sync_results_cells(check=True, root=root) == []
    assert scoring.sync_scoring(check=True, root=root) == []


@pytest.mark.parametrize("assignment", ["ps06_transformer", "ps08_bert"])
def test_a_printed_value_outside_its_stated_interval_is_reported(root, assignment):
    """The seed-0 reference values pass; one value moved outside its interval, or missing, gives one clear message."""
    results = stated_results.load_results(assignment, root)
    values = dict(results["runs"][0]["values"])
    assert stated_results.stated_result_problems(assignment, _executed(root, assignment, values), root) == []
    value = stated_results.EXPERIMENTS[assignment].values[-1]
    low, _high = results["intervals"][value.key]
    problems = stated_results.stated_result_problems(
        assignment, _executed(root, assignment, {**values, value.key: low - 1.0}), root)
    assert len(problems) == 1 and value.label in problems[0] and "outside the stated interval" in problems[0], problems
    missing = {k: v for k, v in values.items() if k != value.key}
    problems = stated_results.stated_result_problems(assignment, _executed(root, assignment, missing), root)
    assert len(problems) == 1 and "no number" in problems[0], problems
    silent = nbformat.read(root / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    assert "printed no line" in " ".join(stated_results.stated_result_problems(assignment, silent, root))


def test_an_assignment_without_stated_results_has_nothing_to_check(root):
    nb = nbformat.read(root / "exercises" / "ps01_counts" / "ps01_counts.ipynb", as_version=4)
    assert "ps01_counts" not in stated_results.EXPERIMENTS
    assert stated_results.stated_result_problems("ps01_counts", nb, root) == []


def test_measure_runs_the_experiment_with_its_seed_and_without_graded_cells(root):
    """The notebook measure runs for seed 3: the SEED line set to 3, no graded test cell, clocks around the experiment."""
    path, = solution_notebooks("ps06_transformer", root)
    nb = nbformat.read(path, as_version=4)
    seeded = measure.seeded_notebook(nb, 3)
    sources = [c.source for c in seeded.cells]
    assert not any(c.metadata.get("nbgrader", {}).get("grade") for c in seeded.cells)
    assert sum("SEED = 3" in s for s in sources) == 1 and not any("SEED = 0" in s for s in sources)
    assert sum("measure-clock" in s for s in sources) == 1
    assert sum(bool(stated_results.SEED_LINE.search(nb.cells[i].source)) for i in measure.experiment_cells(nb)) == 1


def test_the_self_study_scoring_table_adds_up_to_each_problem_sets_points(root):
    """Each problem set's row: the points of its graded cells, 100 in all, 15 of them for the written question."""
    text = (root / "self_study.md").read_text(encoding="utf-8")
    table = text.split(scoring.BEGIN, 1)[1].split(scoring.END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| Problem set")]
    assert len(rows) == len(assignments(root))  # one row per problem set
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        functions = [part for part in cells[1].split("), ")]
        total = sum(int(part.split("` ")[1].split(" (")[0]) for part in functions)
        assert total + int(cells[2]) == int(cells[3]) == 100 and cells[2] == "15", row
    assert "split evenly" not in text


@pytest.mark.parametrize("assignment", [f"ps0{n}" for n in range(1, 9)])
def test_each_problem_sets_points_table_gives_its_graded_cells_points(root, assignment):
    """The table at the top of each problem set (typed with the notebook) gives each function the points of its
    visible and hidden test cells, and the written question the points of its hand-graded cells."""
    name = next(p.name for p in (root / "solutions").iterdir() if p.name.startswith(assignment))
    points = scoring.points(name, root)
    path, = solution_notebooks(name, root)
    intro = nbformat.read(path, as_version=4).cells[0].source
    table = {}
    for line in intro.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and cells[-1].isdigit():
            table[cells[0].strip("`")] = int(cells[-1])
    assert table.pop("written question") == points.written
    assert table == {f: v + h for f, (v, h) in points.functions.items()}
