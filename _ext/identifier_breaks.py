"""Long names break only between their parts: after ``_`` or ``.``, never inside a word.

``scaled_dot_product_attention`` in a narrow table column, or
``course_lib.recurrent.language_model`` on a phone, must wrap somewhere; a browser left
to itself either runs them off the screen or (with ``overflow-wrap: anywhere``) cuts
them mid-word ("scaled_dot_pr|oduct_attenti|on"). This extension puts a ``<wbr>`` (a
line-break opportunity that shows nothing) after every ``_`` and ``.`` that sits between
two characters of a name, in the HTML of inline code and of API signatures (and after the
``(`` of a signature);
``_static/readable.css`` then lets lines break there and nowhere else inside a word.
The page's text and the search index are unchanged (the ``<wbr>`` is added to the
rendered HTML only).
"""

from __future__ import annotations

import re

# inline code, and the module path and name of an API signature (the whole element, up to its end tag)
NAME_ELEMENT = re.compile(r'<code class="[^"]*\bliteral\b[^"]*">.*?</code>'
                          r'|<span class="sig-(?:prename|name) [^"]*">.*?</span></span>'
                          r'|<em class="sig-param">.*?</em>', re.S)
OPEN_PAREN = '<span class="sig-paren">(</span>'  # a signature may also break before its first argument
TEXT = re.compile(r">([^<]+)<")  # the text between two tags
BREAK_AFTER = re.compile(r"(?<=\w)([_.])(?=\w)")  # "_" or "." with a name character on both sides


def add_breaks(html: str) -> str:
    """``html`` with ``<wbr>`` after each ``_`` and ``.`` inside a name of inline code or of a signature."""
    def in_element(element):
        return TEXT.sub(lambda text: ">" + BREAK_AFTER.sub(r"\1<wbr>", text.group(1)) + "<", element.group(0))
    return NAME_ELEMENT.sub(in_element, html).replace(OPEN_PAREN, OPEN_PAREN + "<wbr>")


def _page(app, pagename, templatename, context, doctree):
    if context.get("body"):
        context["body"] = add_breaks(context["body"])


def setup(app):
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
