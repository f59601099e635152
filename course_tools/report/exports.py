"""The class report's tables as CSV files, and each student's grade in the CSV layouts LMS imports read.

:func:`tables` writes one CSV per table of the page (UTF-8 with a byte-order mark, so that
spreadsheet programs read names with accents right). :func:`lms` writes the grades for two
learning management systems' CSV grade imports:

- ``canvas.csv``, Canvas's gradebook import: the columns ``Student``, ``ID``, ``SIS User ID``,
  ``SIS Login ID``, ``Section`` and one column named after the assignment with the points; Canvas
  matches students by its ``ID`` (nbgrader's ``lms_user_id``) or by ``SIS User ID`` (nbgrader's
  student id) and makes a new assignment of a column it does not know;
- ``moodle.csv``, Moodle's "Import grades from a CSV file": ``Username`` (nbgrader's student id),
  ``Email address``, ``ID number`` (``lms_user_id``) and the assignment's points; at import one of
  them is mapped to the user field that identifies students, the points column to the grade item.

Scores are the total points as nbgrader holds them, late penalties subtracted; a submission with
answers still to grade by hand is exported with what it has, and :func:`lms` says how many.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .class_data import ClassData


def _write(path: Path, headers: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="", encoding="utf-8-sig") as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)
    return path


def tables(data: ClassData, earlier: list[ClassData], folder: Path) -> list[Path]:
    """Write scores, functions, cases, hints, notes, pending and history CSVs into ``folder``."""
    subs = data.submissions
    return [
        _write(folder / "scores.csv", ["student", "name", "email", "score", "max_score", "to_grade_by_hand", "notes"],
               [[s.student, s.name, s.email, s.score, s.max_score, s.pending, " | ".join(s.notes)] for s in subs]),
        _write(folder / "functions.csv", ["function", "points", "mean_lost", "submissions_losing_points",
                                          "visible_failed", "hidden_failed", "not_implemented"],
               [[f.function, f.points, round(f.mean_lost, 4), f.lost_by, f.visible_failed, f.hidden_failed,
                 f.not_implemented] for f in data.functions]),
        _write(folder / "cases.csv", ["function", "cell", "case", "call", "failed", "implemented_by", "most_frequent_problem"],
               [[c.function, c.cell, c.number, c.call, c.failed, c.tried, c.problem] for c in data.cases]),
        _write(folder / "hints.csv", ["function", "cells", "hint", "submissions"],
               [[h.function, h.cell, h.hint, h.count] for h in data.hints]),
        _write(folder / "notes.csv", ["student", "note"], [[s.student, n] for s in subs for n in s.notes]),
        _write(folder / "pending.csv", ["student", "cell", "points"], [[p.student, p.cell, p.points] for p in data.pending]),
        _write(folder / "history.csv", ["assignment", "submissions", "mean", "q1", "median", "q3", "most_lost"],
               [list(c.summary().values()) for c in [*earlier, data]]),
    ]


def lms(data: ClassData, folder: Path) -> tuple[list[Path], int]:
    """Write ``canvas.csv`` and ``moodle.csv``; returns them and how many grades still wait for hand grading."""
    subs = data.submissions
    canvas = _write(folder / "canvas.csv", ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", data.assignment],
                    [[s.name, s.lms_id, s.student, "", "", f"{s.score:g}"] for s in subs])
    moodle = _write(folder / "moodle.csv", ["Username", "Email address", "ID number", data.assignment],
                    [[s.student, s.email, s.lms_id, f"{s.score:g}"] for s in subs])
    return [canvas, moodle], sum(1 for s in subs if s.pending)
