"""Grading a class: staging -> sandbox -> probe -> verdicts -> gradebook.

- :mod:`.staging`: each submission read and repaired, the release's locked cells put back;
- :mod:`.autograde`: nbgrader's execute step (``SandboxedExecute``): plan, sandboxed runs, verdicts;
- :mod:`.probe_plan`, :mod:`.scaffolds`: what the graded run executes, and the stand-ins for other exercises;
- :mod:`.sandbox`, :mod:`.memory_cgroup`: bubblewrap, a memory cgroup, CPU and wall-clock limits;
- :mod:`.verdicts`: every test's verdict, outside the sandbox, from the answer key;
- :mod:`.tasks`, :mod:`.worker`, :mod:`.cluster`, :mod:`.batch`: one task per submission on local workers or a
  Dask cluster, recorded by one nbgrader run;
- :mod:`.verdict_store`: every verdict, case by case, and the notes on each run, kept in the gradebook;
- :mod:`.postgres`: a throwaway PostgreSQL server for gradebooks in tests and benchmarks.
"""
