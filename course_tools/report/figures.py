"""The class report's plots, drawn with matplotlib as inline SVG, each in two layouts.

A figure is drawn twice: ``wide`` for a desktop column (about 760 px) and ``narrow`` for a
phone (about 370 px), each at the size it is shown, so its labels keep their size on both; the
page (:mod:`course_tools.report.page`) shows one or the other by the screen's width. Text stays
text in the SVG (``svg.fonttype: none``), and each bar carries an id (``gid``) naming what it
shows, so a browser can read a plot back.
"""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen

from .class_data import ClassData  # noqa: E402

SIZES = {"wide": (7.6, 3.0), "narrow": (3.7, 3.2)}
"""Figure sizes in inches, drawn at 100 px per inch (shown at that size: 760 and 370 px)."""
FONT = {"wide": 10, "narrow": 10}
COLORS = {"bar": "#4c72b0", "lost": "#c44e52", "kept": "#dfe6f0", "line": "#333333"}
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "class-report", "font.family": "DejaVu Sans",
         "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100}


def _svg(fig) -> str:
    """The figure as an ``<svg>`` element that scales to its container (no XML header, no fixed size)."""
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = out.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', text, count=1)


def _figure(layout: str, height: float | None = None):
    width, base = SIZES[layout]
    with plt.rc_context(dict(STYLE, **{"font.size": FONT[layout]})):
        fig, ax = plt.subplots(figsize=(width, height or base))
    return fig, ax


def scores(data: ClassData, layout: str) -> str:
    """Histogram of the scores in per cent (bins of 10 points; 100 % in the last), mean and median marked."""
    with plt.rc_context(dict(STYLE, **{"font.size": FONT[layout]})):
        fig, ax = _figure(layout)
        values = data.percents
        counts, edges, bars = ax.hist(values, bins=range(0, 101, 10), color=COLORS["bar"], edgecolor="white")
        for low, bar in zip(edges, bars):
            bar.set_gid(f"scores-bin-{int(low)}")
        summary = data.summary()
        for value, style, label in ((summary["mean"], "--", "mean"), (summary["median"], ":", "median")):
            ax.axvline(value, color=COLORS["line"], linestyle=style, linewidth=1.2, label=f"{label} {value:.0f} %")
        ax.set_xlim(0, 100)
        ax.set_xlabel("score (% of the points)")
        ax.set_ylabel("submissions")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.legend(frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2)
        return _svg(fig)


def losses(data: ClassData, layout: str) -> str:
    """Per function, the points it is worth (light) and the points lost on average (red), largest loss first."""
    functions = [f for f in data.functions if f.points > 0]
    height = max(1.6, 0.42 * len(functions) + 0.9)
    with plt.rc_context(dict(STYLE, **{"font.size": FONT[layout]})):
        fig, ax = _figure(layout, height)
        names = [f.function for f in functions][::-1]
        worth = ax.barh(names, [f.points for f in functions][::-1], color=COLORS["kept"], label="worth")
        lost = ax.barh(names, [f.mean_lost for f in functions][::-1], color=COLORS["lost"], label="lost, on average")
        for f, a, b in zip(functions[::-1], worth, lost):
            a.set_gid(f"worth-{f.function}")
            b.set_gid(f"lost-{f.function}")
            ax.text(f.points, b.get_y() + b.get_height() / 2, f" {f.mean_lost:.1f} / {f.points:g}", va="center")
        ax.set_xlabel("points")
        ax.set_xlim(0, max((f.points for f in functions), default=1) * 1.35)
        ax.legend(frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2)
        return _svg(fig)


def history(classes: list[ClassData], layout: str) -> str:
    """The scores of each assignment side by side (box: quartiles, line: median, dots: every submission)."""
    with plt.rc_context(dict(STYLE, **{"font.size": FONT[layout]})):
        fig, ax = _figure(layout)
        names = [c.assignment for c in classes]
        labels = [n.split("_")[0] if layout == "narrow" else n for n in names]
        box = ax.boxplot([c.percents for c in classes], tick_labels=labels, showfliers=False, patch_artist=True,
                         medianprops={"color": COLORS["line"]}, widths=0.5)
        for name, patch in zip(names, box["boxes"]):
            patch.set_facecolor(COLORS["kept"])
            patch.set_gid(f"history-{name}")
        for position, c in enumerate(classes, start=1):
            spread = [position + 0.18 * ((i * 0.618) % 1 - 0.5) for i in range(len(c.percents))]
            ax.scatter(spread, c.percents, s=8, color=COLORS["bar"], alpha=0.5, zorder=3)
        ax.set_ylim(-3, 103)
        ax.set_ylabel("score (%)")
        if layout == "narrow" or len(names) > 4:
            ax.tick_params(axis="x", labelrotation=45 if layout == "narrow" else 20)
        return _svg(fig)
