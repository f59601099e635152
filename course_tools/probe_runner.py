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
   recorder and makes the forbidden library functions unusable (:func:`forbid.forbid`),
   and only then runs the submission's answer cells and the cells the student added
   (definitions only: see :func:`course_tools.grading.student_cells`), puts the course's
   scaffolds in place of the other exercises the tested function calls, runs the cases
   and sends the outcomes to the parent through a pipe. It is thrown away afterwards,
   with every process it left behind.
3. The parent reads at most :data:`MAX_CELL_BYTES` per cell, bounds each child by wall
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

import forbid
import probe

MAX_CELL_BYTES = 60_000_000
"""The most a child may send for one test cell; more counts as no result."""
MAX_CALL_BYTES = 65_536


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


def _run_cell(namespace: dict, plan: dict, cell: dict, cases: list, result_fd: int, calls_fd: int) -> None:
    """In the child: everything of the submission that this cell needs, then its cases; the outcome to ``result_fd``."""
    cpu = max(1, math.ceil(cell["cpu_limit"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL a second later
    recorder = probe.install(cell["forbidden"])
    forbid.forbid(cell["forbidden"], calls_fd)
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


def _child(namespace, plan, cell, cases, result_w, calls_w) -> None:
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = sorted({0, 1, 2, result_w, calls_w})
        for low, high in zip(keep, keep[1:] + [resource.getrlimit(resource.RLIMIT_NOFILE)[0]]):
            os.closerange(low + 1, high)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115
        _run_cell(namespace, plan, cell, cases, result_w, calls_w)
    finally:
        os._exit(0)


def run_cell(namespace: dict, plan: dict, cell: dict, cases: list) -> tuple[dict, float]:
    """Fork a child for one test cell; return what it sent (or why there is nothing) and the CPU seconds it used."""
    result_r, result_w = os.pipe()
    calls_r, calls_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(namespace, plan, cell, cases, result_w, calls_w)
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
    if len(data) > MAX_CELL_BYTES:
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


def main(plan_path: str) -> int:
    _undumpable()
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace.update({"__builtins__": builtins, "exit": _no_exit, "quit": _no_exit})
    sys.modules["__main__"] = module
    report = {"setup_errors": [], "cells": {}}
    for source in plan["setup"]:
        try:
            exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102 - the release's own locked cells
        except Exception as error:  # noqa: BLE001
            report["setup_errors"].append(f"{type(error).__name__}: {str(error)[:200]}")
    cpu_used, budget = 0.0, plan["limits"]["notebook_cpu_seconds"]
    for cell in plan["cells"]:
        left = budget - cpu_used
        if left < 1:
            report["cells"][cell["grade_id"]] = {"stopped": f"not run: the notebook's {budget:.0f} s of CPU time "
                                                            f"were used up by earlier cells", "cpu_timeout": True}
            continue
        with open(os.path.join(plan["cases_dir"], f"{cell['grade_id']}.pkl"), "rb") as f:
            cases = pickle.load(f)  # written by the grader: inputs only
        cell = dict(cell, cpu_limit=min(left, plan["limits"]["cell_cpu_seconds"]))
        report["cells"][cell["grade_id"]], cpu = run_cell(namespace, plan, cell, cases)
        cpu_used += cpu
    sys.stdout.write(json.dumps(report, allow_nan=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
