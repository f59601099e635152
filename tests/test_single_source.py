"""One source of truth: course_lib -> solutions/ -> exercises/ and the student edition.

Each test fails on one kind of drift or leak, and says which command mends it.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from course_tools import edition, exercises, leaks, release, sync

pytestmark = pytest.mark.slow


def test_answer_cells_and_hidden_cases_match_course_lib():
    changes = sync.sync(check=True)
    assert not changes, "run `python3 tasks.py sync`:\n" + "\n".join(changes)


def test_every_exercise_belongs_to_exactly_one_assignment():
    found = exercises.find_exercises()
    owners = exercises.owners()
    assert set(found) == set(owners), "exercise functions without an answer cell, or cells without a function"
    assert owners["counts.tfidf"] == "ps01_counts"


def test_exercises_folder_is_what_nbgrader_generates():
    problems = release.drift()
    assert not problems, "run `python3 tasks.py release`:\n" + "\n".join(problems)


def test_release_has_no_solution_text_or_hidden_tests(root):
    found = leaks.find_leaks([root / "exercises"])
    assert not found, "\n".join(map(str, found))
    nb = nbformat.read(root / "exercises" / "ps01_counts" / "ps01_counts.ipynb", as_version=4)
    stubs = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(stubs) == 4 and all("raise NotImplementedError()" in c.source for c in stubs)


@pytest.mark.parametrize("suffix", [".html", ".ipynb"])
def test_leak_scanner_sees_through_markup(tmp_path, suffix):
    line = exercises.find_exercises()["counts.ppmi"].solution_lines()[-3]
    if suffix == ".html":  # as Pygments would highlight it
        words = line.split(" ")
        page = "<pre>" + " ".join(f'<span class="n">{w.replace("<", "&lt;")}</span>' for w in words) + "</pre>"
    else:
        page = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(line)]))
    (tmp_path / f"page{suffix}").write_text(page, encoding="utf-8")
    (tmp_path / "clean.html").write_text("<p>no answers here</p>", encoding="utf-8")
    found = leaks.find_leaks([tmp_path])
    assert [f.path.name for f in found] == [f"page{suffix}"]
    assert "counts.ppmi" in found[0].what


def _call_in_edition(folder, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(folder), "PATH": ""}, cwd=folder)


def test_student_edition_stubs_every_exercise(tmp_path):
    folder = edition.write_edition(tmp_path / "ed0", 0)
    assert not leaks.find_leaks([folder])
    for key in exercises.find_exercises():
        module, name = key.split(".")
        probe = (f"import course_lib, course_lib.{module} as m\n"
                 f"assert course_lib.__file__.startswith({str(folder)!r}), course_lib.__file__\n"
                 f"import inspect; src = inspect.getsource(m.{name})\n"
                 f"assert 'raise NotImplementedError()' in src and 'BEGIN SOLUTION' not in src\n")
        result = _call_in_edition(folder, probe)
        assert result.returncode == 0, result.stderr
    result = _call_in_edition(folder, "from course_lib.counts import one_hot; one_hot([1], 3)")
    assert "NotImplementedError" in result.stderr
    assert (folder / "pyproject.toml").read_text().count("+student0") == 1


def test_edition_one_reveals_ps01(tmp_path):
    folder = edition.write_edition(tmp_path / "ed1", 1)
    result = _call_in_edition(folder, "from course_lib.counts import one_hot; print(one_hot([1], 3).tolist())")
    assert result.stdout.strip() == "[[0.0, 1.0, 0.0]]", result.stderr
    text = (folder / "course_lib" / "counts.py").read_text()
    assert "BEGIN SOLUTION" not in text and "raise NotImplementedError()" not in text


def test_edition_for_an_assignment_reveals_only_earlier_ones():
    assert edition.edition_number("ps01_counts") == 0
    with pytest.raises(ValueError, match="unknown assignment"):
        edition.edition_number("ps99_nothing")


def test_student_edition_installs_with_pip(tmp_path):
    folder = edition.write_edition(tmp_path / "ed0", 0)
    target = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                             "--target", str(target), str(folder)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    installed = _call_in_edition(target, "import course_lib.counts as c, importlib.metadata as m;"
                                          "print(m.version('course-lib'), c.__file__)")
    version, path = installed.stdout.split()
    assert version == "0.1.0+student0" and path.startswith(str(target))
