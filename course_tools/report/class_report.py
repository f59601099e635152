"""``tasks.py report ASSIGNMENT``: the class report of one assignment, from the gradebook, into a folder.

:func:`write_report` reads the class (:mod:`course_tools.report.class_data`) and the assignments
graded before it, and writes ``index.html`` (:mod:`course_tools.report.page`, one file that opens
offline), the tables as CSV and the LMS grade files (:mod:`course_tools.report.exports`) into
``reports/<assignment>/`` of the course, or ``out``.
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from course_tools.grading.batch import gradebook_url
from . import class_data, exports, page


def write_report(assignment: str, course: Path, url: str | None = None, out: Path | None = None) -> list[Path]:
    """Write the report of ``assignment`` from the gradebook at ``url`` (the course's by default); return the files."""
    url = url or gradebook_url(course)
    out = Path(out or course / "reports" / assignment)
    engine = class_data.engine_for(url)
    try:
        with engine.connect() as connection:
            *earlier, data = class_data.history(connection, assignment)
    finally:
        engine.dispose()
    out.mkdir(parents=True, exist_ok=True)
    source = sa.make_url(url).render_as_string(hide_password=True)
    made = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    index = out / "index.html"
    index.write_text(page.render(data, earlier, source, made), encoding="utf-8")
    files, waiting = exports.lms(data, out)
    if waiting:
        print(f"note: {waiting} submission(s) have answers still to grade by hand; canvas.csv and moodle.csv "
              f"hold their points so far", file=sys.stderr)
    return [index, *exports.tables(data, earlier, out), *files]


def main(assignment: str, url: str | None, out: str | None) -> int:
    started = time.perf_counter()
    try:
        files = write_report(assignment, Path.cwd(), url, Path(out) if out else None)
    except (FileNotFoundError, KeyError, class_data.store.NotAGradebook, sa.exc.SQLAlchemyError) as error:
        print(f"no report: {error}", file=sys.stderr)
        return 2
    print(f"report of {assignment} in {time.perf_counter() - started:.1f} s: {files[0]} "
          f"({', '.join(f.name for f in files[1:])})")
    return 0
