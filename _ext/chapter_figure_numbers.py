"""Figures numbered per chapter: "Fig. 8.3" is the third figure of chapter 8, wherever the book puts it.

With ``numfig``, Sphinx numbers the figures (and tables and numbered code blocks) of the
whole book in one sequence, since the table of contents interleaves the chapters with
the problem sets and none of its toctrees is numbered: chapter 8 would start at Fig. 56.
After Sphinx has assigned its numbers, this extension numbers again, per document and in
document order: ``(NN, k)`` in a chapter ``chapters/chNN_name`` (Sphinx prints it as
"8.3"), ``(k,)`` in any other page. Captions and ``{numref}`` read the same table
(``env.toc_fignumbers``), so both show the new numbers.
"""

from __future__ import annotations

import re

CHAPTER = re.compile(r"(?:^|/)ch(\d+)_[^/]*$")


def chapter_number(docname: str) -> int | None:
    """The chapter number of a document named ``chapters/chNN_name`` (``NN`` as an int), else ``None``."""
    match = CHAPTER.search(docname)
    return int(match.group(1)) if match else None


def renumber(fignumbers: dict) -> dict:
    """``{docname: {figtype: {id: number}}}`` numbered again per document, keeping each document's order."""
    renumbered = {}
    for docname, by_type in fignumbers.items():
        prefix = chapter_number(docname)
        renumbered[docname] = {}
        for figtype, numbers in by_type.items():
            in_order = sorted(numbers, key=lambda figure_id: numbers[figure_id])  # Sphinx numbered in page order
            renumbered[docname][figtype] = {
                figure_id: ((prefix, k) if prefix is not None else (k,)) for k, figure_id in enumerate(in_order, 1)}
    return renumbered


def _restore_book_numbers(app, env):
    """Before Sphinx numbers again: put back its own numbers of the last build, so that it compares like
    with like and asks to rewrite only the pages whose figures changed."""
    if hasattr(env, "book_fignumbers"):
        env.toc_fignumbers = env.book_fignumbers
    return []


def _renumber_figures(app, env):
    """After Sphinx's own numbering (``env-get-updated``): number per chapter; return the pages to rewrite."""
    if not app.config.numfig:
        return []
    old = renumber(getattr(env, "book_fignumbers", {}))
    env.book_fignumbers = env.toc_fignumbers
    env.toc_fignumbers = renumber(env.toc_fignumbers)
    return [docname for docname, numbers in env.toc_fignumbers.items() if numbers != old.get(docname)]


def setup(app):
    # Sphinx's toctree collector assigns the book-wide numbers at the default priority (500)
    app.connect("env-get-updated", _restore_book_numbers, priority=100)
    app.connect("env-get-updated", _renumber_figures, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
