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
