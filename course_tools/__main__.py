"""Command line of the course tooling: ``python -m course_tools COMMAND``.

    sync [--check]          copy answer cells from course_lib into solutions/, embed hidden cases,
                            write the install cell (student edition, wheel URL) of each assignment, the
                            measured results each page states (answer_keys/*.results.json) and the
                            self-study page's scoring table
    release [ASSIGNMENT..]  regenerate exercises/ with nbgrader generate_assignment
    check                   fail on any drift: answer cells, hidden cases, install cells, exercises/, leaks
    edition N [--out DIR]   write student edition N (first N assignments revealed)
    public [--out DIR]      write the student-facing tree (default _build/public) and check it for leaks;
      [--self-study]        what it publishes follows course.calendar in _config.yml (on today's date, or
      [--date YYYY-MM-DD]   --date's); --self-study publishes every problem set and every answer
    grade ASSIGNMENT        stage every submission, grade each in a sandbox on every core (or a Dask
                            cluster), record them all in the gradebook, report
                            [--no-experiments] [--unsandboxed] [--workers N | --scheduler ADDRESS | --serial]
                            [--regrade]
    report ASSIGNMENT       the class report from the gradebook: reports/ASSIGNMENT/index.html (one page,
      [--db URL] [--out DIR] offline), the same tables as CSV, canvas.csv and moodle.csv for LMS imports
    leaks PATH..            list solution text found in files under PATH
    chapter FILE            execute one chapter alone; write its notebook and figures to _build/chapter/
    measure ASSIGNMENT..    run each problem set's experiment with the reference answers over several seeds
      [--seeds N]           (default 5) and write answer_keys/<assignment>.results.json, which sync states;
      [--restate]           --restate: recompute its intervals with the current margins, running nothing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sync", help="copy answer cells from course_lib and embed hidden test cases")
    p.add_argument("--check", action="store_true", help="change nothing; fail if anything is out of date")
    p = sub.add_parser("release", help="regenerate exercises/ with nbgrader")
    p.add_argument("assignments", nargs="*")
    sub.add_parser("check", help="fail on any drift or leak")
    p = sub.add_parser("edition", help="write a student edition of course_lib")
    p.add_argument("number", type=int, help="how many assignments to reveal (0: none)")
    p.add_argument("--out", type=Path, help="output folder (default _build/student_edition/editionN)")
    p = sub.add_parser("public", help="write what students may see (book sources, notebooks, wheels) and check it")
    p.add_argument("--out", type=Path, help="output folder (default _build/public)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--self-study", action="store_true",
                      help="publish every problem set and every answer, whatever course.calendar says")
    when.add_argument("--date", metavar="YYYY-MM-DD", help="apply a calendar of dates on this day instead of today")
    p = sub.add_parser("grade", help="stage submissions, autograde each in a sandbox, report")
    p.add_argument("assignment")
    p.add_argument("--no-experiments", action="store_true", help="skip the ungraded experiment sections")
    p.add_argument("--unsandboxed", action="store_true", help="grade without the sandbox (unsafe)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--workers", type=int, help="local Dask workers, one notebook at a time each (default: one per core)")
    how.add_argument("--scheduler", metavar="ADDRESS", help="grade on the Dask cluster of this scheduler (tcp://host:8786)")
    how.add_argument("--serial", action="store_true", help="grade one notebook after another in this process, without Dask")
    p.add_argument("--regrade", action="store_true", help="grade every submission again, even those unchanged since the last run")
    p = sub.add_parser("report", help="the class report of an assignment, from the gradebook")
    p.add_argument("assignment")
    p.add_argument("--db", metavar="URL", help="the gradebook (default: $NBGRADER_DB_URL, else ./gradebook.db)")
    p.add_argument("--out", metavar="DIR", help="where to write it (default: reports/ASSIGNMENT)")
    p = sub.add_parser("leaks", help="find solution text or hidden tests in files")
    p.add_argument("paths", nargs="+", type=Path)
    p = sub.add_parser("chapter", help="execute one chapter alone and write its figures to _build/chapter/")
    p.add_argument("path", type=Path)
    p = sub.add_parser("measure", help="measure problem sets' experiments over seeds into answer_keys/*.results.json")
    p.add_argument("assignments", nargs="+")
    p.add_argument("--seeds", type=int, default=5, help="how many seeds (0, 1, ...; default 5)")
    p.add_argument("--restate", action="store_true",
                   help="run nothing: recompute the intervals from the runs in the file with the current margins")
    args = parser.parse_args(argv)

    if args.command == "sync":
        from course_tools.book.install_cells import sync_install_cells
        from course_tools.authoring.sync import sync

        from course_tools.authoring.scoring import sync_scoring
        from course_tools.authoring.stated_results import sync_results_cells

        changes = (sync(check=args.check) + sync_install_cells(check=args.check) + sync_results_cells(check=args.check)
                   + sync_scoring(check=args.check))
        for line in changes:
            print(("out of date: " if args.check else "synced: ") + line)
        if not changes:
            print("solutions/ is in sync with course_lib")
        return 1 if (args.check and changes) else 0
    if args.command == "release":
        from course_tools.authoring.release import release

        for path in release(args.assignments or None):
            print(f"released {path.relative_to(ROOT)}")
        return 0
    if args.command == "check":
        from course_tools.authoring.leaks import find_leaks
        from course_tools.book.install_cells import sync_install_cells
        from course_tools.authoring.release import drift
        from course_tools.authoring.scoring import sync_scoring
        from course_tools.authoring.stated_results import sync_results_cells
        from course_tools.authoring.sync import sync

        problems = (sync(check=True) + sync_install_cells(check=True) + sync_results_cells(check=True)
                    + sync_scoring(check=True) + drift()
                    + [str(leak) for leak in find_leaks([ROOT / "exercises"])])
        for line in problems:
            print(line)
        print("no drift, no leaks" if not problems else f"{len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "edition":
        from course_tools.authoring.edition import write_edition

        out = write_edition(args.out or ROOT / "_build" / "student_edition" / f"edition{args.number}", args.number)
        print(f"wrote student edition {args.number} to {out}; install it with: pip install {out}")
        return 0
    if args.command == "public":
        from course_tools.book.course_calendar import parse_date, read_calendar, self_study
        from course_tools.book.public import build_public
        from course_tools.site_config import PublicTreeError

        try:
            calendar = self_study() if args.self_study else read_calendar(on=args.date and parse_date(args.date))
            print(f"calendar: {calendar.describe()}", flush=True)
            out = build_public(args.out, calendar=calendar)
        except PublicTreeError as error:
            print(error, file=sys.stderr)
            return 1
        files = sum(1 for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts)
        print(f"wrote the public tree ({files} files, no leaks) to {out}")
        return 0
    if args.command == "grade":
        from course_tools.grading.batch import grade

        if args.workers is not None and args.workers < 1:
            parser.error("--workers needs at least 1")
        return grade(args.assignment, experiments=not args.no_experiments, sandboxed=not args.unsandboxed,
                     workers=args.workers, scheduler=args.scheduler, serial=args.serial, regrade=args.regrade)
    if args.command == "report":
        from course_tools.report.class_report import main as report

        return report(args.assignment, args.db, args.out)
    if args.command == "leaks":
        from course_tools.authoring.leaks import find_leaks

        leaks = find_leaks(args.paths)
        for leak in leaks:
            print(leak)
        print("no leaks" if not leaks else f"{len(leaks)} leak(s)")
        return 1 if leaks else 0
    if args.command == "chapter":
        from course_tools.book.chapter import run_chapter

        return run_chapter(args.path)
    if args.command == "measure":
        from course_tools.authoring.measure import measure, restate

        if args.seeds < 1:
            parser.error("--seeds needs at least 1")
        for assignment in args.assignments:
            results = restate(assignment) if args.restate else measure(assignment, seeds=args.seeds)
            for key, summary in results["summary"].items():
                low, high = results["intervals"][key]
                print(f"{assignment} {key}: mean {summary['mean']:.4g}, min {summary['min']:.4g}, max {summary['max']:.4g}; "
                      f"interval {low:.4g} to {high:.4g}")
            print(f"wrote answer_keys/{assignment}.results.json; now run tasks.py sync and release")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
