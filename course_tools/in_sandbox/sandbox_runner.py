"""Runs one notebook in the grading sandbox: ``python sandbox_runner.py IN OUT CELL_SECONDS [CELL_CPU NOTEBOOK_CPU]``.

Copied into each job's folder and started by :mod:`course_tools.grading.sandbox`; it imports
nothing from the course. It executes ``IN`` cell by cell with nbclient in a fresh
kernel, keeps going past errors, and after every cell writes what ran so far to
``OUT`` (at most :data:`MAX_OUTPUTS` outputs per cell, their text cut to
:data:`MAX_CELL_TEXT` characters, rich data to :data:`MAX_CELL_DATA` per cell, and
everything to :data:`MAX_NOTEBOOK` for the whole notebook; text that cannot be written
as UTF-8 is replaced), so a notebook that is stopped from outside still leaves its
earlier cells. Nothing here decides a score.

Time limits measure the submission, not the machine: a cell whose kernel (with every process
it started) has used ``CELL_CPU`` seconds of CPU time is interrupted, and once the cells
together have used ``NOTEBOOK_CPU`` seconds the run stops (:class:`CpuMeter`, read from
``/proc``). Wall clock is only the generous outer bound: a cell that outlives ``CELL_SECONDS``
seconds is interrupted too. A kernel that ignores the interrupt is killed :data:`GRACE` seconds
later. A kernel that dies ends the run. ``OUT``'s metadata ``grading_run`` says where and why:
``timeouts`` (cells stopped by the wall clock; ``timeout_cpu``: the CPU seconds each of them used),
``cpu_timeouts`` (cells stopped by their CPU time), ``stopped``
(the cell where the run ended, why, and ``limit`` when a limit ended it) and ``cpu_seconds``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

MAX_CELL_TEXT = 20_000
MAX_OUTPUTS = 20
MAX_CELL_DATA = 2_000_000
MAX_NOTEBOOK = 4_000_000
"""Characters of output the whole notebook keeps (text and rich data); later outputs are cut."""
CUT = "\n... [output cut by the grader]"
GRACE = 5.0
"""Seconds a kernel interrupted at a limit has to stop the cell before it is killed."""
POLL = 0.25
"""Seconds between two readings of the CPU time."""
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(parent pid, CPU seconds of the process, CPU seconds of its waited-for children)`` from ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()  # the name, in parentheses, may hold anything
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
        return int(fields[1]), (utime + stime) / TICK, (cutime + cstime) / TICK
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """CPU seconds the submission's processes have used: the kernel, its threads and whatever it started.

    In the sandbox this runner is the only child of bwrap's init in a PID namespace of its own, so
    every process there but the two is the submission's, and a process that ended counts through the
    one that waited for it (its parent, or init for an orphan). Outside a sandbox (unsandboxed grading)
    the runner's descendants are counted. Reading never goes backwards (a reaped orphan's time
    moves between processes)."""

    def __init__(self):
        self.me = os.getpid()
        try:
            with open("/proc/1/cmdline", "rb") as f:
                init = f.read().split(b"\0")[0]
        except OSError:
            init = b""
        self.whole_namespace = os.getppid() == 1 and os.path.basename(init) == b"bwrap"
        self.most = 0.0

    def seconds(self) -> float:
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (stat := _stat(int(name))) is not None:
                stats[int(name)] = stat
        if self.whole_namespace:
            total = sum(own + children for pid, (_parent, own, children) in stats.items() if pid not in (1, self.me))
            total += stats.get(1, (0, 0.0, 0.0))[2]  # orphans init waited for (the runner itself is alive)
        else:
            children: dict[int, list[int]] = {}
            for pid, (parent, _own, _children) in stats.items():
                children.setdefault(parent, []).append(pid)
            total, todo = 0.0, list(children.get(self.me, []))
            while todo:
                pid = todo.pop()
                total += stats[pid][1] + stats[pid][2]
                todo += children.get(pid, [])
        self.most = max(self.most, total)
        return self.most


class CellWatch(threading.Thread):
    """Watches one cell while nbclient runs it: past ``cpu_budget`` seconds of CPU time (or ``wall`` seconds
    of wall clock, which nbclient interrupts itself) the kernel is interrupted, and killed :data:`GRACE`
    seconds later if the cell is still running. ``tripped`` says which limit stopped it (``"cpu"`` or
    ``"wall"``), ``killed`` whether the kernel had to be killed."""

    def __init__(self, client, meter: CpuMeter, cpu_budget: float, wall: float):
        super().__init__(daemon=True)
        self.client, self.meter, self.cpu_budget, self.wall = client, meter, cpu_budget, wall
        self.start_cpu, self.started = meter.seconds(), time.monotonic()
        self.done = threading.Event()
        self.tripped: str | None = None
        self.killed = False

    def run(self):
        interrupted_at = None
        while not self.done.wait(POLL):
            now = time.monotonic()
            if self.tripped is None:
                if self.meter.seconds() - self.start_cpu >= self.cpu_budget:
                    self.tripped = "cpu"
                elif now - self.started >= self.wall:
                    self.tripped = "wall"
                if self.tripped:
                    interrupted_at = now
                    self._signal(signal.SIGINT)
            elif not self.killed and now - interrupted_at >= GRACE:
                self.killed = True
                self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        """Send ``signum`` to the kernel's process group (as Jupyter interrupts it), or to the kernel alone."""
        provisioner = getattr(self.client.km, "provisioner", None)
        process, pgid = getattr(provisioner, "process", None), getattr(provisioner, "pgid", None)
        if pgid:
            try:
                os.killpg(pgid, signum)
                if signum != signal.SIGKILL:
                    return
            except OSError:
                pass
        if process is not None:
            try:
                process.send_signal(signum)
            except OSError:
                pass

    def stop(self) -> float:
        """End the watch; return the CPU seconds the cell used."""
        self.done.set()
        self.join()
        return self.meter.seconds() - self.start_cpu


def _trim(cell, budget: list[int]) -> None:
    """Cut ``cell``'s outputs to the limits; ``budget[0]`` is what the notebook may still keep (decreased)."""
    kept, text_size, data_size = [], 0, 0
    for output in cell.get("outputs", [])[:MAX_OUTPUTS]:
        for field in ("ename", "evalue", "text", "traceback"):
            if field in output:
                value = output[field]
                text = "\n".join(map(str, value)) if isinstance(value, list) else str(value)
                room = max(0, min(MAX_CELL_TEXT - text_size, budget[0], 200 if field == "ename" else MAX_CELL_TEXT))
                if len(text) > room:
                    text = text[:room] + CUT
                text_size += len(text)
                budget[0] -= len(text)
                output[field] = [text] if field == "traceback" else text
        data = output.get("data")
        if isinstance(data, dict):
            for mime in list(data):
                size = len(json.dumps(data[mime]))
                if size > min(MAX_CELL_DATA - data_size, budget[0]):
                    if mime == "text/plain":
                        data[mime] = "[output too large: removed by the grader]"
                    else:
                        del data[mime]
                else:
                    data_size += size
                    budget[0] -= size
        kept.append(output)
    cell["outputs"] = kept


def _save(nb, path, status):
    nb.metadata["grading_run"] = status
    tmp = f"{path}.part"
    with open(tmp, "wb") as f:
        f.write(nbformat.writes(nb).encode("utf-8", "replace"))  # a lone surrogate becomes "?"
    os.replace(tmp, path)


def main(source: str, target: str, cell_timeout: float, cell_cpu: float = float("inf"),
         notebook_cpu: float = float("inf")) -> int:
    """Run the notebook ``source`` into ``target`` under the limits (seconds); see the module's docstring."""
    nb = nbformat.read(source, as_version=4)
    status = {"ran": 0, "stopped": None, "timeouts": [], "timeout_cpu": [], "cpu_timeouts": [], "cpu_seconds": 0.0}
    budget = [MAX_NOTEBOOK]
    # no timeout of nbclient's own: CellWatch interrupts on either clock; starting the kernel gets the wall bound
    client = NotebookClient(nb, timeout=None, startup_timeout=max(60, int(cell_timeout)), kernel_name="python3",
                            allow_errors=True, record_timing=False, resources={"metadata": {"path": os.getcwd()}})
    _save(nb, target, status)
    meter = CpuMeter()
    with client.setup_kernel():
        used = meter.seconds()  # the kernel's start is not the notebook's
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            left = notebook_cpu - (meter.seconds() - used)
            watch = CellWatch(client, meter, min(cell_cpu, left), cell_timeout)
            watch.start()
            try:
                client.execute_cell(cell, index)
            except DeadKernelError:
                status["stopped"] = {"cell": index, "why": "the kernel died (it exited or was killed)"}
            except Exception as error:  # noqa: BLE001 - anything else from the client ends the run plainly
                status["stopped"] = {"cell": index, "why": f"{type(error).__name__}: {str(error)[:200]}"}
            finally:
                cpu = watch.stop()
            status["cpu_seconds"] = round(meter.seconds() - used, 2)
            whole = watch.tripped == "cpu" and left <= cell_cpu  # the notebook's CPU time, not the cell's, ran out
            if watch.tripped == "wall":
                status["timeouts"].append(index)
                status["timeout_cpu"].append(round(cpu, 2))  # a cell that sleeps or waits uses none
            elif watch.tripped == "cpu" and not whole:
                status["cpu_timeouts"].append(index)
            if watch.killed:
                clock = "of CPU time" if watch.tripped == "cpu" else "of wall clock"
                status["stopped"] = {"cell": index, "limit": "notebook_cpu" if whole else f"cell_{watch.tripped}",
                                     "why": f"the kernel did not stop when interrupted at its limit {clock} "
                                            f"and was killed"}
            elif whole or meter.seconds() - used >= notebook_cpu:
                status["stopped"] = {"cell": index, "limit": "notebook_cpu",
                                     "why": f"the notebook used up its {notebook_cpu:g} s of CPU time"}
            _trim(cell, budget)
            status["ran"] = index + 1
            _save(nb, target, status)
            if status["stopped"]:
                break
    _save(nb, target, status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], *(float(x) for x in sys.argv[3:6])))
