"""What the benchmark scripts share: interleaved timing of several step functions, and the CPU's name.

Imported by the scripts beside it (``python benchmarks/<script>.py`` puts this folder first
on ``sys.path``).
"""

from __future__ import annotations

import platform
import time


def interleaved(steps: dict, rounds: int, runs: int, warmup: int = 0, clock=time.perf_counter) -> dict:
    """Seconds per call of each step function: one mean over ``runs`` calls per round, rounds interleaved.

    Each function is first called ``warmup`` times; the order of the functions is
    reversed every other round, so that a slow spell of a shared machine hits them alike.

    Returns:
        ``{name: [seconds per call, one per round]}``.
    """
    for step in steps.values():
        for _ in range(warmup):
            step()
    per_round = {name: [] for name in steps}
    for number in range(rounds):
        for name in (list(steps) if number % 2 == 0 else list(reversed(steps))):
            start = clock()
            for _ in range(runs):
                steps[name]()
            per_round[name].append((clock() - start) / runs)
    return per_round


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (or what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"
