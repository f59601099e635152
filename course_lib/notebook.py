"""Running a chapter as a notebook. Shared by all chapters.

Two things a chapter needs from the notebook it runs in, with nothing of the book build
installed (a student's Jupyter, Colab, Binder):

- :func:`glue` records a value under a name, so that the book's ``{glue:text}`name```
  shows it in the prose. It writes the output myst-nb reads (a display output whose
  MIME types start with ``application/papermill.record/`` and whose metadata names the
  value), so the chapters need no myst-nb at run time; outside the book the output is
  simply not shown.
- :func:`stop_at_unrevealed` makes a chapter stop cleanly where the student edition of
  course_lib installed leaves an exercise empty (it raises
  :class:`course_lib.unrevealed.NotRevealed`, a ``NotImplementedError``): that cell shows
  one message, naming the function, its problem set and what to do, instead of a
  traceback; every later cell is skipped with a one-line note instead of failing on a
  name the stopped cell never defined. The first code cell of each chapter notebook
  (its install cell) calls it.
"""

from __future__ import annotations

GLUE_PREFIX = "application/papermill.record/"
"""The MIME-type prefix of a glued value that is recorded but not shown (myst-nb's)."""


def glue(name: str, value, display: bool = True) -> None:
    """Record ``value`` under ``name`` for the book's ``{glue:text}`` role. All chapters.

    Args:
        name: the name the prose refers to, unique in the chapter (``"ch8_review_count"``).
        value: any object; what is recorded is its display (its ``text/plain`` form, and
            richer forms where IPython has them), as for an output.
        display: also show the value as the cell's output.

    Outside IPython (a plain script) nothing is recorded.
    """
    try:
        from IPython import get_ipython
        from IPython.core.formatters import format_display_data
        from IPython.display import display as show
    except ImportError:
        return
    if get_ipython() is None:
        return
    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = {"name": name, "mime_prefix": prefix}
    show({prefix + mime: data for mime, data in bundle.items()}, raw=True, metadata=metadata)


class _Stop:
    """What :func:`stop_at_unrevealed` remembers: the exception that stopped the chapter."""

    def __init__(self):
        self.error = None

    def report(self, shell, etype, value, tb, tb_offset=None):
        """IPython's handler for a ``NotImplementedError``: shows a message for an unrevealed
        exercise, the usual traceback for any other (IPython shows nothing of its own)."""
        if hasattr(value, "problem_set"):
            self.error = value
            lines = ["This chapter stops here.", "", str(value), "",
                     "The cells below are skipped; the book's page shows what they print. Once you have "
                     "installed that edition, restart the kernel and run all cells."]
        else:  # the student's own stub, or a library's: the usual traceback
            lines = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        shell._showtraceback(etype, value, lines)

    def skip(self, lines: list[str]) -> list[str]:
        """IPython's input transformer: once stopped, a cell's code becomes a one-line note."""
        if self.error is None or not "".join(lines).strip():
            return lines
        note = (f"skipped: an earlier cell needs {self.error.function} (problem set "
                f"{self.error.problem_set}), which this edition of course_lib leaves empty")
        return [f"print({note!r})\n"]


def stop_at_unrevealed() -> None:
    """Stop the chapter cleanly at the first exercise the installed edition does not reveal. All chapters.

    In IPython, registers a handler for ``NotImplementedError``: an exception that carries a
    ``problem_set`` (:class:`course_lib.unrevealed.NotRevealed`) prints its message instead of a
    traceback, and from then on every code cell is replaced by a note that it was skipped; any
    other ``NotImplementedError`` shows its traceback as usual. The stopped cell still ends in an
    error, so "Run all" stops there. Calling it again replaces the earlier registration. Outside
    IPython it does nothing.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    stop = _Stop()
    shell.input_transformers_post = [t for t in shell.input_transformers_post
                                     if not isinstance(getattr(t, "__self__", None), _Stop)]
    shell.input_transformers_post.append(stop.skip)
    shell.set_custom_exc((NotImplementedError,), stop.report)
