"""nbgrader configuration of the course: run nbgrader from the repository root.

solutions/<assignment>/  the instructor's source notebooks (answers, hidden tests)
exercises/<assignment>/  the student release, made by `nbgrader generate_assignment`
submitted/<student>/<assignment>/, autograded/, feedback/: nbgrader's usual folders

The gradebook is SQLite in ./gradebook.db unless NBGRADER_DB_URL names another
database (any SQLAlchemy URL, e.g. postgresql://user@host/gradebook).
"""

import os

from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, IgnorePattern,
                                    LimitOutput, SaveAutoGrades)
from nbconvert.preprocessors import ClearMetadataPreprocessor

from course_tools.grading import StudentEditionExecute

c = get_config()  # noqa: F821 (defined by nbgrader when it loads this file)

c.CourseDirectory.course_id = "one-hot-to-bert"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
if os.environ.get("NBGRADER_DB_URL"):
    c.CourseDirectory.db_url = os.environ["NBGRADER_DB_URL"]

# The stub students see in place of each answer; the student edition of course_lib uses the same.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Grade every notebook in a kernel that imports the student edition of course_lib
# (course_tools/grading.py): importing the instructor's answer gets the stub.
c.Autograde.autograde_preprocessors = [
    StudentEditionExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]
# The experiment sections train on real text; leave them time, but not forever.
c.Execute.timeout = 180
