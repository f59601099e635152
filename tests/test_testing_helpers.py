"""course_lib.testing (what the assignments' test cells call) and course_lib.plotting."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import warnings  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from course_lib import plotting  # noqa: E402
from course_lib.testing import assert_close, quiet  # noqa: E402
from course_tools.authoring.answer_keys import decode as decode_cases, encode as encode_cases  # noqa: E402

# ---------------------------------------------------------------- assert_close


@pytest.mark.parametrize("actual, expected", [
    (np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3)),
    (np.arange(6).reshape(2, 3), np.arange(6.0).reshape(2, 3)),     # int vs float values
    ([[0.0, 1.0], [2.0, 3.0]], np.arange(4.0).reshape(2, 2)),      # array-like
    (np.ones(3) + 1e-9, np.ones(3)),                                 # within rtol
    (sp.csr_matrix(np.eye(3)), sp.csr_matrix(np.eye(3))),
    (sp.coo_matrix(np.eye(3)), sp.csr_matrix(np.eye(3))),
    (2.5, 2.5),
    (np.float32(0.25), 0.25),
    ((1.0, np.ones(2)), (1.0, np.ones(2))),
    ([np.zeros(2), sp.csr_matrix(np.eye(2))], (np.zeros(2), sp.csr_matrix(np.eye(2)))),
])
def test_assert_close_passes_for_equal_values(actual, expected):
    assert assert_close(actual, expected, "f(x)") is None


def test_assert_close_wrong_shape():
    with pytest.raises(AssertionError, match=r"f\(x\) has shape \(3,\), expected \(2, 2\)"):
        assert_close(np.ones(3), np.ones((2, 2)), "f(x)")
    with pytest.raises(AssertionError, match=r"shape \(2, 3\), expected \(3, 2\)"):
        assert_close(np.ones((2, 3)), np.ones((3, 2)), "f(x)")


def test_assert_close_wrong_values_names_index_and_hint():
    expected = np.zeros((3, 4))
    actual = expected.copy()
    actual[1, 2] = 0.5
    actual[2, 0] = -1.0
    with pytest.raises(AssertionError) as info:
        assert_close(actual, expected, "tfidf(counts)", hint="Did you normalise the rows?")
    message = str(info.value)
    assert "tfidf(counts)" in message
    assert "2 of 12 entries" in message
    assert "(1, 2)" in message  # the first differing index
    assert "got 0.5" in message and "expected 0" in message
    assert message.endswith("Did you normalise the rows?")


def test_assert_close_respects_tolerances():
    with pytest.raises(AssertionError):
        assert_close(np.ones(3) * 1.001, np.ones(3), "x")
    assert_close(np.ones(3) * 1.001, np.ones(3), "x", rtol=1e-2)
    with pytest.raises(AssertionError, match="x is 1.5, expected 2"):
        assert_close(1.5, 2.0, "x")


def test_assert_close_nan_is_a_mismatch():
    with pytest.raises(AssertionError, match="got nan"):
        assert_close(np.array([1.0, np.nan]), np.array([1.0, 2.0]), "x")


@pytest.mark.parametrize("actual, expected", [
    (None, 1.0),
    (None, np.ones((2, 2))),
    ((None, 2.0), (1.0, 2.0)),
])
def test_assert_close_none_suggests_missing_return(actual, expected):
    with pytest.raises(AssertionError, match=r"f\(x\).*returned None.*return statement"):
        assert_close(actual, expected, "f(x)")


def test_assert_close_none_where_sparse_expected_suggests_missing_return():
    with pytest.raises(AssertionError, match="returned None.*return statement"):
        assert_close(None, sp.csr_matrix(np.eye(2)), "tfidf(counts)")


def test_assert_close_dense_where_sparse_expected():
    with pytest.raises(AssertionError, match="should be a scipy sparse matrix, got ndarray"):
        assert_close(np.eye(2), sp.csr_matrix(np.eye(2)), "tfidf(counts)")


def test_assert_close_sparse_where_dense_expected():
    with pytest.raises(AssertionError, match="dense|numpy array|sparse"):
        assert_close(sp.csr_matrix(np.eye(2)), np.eye(2), "cosine_similarity(a)")


@pytest.mark.parametrize("actual", [np.array([1.0, 2.0]), "one", np.ones((1, 1))])
def test_assert_close_number_expected_other_shape(actual):
    with pytest.raises(AssertionError, match="loss"):
        assert_close(actual, 1.0, "loss")


def test_assert_close_non_numeric_array():
    with pytest.raises(AssertionError, match="numeric"):
        assert_close(np.array(["a", "b"]), np.ones(2), "x")


def test_assert_close_tuples():
    with pytest.raises(AssertionError, match=r"nearest\(v\) should return 2 values, got tuple of length 3"):
        assert_close((1, 2, 3), (1, 2), "nearest(v)")
    with pytest.raises(AssertionError, match=r"should return 2 values, got float"):
        assert_close(1.0, (1, 2), "nearest(v)")
    with pytest.raises(AssertionError, match=r"nearest\(v\)\[1\] differs .* index \(0,\)"):
        assert_close((np.ones(2), np.array([0.0, 1.0])), (np.ones(2), np.ones(2)), "nearest(v)")
    with pytest.raises(AssertionError, match=r"nearest\(v\)\[0\] has shape"):
        assert_close((np.ones(3), np.ones(2)), (np.ones(2), np.ones(2)), "nearest(v)")


# ---------------------------------------------------------------- answer keys as text

def test_encode_decode_round_trip():
    rng = np.random.default_rng(0)
    cases = [
        {"args": (rng.normal(size=(3, 4)),), "kwargs": {"alpha": 0.75}, "expected": rng.normal(size=3)},
        {"args": (sp.random(5, 6, density=0.3, random_state=1, format="csr"), 2),
         "kwargs": {}, "expected": (np.arange(3), 1.5), "rtol": 1e-3, "atol": 1e-6},
    ]
    text = encode_cases(cases)
    assert text.isascii()
    assert all(len(line) <= 76 for line in text.splitlines())
    for decoded in (decode_cases(text), decode_cases("    " + text.replace("\n", "\n    ") + "\n")):
        assert len(decoded) == 2
        np.testing.assert_array_equal(decoded[0]["args"][0], cases[0]["args"][0])
        assert decoded[0]["kwargs"] == {"alpha": 0.75}
        np.testing.assert_array_equal(decoded[0]["expected"], cases[0]["expected"])
        assert (decoded[1]["args"][0] != cases[1]["args"][0]).nnz == 0
        assert decoded[1]["args"][1] == 2 and decoded[1]["rtol"] == 1e-3
        np.testing.assert_array_equal(decoded[1]["expected"][0], np.arange(3))


# ---------------------------------------------------------------- plotting

@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_word_map_labels_every_point():
    points = np.random.default_rng(0).normal(size=(5, 2))
    words = ["king", "queen", "man", "woman", "apple"]
    ax = plotting.word_map(points, words)
    assert isinstance(ax, Axes)
    assert ax.get_title() == "Word vectors projected to 2-D"
    assert ax.get_xlabel() == "component 1" and ax.get_ylabel() == "component 2"
    assert sorted(t.get_text() for t in ax.texts) == sorted(words)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), points)
    assert ax.get_legend() is None


def test_word_map_groups_custom_labels_and_given_axes():
    _fig, given = plt.subplots()
    points = np.arange(8.0).reshape(4, 2)
    ax = plotting.word_map(points, list("abcd"), groups=["x", "y", "x", "y"], ax=given,
                           title="T", xlabel="X", ylabel="Y")
    assert ax is given
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("T", "X", "Y")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["x", "y"]
    assert len(ax.collections) == 2


@pytest.mark.parametrize("points, words, groups", [
    (np.zeros((3, 2)), ["a", "b"], None),
    (np.zeros((2, 3)), ["a", "b"], None),
    (np.zeros(4), ["a", "b"], None),
    (np.zeros((2, 2)), ["a", "b"], ["g"]),
])
def test_word_map_rejects_mismatched_shapes(points, words, groups):
    with pytest.raises(ValueError):
        plotting.word_map(points, words, groups=groups)


def test_similarity_heatmap_labels_and_values():
    labels = ["cat", "dog", "car"]
    sims = np.array([[1.0, 0.8, 0.1], [0.8, 1.0, 0.2], [0.1, 0.2, 1.0]])
    ax = plotting.similarity_heatmap(sims, labels)
    assert isinstance(ax, Axes)
    assert ax.get_title() == "Cosine similarity"
    assert [t.get_text() for t in ax.get_xticklabels()] == labels
    assert [t.get_text() for t in ax.get_yticklabels()] == labels
    colorbar_axes = [a for a in ax.figure.axes if a is not ax]
    assert len(colorbar_axes) == 1 and colorbar_axes[0].get_ylabel() == "Cosine similarity"
    np.testing.assert_allclose(ax.images[0].get_array(), sims)
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{v:.2f}" for v in sims.ravel())


def test_similarity_heatmap_title_and_no_annotation():
    ax = plotting.similarity_heatmap(np.eye(2), ["a", "b"], title="PPMI", annotate=False)
    assert ax.get_title() == "PPMI"
    assert len(ax.texts) == 0


@pytest.mark.parametrize("sims, labels", [
    (np.eye(3), ["a", "b"]),
    (np.ones((2, 3)), ["a", "b"]),
    (np.ones(4), ["a", "b"]),
])
def test_similarity_heatmap_rejects_mismatched_shapes(sims, labels):
    with pytest.raises(ValueError):
        plotting.similarity_heatmap(sims, labels)


def test_assert_own_code_refuses_a_library_call_and_accepts_own_code():
    import torch

    from course_lib import testing

    def borrowed(x, state, w_ih, w_hh, b_ih, b_hh):
        return torch.lstm_cell(x, state, w_ih, w_hh, b_ih, b_hh)

    def hidden_in_a_lambda(x):
        return (lambda y: torch.nn.LSTMCell(3, 4)(y))(x)

    def own(x, lstm=None):  # a local variable named like a forbidden one is fine
        lstm = torch.sigmoid(x)
        return lstm

    with pytest.raises(AssertionError, match="lstm_cell uses lstm_cell: write the computation yourself"):
        testing.assert_own_code(borrowed, {"lstm_cell", "LSTMCell"}, "lstm_cell")
    with pytest.raises(AssertionError, match="uses LSTMCell"):
        testing.assert_own_code(hidden_in_a_lambda, {"lstm_cell", "LSTMCell"}, "lstm_cell")
    testing.assert_own_code(own, {"lstm_cell", "LSTMCell", "lstm"}, "own")
    with pytest.raises(AssertionError, match="must be a function"):
        testing.assert_own_code(len, {"x"}, "len")


def _helpers(source: str) -> dict:
    namespace = {"__name__": "__main__"}
    exec(source, namespace)  # noqa: S102 - as a notebook defines them
    return namespace


def test_assert_own_code_judges_what_a_helper_calls_not_its_name():
    """A student's own numpy helper named cross_entropy is fine; torch hidden in a helper is not."""
    from course_lib import testing

    own = _helpers("import numpy as np\n"
                   "def cross_entropy(p):\n    return -np.log(p).mean()\n"
                   "def perplexity(p):\n    return float(np.exp(cross_entropy(p)))\n")
    testing.assert_own_code(own["perplexity"], {"torch", "cross_entropy"}, "perplexity")
    wrapped = _helpers("import torch\n"
                       "def helper(z, t):\n    return torch.nn.functional.cross_entropy(z, t)\n"
                       "def perplexity(z, t):\n    return float(helper(z, t).exp())\n")
    with pytest.raises(AssertionError, match="uses cross_entropy, torch"):
        testing.assert_own_code(wrapped["perplexity"], {"torch", "cross_entropy"}, "perplexity")
