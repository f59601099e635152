"""The feedback run of a submission, in the sandbox: its own cells in full, for their outputs, never for a grade.

Copied into each grading job beside :mod:`probe_runner`, which calls :func:`run_feedback` after the
graded run; it imports nothing from the course. One child runs the student's cells in order, as a
notebook would, each under a wall-clock and a CPU timer, and writes one JSON line per cell (what it
printed, cut to :data:`MAX_FEEDBACK_TEXT` characters, its error, whether a timer stopped it) to a pipe
that the parent reads to its end; a last record says where the child ended early.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import time

MAX_FEEDBACK_TEXT = 20_000
"""Characters of output and error message kept per feedback cell."""
MAX_FEEDBACK_BYTES = 4_000_000


def drop_descriptors(*kept: int) -> None:
    """In a child: standard streams to /dev/null and every inherited descriptor closed but ``kept``
    (the parent's report among them, so nothing the child runs can write to it)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    keep = sorted({0, 1, 2, *kept})
    for low, high in zip(keep, keep[1:] + [resource.getrlimit(resource.RLIMIT_NOFILE)[0]]):
        os.closerange(low + 1, high)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115


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


def run_feedback(namespace: dict, plan: dict, emit, started: float) -> None:
    """Run the submission's own cells in full in one more child (for the feedback and the instructor's
    notes; never for a grade) and hand each cell's record to ``emit`` as it comes; a last record
    ``{"died": index}`` says where the child ended early (killed, exited, out of time). ``started``: when
    the runner's process started (``time.monotonic()``), from which the notebook's wall-clock limit counts."""
    if not plan.get("feedback"):
        return
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            drop_descriptors(write_fd)
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

    deadline = started + plan["limits"]["notebook_seconds"] - 3  # before the sandbox's own limit ends it all
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
