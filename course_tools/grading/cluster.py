"""Run grading tasks on every core of this machine, or on a Dask cluster, and say what became of each.

:func:`run_tasks` runs :func:`course_tools.grading.worker.run_task` for each task:

- ``serial=True``: one after another in this process (no Dask);
- otherwise on Dask (``distributed``): a local cluster of ``workers`` processes (default: one
  per core), one task at a time each, or the cluster whose scheduler is at ``scheduler``
  (``tcp://host:8786``). Each worker needs a copy of the course at the same commit, with its
  environment (``python3 tasks.py setup``) and bubblewrap; it grades in its own copy, so
  only the staged notebook travels (see README.md, "Grading on a Dask cluster").

Every task ends in one of two ways, reported as it happens: a result, handed to
``on_result`` (which saves it), or a failure with its reason. A task whose code raises is
tried once more; a worker that dies while grading (killed, out of memory) has its task
sent to another worker by the scheduler, up to Dask's ``allowed-failures`` times (3),
and the task then fails as "KilledWorker". Nothing is lost silently: a failed task has
no result, so the next batch grades it again. A bar shows the progress on a terminal.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Iterable

from tqdm.auto import tqdm

from .tasks import Result, Task
from .worker import run_task

RETRIES = 1
"""How many times a task whose code raised is tried again (on any worker)."""
CONNECT_TIMEOUT = "10s"


class ClusterUnavailable(RuntimeError):
    """No Dask cluster to grade on: the scheduler cannot be reached, or a local one cannot start."""


def _reason(error: BaseException) -> str:
    name = type(error).__name__
    if name == "KilledWorker":
        return ("the workers running it died (killed, or out of memory) "
                f"{_allowed_failures()} times: see the workers' logs")
    return f"{name}: {str(error)[:300]}"


def _allowed_failures() -> int:
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures"))


def _stuck(seconds: float) -> str:
    return (f"no result after {seconds:.0f} s: the grading stopped responding outside the sandbox; "
            f"not recorded, graded again next run")


def _with_deadline(task: Task, deadline: float | None) -> Result:
    """``run_task(task)`` in a thread of its own, given up after ``deadline`` seconds (TimeoutError): a task
    stuck outside the sandbox becomes a failure, and the batch goes on."""
    if deadline is None:
        return run_task(task)
    box: dict = {}

    def work():
        try:
            box["result"] = run_task(task)
        except BaseException as error:  # noqa: BLE001 - handed to the batch below
            box["error"] = error
    thread = threading.Thread(target=work, name=f"grade-{task.student}", daemon=True)
    thread.start()
    thread.join(deadline)
    if thread.is_alive():
        raise TimeoutError(_stuck(deadline))
    if "error" in box:
        raise box["error"]
    return box["result"]


QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "2s", "distributed.worker.memory.monitor-interval": "1s"}
"""Dask's periodic bookkeeping that grading has no use for, made rare on the local cluster: the statistical
profiler sampling each worker's threads every 10 ms, the event loops' 20 ms tick, the system and memory
monitors. Measured on this course's 2-core machine: two idle workers with their nannies used 1.86 CPU
seconds in 20 s with Dask's defaults, 0.22 s with these (a grading task's run gets the rest)."""


class Connection:
    """A Dask client being connected in a thread of its own, so that the local cluster starts while the batch
    stages its submissions: :meth:`get` waits for it, :meth:`close` ends it (a local cluster with it)."""

    def __init__(self, workers: int | None, scheduler: str | None):
        self._box: dict = {}
        self._closed = False
        self._thread = threading.Thread(target=self._connect, args=(workers, scheduler), name="dask-connect",
                                        daemon=True)
        self._thread.start()

    def _connect(self, workers: int | None, scheduler: str | None) -> None:
        import dask
        from distributed import Client, LocalCluster

        try:
            if scheduler:
                self._box["client"], self._box["cluster"] = Client(scheduler, timeout=CONNECT_TIMEOUT), None
            else:
                with dask.config.set(QUIET):  # the workers' processes take the configuration with them
                    cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                           processes=True, dashboard_address=None, silence_logs=logging.ERROR)
                self._box["cluster"] = cluster
                self._box["client"] = Client(cluster)
        except (OSError, TimeoutError, ValueError) as error:
            where = f"reach the Dask scheduler at {scheduler}" if scheduler else "start a local Dask cluster"
            self._box["error"] = ClusterUnavailable(f"could not {where} ({type(error).__name__}: {str(error)[:200]}); "
                                                    f"--serial grades without Dask")

    def get(self):
        """The client, once connected; raises :class:`ClusterUnavailable` when no cluster could be had."""
        self._thread.join()
        if "error" in self._box:
            raise self._box["error"]
        return self._box["client"]

    def close(self) -> None:
        """Close the client and the local cluster (if one was started); once is enough, more is harmless."""
        self._thread.join()
        if self._closed:
            return
        self._closed = True
        for part in ("client", "cluster"):
            if self._box.get(part) is not None:
                self._box[part].close()


def connect(workers: int | None = None, scheduler: str | None = None) -> Connection:
    """Start connecting to the cluster at ``scheduler``, or to a local cluster of ``workers`` processes (default:
    one per core), in the background; returns at once."""
    return Connection(workers, scheduler)


def run_tasks(tasks: Iterable[Task], on_result: Callable[[Result], None], serial: bool = False,
              workers: int | None = None, scheduler: str | None = None,
              progress: bool | None = None, deadline: float | None = None,
              connection: Connection | None = None) -> dict[str, str]:
    """Grade ``tasks``; call ``on_result`` with each result as it arrives; return ``student -> reason``
    for the tasks that failed. ``progress=None`` shows a bar only on a terminal. ``deadline``: the seconds a
    task may take outside the sandbox's own limits before it is given up (serially: that task; on Dask:
    the batch, at ``deadline`` per round of tasks on the workers), reported as a failure. ``connection``: a
    :func:`connect` already under way (else one is made here); it is closed when the tasks are done."""
    tasks = list(tasks)
    failures: dict[str, str] = {}
    bar = tqdm(total=len(tasks), desc="grading", unit="notebook", disable=(None if progress is None else not progress))
    try:
        if serial:
            for task in tasks:
                try:
                    on_result(_with_deadline(task, deadline))
                except TimeoutError as error:
                    failures[task.student] = str(error)
                except Exception as error:  # noqa: BLE001 - one task's trouble must not stop the batch
                    failures[task.student] = _reason(error)
                bar.update()
            return failures
        from distributed import as_completed

        connection = connection or connect(workers, scheduler)
        client = connection.get()
        try:
            futures = {client.submit(run_task, task, retries=RETRIES, pure=False,
                                     key=f"grade-{task.assignment}-{task.fingerprint[:16]}-{index}"): task
                       for index, task in enumerate(tasks)}
            rounds = -(-len(tasks) // max(1, len(client.scheduler_info().get("workers", {})) or 1))
            pending = set(futures)
            try:
                for future in as_completed(futures, timeout=None if deadline is None else deadline * (rounds + 1)):
                    pending.discard(future)
                    task = futures[future]
                    try:
                        on_result(future.result())
                    except Exception as error:  # noqa: BLE001 - reported, and graded again next time
                        failures[task.student] = _reason(error)
                    bar.update()
            except TimeoutError:  # the batch's deadline: what has no result yet is a failure, the rest recorded
                for future in pending:
                    failures[futures[future].student] = _stuck(deadline * (rounds + 1))
                    future.cancel()
        finally:
            connection.close()
        return failures
    finally:
        bar.close()
