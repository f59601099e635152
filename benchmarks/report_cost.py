"""What the class report costs on a large class: a synthetic gradebook on SQLite and on PostgreSQL.

    .venv/bin/python benchmarks/report_cost.py [--students 300] [--rounds 3] [--no-postgres]

:func:`course_tools.report.synthetic.make_gradebook` writes ``--students`` students x ps01_counts,
ps02_word2vec and ps03_rnn into a SQLite file and into a throwaway PostgreSQL server
(:mod:`course_tools.grading.postgres`). On each, timed over ``--rounds`` rounds (median [range]):
``class_data.history`` of ps03_rnn (what the report loads) in this process, and the whole command
``python -m course_tools report ps03_rnn --db URL --out DIR`` as a subprocess. Printed: the times,
the rows of the tables, the size of the output files. The PostgreSQL/SQLite ratio of the command's time
is recorded for ``benchmarks/all.py`` (reported, no target).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_tools.grading.postgres import throwaway_postgres  # noqa: E402
from course_tools.report import class_data, synthetic  # noqa: E402
from timing import cpu_name, ratios, record, spread_text  # noqa: E402

ASSIGNMENTS = ["ps01_counts", "ps02_word2vec", "ps03_rnn"]
TABLES = ["student", "submitted_assignment", "grade", "course_verdict", "course_case", "course_run"]


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def measure(url: str, students: int, rounds: int, out: Path) -> dict:
    """Build the gradebook at ``url``, then time loading and the report command ``rounds`` times."""
    made = synthetic.make_gradebook(url, students, ASSIGNMENTS)
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = {t: connection.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}
    load, command = [], []
    for number in range(rounds):
        started = time.perf_counter()
        with engine.connect() as connection:
            class_data.history(connection, "ps03_rnn")  # what the command loads: ps01 to ps03, each once
        load.append(time.perf_counter() - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "course_tools", "report", "ps03_rnn", "--db", url, "--out",
                        str(out / str(number))], cwd=ROOT, check=True, capture_output=True)
        command.append(time.perf_counter() - started)
    engine.dispose()
    sizes = {p.name: p.stat().st_size for p in sorted((out / "0").rglob("*")) if p.is_file()}
    return {"build": made["seconds"], "load": load, "command": command, "rows": rows, "sizes": sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader's alembic
    print(f"{args.students} students x {', '.join(ASSIGNMENTS)}; {os.cpu_count()} cores ({cpu_name()})")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in ["SQLite"] + ([] if args.no_postgres else ["PostgreSQL"]):
            with throwaway_postgres() if name == "PostgreSQL" else nullcontext(f"sqlite:///{scratch}/gradebook.db") as url:
                results[name] = measure(url, args.students, args.rounds, Path(scratch) / name)
            print(f"  {name}: done", flush=True)
    print(f"\n{'database':<11} {'build s':>8} {'loading s, median [range]':>32} {'report command s':>24}")
    for name, r in results.items():
        print(f"{name:<11} {r['build']:>8.1f} {_spread(r['load']):>32} {_spread(r['command']):>24}")
    first = next(iter(results.values()))
    print("\nrows: " + ", ".join(f"{t} {n}" for t, n in first["rows"].items()))
    print("output files: " + ", ".join(f"{n} {s / 1024:.0f} KiB" for n, s in first["sizes"].items()))
    if "PostgreSQL" in results:
        ratio = ratios(results["PostgreSQL"]["command"], results["SQLite"]["command"])
        print(f"\nreport command, PostgreSQL time / SQLite time: {spread_text(*ratio)}")
        record("report_cost", f"class report of ps03_rnn, {args.students} students: PostgreSQL time / SQLite time",
               *ratio, rounds=args.rounds)


if __name__ == "__main__":
    main()
