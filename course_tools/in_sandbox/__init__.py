"""What runs in the student's process when grading: copied, file by file, into each grading job.

- :mod:`.probe_runner`: the graded run, one fresh child process per test cell;
- :mod:`.probe`: the call recorder and ``run_case`` (the answer keys record the reference with it too);
- :mod:`.forbid`, :mod:`.sentinels`: forbidden library functions made unusable before student code runs;
- :mod:`.feedback_runner`: the feedback run (the student's cells in full, for their outputs, never a grade);
- :mod:`.sandbox_runner`: a whole notebook in a kernel, for the experiments.

Nothing here imports the course (a test checks it) and nothing here decides a verdict: what it reports is
plain data, judged outside the sandbox by :mod:`course_tools.grading.verdicts`.
"""
