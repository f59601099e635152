"""course_lib.vectors.gradcheck and course_lib.vectors.alignment against independent references.

Gradients derived by hand here for a few functions, and scipy's
``orthogonal_procrustes`` for the Procrustes rotation.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group

from course_lib.vectors.alignment import procrustes, retrieval_accuracy
from course_lib.vectors.gradcheck import check_gradient, numerical_gradient, relative_error

# ---------------------------------------------------------------- numerical_gradient

RNG = np.random.default_rng(0)
A = RNG.standard_normal((5, 5))
W = RNG.standard_normal((4, 2))


def quadratic_form(x):  # x: (5,)
    return float(x @ A @ x)


def quadratic_form_grad(x):
    return (A + A.T) @ x


def sum_of_sines(x):  # x: any shape
    return float(np.sum(np.sin(x)))


def sum_of_sines_grad(x):
    return np.cos(x)


def tanh_layer(x):  # x: (3, 4)
    return float(np.sum(np.tanh(x @ W) ** 2))


def tanh_layer_grad(x):
    h = np.tanh(x @ W)  # (3, 2)
    return (2 * h * (1 - h ** 2)) @ W.T  # (3, 4)


FUNCTIONS = {
    "quadratic form": (quadratic_form, quadratic_form_grad, (5,)),
    "sum of sines": (sum_of_sines, sum_of_sines_grad, (2, 3)),
    "tanh layer (3, 4)": (tanh_layer, tanh_layer_grad, (3, 4)),
}


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("seed", [1, 2])
def test_numerical_gradient_matches_analytic(name, seed):
    f, grad, shape = FUNCTIONS[name]
    x = np.random.default_rng(seed).standard_normal(shape)
    num = numerical_gradient(f, x)
    assert isinstance(num, np.ndarray) and num.dtype == np.float64 and num.shape == shape
    np.testing.assert_allclose(num, grad(x), rtol=1e-6, atol=1e-8)


def test_numerical_gradient_by_hand():
    # f(x) = x0^2 + 3 x1 at (2, 5): gradient (4, 3); central differences are exact for quadratics
    num = numerical_gradient(lambda x: float(x[0] ** 2 + 3 * x[1]), np.array([2.0, 5.0]), eps=1e-3)
    np.testing.assert_allclose(num, [4.0, 3.0], rtol=1e-9)


def test_numerical_gradient_uses_eps_and_central_differences():
    # for f = x^3 at 1 the central difference is 3 + eps^2 (the forward one would be 3 + 3 eps + eps^2)
    num = numerical_gradient(lambda x: float(x[0] ** 3), np.array([1.0]), eps=0.1)
    np.testing.assert_allclose(num, [3.01], rtol=1e-10)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_numerical_gradient_leaves_x_unchanged(name):
    f, _grad, shape = FUNCTIONS[name]
    x = np.random.default_rng(3).standard_normal(shape)
    copy = x.copy()
    numerical_gradient(f, x)
    np.testing.assert_array_equal(x, copy)  # bit for bit: restored, not re-added


def test_numerical_gradient_restores_the_saved_value_not_an_arithmetic_undo():
    # in floating point (x - eps) + eps and (x + eps) - eps are not always x: the original must be put back
    x = np.array([-1.95, -0.46, -0.08, 0.43, 0.3, 0.2])
    assert np.any((x - 0.1) + 0.1 != x) and np.any((x + 0.1) - 0.1 != x)  # the premise
    copy = x.copy()
    numerical_gradient(sum_of_sines, x, eps=0.1)
    np.testing.assert_array_equal(x, copy)


def test_numerical_gradient_probes_x_in_place_and_restores_each_entry():
    x = np.array([1.0, 2.0, 3.0])
    seen = []

    def f(y):
        seen.append(y.copy())
        return float(y.sum())

    numerical_gradient(f, x, eps=0.5)
    assert len(seen) == 2 * x.size
    for probe in seen:  # exactly one entry moved by +-eps, the others as in x
        diff = probe - [1.0, 2.0, 3.0]
        assert np.count_nonzero(diff) == 1 and np.abs(diff).max() == 0.5


@pytest.mark.parametrize("x", [np.ones(3, dtype=np.float32), [1.0, 2.0], np.arange(3), 1.5])
def test_numerical_gradient_rejects_non_float64_arrays(x):
    with pytest.raises(TypeError, match="float64"):
        numerical_gradient(sum_of_sines, x)


# ---------------------------------------------------------------- relative_error, check_gradient

def test_relative_error_by_hand():
    assert relative_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert relative_error([1.0], [3.0]) == pytest.approx(0.5)  # |1 - 3| / (1 + 3)
    assert relative_error([1.0, 10.0], [1.0, 12.0]) == pytest.approx(2 / 22)  # the max over entries
    assert relative_error([0.0], [1e-9]) == pytest.approx(0.1)  # denominators floored at 1e-8
    assert relative_error(np.zeros((2, 2)), np.zeros((2, 2))) == 0.0


def test_relative_error_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="shape"):
        relative_error(np.zeros(3), np.zeros(4))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_check_gradient_small_for_right_large_for_wrong(name):
    f, grad, shape = FUNCTIONS[name]
    x = np.random.default_rng(4).standard_normal(shape)
    assert check_gradient(f, x, grad(x)) < 1e-6
    # twice the gradient: |2g - g| / (|2g| + |g|) = 1/3 at every entry
    assert check_gradient(f, x, 2 * grad(x)) == pytest.approx(1 / 3, rel=1e-4)
    assert check_gradient(f, x, -grad(x)) == pytest.approx(1.0, rel=1e-6)


def test_check_gradient_uses_the_given_numerical_function_and_eps():
    calls = []

    def zero_numerical(f, x, eps):
        calls.append(eps)
        return np.zeros_like(x)

    x = np.array([0.3, -0.2])
    assert check_gradient(sum_of_sines, x, np.cos(x), eps=1e-4, numerical_fn=zero_numerical) == 1.0
    assert calls == [1e-4]


# ---------------------------------------------------------------- procrustes

def random_rotation(dim, seed):
    return ortho_group.rvs(dim, random_state=seed)


@pytest.mark.parametrize("n, dim", [(20, 5), (5, 5), (100, 3), (50, 1)])
@pytest.mark.parametrize("seed", [0, 1])
def test_procrustes_matches_scipy(n, dim, seed):
    rng = np.random.default_rng(seed)
    source, target = rng.standard_normal((n, dim)), rng.standard_normal((n, dim))
    r = procrustes(source, target)
    assert isinstance(r, np.ndarray) and r.dtype == np.float64 and r.shape == (dim, dim)
    theirs, _scale = orthogonal_procrustes(source, target)  # argmin ||source @ R - target||
    np.testing.assert_allclose(r, theirs.T, atol=1e-10)  # ours is applied as source @ R.T


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_procrustes_is_orthogonal_and_optimal(seed):
    rng = np.random.default_rng(seed)
    source, target = rng.standard_normal((30, 6)), rng.standard_normal((30, 6))
    r = procrustes(source, target)
    np.testing.assert_allclose(r.T @ r, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(r @ r.T, np.eye(6), atol=1e-12)
    best = np.linalg.norm(source @ r.T - target)
    for s in range(20):  # no other orthogonal matrix does better
        assert best <= np.linalg.norm(source @ random_rotation(6, s).T - target) + 1e-12


@pytest.mark.parametrize("seed", [0, 1])
def test_procrustes_recovers_a_known_rotation_from_noisy_data(seed):
    rng = np.random.default_rng(seed)
    q = random_rotation(10, seed + 10)
    source = rng.standard_normal((500, 10))
    target = source @ q.T + 0.01 * rng.standard_normal((500, 10))
    np.testing.assert_allclose(procrustes(source, target), q, atol=5e-3)
    np.testing.assert_allclose(procrustes(target, source), q.T, atol=5e-3)


@pytest.mark.parametrize("source, target, error, pattern", [
    (np.zeros((4, 3)), np.zeros((4, 2)), ValueError, "same shape"),
    (np.zeros((4, 3)), np.zeros((5, 3)), ValueError, "same shape"),
    (np.zeros(3), np.zeros(3), ValueError, "source"),
    (np.zeros((2, 2)), np.full((2, 2), np.nan), ValueError, "target"),
])
def test_procrustes_errors(source, target, error, pattern):
    with pytest.raises(error, match=pattern):
        procrustes(source, target)


# ---------------------------------------------------------------- retrieval_accuracy

def test_retrieval_accuracy_identical_spaces_is_one():
    x = np.random.default_rng(0).standard_normal((200, 50))
    assert retrieval_accuracy(x, x) == 1.0
    scales = np.random.default_rng(1).uniform(0.1, 10, size=(200, 1))
    assert retrieval_accuracy(x, scales * x) == 1.0  # cosine: the length of a row does not matter
    assert retrieval_accuracy(scales * x, x) == 1.0


def test_retrieval_accuracy_by_hand_and_k():
    source = np.array([[1.0, 0.0], [1.0, 0.1]])
    target = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert retrieval_accuracy(source, target) == 0.5  # query 1 is nearer to candidate 0
    assert retrieval_accuracy(source, target, k=2) == 1.0


def test_retrieval_accuracy_chance_for_random_rotation_and_one_after_procrustes():
    rng = np.random.default_rng(1)
    source = rng.standard_normal((200, 50))
    rotated = source @ random_rotation(50, 7).T + 0.05 * rng.standard_normal((200, 50))
    before = retrieval_accuracy(source, rotated)
    assert before < 0.05, f"a random rotation should leave about 1/200 right, got {before}"
    r = procrustes(source, rotated)
    assert retrieval_accuracy(source @ r.T, rotated) == 1.0
    top5 = retrieval_accuracy(source, rotated, k=5)
    assert before <= top5 < 0.15


def test_retrieval_accuracy_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="same shape"):
        retrieval_accuracy(np.zeros((3, 2)), np.zeros((4, 2)))
