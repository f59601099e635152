"""A class graded serially, on one local Dask worker and on one per core; grades compared; scaling.

    .venv/bin/python benchmarks/grading_parallel.py [--students 30] [--assignment ps01_counts] [--repeats 1]
                                                    [--no-one-worker] [--no-experiments] [--no-postgres]

A scratch course receives ``--students`` submissions of the assignment (four in five
full marks, the others with a wrong tfidf or left blank, as a class hands in), and the
README's command grades the whole batch three times, each from nothing (``--regrade``):

1. ``--serial``: one notebook after another in one process, into SQLite (the reference);
2. ``--workers 1``: a local Dask cluster of one worker, into SQLite;
3. default: one local worker per core, into SQLite;
4. the same into a throwaway PostgreSQL server (:mod:`course_tools.grading.postgres`; not with ``--no-postgres``).

With ``--repeats N`` the serial run and the run on one worker per core are repeated, alternately, N
times (each pair side by side in time), and the speed-up is the median [range] of the pairs' ratios.
Printed: each run's wall time, the mean time of one grading task on its worker (the
sandboxed run with its kernel start and the verdicts), the time nbgrader took to record
what was left after the last result (the one writer of the gradebook records each notebook as its
result comes in), the speed-up over serial grading, and
whether ``nbgrader export`` gives the same grades in every run. Then the expected time
for 300 students and 8 assignments on a 16-core machine and on a cluster of ten such
machines, from these measurements, with the assumptions stated. Target: at least 1.8x
with the local cluster on a 2-core machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from course_tools import tool_env  # noqa: E402
from course_tools.grading.postgres import throwaway_postgres  # noqa: E402
from grading_helpers import answers, scratch_course, submit  # noqa: E402
from timing import cpu_name, ratios, record, spread_text  # noqa: E402


def _class(course: Path, assignment: str, students: int) -> None:
    right = answers(ROOT, assignment)
    wrong = dict(right, tfidf=right["tfidf"].replace("np.log((1 + n_docs) / (1 + df)) + 1",
                                                     "np.log((1 + n_docs) / (1 + df))")) if "tfidf" in right else {}
    for number in range(students):
        kind = number % 10
        submit(course, f"student{number:03d}", wrong if kind == 3 else {} if kind == 7 else right, assignment=assignment)


def _grade(course: Path, assignment: str, flags: list[str], env: dict) -> dict:
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "course_tools", "grade", assignment, "--regrade", *flags],
                            cwd=course, capture_output=True, text=True, env=tool_env(**env))
    wall = time.time() - started
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-500:]
    recorded = re.search(r"recorded by nbgrader in ([0-9.]+) s", summary)
    per_record = re.search(r"([0-9.]+) s to record each\)", summary)
    results = [json.loads(p.read_text()) for p in (course / "_grading" / assignment / "results").glob("*.json")]
    subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", "grades.csv"], cwd=course, check=True,
                   capture_output=True, env=tool_env(**env))
    with open(course / "grades.csv", newline="", encoding="utf-8") as f:
        grades = sorted((row["student_id"], row["raw_score"], row["score"], row["max_score"]) for row in csv.DictReader(f))
    return {"wall": wall, "task": statistics.mean(r["seconds"] for r in results), "grades": grades,
            "recorded": float(recorded.group(1)) if recorded else float("nan"), "summary": summary,
            "per_record": float(per_record.group(1)) if per_record else float("nan"),
            "workers": len({r["worker"] for r in results})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--assignment", default="ps01_counts")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-one-worker", action="store_true", help="skip the run on a cluster of one worker")
    parser.add_argument("--no-experiments", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    flags = ["--no-experiments"] if args.no_experiments else []
    print(f"{args.students} submissions of {args.assignment}{' (graded cells only)' if flags else ''}; "
          f"{cores} cores ({cpu_name()})")
    runs, parallel = {}, f"{cores} workers"
    plan = [] if args.no_one_worker else [("1 worker", ["--workers", "1"], False)]
    for repeat in range(args.repeats):  # serial and parallel alternate, so each pair sees the same machine
        suffix = f" #{repeat + 1}" if args.repeats > 1 else ""
        plan += [("serial" + suffix, ["--serial"], False), (parallel + suffix, [], False)]
    if not args.no_postgres:
        plan.append((f"{parallel}, PostgreSQL", [], True))
    with tempfile.TemporaryDirectory() as scratch:
        for name, how, postgres in plan:
            course = Path(scratch) / name.replace(" ", "_").replace(",", "").replace("#", "")
            with throwaway_postgres() if postgres else nullcontext(None) as url:
                env = {"NBGRADER_DB_URL": url} if url else {}
                # the release is recorded in the gradebook first (PostgreSQL's too), as an instructor does
                scratch_course(course, ROOT, args.assignment, env=tool_env(**env))
                _class(course, args.assignment, args.students)
                runs[name] = _grade(course, args.assignment, flags + how, env)
                print(f"  {name}: {runs[name]['wall']:.1f} s", flush=True)
    serials = [run for name, run in runs.items() if name.startswith("serial")]
    parallels = [run for name, run in runs.items() if name.startswith(parallel) and "PostgreSQL" not in name]
    serial_wall = statistics.median(run["wall"] for run in serials)
    print(f"\n{'run':<24} {'wall s':>8} {'task s (mean)':>14} {'recording tail s':>17} {'speed-up':>9}")
    for name, run in runs.items():
        print(f"{name:<24} {run['wall']:>8.1f} {run['task']:>14.1f} {run['recorded']:>17.1f} "
              f"{serial_wall / run['wall']:>8.2f}x")
    speedup, low, high = ratios([run["wall"] for run in serials], [run["wall"] for run in parallels])
    print(f"\nspeed-up on {cores} local workers over serial grading: {spread_text(speedup, low, high)} "
          f"(median [range] of {len(serials)} pair(s)); target >= 1.8: {'met' if speedup >= 1.8 else 'missed'}")
    record("grading_parallel", f"{args.students} submissions of {args.assignment}"
           f"{' (graded cells only)' if flags else ''}: serial time / time on {cores} local workers",
           speedup, low, high, ">= 1.8", speedup >= 1.8, len(serials))
    serial = serials[0]
    same = all(run["grades"] == serial["grades"] for run in runs.values())
    print(f"\nnbgrader export gives the same grades in every run: {'yes' if same else 'NO'} "
          f"({len(serial['grades'])} students)")
    for name, run in runs.items():
        print(f"  {name}: {run['summary'][:300]}")

    # Scaling, from the measurements above
    task = serial["task"]
    per_record = serial["per_record"]
    efficiency = speedup / cores
    notebooks = 300 * 8
    print(f"\nExpected time for 300 students x 8 assignments ({notebooks} notebooks), assuming every assignment costs "
          f"what {args.assignment} cost here ({task:.1f} s per task on one core of this CPU), the parallel "
          f"efficiency measured here ({efficiency:.2f} per core), and recording at {per_record:.2f} s per notebook "
          f"by the one gradebook writer, beside the grading (so the batch takes the longer of the two):")
    for label, workers in (("one core, serial", 1), ("a 16-core machine", 16), ("10 machines of 16 cores", 160)):
        grading = notebooks * task / (workers * (efficiency if workers > 1 else 1))
        hours = max(grading, notebooks * per_record) / 3600
        print(f"  {label:<26} {hours:6.2f} h{'  (the gradebook writer is the bottleneck)' if notebooks * per_record > grading else ''}")

if __name__ == "__main__":
    main()
