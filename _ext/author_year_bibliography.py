"""Bibliography entries labelled the way the text cites them: "Mikolov et al., 2013" instead of "[12]".

The chapters cite author-year ({cite:t}`key` gives "Mikolov et al. (2013)"), so the
bibliography page lists each entry under the same author-year label, sorted by
author, year and title. Registered as the pybtex style ``author_year_plain`` and used
through ``bibtex_default_style`` in ``_config.yml``.
"""

from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    return " ".join(str(part) for part in person.rich_last_names)  # LaTeX accents decoded: "Řehůřek"


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Lee", "Lee and Welsh", "Lee et al." followed by the year; a suffix (a, b) separates equal labels."""

    def format_labels(self, sorted_entries):
        labels, seen = [], {}
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [_surname(p) for p in people]
            if not names:
                who = entry.fields.get("key", entry.key)
            elif len(names) == 1:
                who = names[0]
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = f"{names[0]} et al."
            label = f"{who}, {entry.fields.get('year', 'n.d.')}".replace("{", "").replace("}", "")
            labels.append(label)
            seen[label] = seen.get(label, 0) + 1
        counts = {}
        for label in labels:
            if seen[label] > 1:
                counts[label] = counts.get(label, 0) + 1
                yield f"{label}{'abcdefghijklmnopqrstuvwxyz'[counts[label] - 1]}"
            else:
                yield label


class AuthorYearPlain(PlainStyle):
    """pybtex's plain style (sorted by author, year, title) with author-year labels."""

    default_label_style = "author_year"


def setup(app):
    register_plugin("pybtex.style.labels", "author_year", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "author_year_plain", AuthorYearPlain)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
