"""One source of truth: course_lib -> solutions/ -> exercises/ and the student edition.

Each test fails on one kind of drift or leak, and says which command mends it.
"""

from __future__ import annotations

import copy
import importlib
import shutil
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from course_tools.authoring import answer_keys, edition, leaks, release, sync
from course_tools import exercises, tool_env

pytestmark = pytest.mark.slow


def test_answer_cells_and_hidden_cases_match_course_lib():
    changes = sync.sync(check=True)
    assert not changes, "run `python3 tasks.py sync`:\n" + "\n".join(changes)


def _perturbed(value, rng):
    """``value`` with every float moved by a few units in the last place, as another CPU's BLAS would."""
    if isinstance(value, dict):
        return {k: _perturbed(v, rng) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_perturbed(v, rng) for v in value)
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        moved = np.asarray(value * (1 + rng.uniform(-4, 4, size=value.shape) * np.finfo(value.dtype).eps)).astype(value.dtype)
        return moved.view(type(value))
    if hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value):
        clone = copy.copy(value)
        clone.__dict__.update(_perturbed(vars(value), rng))
        return clone
    return value


@pytest.mark.parametrize("assignment", ["ps02_word2vec", "ps04_lstm", "ps05_attention", "ps06_transformer",
                                        "ps07_gpt", "ps08_bert", "ps09_fine_tuning"])
def test_answer_keys_recomputed_on_another_cpu_are_not_drift(root, assignment):
    """Keys whose last bits differ (as BLAS and oneDNN give on another machine) are the same keys:
    inputs, expected outcomes and gradients, visible (recorded) and hidden."""
    fresh = answer_keys.build(assignment, root)
    other_cpu = _perturbed(fresh, np.random.default_rng(0))
    assert sync.key_difference(fresh, other_cpu) is None
    assert sync.key_difference(answer_keys.load(assignment, root), other_cpu) is None


@pytest.mark.parametrize("kernel", ["SandyBridge", "Prescott"])
def test_sync_check_passes_with_other_blas_kernels(root, kernel):
    """Another CPU, simulated: OpenBLAS forced to older kernels, which round matrix products differently.

    The recomputed expected values then differ in their last bits from the stored keys; what defines
    the cases does not change.
    """
    code = "from course_tools.authoring import sync; import sys; changes = sync.sync(check=True); print(changes); sys.exit(bool(changes))"
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                            env=tool_env(OPENBLAS_CORETYPE=kernel, ONEDNN_MAX_CPU_ISA="SSE41"))
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def test_a_changed_reference_answer_is_drift(root, monkeypatch):
    """A real change to a reference answer (here 1e-6 relative) must still be caught by `sync --check`."""
    key = "vectors.counts.cosine_similarity"
    module = importlib.import_module("course_lib." + key.rsplit(".", 1)[0])
    original = getattr(module, key.rsplit(".", 1)[1])
    monkeypatch.setattr(module, key.rsplit(".", 1)[1], lambda *a, **k: original(*a, **k) * (1 + 1e-6))
    difference = sync.key_difference(answer_keys.load("ps01_counts", root), answer_keys.build("ps01_counts", root))
    assert difference and "values differ" in difference and "cosine_similarity" in difference, difference


def test_a_changed_generator_or_case_is_drift(root):
    key = answer_keys.load("ps01_counts", root)
    fresh = answer_keys.build("ps01_counts", root)
    assert sync.key_difference(key, fresh) is None
    fewer = copy.deepcopy(fresh)
    fewer["hidden_one_hot"]["cases"].pop()
    assert "length" in sync.key_difference(key, fewer)
    shifted = copy.deepcopy(fresh)
    case = shifted["hidden_one_hot"]["cases"][0]
    case["args"] = (case["args"][0] + 1, *case["args"][1:])
    assert "values differ" in sync.key_difference(key, shifted)
    renamed = copy.deepcopy(fresh)
    renamed["test_tfidf"]["hint"] = "another hint"
    assert sync.key_difference(key, renamed)


def test_no_notebook_holds_expected_values(root):
    """The hidden test cells of solutions/ name their cases; the values live only in answer_keys/."""
    for assignment in exercises.assignments(root):
        for path in exercises.solution_notebooks(assignment, root):
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.metadata.get("course_lib_cases"):
                    assert len(cell.source) < 400 and "check_hidden(" in cell.source, cell.source


def test_every_exercise_belongs_to_exactly_one_assignment():
    found = exercises.find_exercises()
    owners = exercises.owners()
    assert set(found) == set(owners), "exercise functions without an answer cell, or cells without a function"
    assert owners["vectors.counts.tfidf"] == "ps01_counts"


def test_exercises_folder_is_what_nbgrader_generates():
    problems = release.drift()
    assert not problems, "run `python3 tasks.py release`:\n" + "\n".join(problems)


def test_release_has_no_solution_text_or_hidden_tests(root):
    found = leaks.find_leaks([root / "exercises"])
    assert not found, "\n".join(map(str, found))
    nb = nbformat.read(root / "exercises" / "ps01_counts" / "ps01_counts.ipynb", as_version=4)
    stubs = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    assert len(stubs) == 4 and all("raise NotImplementedError()" in c.source for c in stubs)
    written = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"]
    assert [c.source for c in written] == ["YOUR ANSWER HERE"], "the model answer of the written question stays out"


@pytest.mark.parametrize("suffix", [".html", ".ipynb"])
def test_leak_scanner_sees_through_markup(tmp_path, suffix):
    line = exercises.find_exercises()["vectors.counts.ppmi"].solution_lines()[-3]
    if suffix == ".html":  # as Pygments would highlight it
        words = line.split(" ")
        page = "<pre>" + " ".join(f'<span class="n">{w.replace("<", "&lt;")}</span>' for w in words) + "</pre>"
    else:
        page = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(line)]))
    (tmp_path / f"page{suffix}").write_text(page, encoding="utf-8")
    (tmp_path / "clean.html").write_text("<p>no answers here</p>", encoding="utf-8")
    found = leaks.find_leaks([tmp_path])
    assert [f.path.name for f in found] == [f"page{suffix}"]
    assert "vectors.counts.ppmi" in found[0].what


def test_the_leak_search_finds_exactly_what_a_substring_search_finds():
    """The sampled search of leaks.find_leaks against ``sig in text``, on texts made to hold many near misses."""
    rng = np.random.default_rng(0)
    for trial in range(400):
        alphabet = list("ab ") if trial % 2 else list("abcde")
        sigs = {"".join(rng.choice(alphabet, size=rng.integers(leaks.MIN_LENGTH, 40))): "x" for _ in range(20)}
        text = "".join(rng.choice(alphabet, size=rng.integers(0, 400)))
        for sig in list(sigs)[:5]:
            if rng.random() < 0.7:
                at = int(rng.integers(0, len(text) + 1))
                text = text[:at] + sig + text[at:]
        assert leaks._Index(sigs).found(text) == {sig for sig in sigs if sig in text}, trial


def _call_in_edition(folder, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(folder), "PATH": ""}, cwd=folder)


def test_student_edition_stubs_every_exercise(tmp_path):
    folder = edition.write_edition(tmp_path / "ed0", 0)
    assert not leaks.find_leaks([folder])
    keys = sorted(exercises.find_exercises())
    probe = (f"import course_lib, importlib, inspect\n"
             f"assert course_lib.__file__.startswith({str(folder)!r}), course_lib.__file__\n"
             f"for key in {keys!r}:\n"
             f"    module, name = key.rsplit('.', 1)\n"
             f"    src = inspect.getsource(getattr(importlib.import_module('course_lib.' + module), name))\n"
             f"    if 'raise NotRevealed(' not in src or 'BEGIN SOLUTION' in src:\n"
             f"        print('not stubbed:', key)\n"
             f"    else:\n"
             f"        print('stubbed:', key)\n")
    result = _call_in_edition(folder, probe)  # one interpreter for all: importing torch once
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"stubbed: {key}" for key in keys]
    result = _call_in_edition(folder, "from course_lib.vectors.counts import one_hot\n"
                                      "try:\n    one_hot([1], 3)\nexcept NotImplementedError as error:\n    print(error)")
    assert "one_hot (in course_lib.vectors.counts) is an exercise of problem set 1 (ps01_counts)" in result.stdout
    assert "student edition 0 of course_lib" in result.stdout, result.stderr
    assert (folder / "pyproject.toml").read_text().count("+student0") == 1


def test_edition_one_reveals_ps01(tmp_path):
    folder = edition.write_edition(tmp_path / "ed1", 1)
    result = _call_in_edition(folder, "from course_lib.vectors.counts import one_hot; print(one_hot([1], 3).tolist())")
    assert result.stdout.strip() == "[[0.0, 1.0, 0.0]]", result.stderr
    text = (folder / "course_lib" / "vectors" / "counts.py").read_text()
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
    installed = _call_in_edition(target, "import course_lib.vectors.counts as c, importlib.metadata as m;"
                                          "print(m.version('course-lib'), c.__file__)")
    version, path = installed.stdout.split()
    assert version == "0.1.0+student0" and path.startswith(str(target))


def test_leak_scanner_finds_an_answer_key(tmp_path, root):
    """An answer key copied where students can read it (here beside a release) is a leak."""
    shutil.copy(root / "answer_keys" / "ps01_counts.key", tmp_path / "notes.txt")
    found = leaks.find_leaks([tmp_path])
    assert found and "answer key of ps01_counts" in str(found[0])
