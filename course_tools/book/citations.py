"""The book's bibliography outside the book: each entry's author-year label and its reference as Markdown.

The book cites author-year through sphinxcontrib-bibtex, with the labels of the local Sphinx
extension ``_ext/author_year_bibliography.py`` ("Mikolov et al., 2013a") and pybtex's plain
style for the entries. :func:`read_bibliography` formats ``references.bib`` with that same style
and label style, so a chapter notebook (:mod:`course_tools.book.chapter_notebooks`) cites with the
labels the book's bibliography page shows. Every entry of the file is labelled, as on that page
(it lists them all: every entry is cited somewhere in the book).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from course_tools import ROOT
from course_tools.site_config import read_config

STYLE_MODULE = "author_year_bibliography"  # the local Sphinx extension that defines the book's labels


@dataclass(frozen=True)
class Reference:
    """One entry of the bibliography: its label as the book prints it and the full reference in Markdown."""

    label: str  # "Devlin et al., 2019"
    markdown: str  # "Jacob Devlin, ... BERT: pre-training ... [doi:...](https://doi.org/...)."

    @property
    def textual(self) -> str:
        """The label as a sentence names the work: "Devlin et al. (2019)"."""
        who, _, year = self.label.rpartition(", ")
        return f"{who} ({year})" if who else self.label

    @property
    def parenthetical(self) -> str:
        """The label inside parentheses of several citations: "Devlin et al., 2019"."""
        return self.label


def _style_module(root: Path):
    config = read_config(root)
    folders = ((config.get("sphinx") or {}).get("local_extensions") or {})
    path = root / folders.get(STYLE_MODULE, "_ext") / f"{STYLE_MODULE}.py"
    spec = importlib.util.spec_from_file_location(f"_course_{STYLE_MODULE}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_bibliography(root: Path = ROOT) -> dict[str, Reference]:
    """Every entry of the book's ``bibtex_bibfiles``, by key, labelled and formatted as the book's bibliography page."""
    files = tuple(Path(root) / name for name in read_config(root).get("bibtex_bibfiles") or [])
    return dict(_formatted(Path(root), tuple((path, path.stat().st_mtime_ns, path.stat().st_size) for path in files)))


@functools.lru_cache(maxsize=4)
def _formatted(root: Path, files: tuple) -> tuple:
    """``(key, Reference)`` pairs of the bibliography files ``files`` (path, and the version: once per version)."""
    from pybtex.database import BibliographyData, parse_file
    from pybtex.plugin import find_plugin

    style_module = _style_module(root)
    data = BibliographyData()
    for path, _, _ in files:
        for key, entry in parse_file(str(path)).entries.items():
            data.add_entry(key, entry)
    style = style_module.AuthorYearPlain(label_style=style_module.AuthorYearLabels)
    markdown = find_plugin("pybtex.backends", "markdown")()
    return tuple((entry.key, Reference(entry.label, " ".join(entry.text.render(markdown).split())))
                 for entry in style.format_bibliography(data))
