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
"""The book's one figure style; every chapter starts with ``plt.style.use(plotting.STYLE)``."""


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
        ax.annotate(word, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=9)
    if groups[0] != "words" or len(set(groups)) > 1:
        ax.legend(loc="best", fontsize=8, frameon=False)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
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
                ax.text(j, i, f"{sims[i, j]:.2f}", ha="center", va="center", fontsize=7,
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
