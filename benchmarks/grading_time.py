"""How long grading takes per notebook, sandbox included: ``.venv/bin/python benchmarks/grading_time.py``.

For each assignment, a scratch course receives two full-marks submissions and is graded
with ``tasks.py grade A --no-experiments`` (graded cells only) and then with the
experiments. Printed per assignment: the sandboxed run of each notebook (kernel start,
imports, answers and probes, from nbgrader's log) and the whole command per notebook
(staging, nbgrader, the verdicts, the report). The target is at most 10 s per notebook
for the graded cells.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_tools import tool_env  # noqa: E402
from course_tools.exercises import assignments  # noqa: E402

STUDENTS = 2


def _course(folder: Path, assignment: str) -> None:
    shutil.copy(ROOT / "nbgrader_config.py", folder)
    for name in ("solutions", "exercises", "answer_keys"):
        shutil.copytree(ROOT / name, folder / name)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=folder,
                   check=True, capture_output=True, env=tool_env())
    solution = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for student in range(STUDENTS):
        nb = nbformat.read(folder / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = answers[grade_id]
        target = folder / "submitted" / f"student{student}" / assignment
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{assignment}.ipynb")


def _grade(folder: Path, assignment: str, *flags: str) -> tuple[float, list[float]]:
    started = time.time()
    subprocess.run([sys.executable, "-m", "course_tools", "grade", assignment, *flags], cwd=folder, check=True,
                   capture_output=True, env=tool_env())
    total = time.time() - started
    log = (folder / "_grading" / assignment / "autograde.log").read_text()
    runs = [float(s) for s in re.findall(r"in the sandbox in ([0-9.]+) s", log)]
    return total / STUDENTS, runs


def main() -> None:
    print(f"{'assignment':<16} {'mode':<16} {'sandboxed run per notebook':>28} {'whole command per notebook':>28}")
    for assignment in assignments(ROOT):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            _course(folder, assignment)
            for mode, flags in (("graded cells", ("--no-experiments",)), ("with experiments", ())):
                per_notebook, runs = _grade(folder, assignment, *flags)
                shown = ", ".join(f"{r:.1f}" for r in runs)
                print(f"{assignment:<16} {mode:<16} {shown + ' s':>28} {per_notebook:>26.1f} s")


if __name__ == "__main__":
    main()
