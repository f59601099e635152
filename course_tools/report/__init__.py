"""The class report: where a class went wrong on an assignment, from the gradebook.

- :mod:`.class_data`: scores, points lost per function, failed hidden cases, hints, notes, answers
  still to grade by hand, read from nbgrader's tables and the course's verdicts
  (:mod:`course_tools.grading.verdict_store`);
- :mod:`.figures`: the plots, as inline SVG (matplotlib), one layout for wide screens and one for phones;
- :mod:`.page`: the self-contained HTML page (no script, no network);
- :mod:`.exports`: the same tables as CSV, and grades for LMS imports (Canvas, Moodle);
- :mod:`.synthetic`: a gradebook of a made-up class, for measuring the report's cost.
"""
