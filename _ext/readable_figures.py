"""Figures a reader can read on a phone, and open at full size.

Every figure of the book is an SVG that matplotlib drew with its text as text (the book's
style sets ``svg.fonttype: none``), so the smallest text of a figure can be read from the
file itself: the smallest ``font-size`` of its ``<text>`` and ``<tspan>`` elements, in the
units of its ``viewBox``. Shown ``w`` CSS pixels wide, that text is
``smallest * w / viewBox width`` pixels tall. For each figure's image this extension

- writes that width, the width at which its smallest text is :data:`READABLE_PX` pixels,
  on the ``<img>`` as the CSS variable ``--readable-width``: on a narrow screen
  ``_static/readable.css`` shows the figure at least that wide, in a box that scrolls
  sideways (from its left edge) rather than shrinking it until the labels are unreadable;
- wraps the image in a link to the image file itself, so a tap or click opens it at full size.

Only images in figures are changed (the chapters' plots and diagrams); other images are
left as Sphinx writes them.
"""

from __future__ import annotations

import functools
import math
import os
import posixpath
import re
import urllib.parse

from docutils import nodes

READABLE_PX = 9.5  # the browser test asks for 9 CSS pixels; a little more, for rounding
VIEWBOX = re.compile(r'<svg\b[^>]*\bviewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)')
FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px|font:\s*(?:[\w-]+\s+)*?([\d.]+)px")


@functools.lru_cache(maxsize=None)
def smallest_text(path: str) -> tuple[float, float] | None:
    """``(smallest font size, viewBox width)`` of the SVG at ``path``, both in its user units; ``None``
    when it is not an SVG or has no text."""
    if not path.lower().endswith(".svg") or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        svg = handle.read()
    box = VIEWBOX.search(svg)
    sizes = [float(a or b) for a, b in FONT_SIZE.findall(svg)]
    if box is None or not sizes:
        return None
    return min(sizes), float(box.group(1))


def readable_width(path: str, target_px: float = READABLE_PX) -> int | None:
    """The CSS width in pixels at which the smallest text of the SVG at ``path`` is ``target_px`` tall."""
    measured = smallest_text(path)
    if measured is None:
        return None
    smallest, box_width = measured
    return math.ceil(target_px * box_width / smallest)


class readable_image(nodes.image):
    """An image in a figure: written with a full-size link and its readable width."""


def _mark_figure_images(app, doctree, docname):
    if app.builder.format != "html":
        return
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.figure) and not isinstance(image, readable_image):
            replacement = readable_image(image.rawsource, **image.attributes)
            replacement.extend(image.children)
            image.replace_self(replacement)


def visit_readable_image(self, node):
    """``<div class="readable-figure"><a href="the image"><img style="--readable-width: ..."></a></div>``."""
    uri = node["uri"]
    source = os.path.join(self.builder.srcdir, uri)
    if uri in self.builder.images:
        href = posixpath.join(self.builder.imgpath, urllib.parse.quote(self.builder.images[uri]))
    else:
        href = uri
    self.body.append(f'<div class="readable-figure"><a class="full-size" href="{href}" '
                     f'title="Open the figure at full size">')
    start = len(self.body)
    self.visit_image(node)
    width = readable_width(source)
    for k in range(start, len(self.body)):
        if width and "<img " in self.body[k]:
            self.body[k] = self.body[k].replace("<img ", f'<img style="--readable-width: {width}px" ', 1)
            break


def depart_readable_image(self, node):
    self.depart_image(node)
    self.body.append("</a></div>\n")


def setup(app):
    app.add_node(readable_image, html=(visit_readable_image, depart_readable_image))
    app.connect("doctree-resolved", _mark_figure_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
