"""The download button of a chapter page gives the chapter's notebook of the public tree, byte for byte.

For a page written as a MyST notebook (``chapters/<name>.md``), sphinx-book-theme's download
button links ``_sources/<page>.ipynb``, which the theme fills with the notebook myst-nb executed
(``jupyter_execute/<page>.ipynb``): the book's outputs, but no install cell, no note on the
edition, and the MyST roles left raw in its Markdown. The public tree holds, next to each
chapter, the chapter as the notebook that Colab and Binder open (``chapters/<name>.ipynb``,
written by the course's ``chapter_notebooks`` module: an install cell, readable citations and
glued numbers). After the theme has made its copy, this extension copies that notebook over it,
so the download is the same file as the launch buttons open. Pages with no such notebook next
to them keep the theme's behaviour; problem-set pages are notebooks already and their download
is their source.
"""

from __future__ import annotations

import shutil
from pathlib import Path

AFTER_THE_THEME = 900  # sphinx-book-theme copies its notebook at priority 501


def use_the_public_notebook(app, pagename, templatename, context, doctree):
    """Replace the theme's ``_sources/<page>.ipynb`` by ``<page>.ipynb`` of the source tree, if both exist."""
    if not context.get("ipynb_source") or Path(app.env.doc2path(pagename)).suffix != ".md":
        return
    ours = Path(app.srcdir) / f"{pagename}.ipynb"
    if ours.is_file():
        shutil.copyfile(ours, Path(app.outdir) / "_sources" / context["ipynb_source"])


def setup(app):
    """Register the handler, after sphinx-book-theme's."""
    app.connect("html-page-context", use_the_public_notebook, priority=AFTER_THE_THEME)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
