"""Instructor and maintainer tooling of the course (not shipped to students), by part.

- shared top level: :data:`ROOT`, :func:`tool_env`; :mod:`course_tools.exercises` (the exercise functions
  of course_lib and the assignments that own them), :mod:`course_tools.site_config` (where the course is
  published, from ``_config.yml``), :mod:`course_tools.edition_names` (an edition's number, version, wheel).
- :mod:`course_tools.in_sandbox`: what runs in the student's process when grading, copied into each job;
  imports nothing of the course.
- :mod:`course_tools.authoring`: the single source: sync, answer keys and hidden cases, editions,
  release, wheels, leak checks, measured results.
- :mod:`course_tools.book`: the public tree, the students' environment and the book build.
- :mod:`course_tools.grading`: staging, the sandbox, verdicts and the gradebook, on one machine or a cluster.
- ``python -m course_tools`` (:mod:`course_tools.__main__`): the command line behind ``tasks.py``.

Each part imports only the shared top level and earlier parts, in the order above
(``tests/test_layout.py``); CONTRIBUTING.md section 2 draws the flow of a submission and of a change.
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
