"""Each chapter as a Jupyter notebook, for Colab and Binder.

Colab opens only ``.ipynb`` files, so the public tree (:mod:`course_tools.public`)
holds ``chapters/<name>.ipynb`` next to each MyST chapter ``chapters/<name>.md``:
the chapter's cells with empty outputs (the book shows them), after a note that
links the book's page and an install cell (:mod:`course_tools.install_cells`) for
the newest edition the build publishes (the release calendar's newest revealed one,
:mod:`course_tools.course_calendar`). The note names the exercise functions the chapter
calls whose answers that edition does not reveal.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from . import ROOT
from .edition import revealed_keys
from .exercises import find_exercises, library_dir, owners
from .install_cells import install_code, new_install_cells, revealed_text, set_number
from .site_config import read_site


def chapter_notebook(path: Path, number: int, root: Path = ROOT):
    """The MyST chapter at ``path`` as a notebook with empty outputs, for Colab and Binder.

    A note and an install cell (edition ``number``) come first; the chapter's cells follow unchanged.
    """
    from myst_nb.core.read import read_myst_markdown_notebook

    site = read_site(root)
    text = path.read_text(encoding="utf-8")
    nb = read_myst_markdown_notebook(text, path=path)
    for index, cell in enumerate(nb.cells):
        cell.id = f"cell-{index:03d}"  # the same notebook at every build
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
    docname = path.relative_to(root).with_suffix("").as_posix()
    found = find_exercises(library_dir(root))
    revealed, owner = revealed_keys(number, root), owners(root)
    unrevealed = sorted({key.rsplit(".", 1)[1] for key in found if key not in revealed
                         and re.search(rf"\b{re.escape(key.rsplit('.', 1)[1])}\(", text)})
    note = [
        f"*The code of the chapter [{title}]({site.page(docname)}) of the book "
        f"[From one-hot to BERT]({site.book_url}), as a notebook. Read the chapter in the book: "
        "cross-references, citations and the numbers in the text appear only there.*",
        "",
        f"Run the first code cell: on Colab or Binder it installs course_lib (student edition {number}, "
        f"{revealed_text(number, root)}).",
    ]
    if unrevealed:
        sets = sorted({set_number(owner[key]) for key in found if key.rsplit(".", 1)[1] in unrevealed and key in owner})
        names = [f"`{n}`" for n in unrevealed]
        names = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        where = f"problem set {sets[0]}" if len(sets) == 1 else f"problem sets {', '.join(sets)}"
        note += ["", f"This chapter calls {names}, which you write in {where}. Their answers are not "
                     "published, so the cells that call them stop with `NotImplementedError`; "
                     "the book shows what they print."]
    cells = new_install_cells("\n".join(note), install_code(number, root, chapter=True), assignment=False)
    nb.cells = cells + nb.cells
    nb.metadata = {"kernelspec": nb.metadata.get("kernelspec", {"display_name": "Python 3", "language": "python",
                                                                   "name": "python3"}),
                   "language_info": {"name": "python"}}
    nbformat.validate(nb)
    return nb


def is_myst_notebook(path: Path) -> bool:
    """Whether the Markdown file at ``path`` is a MyST notebook (a kernel in its front matter)."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return False
    front = text.split("---", 2)[1]
    return "kernelspec" in front
