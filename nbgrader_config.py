"""nbgrader configuration of the course: run nbgrader from the repository root.

solutions/<assignment>/  the instructor's source notebooks (answers, hidden tests)
exercises/<assignment>/  the student release, made by `nbgrader generate_assignment`
submitted/<student>/<assignment>/, autograded/, feedback/: nbgrader's usual folders

The gradebook is SQLite in ./gradebook.db unless NBGRADER_DB_URL names another
database (any SQLAlchemy URL, e.g. postgresql://user@host/gradebook).
"""

import os

from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, GetGrades,
                                    IgnorePattern, LimitOutput, SaveAutoGrades)
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbconvert.preprocessors import ClearMetadataPreprocessor

from course_tools.grading.autograde import SandboxedExecute
from course_tools.grading.verdict_store import SaveVerdicts

c = get_config()  # noqa: F821 (defined by nbgrader when it loads this file)

c.CourseDirectory.course_id = "one-hot-to-bert"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
if os.environ.get("NBGRADER_DB_URL"):
    c.CourseDirectory.db_url = os.environ["NBGRADER_DB_URL"]

# The stub students see in place of each answer; the student edition of course_lib uses the same.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Every notebook runs in a sandbox with the student edition of course_lib, and every test's
# verdict is decided outside it from the answer keys (course_tools/grading/autograde.py); SaveVerdicts keeps
# every verdict, case by case, and the notes on each run in the gradebook (course_tools/grading/verdict_store.py).
c.Autograde.autograde_preprocessors = [
    SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, SaveVerdicts, AssignLatePenalties, CheckCellMetadata,
]
# Limits (course_tools/grading/sandbox.py, Limits): time is measured as CPU time, which a busy machine does
# not change (c.SandboxedExecute.cell_cpu_seconds = 120 per cell, notebook_cpu_seconds = 600 per
# notebook); wall clock is only a generous outer bound (cell_seconds = 600, notebook_seconds = 1800),
# and a submission that hits it while the machine is busy is graded again alone. Memory: each run's
# memory cgroup (Limits.memory_total, 3 GiB, counting /tmp, /dev/shm and memfds), processes, files.
# Feedback shows each hidden test's verdict (which names the case by its input shapes, never an
# expected value) but not the hidden test's code.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
