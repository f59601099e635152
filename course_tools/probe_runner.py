"""Runs a submission's graded test cells in the sandbox, each in a fresh process: ``python probe_runner.py PLAN``.

Copied into each grading job with :mod:`course_tools.probe` and :mod:`course_tools.forbid`;
it imports nothing from the course. Why a process per cell: any check that runs in a
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
   (definitions only: see :func:`course_tools.grading.student_cells`), puts the course's
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

try:  # in the sandbox this file runs as a script beside forbid.py and probe.py; in the course, as a module
    from . import forbid, probe
except ImportError:
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
MAX_FEEDBACK_TEXT = 20_000
"""Characters of output and error message kept per feedback cell."""
MAX_FEEDBACK_BYTES = 4_000_000
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


def _drop_descriptors(*kept: int) -> None:
    """In a child: standard streams to /dev/null and every inherited descriptor closed but ``kept``
    (the parent's report among them, so nothing the child runs can write to it)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    keep = sorted({0, 1, 2, *kept})
    for low, high in zip(keep, keep[1:] + [resource.getrlimit(resource.RLIMIT_NOFILE)[0]]):
        os.closerange(low + 1, high)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def _child(namespace, plan, cell, cases, result_w, calls_w, prepared) -> None:
    try:
        _drop_descriptors(result_w, calls_w)
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


class _CellStopped(BaseException):
    """Raised in a feedback cell by its wall-clock or CPU timer."""


def _stop(kind: str):
    def handler(signum, frame):
        raise _CellStopped(kind)
    return handler


class _Capped:
    """A text stream that keeps at most ``limit`` characters (what a feedback cell prints)."""

    def __init__(self, limit: int):
        self.parts, self.size, self.limit = [], 0, limit

    def write(self, text) -> int:
        text = str(text)
        room = self.limit - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        return len(text)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        cut = "\n... [output cut by the grader]" if self.size >= self.limit else ""
        return "".join(self.parts) + cut


def _feedback_cells(namespace: dict, plan: dict, out_fd: int) -> None:
    """In the feedback child: the submission's own cells in full, in order, as a notebook would run them,
    one JSON line per cell to ``out_fd`` (what it printed, its error, whether a timer stopped it)."""
    limits = plan["limits"]
    signal.signal(signal.SIGALRM, _stop(f"stopped after {limits['cell_seconds']:.0f} s of wall clock"))
    signal.signal(signal.SIGPROF, _stop(f"stopped after {limits['cell_cpu_seconds']:.0f} s of CPU time"))
    for cell in plan["feedback"]:
        stream = _Capped(MAX_FEEDBACK_TEXT)
        sys.stdout = sys.stderr = stream
        record: dict = {"index": cell["index"]}
        try:
            signal.setitimer(signal.ITIMER_REAL, limits["cell_seconds"])
            signal.setitimer(signal.ITIMER_PROF, limits["cell_cpu_seconds"])
            exec(compile(cell["source"], f"<{cell['label']}>", "exec"), namespace)  # noqa: S102
        except _CellStopped as stopped:
            record["stopped"] = str(stopped)
        except BaseException as error:  # noqa: BLE001 - the student's code may raise anything
            record["error"] = [type(error).__name__[:100], str(error)[:MAX_FEEDBACK_TEXT]]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
        record["text"] = stream.text()
        data = (json.dumps(record) + "\n").encode("utf-8", "replace")
        view = memoryview(data)
        while view:
            view = view[os.write(out_fd, view[:1 << 20]):]


def run_feedback(namespace: dict, plan: dict, emit) -> None:
    """Run the submission's own cells in full in one more child (for the feedback and the instructor's
    notes; never for a grade) and hand each cell's record to ``emit`` as it comes; a last record
    ``{"died": index}`` says where the child ended early (killed, exited, out of time)."""
    if not plan.get("feedback"):
        return
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _drop_descriptors(write_fd)
            _feedback_cells(namespace, plan, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    pending, last, left = b"", None, MAX_FEEDBACK_BYTES

    def take(chunk: bytes) -> None:
        nonlocal pending, last, left
        pending += chunk[:max(0, left)]
        left -= len(chunk)
        *lines, pending = pending.split(b"\n")
        for line in lines:
            emit(line)
            last = line

    deadline = STARTED + plan["limits"]["notebook_seconds"] - 3  # before the sandbox's own limit ends it all
    ended = None
    while ended is None and time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 0.2)
        if ready:
            take(os.read(read_fd, 1 << 20))
        done, status, _ = os.wait4(pid, os.WNOHANG)
        ended = status if done else None
    if ended is None:
        os.kill(pid, signal.SIGKILL)
        os.wait4(pid, 0)
    else:
        # The child may have written its last records and exited after the select above: read the pipe
        # to its end (its only writer has exited) before judging whether every cell ran.
        while select.select([read_fd], [], [], 1.0)[0]:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            take(chunk)
    os.close(read_fd)
    if plan.get("sandboxed"):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    finished = [c["index"] for c in plan["feedback"]]
    done_index = json.loads(last)["index"] if last else None
    if ended is None or not (os.WIFEXITED(ended) and done_index == finished[-1]):
        following = finished[finished.index(done_index) + 1:] if done_index in finished else finished
        if following:
            why = "out of time" if ended is None else "the kernel died (it exited or was killed)"
            emit(json.dumps({"died": following[0], "why": why}).encode())


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
    run_feedback(module.__dict__, plan, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
