"""Run a seeded experiment several times and summarise it: every run, the mean and a 95 % interval. Chapters 5-8.

One training run is one draw: another seed gives other initial weights, other
batches and another result. A chapter that compares two models therefore runs
each one with several seeds and reads the comparison from the intervals:

- :func:`over_seeds` calls ``experiment(seed)`` for each seed and returns a
  :class:`Spread` per number the experiment reports;
- :class:`Spread` holds the ``N`` values, their mean and the Student-t interval
  ``mean ± t_{0.975, N-1} · s / sqrt(N)`` (``s`` the sample standard deviation),
  the range in which the mean of many more runs would fall, 95 times in 100;
- :func:`separated` says whether two intervals are apart. The book says one model
  is better than another only when they are; otherwise it says the runs do not
  tell them apart.
- :func:`proportion` is the interval of one accuracy measured on ``n`` examples
  (Wilson's score interval): the spread a single run owes to its test set alone;
  :func:`paired_difference` the interval of the difference of two accuracies on the same
  examples (a paired bootstrap).

:func:`course_lib.plotting.seed_spread` draws every run as a point beside its interval. Used from
:doc:`/chapters/ch05_attention` to :doc:`/chapters/ch08_bert`, wherever the prose compares runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from course_lib import checks
from course_lib.progress import progress_bar


@dataclass(frozen=True)
class Spread:
    """The results of one quantity over ``N`` runs: each value, the mean, a 95 % interval. Chapters 5-8.

    Attributes:
        values: ``(N,)`` float64, one per run, in the order of the seeds.
        seeds: the ``N`` seeds, or ``()`` when the values do not come from seeds.
        low, high: the interval ``mean ± t_{0.975, N-1} · s / sqrt(N)``; for a :func:`proportion`,
            Wilson's interval.
    """

    values: np.ndarray
    seeds: tuple
    low: float
    high: float

    @property
    def mean(self) -> float:
        """The mean of the values."""
        return float(np.mean(self.values))

    @property
    def n(self) -> int:
        """``N``, the number of runs."""
        return len(self.values)

    def text(self, fmt: str = "{:.2f}", scale: float = 1.0, bounds: tuple | None = None,
             unit: str | None = None) -> str:
        """The mean and interval as prose: ``"0.73 (95 % interval 0.71 to 0.75, 5 seeds)"``.

        Args:
            fmt: the format of each number; scale: multiplies every number first (100 for percent).
            bounds: ``(least, most)`` the quantity can be, e.g. ``(0, 1)`` for an accuracy or
                ``(0, None)`` for a loss (``None``: no bound on that side): the interval is cut to
                it (a t interval over few runs can reach past 0 or 1).
            unit: what one value is, when not a seed's run: ``"cuts"`` gives ``"5 cuts"``.
        """
        low, high = self.low, self.high
        if bounds is not None:
            least, most = bounds
            low = low if least is None else max(low, least)
            high = high if most is None else min(high, most)
        if unit is not None:
            runs = f"{self.n} {unit}"
        else:
            runs = f"{self.n} seeds" if self.seeds else f"{self.n} runs" if self.n > 1 else "one run"
        return (f"{fmt.format(scale * self.mean)} (95 % interval {fmt.format(scale * low)} "
                f"to {fmt.format(scale * high)}, {runs})")

    def __repr__(self) -> str:
        return f"Spread(mean={self.mean:.4g}, interval=[{self.low:.4g}, {self.high:.4g}], N={self.n})"


def spread(values: Sequence[float], seeds: Sequence[int] = ()) -> Spread:
    """The mean of ``N`` runs and its 95 % Student-t interval. Chapters 5-8.

    ``mean ± t_{0.975, N-1} · s / sqrt(N)``, with ``s`` the sample standard deviation
    (``ddof=1``) and ``t_{0.975, N-1}`` Student's quantile (``scipy.stats.t.ppf``).

    Args:
        values: ``(N,)`` finite numbers, ``N >= 2`` (one run has no spread).
        seeds: the seeds that gave them, ``N`` of them, or ``()``.

    Returns:
        a :class:`Spread`.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"values must be at least two numbers in a flat list (one run has no spread), "
                         f"got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"values must be finite, got {values.tolist()}")
    seeds = tuple(int(s) for s in seeds)
    if seeds and len(seeds) != len(values):
        raise ValueError(f"seeds must be one per value: {len(seeds)} seeds for {len(values)} values")
    from scipy.stats import t as student_t

    n = len(values)
    t = float(student_t.ppf(0.975, n - 1))
    half = t * values.std(ddof=1) / np.sqrt(n)
    return Spread(values, seeds, float(values.mean() - half), float(values.mean() + half))


def proportion(correct: int, n: int) -> Spread:
    """Wilson's 95 % score interval of an accuracy ``correct / n`` measured once. Chapters 5-8.

    ``(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``z = 1.96``: the spread
    one run owes to the ``n`` test examples it happened to be scored on.

    Args:
        correct: examples right, ``0 <= correct <= n``; n: examples scored, ``n >= 1``.

    Returns:
        a :class:`Spread` whose ``values`` is the single accuracy ``(1,)``.
    """
    if isinstance(n, bool) or int(n) != n or n < 1 or isinstance(correct, bool) or int(correct) != correct \
            or not 0 <= correct <= n:
        raise ValueError(f"need integers 0 <= correct <= n and n >= 1, got correct={correct!r}, n={n!r}")
    z, p = 1.96, correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Spread(np.array([p]), (), float(centre - half), float(centre + half))


def separated(a: Spread, b: Spread) -> bool:
    """Whether two 95 % intervals do not overlap: the only case in which the book calls one larger. Chapters 5-8."""
    return a.low > b.high or b.low > a.high


def compare(a: Spread, b: Spread, larger: str = "higher", smaller: str = "lower",
            same: str = "not told apart by the runs") -> str:
    """One word for how ``a`` stands to ``b``: ``larger`` or ``smaller`` if the intervals separate, else ``same``.

    Chapters 5-8. The words are glued into the prose, so a sentence states an ordering only
    when the executed runs support it.
    """
    if not separated(a, b):
        return same
    return larger if a.mean > b.mean else smaller


def over_seeds(experiment: Callable[[int], float | Mapping[str, float]], seeds: Sequence[int] = (0, 1, 2),
               progress: bool = True, desc: str = "seeds") -> Spread | dict[str, Spread]:
    """Run ``experiment(seed)`` once per seed and summarise what it returns. Chapters 5-8.

    Args:
        experiment: ``seed -> number`` or ``seed -> {name: number}`` (the same names every time).
            It must take all its randomness from ``seed``.
        seeds: ``N >= 2`` distinct seeds.
        progress: show a tqdm bar over the seeds.

    Returns:
        a :class:`Spread` if the experiment returns a number, else ``{name: Spread}``.
    """
    seeds = [int(s) for s in seeds]
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be at least two distinct integers, got {seeds}")
    results = []
    with progress_bar(len(seeds), desc, progress) as bar:
        for seed in seeds:
            results.append(experiment(seed))
            bar.update(1)
    if all(isinstance(r, Mapping) for r in results):
        names = list(results[0])
        if any(list(r) != names for r in results):
            raise ValueError(f"the experiment must return the same names for every seed, got "
                             f"{[sorted(r) for r in results]}")
        return {name: spread([float(r[name]) for r in results], seeds) for name in names}
    if any(isinstance(r, Mapping) for r in results):
        raise ValueError("the experiment returned a number for some seeds and a dict for others")
    return spread([float(r) for r in results], seeds)


def paired_difference(correct_a, correct_b, resamples: int = 2000, seed: int = 0) -> Spread:
    """The difference of two accuracies on the same ``N`` test texts, with a paired bootstrap 95 % interval. Chapters 5-8 (used in chapter 8).

    ``d = mean(a) - mean(b)`` for the 0/1 outcomes ``a`` and ``b`` of two classifiers on
    the same texts. The interval is the 2.5th to 97.5th percentile of ``d`` over
    ``resamples`` resamplings of the ``N`` texts with replacement, each drawing the *same*
    texts for both classifiers (Efron's bootstrap, paired): the texts that both get right
    or both get wrong then cancel, so the interval is narrower than two separate Wilson
    intervals (:func:`proportion`) and says whether the two classifiers
    differ on texts like these.

    Args:
        correct_a, correct_b: ``(N,)`` bools or 0/1, whether each classifier got each text right.
        resamples: bootstrap draws, at least 100. seed: seeds the draws.

    Returns:
        a :class:`Spread` whose ``values`` is the observed ``d`` ``(1,)`` and whose
        ``low`` and ``high`` are the percentile interval.
    """
    a, b = np.asarray(correct_a), np.asarray(correct_b)
    if a.ndim != 1 or a.shape != b.shape or not len(a):
        raise ValueError(f"correct_a and correct_b must be two (N,) arrays of the same length, got {a.shape} and "
                         f"{b.shape}")
    if not (np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all()):
        raise ValueError("correct_a and correct_b hold one 0/1 (or bool) outcome per text")
    if checks.positive_int(resamples, "resamples") < 100:
        raise ValueError(f"resamples must be at least 100 for a 95 % interval, got {resamples}")
    d = a.astype(np.float64) - b.astype(np.float64)  # (N,) per text: +1, 0 or -1
    draws = np.random.default_rng(seed).integers(0, len(d), size=(resamples, len(d)))  # (resamples, N)
    means = d[draws].mean(axis=1)  # (resamples,)
    low, high = np.percentile(means, [2.5, 97.5])
    return Spread(np.array([d.mean()]), (), float(low), float(high))
