"""Progress bars for the training loops of every chapter. Shared by all chapters.

One place decides how a loop reports progress: a tqdm bar that updates at
most once a second and disappears when the loop ends, or nothing at all when
``enabled`` is false (the built book passes ``progress=False``, because
anything written to stderr fails its build).
"""

from __future__ import annotations


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "it"):
    """A tqdm bar over ``total`` items, or a silent one when ``enabled`` is false. All chapters.

    Args:
        total: the number of updates expected (steps, pairs, ...).
        desc: the label shown before the bar.
        enabled: show the bar.
        unit: what one update counts; large counts are shown with k and M.

    Returns:
        a ``tqdm`` object, to use as a context manager and ``.update(n)``.
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit != "it", disable=not enabled,
                mininterval=1.0, leave=False)
