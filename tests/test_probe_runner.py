"""The graded run's own walls, without the sandbox: forbidden functions unusable by any route, a fresh
process per graded cell, limits in CPU time, and a report no student code can write to.

(tests/test_redteam_later.py grades the same attacks as submissions, in the sandbox, with nbgrader.)
"""

from __future__ import annotations

import builtins
import os
import pickle
import threading

import numpy as np
import pytest
import torch

from course_tools import forbid, probe_runner

LSTM_NAMES = {"lstm_cell", "LSTMCell", "LSTM", "lstm"}


def _in_child(fn) -> tuple[list[str], list[str]]:
    """Run ``fn`` in a forked child after :func:`forbid.forbid` (LSTM names): ``(routes that worked, reports)``."""
    read_result, write_result = os.pipe()
    read_calls, write_calls = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            forbid.forbid(LSTM_NAMES | {"multi_head_attention_forward"}, write_calls)
            worked = fn()
            os.write(write_result, "\n".join(worked).encode() or b"-")
        finally:
            os._exit(0)
    os.close(write_result)
    os.close(write_calls)
    os.waitpid(pid, 0)
    worked = os.read(read_result, 65536).decode()
    reports = os.read(read_calls, 65536).decode().split()
    os.close(read_result)
    os.close(read_calls)
    return [w for w in worked.split("\n") if w and w != "-"], reports


def _routes() -> list[str]:
    x, h, c = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    w, u = torch.randn(16, 3), torch.randn(16, 4)
    c_function = torch._C._VariableFunctions.lstm_cell
    routes = {
        "torch.lstm_cell": lambda: torch.lstm_cell(x, (h, c), w, u),
        "torch._VF": lambda: torch._VF.lstm_cell(x, (h, c), w, u),
        "C binding through map": lambda: next(map(c_function, [x], [(h, c)], [w], [u])),
        "torch.ops.aten": lambda: torch.ops.aten.lstm_cell(x, [h, c], w, u),
        "nn.LSTMCell": lambda: torch.nn.LSTMCell(3, 4)(x),
        "nn.LSTM subclass": lambda: type("Mine", (torch.nn.LSTM,), {})(3, 4)(x[None]),
        "Python function through map": lambda: next(map(torch.nn.functional.multi_head_attention_forward, [h])),
    }
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("out", torch.lstm_cell(x, (h, c), w, u)))
    worked = []
    for name, route in routes.items():
        try:
            route()
            worked.append(name)
        except Exception:  # noqa: BLE001 - what the sentinels raise
            pass
    thread.start()
    thread.join()
    if "out" in box:
        worked.append("another thread")
    torch.sigmoid(x) @ w.T  # the operations an LSTM is written with still work
    return worked


def test_a_forbidden_operator_is_unusable_by_every_route_and_each_call_is_reported():
    worked, reports = _in_child(_routes)
    assert worked == [], f"reached the forbidden implementation through: {worked}"
    assert any("lstm_cell" in r for r in reports) and any("multi_head_attention_forward" in r for r in reports)


def _plan(tmp_path, source: str, function: str, forbidden=(), cell_cpu=60.0, cell_wall=60.0) -> tuple[dict, dict]:
    cases = [{"args": (np.arange(3.0),), "kwargs": {}, "forbidden": list(forbidden), "twice": False}]
    with open(tmp_path / "test_f.pkl", "wb") as f:
        pickle.dump(cases, f)
    plan = {"setup": ["import numpy as np\nimport torch"], "student": [{"label": "f", "source": source}],
            "cells": [{"grade_id": "test_f", "function": function, "forbidden": list(forbidden), "scaffolds": {}}],
            "sandboxed": False, "cases_dir": str(tmp_path), "feedback": [],
            "limits": {"cell_cpu_seconds": cell_cpu, "notebook_cpu_seconds": 600, "cell_seconds": cell_wall,
                       "notebook_seconds": 600}}
    return plan, {"__builtins__": builtins, "__name__": "__main__"}


def test_each_graded_cell_runs_where_no_student_code_ran_before(tmp_path):
    plan, namespace = _plan(tmp_path, "import numpy as np\nnp.sum = lambda *a, **k: 42\ndef f(x):\n    return np.sum(x)\n",
                            "f")
    report = probe_runner.run(plan, namespace)
    assert report["cells"]["test_f"]["cases"][0]["value"] == 42  # the patch lives in the child only ...
    assert np.sum(np.arange(3.0)) == 3.0  # ... never in the process that forks the next cell


def test_a_child_cannot_write_into_the_report(tmp_path):
    source = ("import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'FORGED')\n    except OSError:\n"
              "        pass\ndef f(x):\n    return x\n")
    plan, namespace = _plan(tmp_path, source, "f")
    read_fd, write_fd = os.pipe()
    saved = os.dup(1)
    os.dup2(write_fd, 1)  # the parent's report channel, as in the sandbox
    try:
        report = probe_runner.run(plan, namespace)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(write_fd)
    os.set_blocking(read_fd, False)
    try:
        leaked = os.read(read_fd, 65536)
    except BlockingIOError:
        leaked = b""
    os.close(read_fd)
    assert leaked == b"", "a graded cell's process wrote into the parent's report"
    # what it wrote into its own pipes only spoils its own outcome
    assert "cases" not in report["cells"]["test_f"] or report["cells"]["test_f"]["forbidden"]


@pytest.mark.slow
def test_cpu_time_stops_a_cell_and_a_sleeping_cell_is_stopped_only_by_the_wall_clock(tmp_path):
    busy, _ = _plan(tmp_path, "def f(x):\n    while True:\n        pass\n", "f", cell_cpu=2)
    outcome = probe_runner.run(busy, {"__builtins__": builtins})["cells"]["test_f"]
    assert outcome.get("cpu_timeout") and "CPU time" in outcome["stopped"], outcome
    sleepy, _ = _plan(tmp_path, "import time\ndef f(x):\n    time.sleep(100)\n", "f", cell_cpu=1, cell_wall=3)
    outcome = probe_runner.run(sleepy, {"__builtins__": builtins})["cells"]["test_f"]
    assert outcome.get("wall_timeout") and "wall clock" in outcome["stopped"] and outcome["cpu"] < 1, outcome
