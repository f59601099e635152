"""The bibliography a reader can follow: every entry links to the paper, and labels read as the text cites."""

from __future__ import annotations

import re
import sys

import pytest
from pybtex.database import parse_file, parse_string

from course_tools import ROOT

NO_ONLINE_COPY = {
    "firth1957synopsis",  # a 1957 book chapter, in print only
    "williams1995gradient",  # a chapter of an edited book without a DOI
}


def test_every_entry_links_to_the_paper():
    entries = parse_file(str(ROOT / "references.bib")).entries
    missing = sorted(key for key, entry in entries.items()
                     if not ({"doi", "url"} & {f.lower() for f in entry.fields}) and key not in NO_ONLINE_COPY)
    assert not missing, f"add a doi or url to: {missing}"
    assert NO_ONLINE_COPY <= set(entries), "an exception names an entry that no longer exists"


def test_labels_are_author_year_and_unique():
    sys.path.insert(0, str(ROOT / "_ext"))
    import author_year_bibliography as style

    style.setup(app=None)
    data = parse_string("""
        @article{a, author = {Lee, Michael and Pincombe, Brandon and Welsh, Matthew}, title = {T}, journal = {J}, year = {2005}}
        @article{b, author = {Church, Kenneth and Hanks, Patrick}, title = {T}, journal = {J}, year = {1990}}
        @article{c, author = {Elman, Jeffrey}, title = {A}, journal = {J}, year = {1990}}
        @article{d, author = {Elman, Jeffrey}, title = {B}, journal = {J}, year = {1990}}
        @article{e, author = {{\\v{R}}eh{\\r{u}}{\\v{r}}ek, Radim and Sojka, Petr}, title = {T}, journal = {J}, year = {2010}}
    """, "bibtex")
    formatted = style.AuthorYearPlain().format_bibliography(data)
    labels = {entry.key: entry.label for entry in formatted}
    assert labels == {"a": "Lee et al., 2005", "b": "Church and Hanks, 1990", "c": "Elman, 1990a",
                      "d": "Elman, 1990b", "e": "Řehůřek and Sojka, 2010"}


@pytest.mark.parametrize("key", ["mikolov2013efficient", "peters2018deep"])
def test_links_are_well_formed(key):
    fields = parse_file(str(ROOT / "references.bib")).entries[key].fields
    link = fields.get("url") or "https://doi.org/" + fields["doi"]
    assert re.match(r"https://[\w.-]+/\S+$", link), link
