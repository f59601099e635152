"""Serve MathJax from the book itself, so equations render without a network.

Sphinx links MathJax from a CDN by default; a reader offline (or behind a firewall)
then sees raw TeX. This extension copies the MathJax 2.7 that the PyPI package
``jupyter-server-mathjax`` ships into ``_static/mathjax`` of the built HTML and
points ``mathjax_path`` at it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MATHJAX_PATH = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"


def _mathjax_dir() -> Path:
    import jupyter_server_mathjax

    return Path(jupyter_server_mathjax.__file__).parent / "static"


def _copy(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        if not (target / "MathJax.js").exists():
            shutil.copytree(_mathjax_dir(), target, dirs_exist_ok=True)


def setup(app):
    app.config.mathjax_path = MATHJAX_PATH
    # MyST marks each page tex2jax_ignore and its math spans "math" (MathJax 3 style);
    # tell MathJax 2 to typeset those spans all the same.
    # The package ships the STIX-Web fonts only (not MathJax's TeX fonts): use them.
    app.config.mathjax2_config = {
        "tex2jax": {"processClass": "tex2jax_process|mathjax_process|math|output_area"},
        "HTML-CSS": {"availableFonts": [], "webFont": "STIX-Web", "imageFont": None},
    }
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
