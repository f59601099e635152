"""The diagram primitives and the book's figure style."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib import diagrams, plotting  # noqa: E402


def test_canvas_box_and_arrow_draw_where_asked():
    ax = diagrams.canvas(6, 3)
    assert ax.get_xlim() == (0, 6) and ax.get_ylim() == (0, 3) and not ax.axison
    patch = diagrams.box(ax, (1, 2), "$h_t$", role="hidden", width=0.8, height=0.4)
    x0, y0, x1, y1 = patch.get_extents().transformed(ax.transData.inverted()).extents
    assert x0 == pytest.approx(0.6, abs=0.05) and x1 == pytest.approx(1.4, abs=0.05)
    assert y0 == pytest.approx(1.8, abs=0.05) and y1 == pytest.approx(2.2, abs=0.05)
    assert patch.get_facecolor()[:3] == pytest.approx(matplotlib.colors.to_rgb(diagrams.ROLES["hidden"]))
    diagrams.arrow(ax, (1, 0.5), (1, 1.8), "$W$")
    assert [t.get_text() for t in ax.texts] == ["$h_t$", "$W$"]
    plt.close(ax.figure)


def test_box_rejects_an_unknown_role():
    ax = diagrams.canvas(2, 2)
    with pytest.raises(ValueError, match="role must be one of"):
        diagrams.box(ax, (1, 1), "x", role="colourful")
    plt.close(ax.figure)


def test_the_book_style_loads():
    with plt.style.context(plotting.STYLE):
        assert plt.rcParams["font.size"] == 12 and plt.rcParams["savefig.dpi"] == 200


def test_place_labels_leaves_no_label_over_another():
    import numpy as np

    rng = np.random.default_rng(0)
    points = np.vstack([rng.normal(0, 0.05, size=(8, 2)), rng.normal(3, 1.0, size=(8, 2))])  # a crowd and a spread
    words = [f"word{i}" for i in range(len(points))]
    with plt.style.context(plotting.STYLE):
        ax = plotting.word_map(points, words)
        plotting.place_labels(ax)
        ax.figure.canvas.draw()
        boxes = [matplotlib.text.Text.get_window_extent(t) for t in ax.texts]  # the text, not its leader line
    assert sorted(t.get_text() for t in ax.texts) == sorted(words), "every word keeps its label"
    overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
    assert not overlaps, f"{len(overlaps)} pairs of labels overlap"
    plt.close(ax.figure)
