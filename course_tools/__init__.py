"""Instructor and maintainer tooling of the course (not shipped to students).

- :mod:`course_tools.exercises`: finds the exercise functions of course_lib and the assignments that own them.
- :mod:`course_tools.sync`: copies answer cells from course_lib into ``solutions/`` and embeds hidden test cases.
- :mod:`course_tools.edition`: writes the student edition of course_lib.
- :mod:`course_tools.release`: produces ``exercises/`` with ``nbgrader generate_assignment``.
- :mod:`course_tools.answer_keys`: every graded test cell's cases and expected outcomes, outside the notebooks.
- :mod:`course_tools.staging`, :mod:`course_tools.batch`: read and repair a class's submissions, grade them, report.
- :mod:`course_tools.grading_tasks`, :mod:`course_tools.grading_worker`, :mod:`course_tools.cluster`: one grading task per submission, run serially,
  on every core or on a Dask cluster; results recorded by one ``nbgrader autograde`` run.
- :mod:`course_tools.postgres`: a throwaway PostgreSQL server for gradebooks in tests and benchmarks.
- :mod:`course_tools.grading`: nbgrader's execute step: a sandboxed run (:mod:`course_tools.sandbox`,
  :mod:`course_tools.sandbox_runner`), probes in the kernel (:mod:`course_tools.probe`), verdicts
  outside it (:mod:`course_tools.verdicts`).
- :mod:`course_tools.leaks`: finds solution text where students can read it.
- :mod:`course_tools.measure`, :mod:`course_tools.stated_results`: run each problem set's experiment with the
  reference answers over seeds (``tasks.py measure``); the results and intervals its page states, written by sync.
- :mod:`course_tools.scoring`: the self-study page's scoring table, written by sync from the nbgrader points.
- :mod:`course_tools.book_execution`: executes the book's chapters two at a time into the execution cache before ``jupyter-book build``.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tool_env(**extra: str) -> dict:
    """The environment for running the venv's command-line tools (nbgrader calls ``alembic``).

    Puts the folder of the running Python first on ``PATH``, so that tools of the
    same environment are found even when it was not activated.
    """
    import os
    import sys

    env = dict(os.environ, **extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env
