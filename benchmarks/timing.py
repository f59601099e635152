"""What the benchmark scripts share: interleaved timing, the spread of per-round ratios, the CPU's name,
and the one line per targeted ratio that ``benchmarks/all.py`` gathers into its table.

Imported by the scripts beside it (``python benchmarks/<script>.py`` puts this folder first
on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

RESULTS = "BENCH_RESULTS"
"""The environment variable naming the file :func:`record` appends to (set by ``benchmarks/all.py``)."""


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


def ratios(ours: list[float], theirs: list[float]) -> tuple[float, float, float]:
    """``(median, lowest, highest)`` of the per-round ratios ``ours[i] / theirs[i]`` (rounds interleaved, so
    each ratio compares two measurements taken side by side)."""
    per_round = [a / b for a, b in zip(ours, theirs)]
    return statistics.median(per_round), min(per_round), max(per_round)


def spread_text(median: float, low: float, high: float, digits: int = 2) -> str:
    """``"1.23 [1.20-1.31]"``: a ratio's median over the rounds and its range."""
    return f"{median:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def record(benchmark: str, measure: str, median: float, low: float, high: float, target: str | None = None,
           met: bool | None = None, rounds: int | None = None) -> None:
    """Append one result to the file named by ``$BENCH_RESULTS`` (nothing when it is not set).

    Args:
        benchmark: the script's name, e.g. ``"lstm_vs_torch"``.
        measure: what the ratio compares, e.g. ``"LSTM layer forward+backward, ours/torch.nn.LSTM time"``.
        median, low, high: the ratio's median over the rounds and its range.
        target: the target as text (``"<= 1.5"``), or ``None`` when the ratio is reported, not targeted.
        met: whether the median meets it.
        rounds: how many rounds the spread is over.
    """
    path = os.environ.get(RESULTS)
    if not path:
        return
    line = dict(benchmark=benchmark, measure=measure, median=median, low=low, high=high, target=target, met=met,
                rounds=rounds, cpu=cpu_name(), load=round(os.getloadavg()[0], 2))
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
