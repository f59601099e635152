"""Each chapter as a Jupyter notebook, for Colab, Binder and the book's download button.

Colab opens only ``.ipynb`` files, so the public tree (:mod:`course_tools.book.public`)
holds ``chapters/<name>.ipynb`` next to each MyST chapter ``chapters/<name>.md``:
the chapter's cells with empty outputs, after a note that links the book's page and an
install cell (:mod:`course_tools.book.install_cells`) for the newest edition the build
publishes (the release calendar's newest revealed one, :mod:`course_tools.book.course_calendar`).
The note names the exercise functions the chapter calls whose answers that edition does
not reveal. The book's download button gives this same file (``_ext/chapter_download.py``).

The Markdown reads as the book does, outside it (:mod:`course_tools.book.plain_markdown`):
citations as "Devlin et al. (2019)", with the cited works listed in a last cell
(:mod:`course_tools.book.citations`); cross-references as links to the book's pages, figures
numbered as the book numbers them ("Fig. 8.3", a caption cell after the cell that draws
each); glued numbers as the book's executed chapter glued them. Those values exist only
after the chapter ran: they are read from the book's execution cache (``execute.cache`` of
``_config.yml``, relative to ``root``), where ``tasks.py book`` puts them before it writes
these notebooks again (``python -m course_tools.book.chapter_notebooks TREE``); a chapter
the cache does not hold gets a link "(see the book)" instead of each number.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.authoring.edition import revealed_keys, wheel_name
from course_tools.exercises import assignments, find_exercises, library_dir, owners, set_number
from course_tools.site_config import EDITIONS, PublicTreeError, read_config, read_site
from .citations import read_bibliography
from .install_cells import install_code, new_install_cells, revealed_text
from .plain_markdown import Book, render

CHAPTER = re.compile(r"ch(\d+)_")  # the chapter's number, from its file name


def executed_chapter(nb, root: Path = ROOT):
    """The chapter notebook ``nb`` (as myst-nb reads its MyST source) as the book executed it, from the
    execution cache (``execute.cache`` of ``_config.yml``, relative to ``root``); ``None`` when the book does
    not cache or the cache does not hold this version of its code (the cache matches notebooks by their code)."""
    from jupyter_cache import get_cache

    execute = read_config(root).get("execute") or {}
    cache_path = Path(root) / str(execute.get("cache") or "")
    if execute.get("execute_notebooks") != "cache" or not execute.get("cache") or not cache_path.is_dir():
        return None
    cache = get_cache(str(cache_path))
    try:
        record = cache.match_cache_notebook(nb)
    except KeyError:
        return None
    return cache.get_cache_bundle(record.pk).nb


def glued_values(executed) -> dict[str, str]:
    """The ``text/plain`` form of every value a notebook executed by myst-nb glued, by name."""
    from myst_nb.ext.glue import extract_glue_data_cell

    values = {}
    for cell in executed.cells:
        if cell.cell_type == "code":
            for key, output in extract_glue_data_cell(copy.deepcopy(cell)):
                if "text/plain" in output.get("data", {}):
                    values[key] = output["data"]["text/plain"]
    return values


def page_title(docname: str, root: Path = ROOT) -> str:
    """The title of the book's page ``docname`` (its first ``# `` heading), or ``docname``."""
    for suffix in (".md", ".ipynb"):
        path = Path(root) / f"{docname}{suffix}"
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "markdown")
        return next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), docname)
    return docname


def figures(nb, docname: str) -> dict[int, tuple[str, str, str]]:
    """The figures the cells of ``nb`` draw, by cell index: ``(name, "Fig. 8.3", caption)``, numbered
    per chapter in reading order, as ``_ext/chapter_figure_numbers.py`` numbers them in the book."""
    chapter = CHAPTER.match(Path(docname).name)
    found, count = {}, 0
    for index, cell in enumerate(nb.cells):
        figure = (cell.metadata.get("mystnb") or {}).get("figure")
        if cell.cell_type == "code" and isinstance(figure, dict):  # a figure, numbered even without a caption
            count += 1
            number = f"{int(chapter.group(1))}.{count}" if chapter else str(count)
            found[index] = (str(figure.get("name") or ""), f"Fig. {number}", str(figure.get("caption") or "").strip())
    return found


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _note(title: str, docname: str, number: int, unrevealed: list[str], sets: list[str], root: Path) -> str:
    site = read_site(root)
    note = [
        f"*The chapter [{title}]({site.page(docname)}) of the book [From one-hot to BERT]({site.book_url}), "
        "as a notebook: its text, with the numbers of the book's own run, and its code. Run the cells to "
        "draw the figures; the book shows every output.*",
        "",
        f"Run the first code cell: on Colab or Binder it installs course_lib (student edition {number}, "
        f"{revealed_text(number, root)}).",
    ]
    if unrevealed:
        names = _join([f"`{n}`" for n in unrevealed])
        where = f"problem set {sets[0]}" if len(sets) == 1 else f"problem sets {_join(sets)}"
        note += ["", f"This chapter calls {names}, which you write in {where}. This edition does not reveal "
                     "their answers yet: the first cell that needs one stops with a message that names the "
                     "function, its problem set and what to do, and every cell after it is skipped with a "
                     "one-line note. The book shows what they print."]
    return "\n".join(note)


def _references(book: Book) -> str:
    items = [f"- **{book.references[key].label}.** {book.references[key].markdown}" for key in
             sorted(book.cited, key=lambda k: book.references[k].label.casefold())]
    return "\n".join(["## Works cited", "", *items, "", f"All the works the book cites: "
                      f"[its bibliography]({book.page_url('bibliography')})."])


def chapter_notebook(path: Path, number: int, root: Path = ROOT, docname: str | None = None):
    """The MyST chapter at ``path`` as a notebook with empty outputs and plain Markdown, for Colab and Binder.

    A note and an install cell (edition ``number``) come first; the chapter's cells follow, their
    Markdown rendered as the book shows it, a caption cell after each cell that draws a figure,
    and the works cited at the end. Glued numbers come from the book's executed chapter
    (:func:`executed_chapter`), if the execution cache holds it. ``docname`` is the chapter's page
    (default: ``path`` relative to ``root``, without its suffix).
    """
    from myst_nb.core.read import read_myst_markdown_notebook

    root, path = Path(root), Path(path)
    site = read_site(root)
    text = path.read_text(encoding="utf-8")
    nb = read_myst_markdown_notebook(text, path=path)
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
    docname = docname or path.resolve().relative_to(root.resolve()).with_suffix("").as_posix()
    executed = executed_chapter(nb, root)
    drawn = figures(nb, docname)
    book = Book(docname, site.page, read_bibliography(root), glued_values(executed) if executed else None,
                {name.lower(): (docname, numbered, caption) for name, numbered, caption in drawn.values() if name},
                lambda name: page_title(name, root))
    cells = []
    for index, cell in enumerate(nb.cells):
        cell.id = f"cell-{index:03d}"  # the same notebook at every build
        if cell.cell_type == "markdown":
            cell.source = render(cell.source, book)
        cells.append(cell)
        if drawn.get(index, ("", "", ""))[2]:
            _, numbered, caption = drawn[index]
            cells.append(nbformat.v4.new_markdown_cell(f"**{numbered}.** {render(caption, book)}",
                                                      id=f"cell-{index:03d}-caption"))
    if book.cited:
        cells.append(nbformat.v4.new_markdown_cell(_references(book), id="works-cited"))

    found = find_exercises(library_dir(root))
    revealed, owner = revealed_keys(number, root), owners(root)
    unrevealed = sorted({key.rsplit(".", 1)[1] for key in found if key not in revealed
                         and re.search(rf"\b{re.escape(key.rsplit('.', 1)[1])}\(", text)})
    sets = sorted({set_number(owner[key]) for key in found if key.rsplit(".", 1)[1] in unrevealed and key in owner})
    note = _note(title, docname, number, unrevealed, sets, root)
    nb.cells = new_install_cells(note, install_code(number, root, chapter=True), assignment=False) + cells
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


def refresh(tree: Path, root: Path = ROOT) -> list[Path]:
    """Write again the chapter notebooks of the public tree ``tree``, for the newest edition it publishes,
    now that the execution cache holds the chapters (``tasks.py book`` runs this after executing them);
    return the notebooks written. Raises :class:`~course_tools.site_config.PublicTreeError` on a leak."""
    from course_tools.authoring import leaks

    tree, root = Path(tree).resolve(), Path(root).resolve()
    editions = [n for n in range(len(assignments(root)) + 1) if (tree / EDITIONS / wheel_name(n, root)).is_file()]
    if not editions:
        raise PublicTreeError(f"{tree / EDITIONS} holds no edition: write the tree with `tasks.py public` first")
    written = []
    for target in sorted(tree.rglob("*.ipynb")):
        source, page = target.with_suffix(".md"), target.relative_to(tree).with_suffix("").as_posix()
        if ".git" in target.relative_to(tree).parts or not source.is_file() or not is_myst_notebook(source):
            continue
        nbformat.write(chapter_notebook(source, max(editions), root, page), target)  # the tree's source: the book's
        written.append(target)
    problems = leaks.find_leaks(written, root)
    if problems:
        for path in written:
            path.unlink()
        raise PublicTreeError("the chapter notebooks are not safe to publish:\n" + "\n".join(map(str, problems)))
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m course_tools.book.chapter_notebooks TREE``: :func:`refresh` the public tree ``TREE``."""
    parser = argparse.ArgumentParser(prog="python -m course_tools.book.chapter_notebooks",
                                     description="Write again the chapter notebooks of a public tree, with the "
                                                 "numbers of the book's executed chapters (the execution cache).")
    parser.add_argument("tree", type=Path, help="the public tree (tasks.py public --out TREE)")
    args = parser.parse_args(argv)
    written = refresh(args.tree)
    print(f"chapter notebooks: wrote {len(written)} in {args.tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
