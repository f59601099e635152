"""Runs a submission's graded test cells in the sandbox, each in a fresh process: ``python probe_runner.py PLAN``.

Copied into each grading job with the other modules of :mod:`course_tools.in_sandbox` (:mod:`probe`, :mod:`forbid`,
:mod:`sentinels`, :mod:`feedback_runner`); it imports nothing from the course. Why a process per cell: any check that runs in a
process where the student's code has already run, or that writes to a place that code can
reach, can be undone by it (the recorder switched off, the probe patched, its output
rewritten). So:

1. This process, the *parent*, runs only the release's own setup cells (imports), loads
   every cell's test inputs, and makes itself undumpable (no process of the same user may
   trace it or read its memory). No code of the submission ever runs in it.
2. For each graded test cell it forks a *child*, which first drops every file descriptor
   it inherited (the parent's output among them), limits its CPU time, installs the call
   recorder, makes the forbidden library functions and the course's own stand-ins for the
   tested function unusable (found once here, :func:`forbid.prepare`, and applied in the
   child), forbids itself to start any process or program (:func:`forbid.no_other_programs`:
   a fresh interpreter would have no sentinels, and the child's CPU time is then all the
   cell's), and only then runs the submission's answer cells and the cells the student added
   (definitions only: see :func:`course_tools.grading.autograde.student_cells`), puts the course's
   scaffolds in place of the other exercises the tested function calls, runs the cases
   and sends the outcomes to the parent through a pipe. It is thrown away afterwards.
3. The parent reads at most :data:`MAX_CELL_BYTES` (and :data:`MAX_CELL_VALUES` values) per cell and
   keeps the whole report within :data:`MAX_REPORT_BYTES`, since the grader decodes it outside any
   sandbox; it bounds each child by wall
   clock too (a generous outer bound) and the whole notebook by the CPU time of its
   children, and finally writes one JSON document to its standard output, which only
   the grader outside the sandbox reads. Nothing here decides a verdict.
"""

from __future__ import annotations

import builtins
import ctypes
import importlib
import json
import math
import os
import pickle
import resource
import select
import signal
import sys
import time
import types

try:  # in the sandbox this file runs as a script beside the other modules of in_sandbox; in the course, as a module
    from . import feedback_runner, forbid, probe
except ImportError:
    import feedback_runner
    import forbid
    import probe

MAX_CELL_BYTES = 60_000_000
"""The most a child may send for one test cell; more counts as no result."""
MAX_CELL_VALUES = 250_000
"""The most JSON values (about: its commas and brackets) a child may send for one test cell. The grader decodes
the report outside any sandbox, where a megabyte of ``[],[],...`` would take 25 (the course's own cells send
a few thousand values)."""
MAX_REPORT_BYTES = 100_000_000
MAX_REPORT_VALUES = 1_000_000
"""The whole report's bounds (the largest the course's answers make: 10 MB, 20,000 values): past them a cell's
outcome is replaced by a note, so that what the grader decodes stays within some hundred megabytes."""
MAX_CALL_BYTES = 65_536
STARTED = time.monotonic()


def _undumpable() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):
        pass


def _no_exit(*args, **kwargs):
    raise RuntimeError("exit() and quit() would end the process; when grading they are ignored")


def _scaffold(reference: str):
    module, _, name = reference.partition(":")
    value = getattr(importlib.import_module(module), name.removesuffix("()"))
    return value() if name.endswith("()") else value


_PREPARED: dict = {}


def _prepared(cell: dict) -> forbid.Prepared:
    """What the cell's forbidden names and stand-ins stand for (:func:`forbid.prepare`), found once per set of
    names here in the parent, before the fork (the modules loaded are the same for every cell)."""
    key = (tuple(sorted(cell["forbidden"])), tuple(cell.get("stand_ins", ())), len(sys.modules))
    if key not in _PREPARED:
        _PREPARED[key] = forbid.prepare(cell["forbidden"], stand_ins=cell.get("stand_ins", ()))
    return _PREPARED[key]


def _run_cell(namespace: dict, plan: dict, cell: dict, cases: list, result_fd: int, calls_fd: int,
              prepared: forbid.Prepared) -> None:
    """In the child: everything of the submission that this cell needs, then its cases; the outcome to ``result_fd``."""
    cpu = max(1, math.ceil(cell["cpu_limit"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL a second later
    recorder = probe.install(cell["forbidden"])
    prepared.apply(calls_fd, armed=lambda: recorder.armed)  # reports only what a test case calls
    forbid.no_other_programs()  # threads only: a program started from here would run without the sentinels
    errors = []
    for student in plan["student"]:
        try:
            exec(compile(student["source"], f"<{student['label']}>", "exec"), namespace)  # noqa: S102
        except BaseException as error:  # noqa: BLE001 - the student's code may raise anything
            errors.append([student["label"], f"{type(error).__name__}: {str(error)[:200]}"])
    fn = namespace.get(cell["function"])
    if not callable(fn):
        outcome = {"missing": f"{cell['function']} is not defined (did its cell run without errors?)"}
    else:
        for name, reference in cell["scaffolds"].items():
            stand_in, own = _scaffold(reference), namespace.get(name)
            namespace[name] = stand_in
            defaults = getattr(fn, "__defaults__", None)  # def f(..., attention_fn=scaled_dot_product_attention)
            if defaults and own is not None:
                fn.__defaults__ = tuple(stand_in if d is own else d for d in defaults)
            kwdefaults = getattr(fn, "__kwdefaults__", None)
            if kwdefaults and own is not None:
                fn.__kwdefaults__ = {k: stand_in if d is own else d for k, d in kwdefaults.items()}
        import numpy as np

        outcome = {"cases": []}
        for case in cases:
            with np.errstate(all="ignore"):
                outcome["cases"].append(probe.run_case(fn, case, record_calls=True, recorder=recorder))
    outcome["cell_errors"] = errors
    data = json.dumps(outcome, allow_nan=True).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(result_fd, view[:1 << 20]):]


def _values(data: bytes) -> int:
    """About how many JSON values ``data`` holds (its commas and opening brackets), counted before decoding it."""
    return data.count(b",") + data.count(b"[") + data.count(b"{")


def _read_until_exit(pid: int, fds: dict, deadline: float):
    """Read ``fd -> [bytearray, limit]`` while the child ``pid`` lives; return its ``(status, rusage)``, or
    ``None`` when ``deadline`` passed first. A process the child left holding a pipe cannot hold us."""
    while True:
        ready, _, _ = select.select(list(fds), [], [], 0.2)
        for fd in ready:
            _read_some(fd, fds)
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            for fd in fds:  # what is already in the pipes
                os.set_blocking(fd, False)
                try:
                    while _read_some(fd, fds):
                        pass
                except BlockingIOError:
                    pass
            return status, usage
        if time.monotonic() > deadline:
            return None


def _read_some(fd: int, fds: dict) -> bool:
    chunk = os.read(fd, 1 << 20)
    buffer, limit = fds[fd]
    buffer.extend(chunk[:max(0, limit + 1 - len(buffer))])
    return bool(chunk)


def _child(namespace, plan, cell, cases, result_w, calls_w, prepared) -> None:
    try:
        feedback_runner.drop_descriptors(result_w, calls_w)
        _run_cell(namespace, plan, cell, cases, result_w, calls_w, prepared)
    finally:
        os._exit(0)


def run_cell(namespace: dict, plan: dict, cell: dict, cases: list) -> tuple[dict, float]:
    """Fork a child for one test cell; return what it sent (or why there is nothing) and the CPU seconds it used."""
    prepared = _prepared(cell)
    result_r, result_w = os.pipe()
    calls_r, calls_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(namespace, plan, cell, cases, result_w, calls_w, prepared)
    os.close(result_w)
    os.close(calls_w)
    buffers = {result_r: [bytearray(), MAX_CELL_BYTES], calls_r: [bytearray(), MAX_CALL_BYTES]}
    ended = _read_until_exit(pid, buffers, started + plan["limits"]["cell_seconds"])
    finished = ended is not None
    if not finished:
        os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    else:
        status, usage = ended
    if plan.get("sandboxed"):
        try:  # whatever the child left behind (daemons): every process of ours here but this one and init
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    for fd in buffers:
        os.close(fd)
    cpu = usage.ru_utime + usage.ru_stime
    data, calls = bytes(buffers[result_r][0]), bytes(buffers[calls_r][0])
    forbidden = sorted(set(calls.decode("utf-8", "replace").split()))[:20]
    seconds = {"cpu": round(cpu, 3), "wall": round(time.monotonic() - started, 3)}
    if not finished:
        return {"stopped": f"stopped after {plan['limits']['cell_seconds']:.0f} s of wall clock", "wall_timeout": True,
                "forbidden": forbidden, **seconds}, cpu
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) and cpu >= cell["cpu_limit"] - 0.5:
        return {"stopped": f"stopped after {cpu:.0f} s of CPU time", "cpu_timeout": True, "forbidden": forbidden,
                **seconds}, cpu
    if len(data) > MAX_CELL_BYTES or _values(data) > MAX_CELL_VALUES:
        return {"stopped": "sent more than the grader reads", "forbidden": forbidden, **seconds}, cpu
    try:
        outcome = json.loads(data)
        if not isinstance(outcome, dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError):
        why = "the process ended before its results were complete"
        if os.WIFSIGNALED(status):
            why += f" (signal {os.WTERMSIG(status)})"
        return {"stopped": why, "forbidden": forbidden, **seconds}, cpu
    return {**outcome, "forbidden": forbidden, **seconds}, cpu


def run(plan: dict, namespace: dict) -> dict:
    """Run the setup cells in ``namespace``, then each graded cell of ``plan`` in a child forked from here;
    return the report (``setup_errors`` and ``cells``: ``grade_id -> outcome``)."""
    report = {"setup_errors": [], "cells": {}}
    for source in plan["setup"]:
        try:
            exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102 - the release's own locked cells
        except Exception as error:  # noqa: BLE001
            report["setup_errors"].append(f"{type(error).__name__}: {str(error)[:200]}")
    cpu_used, budget = 0.0, plan["limits"]["notebook_cpu_seconds"]
    room = [MAX_REPORT_BYTES, MAX_REPORT_VALUES]  # what is left of the report's bounds
    for cell in plan["cells"]:
        left = budget - cpu_used
        if left < 1:
            report["cells"][cell["grade_id"]] = {"stopped": f"not run: the notebook's {budget:.0f} s of CPU time "
                                                            f"were used up by earlier cells", "cpu_timeout": True}
            continue
        with open(os.path.join(plan["cases_dir"], f"{cell['grade_id']}.pkl"), "rb") as f:
            cases = pickle.load(f)  # written by the grader: inputs only
        cell = dict(cell, cpu_limit=min(left, plan["limits"]["cell_cpu_seconds"]))
        outcome, cpu = run_cell(namespace, plan, cell, cases)
        cpu_used += cpu
        data = json.dumps(outcome, allow_nan=True).encode()
        if len(data) <= room[0] and _values(data) <= room[1]:
            room = [room[0] - len(data), room[1] - _values(data)]
        else:  # the cell's own verdict needs no more than this note
            outcome = {"stopped": "its results would make the report larger than the grader reads",
                       "forbidden": outcome.get("forbidden", []), "cpu": outcome.get("cpu"), "wall": outcome.get("wall")}
        report["cells"][cell["grade_id"]] = outcome
    return report


def main(plan_path: str) -> int:
    _undumpable()
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    module = types.ModuleType("__main__")
    module.__dict__.update({"__builtins__": builtins, "exit": _no_exit, "quit": _no_exit})
    sys.modules["__main__"] = module
    report = run(plan, module.__dict__)
    out = sys.stdout.buffer
    out.write(json.dumps(report, allow_nan=True).encode() + b"\n")  # the grades' data first: it is complete
    out.flush()

    def emit(line: bytes) -> None:
        out.write(line + b"\n")
        out.flush()
    feedback_runner.run_feedback(module.__dict__, plan, emit, STARTED)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
