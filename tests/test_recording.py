"""The gradebook's one writer (course_tools.grading.recording): what it cannot record, it says it did not.

Recording itself (nbgrader's Autograde replaying the workers' results) is exercised by every batch the
grading tests run (test_grading, test_cluster_grading, test_redteam): each of them reads the gradebook it
wrote. Here, the two ways a student can end up unrecorded: nbgrader finds no notebook of theirs, and the
recording process dies; both must be reported, never silently dropped.
"""

from __future__ import annotations

import os
import signal

from course_tools import tool_env
from course_tools.grading.recording import Recorder
from grading_helpers import answers, scratch_course, submit

ASSIGNMENT = "ps01_counts"


def test_a_student_it_cannot_record_and_a_recorder_that_died_are_reported(tmp_path, root):
    course = scratch_course(tmp_path / "course", root, ASSIGNMENT, env=tool_env())
    submit(course, "ada", answers(root, ASSIGNMENT))
    log = tmp_path / "autograde.log"
    recorder = Recorder(course, ASSIGNMENT, "submitted", tool_env(COURSE_GRADE_RESULTS=str(tmp_path / "none")), log)
    recorder.record("nobody")  # no notebook of theirs: nothing to record
    recorder.wait()
    assert recorder.failed == ["nobody"] and recorder.recorded == []
    assert "ps01_counts of nobody is not recorded" in log.read_text(encoding="utf-8")
    os.kill(recorder._process.pid, signal.SIGKILL)
    recorder._process.wait()
    recorder.record("ada")  # handed to a recorder that is gone
    recorder.wait()  # returns: nobody is left to answer
    assert recorder.close() != 0
    assert "ada" in recorder.failed and "ada" not in recorder.recorded
