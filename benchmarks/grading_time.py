"""How long grading takes per notebook, sandbox included: ``.venv/bin/python benchmarks/grading_time.py``.

For each assignment, a scratch course receives two full-marks submissions and is graded
serially with ``tasks.py grade A --serial --no-experiments`` (graded cells only) and then
with the experiments. Printed per assignment: the grading task of each notebook (kernel
start, imports, answers and probes in the sandbox, then the verdicts; from its result
file) and the whole command per notebook (staging, the task, recording by nbgrader, the
report). ``--load N`` grades each assignment again while N processes keep N cores busy (the
graded verdicts count CPU time, so they must not change; the times show what load costs);
``--graded-only`` skips the experiments. ``benchmarks/grading_parallel.py`` measures a class
graded in parallel. The target is at most 10 s per notebook for the graded cells.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import timing  # noqa: E402
from course_tools import tool_env  # noqa: E402
from course_tools.exercises import assignments  # noqa: E402
from grading_helpers import answers, scratch_course, submit  # noqa: E402

STUDENTS = 2


def _course(folder: Path, assignment: str) -> None:
    scratch_course(folder, ROOT, assignment, env=tool_env())
    for student in range(STUDENTS):
        submit(folder, f"student{student}", answers(ROOT, assignment), assignment=assignment)


def _grade(folder: Path, assignment: str, *flags: str) -> tuple[float, list[float]]:
    started = time.time()
    subprocess.run([sys.executable, "-m", "course_tools", "grade", assignment, "--serial", "--regrade", *flags],
                   cwd=folder, check=True, capture_output=True, env=tool_env())
    total = time.time() - started
    results = sorted((folder / "_grading" / assignment / "results").glob("*.json"))
    return total / STUDENTS, [json.loads(p.read_text())["seconds"] for p in results]


def _busy(cores: int) -> list[subprocess.Popen]:
    """``cores`` processes that keep a core busy each (another grader, a build) until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graded-only", action="store_true", help="skip the runs with the experiments")
    parser.add_argument("--load", type=int, default=0, help="also grade while N busy processes keep N cores busy")
    options = parser.parse_args()
    modes = [("graded cells", ("--no-experiments",))] + ([] if options.graded_only else [("with experiments", ())])
    print(f"{timing.cpu_name()}; load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'assignment':<16} {'mode':<24} {'grading task per notebook':>28} {'whole command per notebook':>28}")
    for assignment in assignments(ROOT):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            _course(folder, assignment)
            for mode, flags in modes:
                for load in sorted({0, options.load}):
                    busy = _busy(load)
                    try:
                        per_notebook, runs = _grade(folder, assignment, *flags)
                    finally:
                        for process in busy:
                            process.kill()
                            process.wait()
                    shown = ", ".join(f"{r:.1f}" for r in runs)
                    label = mode + (f", {load} busy" if load else ", quiet")
                    print(f"{assignment:<16} {label:<24} {shown + ' s':>28} {per_notebook:>26.1f} s", flush=True)


if __name__ == "__main__":
    main()
