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


def run_tasks(tasks: Iterable[Task], on_result: Callable[[Result], None], serial: bool = False,
              workers: int | None = None, scheduler: str | None = None,
              progress: bool | None = None, deadline: float | None = None) -> dict[str, str]:
    """Grade ``tasks``; call ``on_result`` with each result as it arrives; return ``student -> reason``
    for the tasks that failed. ``progress=None`` shows a bar only on a terminal. ``deadline``: the seconds a
    task may take outside the sandbox's own limits before it is given up (serially: that task; on Dask:
    the batch, at ``deadline`` per round of tasks on the workers), reported as a failure."""
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
        from distributed import Client, LocalCluster, as_completed

        try:
            if scheduler:
                client, cluster = Client(scheduler, timeout=CONNECT_TIMEOUT), None
            else:
                cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                       processes=True, dashboard_address=None, silence_logs=logging.ERROR)
                client = Client(cluster)
        except (OSError, TimeoutError, ValueError) as error:
            where = f"reach the Dask scheduler at {scheduler}" if scheduler else "start a local Dask cluster"
            raise ClusterUnavailable(f"could not {where} ({type(error).__name__}: {str(error)[:200]}); "
                                     f"--serial grades without Dask") from None
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
            client.close()
            if cluster is not None:
                cluster.close()
        return failures
    finally:
        bar.close()
