"""Chapter 9's power-law fit (course_lib.transfer.scaling) against scipy's linear regression, exact laws, and the
coverage of its interval; C = 6 N T."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from course_lib.transfer.scaling import PowerLaw, fit_power_law, training_flops


def test_an_exact_power_law_is_recovered():
    x = np.array([1e3, 4e3, 2e4, 1e5, 7e5])
    law = fit_power_law(x, 3.5 * x ** -0.25)
    assert law.coefficient == pytest.approx(3.5, rel=1e-10) and law.exponent == pytest.approx(0.25, rel=1e-10)
    assert law.low == pytest.approx(0.25, abs=1e-9) and law.high == pytest.approx(0.25, abs=1e-9)
    np.testing.assert_allclose(law(x), 3.5 * x ** -0.25, rtol=1e-10)
    assert law.n == 5


def test_slope_and_interval_equal_scipy_linregress_on_the_log_scale():
    rng = np.random.default_rng(0)
    x = np.geomspace(1e3, 1e6, 7)
    y = 4.0 * x ** -0.08 * np.exp(rng.normal(0, 0.03, len(x)))
    law = fit_power_law(x, y, confidence=0.9)
    reference = stats.linregress(np.log(x), np.log(y))
    half = stats.t.ppf(0.95, len(x) - 2) * reference.stderr
    assert law.exponent == pytest.approx(-reference.slope, rel=1e-12)
    assert law.coefficient == pytest.approx(math.exp(reference.intercept), rel=1e-12)
    assert (law.low, law.high) == pytest.approx((-reference.slope - half, -reference.slope + half), rel=1e-10)


def test_the_interval_covers_the_true_exponent_about_95_times_in_100():
    rng = np.random.default_rng(1)
    x = np.geomspace(1e3, 1e5, 6)
    covered = sum(law.low <= 0.1 <= law.high for law in
                  (fit_power_law(x, 2.0 * x ** -0.1 * np.exp(rng.normal(0, 0.05, len(x)))) for _ in range(2000)))
    # 2000 draws: 95 % coverage gives 1900 +- 10 (binomial sd); 4.5 sd either way
    assert 1855 <= covered <= 1945, covered


@pytest.mark.parametrize("x, y, message", [
    ([1, 2], [1, 2], "at least 3 points"),
    ([1, 2, 3], [1, 2], "the same length"),
    ([1, 2, -3], [1, 2, 3], "finite and positive"),
    ([1, 2, 3], [1, 0, 3], "finite and positive"),
    ([2, 2, 2], [1, 2, 3], "two different sizes"),
])
def test_bad_points_are_refused(x, y, message):
    with pytest.raises(ValueError, match=message):
        fit_power_law(x, y)
    with pytest.raises(ValueError, match="confidence"):
        fit_power_law([1, 2, 3], [3, 2, 1], confidence=1.0)


def test_training_flops_is_six_n_t():
    assert training_flops(1e9, 2e10) == pytest.approx(1.2e20)
    np.testing.assert_allclose(training_flops(np.array([1e3, 2e3]), 1e4), [6e7, 1.2e8])
    assert PowerLaw(1.0, 0.5, 0.4, 0.6, 3)(4.0) == pytest.approx(0.5)
