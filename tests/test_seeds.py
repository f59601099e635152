"""course_lib.seeds against scipy and by hand: the t interval, Wilson's interval, separation, over_seeds.

The interval of ``spread`` is scipy's ``t.interval`` (built another way: ``sem`` and
``t.interval`` rather than ``std`` and ``t.ppf``); ``proportion`` is Wilson's, checked against
the formula worked by hand for 723 of 991; ``separated`` and ``compare`` only call an ordering
when the intervals are apart; ``over_seeds`` passes each seed once, in order, and refuses
experiments that change what they return; bad input gets a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from course_lib import seeds


@pytest.mark.parametrize("n", [2, 3, 5, 10, 31])
def test_spread_is_the_student_t_interval(n):
    values = np.random.default_rng(n).normal(3.0, 2.0, size=n)
    s = seeds.spread(values)
    low, high = scipy.stats.t.interval(0.95, n - 1, loc=values.mean(), scale=scipy.stats.sem(values))
    assert s.mean == pytest.approx(values.mean())
    assert (s.low, s.high) == pytest.approx((low, high), rel=1e-9, abs=1e-12)
    assert s.n == n and s.seeds == ()


def test_wilson_interval_by_hand():
    s = seeds.proportion(723, 991)
    p, n, z = 723 / 991, 991, 1.96
    centre = (p + z ** 2 / (2 * n)) / (1 + z ** 2 / n)
    half = z / (1 + z ** 2 / n) * np.sqrt(p * (1 - p) / n + z ** 2 / (4 * n ** 2))
    assert (s.low, s.high) == pytest.approx((centre - half, centre + half))
    assert 0.70 < s.low < p < s.high < 0.76  # about 2.8 points either side on 991 sentences
    assert seeds.proportion(0, 10).low == pytest.approx(0.0, abs=1e-12)
    assert seeds.proportion(10, 10).high == pytest.approx(1.0)


def test_separation_and_the_word_it_gives():
    a, b, c = seeds.spread([1.0, 1.1, 0.9]), seeds.spread([2.0, 2.1, 1.9]), seeds.spread([0.5, 1.5, 1.0])
    assert seeds.separated(a, b) and seeds.separated(b, a)
    assert not seeds.separated(a, c)
    assert seeds.compare(b, a) == "higher" and seeds.compare(a, b) == "lower"
    assert seeds.compare(a, c, same="the same within the runs") == "the same within the runs"


def test_over_seeds_runs_each_seed_once_in_order_and_summarises_each_name():
    seen = []

    def experiment(seed):
        seen.append(seed)
        return {"accuracy": 0.5 + 0.01 * seed, "loss": 2.0 - seed}

    out = seeds.over_seeds(experiment, seeds=(3, 1, 2), progress=False)
    assert seen == [3, 1, 2]
    assert set(out) == {"accuracy", "loss"}
    assert out["loss"].seeds == (3, 1, 2)
    assert out["loss"].values.tolist() == [-1.0, 1.0, 0.0]
    single = seeds.over_seeds(lambda seed: float(seed), seeds=(0, 1), progress=False)
    assert isinstance(single, seeds.Spread) and single.mean == 0.5


def test_text_states_mean_interval_and_runs():
    s = seeds.spread([0.70, 0.72, 0.74], seeds=(0, 1, 2))
    assert s.text("{:.1f}", scale=100).startswith("72.0 (95 % interval ")
    assert s.text().endswith("3 seeds)")
    assert seeds.proportion(5, 10).text().endswith("one run)")


@pytest.mark.parametrize("call, match", [
    (lambda: seeds.spread([1.0]), "at least two"),
    (lambda: seeds.spread([[1.0, 2.0]]), "at least two"),
    (lambda: seeds.spread([1.0, float("nan")]), "finite"),
    (lambda: seeds.spread([1.0, 2.0], seeds=(0,)), "one per value"),
    (lambda: seeds.proportion(11, 10), "correct <= n"),
    (lambda: seeds.proportion(1, 0), "n >= 1"),
    (lambda: seeds.over_seeds(lambda s: 1.0, seeds=(0,), progress=False), "at least two distinct"),
    (lambda: seeds.over_seeds(lambda s: 1.0, seeds=(0, 0), progress=False), "at least two distinct"),
    (lambda: seeds.over_seeds(lambda s: {"a": 1.0} if s else {"b": 1.0}, seeds=(0, 1), progress=False), "same names"),
    (lambda: seeds.over_seeds(lambda s: {"a": 1.0} if s else 1.0, seeds=(0, 1), progress=False), "a number for some"),
])
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_seed_spread_draws_every_run_and_the_interval():
    import matplotlib
    matplotlib.use("Agg")
    from course_lib import plotting
    spreads = {"a": seeds.spread([1.0, 2.0, 3.0]), "b": seeds.spread([4.0, 5.0, 6.0])}
    ax = plotting.seed_spread(spreads, ylabel="accuracy")
    from matplotlib.collections import PathCollection
    points = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections if isinstance(c, PathCollection)])
    assert sorted(points.tolist()) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    with pytest.raises(ValueError, match="at least one"):
        plotting.seed_spread({})


def test_text_cuts_the_interval_to_the_bounds_of_the_quantity():
    s = seeds.spread([0.0, 0.02, 0.4], seeds=(0, 1, 2))
    assert s.low < 0  # three runs this far apart reach past zero
    assert "interval -" in s.text("{:.1%}")
    assert s.text("{:.1%}", bounds=(0, 1)).startswith("14.0% (95 % interval 0.0% to ")
    assert (s.low, s.high) == (seeds.spread([0.0, 0.02, 0.4]).low, seeds.spread([0.0, 0.02, 0.4]).high)
    assert seeds.spread([0.0, 0.01, 0.3]).text("{:.2f}", bounds=(0, None)).startswith("0.10 (95 % interval 0.00 to 0.")


def test_text_names_what_the_values_are():
    assert seeds.spread([1.0, 2.0, 3.0], seeds=(0, 1, 2)).text("{:.0f}", unit="cuts").endswith(", 3 cuts)")
