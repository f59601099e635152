"""Every benchmark in one go, alone, and one table of their ratios: ``python3 tasks.py bench``.

    .venv/bin/python benchmarks/all.py [--quick] [--output _build/benchmarks.md]

Runs each script of this folder one after another in a process of its own (so no two measure at once),
shows its own report as it goes, and gathers the ratios each one records (:func:`timing.record`) into
one Markdown table: what is compared, the median ratio over the rounds with its range, the target and
whether it is met. The table is printed and written to ``--output``. Run it on a quiet machine: the
load average at the start and the end is printed with it. ``--quick`` uses fewer rounds, fewer
students and repeats (a smoke test of the scripts, not a measurement).

``grading_time.py`` (seconds per notebook for each assignment, not a ratio) is not part of the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from timing import RESULTS, cpu_name  # noqa: E402

SCRIPTS = {  # script -> (arguments, arguments with --quick)
    "counts_vs_sklearn.py": ([], []),
    "word2vec_vs_gensim.py": ([], ["--repeats", "1"]),
    "lstm_vs_torch.py": ([], ["--rounds", "3", "--runs", "3"]),
    "attention_vs_torch.py": ([], ["--rounds", "3", "--runs", "5"]),
    "transformer_vs_torch.py": ([], ["--rounds", "3", "--runs", "2"]),
    "gpt_vs_transformers.py": ([], ["--rounds", "3", "--runs", "1", "--no-lengths"]),
    "bpe_vs_tokenizers.py": ([], ["--rounds", "1", "--vocab-size", "500"]),
    "bert_vs_transformers.py": ([], ["--rounds", "3"]),
    "grading_parallel.py": (["--students", "20", "--repeats", "2", "--no-postgres", "--no-one-worker"],
                            ["--students", "4", "--no-postgres", "--no-one-worker", "--no-experiments"]),
    "report_cost.py": ([], ["--students", "30", "--rounds", "1"]),
}


def table(rows: list[dict]) -> str:
    """The Markdown table of the recorded ratios."""
    lines = ["| benchmark | what is compared | ratio (or difference), median [range] | rounds | target | met |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        met = "" if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(f"| {row['benchmark']} | {row['measure']} | {row['median']:.2f} [{row['low']:.2f}-{row['high']:.2f}] "
                     f"| {row['rounds'] or ''} | {row['target'] or 'reported'} | {met} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", help="run only these scripts (names without .py)")
    parser.add_argument("--output", default=str(HERE.parent / "_build" / "benchmarks.md"))
    args = parser.parse_args()
    scripts = {name: arguments[1 if args.quick else 0] for name, arguments in SCRIPTS.items()
               if not args.only or name.removesuffix(".py") in args.only}
    start_load, started, failed = os.getloadavg()[0], time.time(), []
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.jsonl"
        for name, arguments in scripts.items():
            print(f"\n===== {name} {' '.join(arguments)}", flush=True)
            began = time.time()
            status = subprocess.run([sys.executable, str(HERE / name), *arguments], cwd=HERE.parent,
                                    env=dict(os.environ, **{RESULTS: str(results)})).returncode
            print(f"===== {name}: {time.time() - began:.0f} s" + (f", exit status {status}" if status else ""), flush=True)
            if status:
                failed.append(name)
        rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()] if results.exists() else []
    heading = (f"Benchmarks of {datetime.date.today()}, {cpu_name()}, {os.cpu_count()} cores; load average "
               f"{start_load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {time.time() - started:.0f} s"
               + (" (--quick: not a measurement)" if args.quick else ""))
    report = heading + "\n\n" + table(rows) + "\n"
    print("\n" + report)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(report, encoding="utf-8")
    print(f"written to {args.output}")
    if failed:
        print(f"these benchmarks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
