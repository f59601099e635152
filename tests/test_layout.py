"""course_lib and course_tools by part: who may import whom, and modules small enough to read.

course_lib's parts, in the order the course teaches them: ``text`` < ``vectors`` (chapters 1-2)
< ``recurrent`` (3-4) < ``attention`` (5) < ``transformer`` (6) < ``gpt`` (7) < ``bert`` (8) < ``transfer`` (9).
course_tools' parts, in the order a change flows: ``in_sandbox`` (what runs in the student's process,
copied into each grading job: it imports nothing of the course at all) < ``authoring`` (the single
source: sync, editions, release, answer keys, hidden cases) < ``book`` (the public tree and the book)
< ``grading`` (staging, sandbox, verdicts, gradebook) < ``report`` (the class report, read from the gradebook).
In both packages a part imports the shared top
level and earlier parts only, and the shared top level imports no part; course_tools' ``__main__``
(the command line, which nothing imports) may import every part. The rule is read from the source
(``import`` statements, also inside functions), so it holds in every module, imported or not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from course_tools import ROOT


@dataclass(frozen=True)
class Package:
    name: str
    parts: tuple[str, ...]
    top: frozenset[str]
    max_lines: int
    isolated: tuple[str, ...] = ()  # parts that import nothing of the package, not even its top level
    entry: tuple[str, ...] = ()  # modules that may import every part (nothing imports them)

    @property
    def folder(self) -> Path:
        return ROOT / self.name


LIB = Package("course_lib", ("text", "vectors", "recurrent", "attention", "transformer", "gpt", "bert", "transfer"),
              frozenset({"activations", "checks", "diagrams", "plotting", "progress", "testing", "training",
                         "unrevealed", "notebook", "seeds"}), 350)
TOOLS = Package("course_tools", ("in_sandbox", "authoring", "book", "grading", "report"),
                frozenset({"exercises", "site_config", "edition_names"}), 400, isolated=("in_sandbox",),
                entry=("__main__",))
PACKAGES = {package.name: package for package in (LIB, TOOLS)}


def _modules(package: Package) -> dict[str, Path]:
    """Dotted name below the package -> file, for every module of it."""
    out = {}
    for path in sorted(package.folder.rglob("*.py")):
        parts = path.relative_to(package.folder).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"] = path
    return out


def _imported(path: Path, dotted: str, package: Package) -> set[str]:
    """The modules and packages of ``package`` that ``path`` (module ``dotted``) imports, as dotted names below it
    (``""`` for the package itself)."""
    here = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    here = "" if here == "__init__" else here
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = here.split(".")[:len(here.split(".")) - node.level + 1] if here else []
                module = ".".join([package.name, *base] + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    prefix = package.name + "."
    return {"" if name == package.name else name.removeprefix(prefix) for name in found
            if name == package.name or name.startswith(prefix)}


def _part(name: str, package: Package) -> str | None:
    head = name.split(".")[0]
    return head if head in package.parts else None


def _violations(name: str, path: Path, package: Package = LIB) -> list[str]:
    if name in package.entry:
        return []
    here = _part(name, package)
    imported = _imported(path, name, package)
    if here in package.isolated:
        return sorted(f"{package.name}.{name} imports {package.name}{'.' if target else ''}{target} (it runs in the "
                      f"sandbox alone: it may import only its own part)" for target in imported
                      if _part(target, package) != here)
    allowed = set(package.parts[:package.parts.index(here) + 1]) if here else set()
    return sorted(f"{package.name}.{name} imports {package.name}.{target}" for target in imported
                  if _part(target, package) not in allowed | {None} or target.split(".")[0] in package.entry)


MODULES = {package.name: _modules(package) for package in PACKAGES.values()}
ALL = [(package, name) for package in PACKAGES for name in sorted(MODULES[package])]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_parts_exist_and_hold_the_modules(package):
    spec = PACKAGES[package]
    modules = MODULES[package]
    assert set(spec.parts) <= set(modules)
    top = {name for name in modules if "." not in name and name != "__init__" and name not in spec.parts
           and name not in spec.entry}
    assert top == spec.top, "the shared top level is for code every part uses; put a new concept in its part"


def test_the_parts_hold_what_the_layout_promises():
    tools = MODULES["course_tools"]
    assert {"in_sandbox.probe", "in_sandbox.probe_runner", "authoring.sync", "authoring.cases.ps08_bert",
            "book.public", "grading.autograde", "grading.verdicts"} <= set(tools)
    from course_tools.grading.probe_plan import SANDBOX_RUNNERS

    in_sandbox = {name.split(".")[1] + ".py" for name in tools if name.startswith("in_sandbox.")}
    assert set(SANDBOX_RUNNERS) | {"sandbox_runner.py"} == in_sandbox, \
        "what a grading job gets is exactly course_tools/in_sandbox/"


@pytest.mark.parametrize("package,name", ALL)
def test_a_part_imports_the_shared_top_level_and_earlier_parts_only(package, name):
    spec = PACKAGES[package]
    problems = _violations(name, MODULES[package][name], spec)
    assert not problems, "\n".join(problems) + "\n(the order is " + " < ".join(spec.parts) + ")"


def test_the_import_rule_catches_a_later_part_and_a_part_in_the_shared_level(tmp_path):
    later = tmp_path / "counts.py"
    later.write_text("def f():\n    from course_lib.recurrent.cells import lstm_cell\n")
    assert _violations("vectors.counts", later) == ["course_lib.vectors.counts imports course_lib.recurrent.cells",
                                                     "course_lib.vectors.counts imports course_lib.recurrent.cells.lstm_cell"]
    shared = tmp_path / "plotting.py"
    shared.write_text("from course_lib.text import vocabulary\nfrom . import checks\n")
    assert _violations("plotting", shared) == ["course_lib.plotting imports course_lib.text",
                                               "course_lib.plotting imports course_lib.text.vocabulary"]
    relative = tmp_path / "word2vec.py"
    relative.write_text("from ..recurrent import elmo\nfrom ..text.vocabulary import Vocabulary\n")
    assert _violations("vectors.word2vec", relative) == ["course_lib.vectors.word2vec imports course_lib.recurrent",
                                                         "course_lib.vectors.word2vec imports course_lib.recurrent.elmo"]


def test_the_import_rule_guards_course_tools_parts_and_the_sandbox(tmp_path):
    earlier = tmp_path / "sync.py"
    earlier.write_text("from course_tools.grading import verdicts\nfrom . import answer_keys\n")
    assert _violations("authoring.sync", earlier, TOOLS) == ["course_tools.authoring.sync imports course_tools.grading",
                                                             "course_tools.authoring.sync imports course_tools.grading.verdicts"]
    sandboxed = tmp_path / "probe.py"
    sandboxed.write_text("import json\nfrom course_tools import ROOT\nfrom . import forbid\n")
    assert _violations("in_sandbox.probe", sandboxed, TOOLS) == [
        "course_tools.in_sandbox.probe imports course_tools (it runs in the sandbox alone: it may import only its own part)",
        "course_tools.in_sandbox.probe imports course_tools.ROOT (it runs in the sandbox alone: it may import only its "
        "own part)"]
    top = tmp_path / "site_config.py"
    top.write_text("from course_tools.book.public import readme\nfrom . import ROOT\n")
    assert _violations("site_config", top, TOOLS) == ["course_tools.site_config imports course_tools.book.public",
                                                      "course_tools.site_config imports course_tools.book.public.readme"]
    main = tmp_path / "__main__.py"
    main.write_text("from course_tools.grading import batch\n")
    assert _violations("__main__", main, TOOLS) == []


@pytest.mark.parametrize("package,name", ALL)
def test_modules_stay_small(package, name):
    limit = PACKAGES[package].max_lines
    lines = len(MODULES[package][name].read_text(encoding="utf-8").splitlines())
    assert lines <= limit, f"{package}.{name} has {lines} lines; split it by concept (at most {limit})"


def test_each_problem_set_keeps_its_hidden_cases_in_a_module_of_its_own():
    from course_tools.authoring import cases
    from course_tools.exercises import assignments, owners

    owner = owners()
    modules = cases.problem_set_modules()
    assert list(modules) == assignments(), "one module of course_tools/authoring/cases/ per problem set"
    for name, module in modules.items():
        for table in (*cases.TABLES, "TORCH"):
            strays = sorted(key for key in getattr(module, table, ()) if owner.get(key) != name)
            assert not strays, f"cases/{name}.py {table} holds exercises of other problem sets: {strays}"
    assert set(cases.GENERATORS) == {key for m in modules.values() for key in m.GENERATORS}


def test_two_problem_sets_cannot_claim_one_exercise(monkeypatch):
    import types

    from course_tools.authoring import cases

    def generator(rng):
        yield (), {}

    twins = {name: types.SimpleNamespace(GENERATORS={"vectors.counts.one_hot": generator})
             for name in ("ps01_counts", "ps09_subwords")}
    monkeypatch.setattr(cases, "problem_set_modules", lambda: twins)
    with pytest.raises(ValueError, match="ps09_subwords.GENERATORS repeats .'vectors.counts.one_hot'."):
        cases._merged()
