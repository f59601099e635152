"""Serve MathJax 3 from the book itself, and keep every page's console clean.

Sphinx links MathJax from a CDN by default; a reader offline (or behind a firewall)
then sees raw TeX. This extension copies the MathJax 3.2 that the PyPI package
``sphinx-mathjax-offline`` ships (Apache-2.0; its ``static/mathjax`` folder, CommonHTML
output with its own web fonts) into ``_static/mathjax`` of the built HTML and points
``mathjax_path`` at it. MathJax 3 is what the book's theme is styled for: a display
equation wider than the column scrolls sideways inside its block instead of being cut off.

It also removes scripts that other extensions add twice to a page (see
:func:`_drop_repeated_scripts`).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

MATHJAX_PATH = "mathjax/tex-chtml.js"


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")  # the package's folder name has hyphens
    if spec is None or spec.origin is None:
        raise RuntimeError("sphinx-mathjax-offline is not installed; run `python3 tasks.py setup`")
    return Path(spec.origin).parent / "static" / "mathjax"


def _copy(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        if not (target / "tex-chtml.js").exists():
            shutil.copytree(_mathjax_dir(), target, dirs_exist_ok=True)


def _drop_repeated_scripts(app, pagename, templatename, context, doctree):
    """Keep one copy of each script: sphinx-thebe and sphinx-togglebutton add their inline
    configuration twice, and the second ``const THEBE_JS_URL`` is a SyntaxError in every page's console."""
    scripts, seen = context.get("script_files"), set()
    if not scripts:
        return
    unique = []
    for script in scripts:
        # an inline script is added once with filename None and once with "": the same script
        key = (getattr(script, "filename", script) or "", tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.config.mathjax_path = MATHJAX_PATH
    app.connect("build-finished", _copy)
    app.connect("html-page-context", _drop_repeated_scripts, priority=100)  # before handlers that end the event
    return {"parallel_read_safe": True, "parallel_write_safe": True}
