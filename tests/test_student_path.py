"""The student's path, taken as a student takes it: only what the built pages say, nothing of this repository.

The book build (the ``html`` fixture, ``tasks.py book``) makes the students' environment from the install
lines of the pages, fetched over HTTP from a local server that serves the public tree as the book's URL
serves the site (``course_tools/book/student_env.py``), and executes every chapter in it: a chapter cell that
errors, or a package the lines miss, fails the build. Here:

- the lines the built pages show (every problem-set page, the self-study page, the public README) are
  the lines that environment was made from, the same on every page;
- every problem set of the public tree, with the instructor's answers filled in, runs top to bottom in
  that environment with the edition its page names, fetched by its page's own line from the built site
  served over HTTP (``pip install --target``, one folder per problem set, so two run at once): the
  visible tests pass, the experiments run, and the numbers they print lie where the page says a
  correct answer lands;
- a chapter run with an edition that leaves one of its exercises empty stops at the first cell that
  needs it with one message naming the function, the problem set and what to do, and skips the rest
  instead of failing.
"""

from __future__ import annotations

import html as html_lib
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from conftest import after_book
from course_tools import ROOT
from course_tools.book import browser, student_env
from course_tools.exercises import assignments
from course_tools.site_config import read_site

pytestmark = pytest.mark.slow
CELL_TIMEOUT = 900


def _install_lines(page: Path) -> list[str]:
    """The ``pip install`` lines of the code blocks of a built page, as a student copies them."""
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", text, flags=re.S)
    lines = []
    for block in blocks:
        plain = html_lib.unescape(re.sub(r"<[^>]+>", "", block))
        lines += [line.strip() for line in plain.splitlines() if line.strip().startswith("pip install")]
    return lines


def _env_line(lines: list[str]) -> str:
    found = [line for line in lines if line.startswith("pip install -r")]
    assert len(found) == 1, f"one line installs the students' requirements: {lines}"
    return found[0]


def _edition_line(lines: list[str]) -> str:
    found = [line for line in lines if "--no-deps" in line and "course_lib-" in line]
    assert len(found) == 1, f"one line installs the edition: {lines}"
    return found[0]


@pytest.fixture(scope="module")
def built(html, root):
    """The built site, served over HTTP; the students' environment the build made."""
    python = student_env.venv_python()
    assert python.exists(), "the self-study build makes the students' environment and executes the chapters in it"
    with browser.serve(html) as served:
        yield html, served, python


def test_every_page_shows_the_lines_the_chapters_ran_with(built, root):
    """The problem-set pages, the self-study page and the public README show one line for the students'
    requirements, the same everywhere, and an edition line; the environment the build executed the
    chapters in was made from exactly the self-study page's lines for the newest edition."""
    html, _served, _python = built
    pages = {name: html / "exercises" / name / f"{name}.html" for name in assignments(root)}
    pages["self_study"] = html / "self_study.html"
    shown = {name: _install_lines(page) for name, page in pages.items()}
    readme = (root / "_build" / "public" / "README.md").read_text(encoding="utf-8")
    shown["public README"] = [line.strip() for line in readme.splitlines() if line.strip().startswith("pip install")]
    env_lines = {name: _env_line(lines) for name, lines in shown.items()}
    assert len(set(env_lines.values())) == 1, f"the requirements line differs between pages: {env_lines}"
    editions = student_env.published_editions(root / "_build" / "public")
    used = student_env.page_lines(editions[-1], root)
    assert env_lines["self_study"] == used[0]
    for number, name in enumerate(assignments(root)):
        assert f"+student{number}-" in _edition_line(shown[name]), f"{name} runs on edition {number}"


def _with_answers(exercise: Path, solution: Path):
    """The released notebook with every answer cell holding the instructor's answer (by nbgrader grade_id)."""
    nb = nbformat.read(exercise, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nbformat.read(solution, as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    filled = 0
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source = answers[grade_id]
            filled += 1
    assert filled, f"{exercise.name} has answer cells"
    return nb


def _kernel_env(target: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(student_env.venv_python().parent), env.get("PATH", "")])
    if target is not None:
        env["PYTHONPATH"] = str(target)
    return env


def _install_edition(line: str, python: Path, book_url: str, served: str, target: Path) -> None:
    """The page's edition line, its URL on the local server, into folder ``target`` (shadows the environment's)."""
    command = student_env.pip_command(python, student_env.local_lines([line], book_url, served)[0])
    subprocess.run([*command, "--target", str(target)], check=True, capture_output=True, text=True)


def _execute(nb, cwd: Path, target: Path | None, allow_errors: bool = False):
    """Run ``nb`` top to bottom in the students' kernel (the kernel spec the build wrote for the students'
    environment, found without changing this process's JUPYTER_PATH), with ``target`` first on its path."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    specs = KernelSpecManager(kernel_dirs=[str(student_env.kernel_dir() / "kernels")], ensure_native_kernel=False)
    kernel = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=specs)
    client = NotebookClient(nb, km=kernel, timeout=CELL_TIMEOUT, allow_errors=allow_errors,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(env=_kernel_env(target), cleanup_kc=True)  # a kernel manager given: shut its kernel down too
    return nb


def _errors(nb) -> list[str]:
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}"[:400] for i, c in enumerate(nb.cells)
            if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


@after_book
def _problem_sets_in_the_students_environment(html: Path) -> dict:
    """Every problem set of the public tree, answers filled in, executed in the students' environment
    with its page's edition: ``name -> executed notebook``. Two at a time, in the background as soon as the
    book is built (it shares nothing with the tests that run meanwhile: its own server, kernels and folder)."""
    python = student_env.venv_python()
    assert python.exists(), "the self-study build makes the students' environment and executes the chapters in it"
    book_url = read_site(ROOT).book_url
    public = ROOT / "_build" / "public"
    scratch = ROOT / "_build" / "student_path"
    shutil.rmtree(scratch, ignore_errors=True)

    def one(name: str, served: str):
        line = _edition_line(_install_lines(html / "exercises" / name / f"{name}.html"))
        target, work = scratch / f"{name}_edition", scratch / name
        _install_edition(line, python, book_url, served, target)
        shutil.copytree(public / "exercises" / name, work)
        nb = _with_answers(work / f"{name}.ipynb", ROOT / "solutions" / name / f"{name}.ipynb")
        return name, _execute(nb, work, target, allow_errors=True)

    with browser.serve(html) as served, ThreadPoolExecutor(2) as pool:
        return dict(pool.map(lambda name: one(name, served), assignments(ROOT)))


@pytest.fixture(scope="module")
def problem_sets(built):
    return _problem_sets_in_the_students_environment.result()


@pytest.mark.parametrize("name", assignments())
def test_each_problem_set_runs_top_to_bottom_from_its_page(problem_sets, name):
    nb = problem_sets[name]
    assert not _errors(nb), f"{name}, answers filled in, run as a student runs it:\n" + "\n".join(_errors(nb))
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code if c.source.strip()), "every code cell ran"


@pytest.mark.parametrize("name", assignments())
def test_each_problem_set_lands_where_its_page_says(problem_sets, name):
    from course_tools.authoring import stated_results

    nb = problem_sets[name]
    if name in stated_results.EXPERIMENTS:
        assert stated_results.results_cells(nb, name), f"{name}'s page states its measured results"
    problems = stated_results.stated_result_problems(name, nb)
    assert not problems, "\n".join(problems)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader")
                      for o in c.get("outputs", []) if o.output_type == "stream")
    if name == "ps07_gpt":
        assert "beam search" in printed and "sample 3" in printed, "the generation cell printed its continuations"
    if name == "ps08_bert":
        agree = re.search(r"agrees with transformers' on (\d+) of (\d+) review sentences", printed)
        assert agree and agree.group(1) == agree.group(2), "the tokenizer of the solution's wordpiece_word agrees on every sentence"


def test_a_chapter_with_an_unrevealed_exercise_stops_with_one_clear_message(built, root, tmp_path):
    """Chapter 8's notebook with edition 7, in which the ps08 functions are empty: the cell that first calls
    one ends with a message naming it, problem set 8 and what to do; every later cell is skipped with a note,
    none fails (before: 37 of 46 code cells failed, most with a NameError)."""
    html, served, python = built
    book_url = read_site(root).book_url
    line = _edition_line(_install_lines(html / "exercises" / "ps08_bert" / "ps08_bert.html"))  # edition 7
    target = tmp_path / "edition7"
    _install_edition(line, python, book_url, served, target)
    nb = nbformat.read(root / "_build" / "public" / "chapters" / "ch08_bert.ipynb", as_version=4)
    _execute(nb, root / "_build" / "public" / "chapters", target, allow_errors=True)
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = [i for i, c in enumerate(code) if any(o.output_type == "error" for o in c.outputs)]
    assert len(failed) == 1, f"exactly one cell stops the chapter: {_errors(nb)}"
    error = next(o for o in code[failed[0]].outputs if o.output_type == "error")
    message = "\n".join(error.traceback)
    assert "wordpiece_word" in message and "problem set 8" in message and "edition 8" in message, message
    later = code[failed[0] + 1:]
    assert later and all("skipped" in "".join(o.get("text", "") for o in c.outputs) for c in later if c.source.strip())
