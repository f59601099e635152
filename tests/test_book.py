"""The book: a real Jupyter Book build of the repository, then checks of the HTML a student reads.

The build is the README's (``tasks.py book``: the public tree, then ``jupyter-book build``
of it with ``-W``, so any Sphinx warning or cell error fails it), into ``_build/html``,
with the execution cache in ``_build/.jupyter_cache`` so an unchanged rebuild executes nothing.
"""

from __future__ import annotations

import html as html_text
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import after_book, run
from course_tools.authoring import edition, leaks
from course_tools import ROOT, exercises, site_config, tool_env
from course_tools.book import public, student_install

pytestmark = pytest.mark.slow
PAGES = ["intro", "self_study", "chapters/ch01_counts", "chapters/ch02_word2vec", "chapters/ch03_rnn", "chapters/ch04_lstm",
         "chapters/ch05_attention", "chapters/ch06_transformer", "chapters/ch07_gpt", "chapters/ch08_bert",
         "chapters/ch09_after_bert",
         "exercises/ps01_counts/ps01_counts", "exercises/ps02_word2vec/ps02_word2vec", "exercises/ps03_rnn/ps03_rnn",
         "exercises/ps04_lstm/ps04_lstm", "exercises/ps05_attention/ps05_attention",
         "exercises/ps06_transformer/ps06_transformer", "exercises/ps07_gpt/ps07_gpt",
         "exercises/ps08_bert/ps08_bert", "exercises/ps09_fine_tuning/ps09_fine_tuning", "api", "bibliography"]


def _build(folder):
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    return subprocess.run([str(jupyter_book), "build", str(folder), "--builder", "html", "-W", "--keep-going"],
                          cwd=folder, capture_output=True, text=True, env=tool_env())


def _build_book(root):
    """The README's command, as a user runs it (the ``html`` fixture of conftest.py builds the book once)."""
    return run([str(root / "tasks.py"), "book"], cwd=root, check=False)


def _page(html, name):
    return (html / f"{name}.html").read_text(encoding="utf-8")


def test_every_page_of_the_toc_is_built(html):
    for name in PAGES:
        assert (html / f"{name}.html").exists(), name


def test_nothing_from_solutions_is_published(html):
    published = [p for p in html.rglob("*") if "solutions" in p.relative_to(html).parts]
    assert not published
    found = leaks.find_leaks([html])
    assert not found, "\n".join(map(str, found))


def test_no_page_shows_the_build_machines_paths(html, root):
    """A page must read the same whatever folder the course was cloned into (and a long path
    that cannot wrap made the API page wider than a phone's screen)."""
    machine = {str(root), str(Path.home()), str(Path(sys.executable).parent)}
    shown = {page.relative_to(html).as_posix(): sorted(p for p in machine if p in page.read_text(encoding="utf-8"))
             for page in html.rglob("*.html")}
    assert not {page: paths for page, paths in shown.items() if paths}


def test_chapter_renders_math_citations_and_figures(html):
    page = _page(html, "chapters/ch01_counts")
    assert page.count('class="math') >= 5, "equations should render as math"
    # MathJax is served from the book itself, so equations render offline too
    # (a rebuild finds the file already in _static and adds Sphinx's ?v= checksum)
    assert re.search(r'src="\.\./_static/mathjax/tex-chtml\.js(\?v=\w+)?"', page), "MathJax from the book"
    assert (html / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert "cdn.jsdelivr.net/npm/mathjax" not in page
    assert re.search(r'href="[^"]*bibliography\.html#id\d+"', page), "citations should link to the bibliography"
    images = re.findall(r'<img[^>]+src="([^"]*_images/[^"]+\.(?:png|svg))"', page)  # figures, not the theme's logos
    assert len(images) >= 3, "the chapter should show its figures"
    for src in images:
        assert (html / "chapters" / src).resolve().exists(), src
    assert "Traceback" not in page, "a cell of the chapter printed a traceback"


def test_bibliography_lists_the_cited_papers(html):
    page = re.sub(r"<[^>]+>", "", _page(html, "bibliography"))
    for author in ["Levy", "Church", "Deerwester"]:
        assert author in page, author


def _hrefs(page):
    return [html_text.unescape(href) for href in re.findall(r'href="([^"]+)"', page)]


@pytest.mark.parametrize("name", ["chapters/ch01_counts", "exercises/ps01_counts/ps01_counts"])
def test_launch_and_repository_buttons_open_notebooks_of_the_public_repository(html, root, name):
    """Colab and Binder get the .ipynb of the page in the public repository; every link there derives from _config.yml."""
    site = site_config.read_site(root)
    hrefs = _hrefs(_page(html, name))
    assert site.colab_url(f"{name}.ipynb") in hrefs
    assert site.binder_url(f"{name}.ipynb") in hrefs
    assert site.repository_url in hrefs  # the repository button
    owner, _name = site.github
    ours = [h for h in hrefs if h.startswith(f"https://github.com/{owner}/")]
    assert ours and all(h == site.repository_url or h.startswith(site.repository_url + "/") for h in ours), ours
    assert not [h for h in hrefs if "colab.research.google.com" in h and not h.endswith(".ipynb")]
    assert not [h for h in hrefs if "hub/user-redirect" in h], "no JupyterHub button"


def test_exercise_pages_link_the_wheel_the_book_serves(html, root):
    site = site_config.read_site(root)
    for assignment in exercises.assignments(root):
        number = edition.edition_number(assignment, root)
        wheel = edition.wheel_name(number, root)
        page = _page(html, f"exercises/{assignment}/{assignment}")
        assert site.wheel_url(number, root) in _hrefs(page), assignment
        lines = student_install.install_lines(site, number, root)
        assert all(line in html_text.unescape(re.sub(r"<[^>]+>", "", page)) for line in lines), assignment
        served = html / site_config.EDITIONS / wheel
        assert served.read_bytes() == (root / "_build" / "public" / site_config.EDITIONS / wheel).read_bytes()
    # the site serves the tree's wheels and no other (``tasks.py book`` empties _build/html: Sphinx never
    # deletes a file an earlier build left, such as a wheel the calendar no longer publishes)
    assert sorted(p.name for p in (html / site_config.EDITIONS).iterdir()) == \
        sorted(p.name for p in (root / "_build" / "public" / site_config.EDITIONS).iterdir())


def test_next_follows_the_course(html, root):
    """Each problem set comes right after its chapter."""
    order = [p.with_suffix("").as_posix() for p in public.toc_files(root)]
    for here, after in zip(order, order[1:]):
        link = re.search(r'<a[^>]*class="right-next"[^>]*>', _page(html, here))
        assert link and re.search(rf'href="[^"]*{re.escape(Path(after).name)}\.html"', link.group(0)), (here, after)


def test_api_reference_documents_every_public_function(html):
    import importlib
    import pkgutil

    import course_lib

    modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")
               if not m.ispkg]
    page = re.sub(r"<[^>]+>", "", _page(html, "api"))
    assert len(modules) > 20
    for module in modules:
        for name in dir(module):
            obj = getattr(module, name)
            if callable(obj) and not name.startswith("_") and getattr(obj, "__module__", "") == module.__name__:
                assert f"{module.__name__}.{name}" in page, f"{module.__name__}.{name} missing from the API page"
    assert "idf_w = ln((1 + n_docs) / (1 + df_w)) + 1" in page


def test_exercise_page_is_unexecuted_and_downloadable(html, root):
    page = _page(html, "exercises/ps01_counts/ps01_counts")
    assert 'class="cell_output' not in page, "exercise pages must not be executed"
    assert 'class="cell_output' in _page(html, "chapters/ch01_counts"), "chapters are executed"
    assert "raise NotImplementedError()" in re.sub(r"<[^>]+>", "", page).replace("&#39;", "'")
    assert "_sources/exercises/ps01_counts/ps01_counts.ipynb" in page
    download = html / "_sources" / "exercises" / "ps01_counts" / "ps01_counts.ipynb"
    assert download.read_bytes() == (root / "exercises" / "ps01_counts" / "ps01_counts.ipynb").read_bytes()


CHAPTERS = [page.split("/")[1] for page in PAGES if page.startswith("chapters/")]
ROLE = re.compile(r"\{([a-zA-Z][\w:+-]*)\}`([^`]+)`")


def _downloaded_notebook(html, name) -> Path:
    """The file the download button of chapter ``name``'s page links (the ".ipynb" entry of its menu)."""
    link = re.search(r'<a href="([^"]+)"[^>]*\n?[^>]*btn-download-notebook-button', _page(html, f"chapters/{name}"))
    assert link, f"chapters/{name}.html has no notebook download button"
    return (html / "chapters" / html_text.unescape(link.group(1))).resolve()


def _glued_values_in_notebook(source: str, nb) -> dict[int, str]:
    """The values the notebook's Markdown shows for the ``{glue:text}`` roles of the MyST ``source``, by the
    role's place among them (0, 1, ...). Each source line whose roles close on it is matched, as a pattern
    (its text, each role any text), against the lines of the notebook's cell of the same id, in order; a line
    with little text besides its roles, or that the pattern splits in two ways, is left out."""
    from myst_nb.core.read import read_myst_markdown_notebook

    cells = {cell.get("id"): cell.source.splitlines() for cell in nb.cells if cell.cell_type == "markdown"}
    values, count = {}, 0
    for index, cell in enumerate(read_myst_markdown_notebook(source).cells):
        if cell.cell_type != "markdown":
            continue
        rendered, at = cells.get(f"cell-{index:03d}", []), 0
        for line in cell.source.split("\n"):
            roles = list(ROLE.finditer(line))
            glued = [m.group(1).startswith("glue") for m in roles]
            first, count = count, count + sum(glued) + line.count("{glue") - sum("{glue" in m.group(0) for m in roles)
            if not any(glued) or "`" in ROLE.sub("", line) or len(ROLE.sub("", line).strip()) < 12:
                continue  # no glue, a role across lines, or too little text to find the line by
            literal = [re.escape(text) for text in ROLE.split(line)[::3]]
            lazy, greedy = (re.compile(group.join(literal)) for group in ("(.+?)", "(.+)"))
            for number in range(at, len(rendered)):
                found = lazy.fullmatch(rendered[number])
                if found:
                    at = number + 1
                    if found.groups() == greedy.fullmatch(rendered[number]).groups():  # else the line is ambiguous
                        shown = [value for value, is_glue in zip(found.groups(), glued) if is_glue]
                        values.update({first + k: value for k, value in enumerate(shown)})
                    break
    return values


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_download_is_the_public_notebook_as_the_book_reads(html, root, name):
    """The download button gives the public tree's notebook (the launch buttons' file), byte for byte; its
    Markdown holds no MyST role or directive, and shows the glued numbers and figure numbers the page shows."""
    import nbformat

    public = root / "_build" / "public"
    download = _downloaded_notebook(html, name)
    assert download.read_bytes() == (public / "chapters" / f"{name}.ipynb").read_bytes()
    nb = nbformat.reads(download.read_text(encoding="utf-8"), as_version=4)
    markdown = "\n\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    for raw in ("{cite", "{glue", "{numref", "{doc}`", "{ref}`", "```{", ":::{", ":class:", "see the book"):
        assert raw not in markdown, f"{name}.ipynb: {raw!r} left in its Markdown"
    labels = set(re.findall(r'class="label"><span class="fn-bracket">\[</span>([^<]+)<', _page(html, "bibliography")))
    cited = re.findall(r"^- \*\*(.+?)\.\*\* ", nb.cells[-1].source, re.M)
    assert nb.cells[-1].source.startswith("## Works cited") and cited and set(cited) <= labels  # the book's labels

    page = _page(html, f"chapters/{name}")
    quotes = str.maketrans("\u201c\u201d\u2018\u2019", "\"\"''")  # Sphinx's smart quotes
    shown = [html_text.unescape(re.sub(r"<[^>]+>", "", value)).translate(quotes)
             for value in re.findall(r'<span class="pasted-text">(.*?)</span>', page, re.S)]
    source = (public / "chapters" / f"{name}.md").read_text(encoding="utf-8")
    assert len(shown) == source.count("{glue")
    glued = _glued_values_in_notebook(source, nb)
    assert len(glued) >= 0.8 * len(shown), f"only {len(glued)} of {len(shown)} glued values found in the notebook"
    assert {k: glued[k] for k in glued} == {k: shown[k] for k in glued}

    numbers = dict(re.findall(r'href="#([\w-]+)"><span class="std std-numref">([^<]+)</span>', page))
    linked = dict((anchor, text) for text, anchor in
                  re.findall(rf"\[([^\]]+)\]\({re.escape(site_config.read_site(root).page('chapters/' + name))}#([\w-]+)\)",
                             markdown))
    assert set(numbers) <= set(linked), f"cross-references missing from the notebook: {set(numbers) - set(linked)}"
    assert {a: linked[a] for a in numbers} == numbers


@after_book(last=True)
def _rebuilt(html):
    """The README's command run again on an unchanged course, in the background once the other readers of the
    first build are done (the tests that read the book wait for it)."""
    return _build_book(ROOT)


def test_unchanged_rebuild_executes_nothing(html, root):
    result = _rebuilt.result()
    assert result.returncode == 0
    assert "Executing" not in result.stdout + result.stderr


def test_a_cell_error_fails_the_build(tmp_path, root):
    shutil.copy(root / "_config.yml", tmp_path)
    shutil.copy(root / "references.bib", tmp_path)
    shutil.copytree(root / "_ext", tmp_path / "_ext")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n", encoding="utf-8")
    (tmp_path / "intro.md").write_text(textwrap.dedent("""\
        ---
        kernelspec: {name: python3, display_name: Python 3}
        jupytext: {text_representation: {format_name: myst}}
        ---
        # A page with a bug

        ```{code-cell} ipython3
        1 / 0
        ```
        """), encoding="utf-8")
    result = _build(tmp_path)
    assert result.returncode != 0
    assert "ZeroDivisionError" in result.stdout + result.stderr


def _small_book(folder, root, chapter, kernel="python3"):
    """A book of one MyST chapter (``chapters/small.md``, body ``chapter``, run by the kernel named
    ``kernel``) with the course's configuration."""
    shutil.copy(root / "_config.yml", folder)
    shutil.copy(root / "references.bib", folder)
    shutil.copytree(root / "_ext", folder / "_ext")
    (folder / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapters/small\n",
                                     encoding="utf-8")
    (folder / "intro.md").write_text("# A small book\n", encoding="utf-8")
    (folder / "chapters").mkdir()
    front = (f"---\nkernelspec: {{name: {kernel}, display_name: Python 3}}\n"
             "jupytext: {text_representation: {format_name: myst}}\n---\n")
    (folder / "chapters" / "small.md").write_text(front + textwrap.dedent(chapter), encoding="utf-8")


def test_pre_executed_chapters_are_served_from_the_cache_and_still_checked(tmp_path, root):
    """``tasks.py book`` executes the chapters first (course_tools/book/book_execution.py): myst-nb must find
    each in the cache, so the notebook must be read as myst-nb reads it (cell metadata, colon fences, the
    chapter's folder as cwd); and myst-nb still fails the build on output to stderr."""
    from course_tools.book.book_execution import execute_book

    _small_book(tmp_path, root, """\
        # A chapter

        :::{note}
        A colon fence, as the book's configuration enables.
        :::

        ```{code-cell} ipython3
        ---
        tags: [remove-input]
        mystnb:
          image:
            alt: nothing
        ---
        from pathlib import Path
        print("cwd:", Path.cwd().name)
        ```

        ```{code-cell} ipython3
        import sys
        print("careful", file=sys.stderr)
        ```
        """)
    assert execute_book(tmp_path, cwd=tmp_path) == []
    result = _build(tmp_path)
    log = result.stdout + result.stderr
    assert "Using cached notebook" in log and "Executing" not in log, log[-3000:]
    assert result.returncode != 0 and "stderr was found in the cell outputs of cell 3" in log
    page = (tmp_path / "_build" / "html" / "chapters" / "small.html").read_text(encoding="utf-8")
    assert "cwd: chapters" in page, "the chapter ran in its folder"


def test_a_cell_error_in_the_pre_execution_names_the_chapter_and_cell(tmp_path, root):
    from course_tools.book.book_execution import execute_book

    _small_book(tmp_path, root, """\
        # A chapter with a bug

        ```{code-cell} ipython3
        x = 1
        ```

        ```{code-cell} ipython3
        x / 0
        ```
        """)
    failures = execute_book(tmp_path, cwd=tmp_path)
    assert len(failures) == 1
    assert failures[0].startswith("chapters/small.md: cell 3 (line 11) failed"), failures[0]
    assert "ZeroDivisionError" in failures[0]


def test_a_kernel_that_dies_before_it_answers_is_started_again(tmp_path, root, monkeypatch):
    """Two chapters starting at once can pick the same free TCP port (jupyter_client picks ports per
    process); the loser's kernel dies before it answers kernel_info. The pre-execution starts it again:
    here a real kernel whose first start exits at once, as the loser's does, and whose second start works."""
    import json
    import sys

    from course_tools.book.book_execution import execute_book

    kernels = tmp_path / "jupyter" / "kernels" / "flaky"
    kernels.mkdir(parents=True)
    (kernels / "launch.py").write_text(textwrap.dedent(f"""\
        import os, runpy, sys
        marker = {str(tmp_path / "started-once")!r}
        if not os.path.exists(marker):
            open(marker, "w").close()
            sys.exit("Address already in use (as when another kernel took the port)")
        sys.argv = ["ipykernel_launcher"] + sys.argv[1:]
        runpy.run_module("ipykernel_launcher", run_name="__main__")
        """))
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(kernels / "launch.py"), "-f", "{connection_file}"],
        "display_name": "Python 3 (flaky)", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    book = tmp_path / "book"
    book.mkdir()
    _small_book(book, root, """\
        # A chapter

        ```{code-cell} ipython3
        print(6 * 7)
        ```
        """, kernel="flaky")
    assert execute_book(book, cwd=book) == []
    assert (tmp_path / "started-once").exists(), "the first start did fail"
    from jupyter_cache import get_cache
    from course_tools.book.book_execution import book_config, read_chapter

    notebook, _ = read_chapter(book / "chapters" / "small.md", *book_config(book))
    cached = get_cache(str(book / "_build" / ".jupyter_cache")).match_cache_notebook(notebook)
    assert "42" in json.dumps(get_cache(str(book / "_build" / ".jupyter_cache")).get_cache_bundle(cached.pk).nb.cells[-1].outputs)


def test_the_longest_chapters_start_first(tmp_path):
    """With two workers, a long chapter started last keeps one worker busy alone: the pre-execution starts
    the chapters whose last run took longest, and before them the chapters it has never run (later ones first)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    import nbformat

    from course_tools.book.book_execution import longest_first

    cache = get_cache(str(tmp_path / "cache"))
    paths = {name: tmp_path / f"{name}.md" for name in ("a", "b", "c", "d", "e")}
    for name, seconds in (("a", 5.0), ("b", 50.0), ("c", 20.0)):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x = '{name}'")])
        cache.cache_notebook_bundle(CacheBundleIn(nb, str(paths[name]), data={"execution_seconds": seconds}),
                                    check_validity=False, overwrite=True)
    pending = [(name, paths[name]) for name in "abcde"]  # the table of contents' order
    assert [name for name, _ in longest_first(pending, cache)] == ["e", "d", "b", "c", "a"]
