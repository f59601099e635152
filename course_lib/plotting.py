"""The figures the chapters draw, with labelled axes and titles.

Each function draws on a matplotlib ``Axes`` (a new figure if none is given)
and returns the ``Axes``, so a chapter can combine them. Shared by all
chapters: word maps and similarity heatmaps from :doc:`/chapters/ch01_counts`
on, gradient norms in :doc:`/chapters/ch03_rnn` and :doc:`/chapters/ch04_lstm`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from course_lib import checks

STYLE = str(Path(__file__).with_name("book.mplstyle"))
"""The book's one figure style (the path of ``book.mplstyle`` beside this module); every chapter
starts with ``plt.style.use(plotting.STYLE)``.

:meta hide-value:
"""


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def word_map(points, words: Sequence[str], groups: Sequence[str] | None = None, ax=None,
             title: str = "Word vectors projected to 2-D",
             xlabel: str = "component 1", ylabel: str = "component 2"):
    """Scatter plot of words at 2-D coordinates, each point labelled with its word. Chapter 1 on.

    Args:
        points: ``(N, 2)`` coordinates, e.g. the first two SVD dimensions or a PCA.
        words: the ``N`` labels.
        groups: optional ``N`` group names; each group gets a colour and a legend entry.
        ax: the matplotlib Axes to draw on; a new figure if ``None``.

    Returns:
        the matplotlib Axes.
    """
    points = checks.matrix(points, "points", allow_sparse=False)
    if points.shape != (len(words), 2):
        raise ValueError(f"points must have shape ({len(words)}, 2), got {points.shape}")
    ax = _axes(ax, (7, 6))
    groups = list(groups) if groups is not None else ["words"] * len(words)
    if len(groups) != len(words):
        raise ValueError(f"groups must have one entry per word ({len(words)}), got {len(groups)}")
    for group in dict.fromkeys(groups):
        mask = np.array([g == group for g in groups])
        ax.scatter(points[mask, 0], points[mask, 1], s=18, label=group)
    for (x, y), word in zip(points, words):
        ax.annotate(word, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=11)
    if groups[0] != "words" or len(set(groups)) > 1:
        ax.legend(loc="best", fontsize=11, frameon=False)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return ax


def place_labels(ax, crowd=30.0, step=4.0, tries=40):
    """Move the word labels of a word map so that no label covers another label or a point. Chapter 1 on.

    Each label tries places around its point, nearest first, and takes the first free one:
    right, left, above or below an isolated point; for a point with other points within
    ``crowd`` pixels, farther out and on the side away from them, joined to it by a thin line.
    The points are the anchors ``(N, 2)`` of the ``N`` text labels of ``ax`` (as
    :func:`word_map` draws them), in data coordinates; returns ``ax``.
    """
    fig = ax.figure
    for label in ax.texts:
        label.set_fontsize(11)
    fig.canvas.draw()  # lay the figure out, so that the sizes of the labels are known
    labels = list(ax.texts)
    anchors = ax.transData.transform([label.xy for label in labels])  # (n, 2) the points, in pixels
    frame = ax.get_window_extent()
    clear = 6.0  # pixels around a point that no label may cover
    taken = [(x - clear, y - clear, x + clear, y + clear) for x, y in anchors]

    def is_free(box):
        inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
        return inside and not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3]
                                  for o in taken)

    distance = np.linalg.norm(anchors[:, None] - anchors[None], axis=-1)  # (n, n) in pixels
    n_near = (distance < crowd).sum(axis=1) - 1
    for i in np.argsort(-n_near, kind="stable"):  # the most crowded points first
        (x, y), extent = anchors[i], labels[i].get_window_extent()
        w, h = extent.width, extent.height
        if n_near[i]:  # 16 directions, those pointing away from the nearby points first
            angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
            away = anchors[i] - anchors[(distance[i] < 2 * crowd) & (distance[i] > 0)].mean(axis=0)
            angles = angles[np.argsort(-(np.cos(angles) * away[0] + np.sin(angles) * away[1]), kind="stable")]
            start = 3 * clear
        else:  # right, left, above, below, then the diagonals
            angles, start = np.deg2rad([0, 180, 90, 270, 45, 135, 315, 225]), clear
        spot = None
        for k in range(tries):
            for a in angles:
                cx = x + np.cos(a) * (start + k * step + w / 2)  # the label's centre
                cy = y + np.sin(a) * (start + k * step + h / 2)
                if is_free((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)):
                    spot = (cx, cy)
                    break
            if spot:
                break
        spot = spot or (x + clear + w / 2, y)  # no free place found: right of the point
        taken.append((spot[0] - w / 2, spot[1] - h / 2, spot[0] + w / 2, spot[1] + h / 2))
        text, xy, color = labels[i].get_text(), labels[i].xy, labels[i].get_color()
        labels[i].remove()
        line = dict(arrowstyle="-", color="0.5", linewidth=0.8, shrinkA=1, shrinkB=3)
        ax.annotate(text, xy, xytext=((spot[0] - x) * 72 / fig.dpi, (spot[1] - y) * 72 / fig.dpi),
                    textcoords="offset points", ha="center", va="center", fontsize=11, color=color,
                    arrowprops=line if n_near[i] or k > 0 else None)
    return ax


def similarity_heatmap(similarities, labels: Sequence[str], ax=None,
                       title: str = "Cosine similarity", vmin: float = -1.0, vmax: float = 1.0,
                       annotate: bool = True):
    """Heatmap of a square similarity matrix with a labelled colour bar. Chapter 1 on.

    Args:
        similarities: ``(N, N)`` array, e.g. from ``cosine_similarity``.
        labels: the ``N`` row and column labels.
        annotate: print each value in its cell (for ``N`` up to about 15).

    Returns:
        the matplotlib Axes.
    """
    sims = checks.matrix(similarities, "similarities", allow_sparse=False)
    if sims.shape != (len(labels), len(labels)):
        raise ValueError(f"similarities must have shape ({len(labels)}, {len(labels)}), got {sims.shape}")
    ax = _axes(ax, (6.5, 5.5))
    image = ax.imshow(sims, cmap="RdBu_r", vmin=vmin, vmax=vmax)
    ax.figure.colorbar(image, ax=ax, label=title)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    if annotate:
        for i in range(len(labels)):
            for j in range(len(labels)):
                ax.text(j, i, f"{sims[i, j]:.2f}", ha="center", va="center", fontsize=11 if len(sims) <= 12 else 9,
                        color="white" if abs(sims[i, j]) > 0.6 * max(abs(vmin), abs(vmax)) else "black")
    ax.set_title(title)
    return ax


def gradient_norms(norms_by_label: dict, ax=None, title: str = "Gradient of the last step's loss, back through time"):
    """Plot ``||dL_T / dh_t||`` against the distance ``T - t`` on a log scale, one line per model. Chapters 3 and 4.

    Args:
        norms_by_label: ``{label: (T,) norms}`` as returned by
            :func:`course_lib.recurrent.gradient_flow.gradient_norms_through_time`.
        ax: the ``Axes`` to draw on (a new figure if ``None``).

    Returns:
        the matplotlib Axes.
    """
    ax = _axes(ax, (6.5, 3.8))
    for label, norms in norms_by_label.items():
        norms = np.asarray(norms, dtype=np.float64)
        if norms.ndim != 1 or norms.size == 0:
            raise ValueError(f"the norms of {label!r} must be a non-empty 1-D array, got shape {norms.shape}")
        distance = np.arange(len(norms))[::-1]  # entry t is T - 1 - t steps before the loss
        shown = np.where(norms > 0, norms, np.nan)  # an exact zero has no logarithm: leave a gap
        ax.semilogy(distance, shown, label=label)
    ax.set_xlabel("steps back from the prediction, T - t")
    ax.set_ylabel("gradient norm ||dL_T / dh_t||")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return ax


def attention_heatmap(weights, source: Sequence[str], output: Sequence[str], ax=None, title: str = "",
                      source_label: str = "source", output_label: str = "output"):
    """Heatmap of attention weights: one row per output word, one column per source word. Chapter 5 on.

    Args:
        weights: ``(Tq, Tk)`` array, row ``t`` the weights the decoder gave the source while producing
            output word ``t`` (each row sums to 1).
        source: the ``Tk`` source words (columns). output: the ``Tq`` output words (rows).
        ax: the ``Axes`` to draw on (a new figure if ``None``).
        title: the title above the map.
        source_label, output_label: the axis labels, e.g. the two languages.

    Returns:
        the matplotlib Axes.
    """
    w = checks.matrix(weights, "weights", allow_sparse=False)
    if w.shape != (len(output), len(source)):
        raise ValueError(f"weights must have shape (Tq, Tk) = ({len(output)}, {len(source)}), got {w.shape}")
    ax = _axes(ax, (min(0.45 * len(source) + 2.2, 7.5), min(0.4 * len(output) + 1.6, 7.5)))
    ax.imshow(w, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(source)), source, rotation=60, ha="right")
    ax.set_yticks(range(len(output)), output)
    ax.set_xlabel(source_label)
    ax.set_ylabel(output_label)
    ax.grid(False)
    if title:
        ax.set_title(title)
    return ax


def attention_heads(weights, source: Sequence[str], output: Sequence[str], axes=None,
                    titles: Sequence[str] | None = None, source_label: str = "source", output_label: str = "output"):
    """Heatmaps of the attention weights of several heads side by side, sharing the word labels. Chapter 6 on.

    Args:
        weights: ``(nh, Tq, Tk)`` array, one ``(Tq, Tk)`` map per head (or per layer), each row summing to 1.
        source: the ``Tk`` key words (columns). output: the ``Tq`` query words (rows).
        axes: ``nh`` ``Axes`` to draw on, e.g. one row of ``plt.subplots``; a new figure of one
            row if ``None``.
        titles: one title per map (default "head 1", "head 2", ...).
        source_label, output_label: the axis labels; the rows are labelled on the first map only.

    Returns:
        the ``nh`` Axes, as a list.
    """
    import matplotlib.pyplot as plt

    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or w.shape[1:] != (len(output), len(source)):
        raise ValueError(f"weights must have shape (nh, Tq, Tk) = (?, {len(output)}, {len(source)}), got {w.shape}")
    titles = list(titles) if titles is not None else [f"head {h + 1}" for h in range(len(w))]
    if len(titles) != len(w):
        raise ValueError(f"titles must give one title per map ({len(w)}), got {len(titles)}")
    if axes is None:
        _fig, axes = plt.subplots(1, len(w), figsize=(min(2.2 * len(w) + 1.0, 8.0), 0.3 * len(output) + 1.8),
                                  layout="constrained", squeeze=False)
    axes = list(np.ravel(axes))
    if len(axes) != len(w):
        raise ValueError(f"axes must hold one Axes per map ({len(w)}), got {len(axes)}")
    for h, ax in enumerate(axes):
        ax.imshow(w[h], cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(source)), source, rotation=90)
        if h == 0:
            ax.set_yticks(range(len(output)), output)
        else:  # leave the labels of the first map alone (the maps may share their y axis)
            ax.set_yticks(range(len(output)))
            ax.tick_params(labelleft=False)
        ax.grid(False)
        ax.set_title(titles[h])
        ax.set_xlabel(source_label)
    axes[0].set_ylabel(output_label)
    return axes


def seed_spread(spreads: dict, ax=None, title: str = "", ylabel: str = "", scale: float = 1.0):
    """Every run of each setting as a point, beside its mean and 95 % interval. Chapters 5-8.

    Args:
        spreads: label -> a :class:`course_lib.seeds.Spread` (anything with ``values``, ``mean``,
            ``low``, ``high``); drawn left to right in the dict's order.
        ax: the axes to draw on, or ``None`` for a new figure.
        title, ylabel: the axes' title and y label.
        scale: multiplies every number (100 for percent).

    Returns:
        the ``Axes``.
    """
    if not spreads:
        raise ValueError("spreads must hold at least one setting")
    ax = _axes(ax, (1.2 + 1.1 * len(spreads), 3.2))
    for x, (label, s) in enumerate(spreads.items()):
        values = scale * np.asarray(s.values, dtype=float)
        offsets = np.linspace(-0.12, 0.12, len(values)) if len(values) > 1 else np.zeros(1)
        ax.scatter(x - 0.15 + offsets, values, s=16, color="0.45", zorder=3,
                   label="one run" if x == 0 else None)
        ax.errorbar(x + 0.15, scale * s.mean, yerr=[[scale * (s.mean - s.low)], [scale * (s.high - s.mean)]],
                    fmt="o", color="C0", capsize=4, zorder=4, label="mean, 95 % interval" if x == 0 else None)
    ax.set_xticks(range(len(spreads)), list(spreads))
    ax.set_xlim(-0.6, len(spreads) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return ax
