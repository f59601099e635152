"""Drawing primitives for the architecture diagrams of the chapters. All chapters.

A diagram is drawn on a matplotlib ``Axes`` in data coordinates (one unit is one
box width, roughly), from code, so it is versioned with the chapter and redrawn
at every build. :func:`canvas` makes the axes; :func:`box`, :func:`arrow` and
:func:`note` draw on it. Colours say what a thing is, the same in every chapter:
``ROLES`` maps ``"input"``, ``"hidden"``, ``"output"``, ``"weight"``, ``"gate"``,
``"op"`` to a fill colour.

Example (an unrolled step)::

    ax = diagrams.canvas(6, 3)
    diagrams.box(ax, (1, 0.5), "x_t", role="input")
    diagrams.box(ax, (1, 2), "h_t", role="hidden")
    diagrams.arrow(ax, (1, 0.8), (1, 1.7), "W")
"""

from __future__ import annotations

ROLES = {
    "input": "#DCEBF7",   # light blue: what the model reads
    "hidden": "#FCE3C8",  # light orange: states and hidden vectors
    "output": "#D9F0E3",  # light green: what the model predicts
    "weight": "#EDE0F2",  # light purple: parameters
    "gate": "#FFF4C2",    # light yellow: gates and nonlinearities
    "op": "#FFFFFF",      # white: elementwise operations (+, x)
}
"""Fill colour of a box by what it stands for."""


def canvas(width: float, height: float, scale: float = 1.2):
    """A new ``Axes`` for a diagram ``width`` by ``height`` units, without ticks or frame. All chapters.

    Args:
        width, height: the extent of the drawing in data units; ``(0, 0)`` is the bottom left.
        scale: inches per unit.

    Returns:
        the matplotlib ``Axes``, with equal aspect so circles stay round.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width * scale, height * scale))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.subplots_adjust(0, 0, 1, 1)
    return ax


def box(ax, center: tuple[float, float], text: str, role: str = "hidden", width: float = 0.9,
        height: float = 0.55, round_: bool = False, fontsize: float = 12):
    """Draw a labelled box (or circle, ``round_=True``) centred at ``center``; return the patch. All chapters.

    ``text`` may use matplotlib mathtext, e.g. ``"$h_t$"``.
    """
    from matplotlib.patches import Ellipse, FancyBboxPatch

    if role not in ROLES:
        raise ValueError(f"role must be one of {sorted(ROLES)}, got {role!r}")
    x, y = center
    if round_:
        patch = Ellipse((x, y), width, height, facecolor=ROLES[role], edgecolor="#333333", linewidth=1.2)
    else:
        patch = FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                               facecolor=ROLES[role], edgecolor="#333333", linewidth=1.2)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
    return patch


def arrow(ax, start: tuple[float, float], end: tuple[float, float], label: str = "", color: str = "#333333",
          style: str = "-|>", curve: float = 0.0, label_offset: tuple[float, float] = (0.12, 0.0), fontsize: float = 11):
    """Draw an arrow from ``start`` to ``end`` with an optional label beside its middle; return the patch. All chapters.

    ``curve`` bends the arrow (``0`` is straight; ``0.3`` a gentle arc to the left).
    """
    from matplotlib.patches import FancyArrowPatch

    patch = FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=14, color=color, linewidth=1.3,
                            connectionstyle=f"arc3,rad={curve}", shrinkA=0, shrinkB=0)
    ax.add_patch(patch)
    if label:
        mid = ((start[0] + end[0]) / 2 + label_offset[0], (start[1] + end[1]) / 2 + label_offset[1])
        ax.text(*mid, label, ha="left", va="center", fontsize=fontsize, color=color)
    return patch


def note(ax, xy: tuple[float, float], text: str, fontsize: float = 11, **kwargs):
    """Write plain explanatory text at ``xy`` (left-aligned unless ``ha`` is given); return the text. All chapters."""
    options = dict(ha="left", va="center", fontsize=fontsize, color="#444444")
    options.update(kwargs)
    return ax.text(*xy, text, **options)
