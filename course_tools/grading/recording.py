"""Record each graded submission in the gradebook as soon as its result is in, while the others still grade.

The gradebook has one writer: nbgrader's own autograde, run in one process of its own for the whole
batch (:class:`Recorder`). The batch (:mod:`course_tools.grading.batch`) hands it a student as that
student's result is saved; it runs nbgrader's ``Autograde`` converter for that student, exactly as
``nbgrader autograde ASSIGNMENT --student STUDENT --force`` would, with the configuration nbgrader's
command loads (``nbgrader_config.py``), whose execute step (:class:`course_tools.grading.autograde.SandboxedExecute`)
replays the worker's result. So recording a class no longer waits for its last task: it overlaps the
grading, and what is left at the end is the last few notebooks, not the whole class.

The two processes speak in JSON lines. To the recorder: a student's name (record it), or an empty line
(answer ``"synced"`` once everything before it is recorded). From it: ``["recorded", student, seconds]`` or
``["failed", student, seconds]`` per student (the seconds nbgrader took), and ``"synced"``. Everything nbgrader logs or prints goes to the log
file (``_grading/<assignment>/autograde.log``).

Run as ``python -m course_tools.grading.recording ASSIGNMENT SUBMITTED_DIRECTORY`` from the course root
(the batch does this).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


class Recorder:
    """nbgrader's autograde in a process of its own, fed one student at a time. Use as a context manager,
    or call :meth:`close`, which returns the exit status (0 when every student handed in was recorded).

    Args:
        course: the course root (nbgrader runs there).
        assignment: the assignment's name.
        submitted: the folder of the notebooks to record, relative to ``course``
            (``<student>/<assignment>/*.ipynb`` below it).
        env: the environment of the recording process.
        log: where nbgrader's log goes.
    """

    def __init__(self, course: Path, assignment: str, submitted: str, env: dict, log: Path):
        self.recorded: list[str] = []
        self.failed: list[str] = []
        self.seconds = 0.0  # the time nbgrader took for the students answered so far
        self._log = open(log, "w", encoding="utf-8")
        self._process = subprocess.Popen([sys.executable, "-m", "course_tools.grading.recording", assignment, submitted],
                                         cwd=course, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, text=True, encoding="utf-8")
        self._synced = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="recorder-replies", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._process.stdout:
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if reply == "synced":
                self._synced.release()
            elif isinstance(reply, list) and len(reply) == 3:
                (self.recorded if reply[0] == "recorded" else self.failed).append(str(reply[1]))
                self.seconds += float(reply[2])
        self._synced.release()  # the recorder ended: nobody may wait for it any longer

    def _send(self, line: str) -> bool:
        with self._lock:
            try:
                self._process.stdin.write(line + "\n")
                self._process.stdin.flush()
                return True
            except (BrokenPipeError, OSError, ValueError):  # the recorder has ended
                return False

    def record(self, student: str) -> None:
        """Record ``student``'s notebook (again, if it was recorded before: ``--force``). Returns at once."""
        if not self._send(json.dumps(student)):
            self.failed.append(student)

    def wait(self) -> None:
        """Return once every student handed in so far is recorded (or the recorder has ended)."""
        if self._send(""):
            self._synced.acquire()

    def close(self) -> int:
        """Record what is left, end the recorder and return its exit status (1 when a student failed)."""
        with self._lock:
            try:
                self._process.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        status = self._process.wait()
        self._reader.join()
        self._log.close()
        return status or (1 if self.failed else 0)

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        if self._process.poll() is None:
            self.close()


def main(argv: list[str]) -> int:
    """The recording process: nbgrader's autograde for each student named on standard input."""
    assignment, submitted = argv
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # what nbgrader prints goes to the log, never into the replies
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.converters.autograde import Autograde

    app = AutogradeApp()
    app.initialize(["--force", f"--CourseDirectory.submitted_directory={submitted}", f"--assignment={assignment}"])
    failed = False
    for line in sys.stdin:
        if not line.strip():
            print(json.dumps("synced"), file=replies)
            continue
        student = str(json.loads(line))
        app.coursedir.student_id = student
        autograded = Path(app.coursedir.format_path(app.coursedir.autograded_directory, student, assignment))
        started = time.perf_counter()
        try:
            Autograde(coursedir=app.coursedir, parent=app).start()
            outcome = "recorded" if any(autograded.glob("*.ipynb")) else "failed"  # nbgrader found a notebook
        except (Exception, SystemExit):  # noqa: BLE001 - nbgrader's failure for this student, logged; the others go on
            app.log.exception("recording %s of %s failed", assignment, student)
            outcome = "failed"
        if outcome == "failed":
            app.log.error("%s of %s is not recorded", assignment, student)
            failed = True
        print(json.dumps([outcome, student, round(time.perf_counter() - started, 3)]), file=replies)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
