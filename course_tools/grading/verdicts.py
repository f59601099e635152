"""The grader's verdicts: plain data out of the sandbox, compared with expected values that never went in.

:mod:`course_tools.in_sandbox.probe` writes, for each test case, what the student's function
returned, its arguments after the call, gradients where asked, and the library
functions it reached, as plain JSON. Here, in the grader's own process, that data
is decoded without running anything of the student's (:func:`from_plain` builds
only numbers, strings, containers and numeric numpy arrays) and compared with the
answer key: a test cell passes when every case matches. The message says which
case failed and why, in one or two lines; for hidden tests it never shows an
expected value.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

MAX_RESULT_BYTES = 60_000_000
"""The largest probe file the grader reads; a larger one fails its test cell."""


from course_tools.authoring.answer_keys import float32_atol
from course_tools.authoring.plain_values import Tensor, Unsupported, from_plain  # noqa: F401 - the decoded values the verdicts compare


def read_untrusted(path, limit: int) -> bytes | None:
    """The bytes of ``path``, a file the sandbox could write, read as untrusted: only a regular file (a link
    is not followed, a pipe or device is not opened for reading in blocking mode), at most ``limit`` bytes;
    ``None`` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def read_results(path) -> dict | None:
    """A probe's JSON file, decoded as untrusted data (:func:`read_untrusted`); ``None`` if it is missing, not a
    regular file, too large, too deeply nested or not plain data."""
    raw = read_untrusted(path, MAX_RESULT_BYTES)
    try:
        return json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


@dataclass
class Verdict:
    passed: bool
    message: str


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{'tensor' if isinstance(value, Tensor) else 'array'} {value.shape}"
    if sp.issparse(value):
        return f"sparse matrix {value.shape}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    if isinstance(value, (bool, int, float, str, type(None))):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    if isinstance(value, np.random.Generator):
        return "a numpy Generator"
    return f"a {type(value).__name__}"


def describe_call(name: str, args, kwargs) -> str:
    """``tfidf(sparse matrix (4, 7), smooth_idf=True)``: shapes, not values; short."""
    parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _unreadable(actual, what: str) -> str:
    """The message for a result that is None or a value the probe could not turn into plain data."""
    if actual is None:
        if "grad" in what:
            return f"{what} is None: the result is not connected to this input (.detach(), numpy or a new tensor?)"
        return f"{what} is None (a missing return statement?)"
    return f"{what} is {actual.what[:60]}, not a value that can be checked"


def difference(actual, expected, rtol: float, atol: float, secret: bool, what: str = "the result") -> str | None:
    """How ``actual`` differs from ``expected`` (decoded values); ``None`` if it matches.

    Structure, types (tuple or list, array or tensor, dense or sparse), shapes and
    dtypes must match (any integer dtype for an integer array); numbers within
    ``rtol``/``atol``, with NaN and infinities where expected. With ``secret``, the
    message shows no expected value.
    """
    if isinstance(expected, Unsupported):
        return None  # objects the reference returned that are not compared (e.g. a module)
    if expected is None:
        return None if actual is None else f"{what} should be None, got {_describe(actual)}"
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            got = f"{type(actual).__name__} of length {len(actual)}" if isinstance(actual, (tuple, list)) \
                else _describe(actual)
            return f"{what} should be {len(expected)} values in a {type(expected).__name__}, got {got}"
        return next((d for i, (a, e) in enumerate(zip(actual, expected))
                     if (d := difference(a, e, rtol, atol, secret, f"{what}[{i}]"))), None)
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return f"{what} should be a dict with keys {sorted(map(str, expected))}"
        return next((d for k in expected if (d := difference(actual[k], expected[k], rtol, atol, secret,
                                                             f"{what}[{k!r}]"))), None)
    if actual is None or isinstance(actual, Unsupported):
        return _unreadable(actual, what)
    if sp.issparse(expected) != sp.issparse(actual):
        return f"{what} should be {'a scipy sparse matrix' if sp.issparse(expected) else 'a dense array'}, " \
               f"got {'a sparse matrix' if sp.issparse(actual) else _describe(actual)}"
    if sp.issparse(expected):
        actual, expected = actual.toarray(), expected.toarray()
    if isinstance(expected, np.ndarray) and expected.ndim > 0:
        if not isinstance(actual, np.ndarray):
            return f"{what} should be an array of shape {expected.shape}, got {_describe(actual)}"
        if isinstance(expected, Tensor) != isinstance(actual, Tensor):
            return f"{what} should be a {'torch tensor' if isinstance(expected, Tensor) else 'numpy array'}"
        if actual.shape != expected.shape:
            return f"{what} has shape {actual.shape}, expected {expected.shape}"
        if actual.dtype != expected.dtype and not (actual.dtype.kind in "iu" and expected.dtype.kind in "iu"):
            return f"{what} has dtype {actual.dtype}, expected {expected.dtype}"
        return _values(actual, expected, rtol, atol, secret, what)
    if isinstance(actual, np.ndarray) and actual.ndim > 0:
        return f"{what} should be a single number, got an array of shape {actual.shape}"
    if isinstance(expected, (str, bool)) or isinstance(actual, (str, bool)):
        return None if type(actual) is type(expected) and actual == expected else \
            f"{what} is {_describe(actual)}" + ("" if secret else f", expected {_describe(expected)}")
    if not isinstance(actual, (int, float, np.number, np.ndarray)):
        return f"{what} should be a number, got {_describe(actual)}"
    return _values(np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                   rtol, atol, secret, what)


def _numbers(x) -> np.ndarray | None:
    """``x`` as a plain numeric numpy array (a tensor's values, a list or tuple of numbers, a number), or ``None``."""
    if isinstance(x, (Unsupported, str)) or x is None or sp.issparse(x):
        return None
    try:
        array = np.asarray(x)
    except (TypeError, ValueError):  # ragged sequences
        return None
    return np.asarray(array.view(np.ndarray)) if array.dtype.kind in "biufc" else None


def lenient_difference(actual, expected, rtol: float, atol: float, secret: bool,
                       what: str = "the result") -> str | None:
    """How ``actual`` differs from ``expected`` as a visible test cell can see it; ``None`` if it matches.

    The grader's replay of a *visible* test cell judges with this, so that a value the cell accepts
    on the student's machine is accepted when graded, whatever the cell reads it with: the
    leniency of :func:`course_lib.testing.assert_close` (tuples and lists alike, torch tensors and
    numpy arrays alike, every numeric dtype compared by value, a list of numbers where an array is
    expected) and of the plain Python a cell may use (``list(words) == [3, 1]``, ``float(loss)``):
    a sequence of numbers may also come as a 1-D array or tensor, a number as a Python or numpy
    scalar or a 0-d array or tensor, and float32 values are compared within float32's precision.
    Structure, lengths, dict keys, shapes, sparse or dense, strings and values still count. What a
    docstring promises about types (a list, a tensor, float64) is checked by the visible cell itself,
    with a message, and by the hidden cases, which :func:`difference` judges strictly.
    """
    if isinstance(expected, Unsupported):
        return None
    if expected is None:
        return None if actual is None else f"{what} should be None, got {_describe(actual)}"
    if actual is None or isinstance(actual, Unsupported):
        return _unreadable(actual, what)
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return f"{what} should be a dict with keys {sorted(map(str, expected))}"
        return next((d for k in expected if (d := lenient_difference(actual[k], expected[k], rtol, atol, secret,
                                                                     f"{what}[{k!r}]"))), None)
    if isinstance(expected, (tuple, list)):
        if isinstance(actual, (tuple, list)):
            if len(actual) != len(expected):
                return f"{what} should be {len(expected)} values, got {type(actual).__name__} of length {len(actual)}"
            return next((d for i, (a, e) in enumerate(zip(actual, expected))
                         if (d := lenient_difference(a, e, rtol, atol, secret, f"{what}[{i}]"))), None)
        numeric = _numbers(expected)
        if numeric is None or not isinstance(actual, np.ndarray):
            return f"{what} should be {len(expected)} values, got {_describe(actual)}"
        expected = numeric  # numbers that came as an array or tensor: compared as arrays below
    if sp.issparse(expected) != sp.issparse(actual):
        return f"{what} should be {'a scipy sparse matrix' if sp.issparse(expected) else 'a dense array'}, " \
               f"got {'a sparse matrix' if sp.issparse(actual) else _describe(actual)}"
    if sp.issparse(expected):
        actual, expected = actual.toarray(), expected.toarray()
    if isinstance(expected, str) or isinstance(actual, str):
        return None if isinstance(actual, str) and isinstance(expected, str) and actual == expected else \
            f"{what} is {_describe(actual)}" + ("" if secret else f", expected {_describe(expected)}")
    e, a = _numbers(expected), _numbers(actual)
    if e is None:  # not a value the probe's plain data holds: judged strictly
        return difference(actual, expected, rtol, atol, secret, what)
    if a is None:
        return f"{what} should be {'numbers' if e.ndim else 'a number'}, got {_describe(actual)}"
    if a.shape != e.shape:
        if e.ndim == 0:
            return f"{what} should be a single number, got an array of shape {a.shape}"
        return f"{what} has shape {a.shape}, expected {e.shape}"
    if a.dtype.kind == "f" and a.dtype.itemsize < 8:  # float32 values are as close as float32 can be
        atol = float32_atol(e, atol)
    return _values(a, e, rtol, atol, secret, what)


def _values(actual, expected, rtol, atol, secret, what) -> str | None:
    if expected.dtype.kind == "f" and expected.dtype.itemsize < 8:
        atol = float32_atol(expected, atol)
    if actual.dtype.kind == "c" or expected.dtype.kind == "c":
        close = np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    wrong = int((~close).sum())
    if close.ndim == 0:
        shown = f"{float(actual):.6g}" + ("" if secret else f", expected {float(expected):.6g}")
        return f"{what} is wrong: got {shown}"
    where = tuple(int(i) for i in np.argwhere(~close)[0])
    shown = "" if secret else f": got {actual[where]:.6g}, expected {expected[where]:.6g}"
    return f"{what} differs in {wrong} of {close.size} entries, first at index {where}{shown}"


def forbidden_calls(calls, forbidden) -> list[str]:
    """The recorded library calls of which any dotted part is a forbidden name (``torch``, ``lstm_cell``).

    Where names are forbidden, a call that switches the recording off (``sys.setprofile``, a new
    thread: ``course_probe.*``) counts as forbidden too: what it would hide cannot be judged."""
    forbidden = set(forbidden)
    if not forbidden:
        return []
    return [c for c in calls if isinstance(c, str) and (forbidden & set(c.split(".")) or c.startswith("course_probe."))]


def judge(entry: dict, results: dict | None, secret: bool) -> Verdict:
    """The verdict of one test cell: ``entry`` from the answer key, ``results`` from the probe."""
    return _judge(entry, results, secret)[0]


def verdict_record(grade_id: str, entry: dict, results: dict | None, secret: bool) -> tuple[Verdict, dict]:
    """The verdict of one test cell and its record for the gradebook
    (:mod:`course_tools.grading.verdict_store`): every case's call, by input shapes, and what was wrong
    with it (``None``: it passed); ``cases`` is ``None`` when the tests produced no case outcomes."""
    verdict, problems = _judge(entry, results, secret)
    name, cases = entry["function"], entry["cases"]
    outcomes = None
    if problems is not None:
        wrong = dict(problems)
        outcomes = [[describe_call(name, c["args"], c.get("kwargs", {})), wrong.get(number)]
                    for number, c in enumerate(cases, start=1)]
    hinted = bool(problems) and problems[0][1] != "not implemented" and bool(entry.get("hint"))
    return verdict, {"cell": grade_id, "function": name, "kind": entry.get("kind", "hidden" if secret else "visible"),
                     "passed": verdict.passed, "message": verdict.message,
                     "hint": entry["hint"] if hinted else None, "cases": outcomes}


def _judge(entry: dict, results: dict | None, secret: bool) -> tuple[Verdict, list[tuple[int, str]] | None]:
    """:func:`judge`, and every failing case (``None`` when the cases were not judged one by one)."""
    name, cases = entry["function"], entry["cases"]
    label = "hidden test" if secret else "test"
    if results is None:
        return Verdict(False, f"{name}: the {label}s produced no results (the notebook stopped before this cell)"), None
    if "missing" in results:
        return Verdict(False, f"{name} is not defined when its tests run: did its cell raise an error?"), None
    forbidden = results.get("forbidden")
    if isinstance(forbidden, list) and forbidden:  # reported by the sentinels (course_tools.in_sandbox.forbid) to the parent
        return Verdict(False, f"{name} calls {', '.join(map(str, forbidden[:3]))}: write the computation yourself "
                              f"instead of calling a library that does it."), None
    if "stopped" in results and "cases" not in results:
        return Verdict(False, f"{name}: the {label}s did not finish ({str(results['stopped'])[:200]})"), None
    outcomes = results.get("cases")
    if not isinstance(outcomes, list) or len(outcomes) != len(cases):
        return Verdict(False, f"{name}: the {label}s did not run to the end"), None
    hint = f" Hint: {entry['hint']}" if entry.get("hint") else ""
    problems = case_problems(entry, outcomes, secret)
    if problems:
        number, problem = problems[0]
        if problem == "not implemented":
            return Verdict(False, f"{name} is not implemented yet."), problems
        call = describe_call(name, cases[number - 1]["args"], cases[number - 1].get("kwargs", {}))
        also = f" ({len(problems) - 1} other case(s) failed too)" if len(problems) > 1 else ""
        return Verdict(False, f"{label} {number} of {len(cases)}: {call} {problem}.{also}{hint}"), problems
    return Verdict(True, f"{name}: {len(cases)} {label} case(s) passed"), problems


def case_problems(entry: dict, outcomes: list, secret: bool) -> list[tuple[int, str]]:
    """``(case number, what is wrong)`` for every failing case of one test cell (numbers from 1)."""
    out = []
    for number, (case, raw) in enumerate(zip(entry["cases"], outcomes), start=1):
        problem = _case_problem(entry, case, raw, secret)
        if problem:
            out.append((number, problem))
    return out


def outcomes_in_process(fn, entry: dict) -> list:
    """Run ``fn`` on the cases of ``entry`` here, as the probe would in the sandbox, through plain JSON.

    For the instructor and the tests (alternative answers); grading never runs student code here.
    """
    from course_tools.in_sandbox.probe import run_case

    from course_tools.authoring.answer_keys import probe_inputs

    return json.loads(json.dumps([run_case(fn, case, record_calls=True) for case in probe_inputs(entry)],
                                 allow_nan=True))


def _case_problem(entry, case, raw, secret) -> str | None:
    if not isinstance(raw, dict):
        return "produced no result"
    try:
        expected = case["expected"]
        calls = raw.get("calls", [])
        shortcuts = forbidden_calls(calls if isinstance(calls, list) else [], entry.get("forbidden", ()))
        if shortcuts:
            return f"calls {', '.join(shortcuts[:3])}: write the computation yourself instead of calling a library"
        if "error" in raw:
            error = str(raw["error"])
            if error.startswith(("NotImplementedError", "NotRevealed")):  # a stub (the edition's: NotRevealed)
                return "not implemented"
            if "error" in expected and error.split(":")[0] == expected["error"].split(":")[0]:
                return None
            return f"raised {error[:200]}"
        if "error" in expected:
            return f"should raise {expected['error'].split(':')[0]} but returned normally"
        rtol, atol = case.get("rtol", 1e-6), case.get("atol", 1e-9)
        # a visible cell's replay accepts what the cell accepts on the student's machine; hidden cases are strict
        compare = lenient_difference if entry.get("kind") == "visible" else difference
        if entry.get("property"):
            from course_tools.authoring.cases import PROPERTIES

            found = PROPERTIES[entry["key"]](case, from_plain(raw.get("value")))
            if not found and raw.get("same_again") is not True:
                found = "a second call with the same arguments (and seed) gave other values: draw only from the rng given"
            from course_tools.authoring.cases import VARIES

            if not found and raw.get("other_seed_same") is True and VARIES.get(entry["key"], lambda c: False)(case):
                found = "a call with a generator of another seed gave the same values: draw from the rng given"
        else:
            found = compare(from_plain(raw.get("value")), expected["value"], rtol, atol, secret)
        if found:
            return f"gives a wrong result: {found}"
        if "args_after" in expected and entry.get("kind") != "visible":  # a visible cell may not look at them
            changed = difference(from_plain(raw.get("args_after")), expected["args_after"],
                                 1e-12, 1e-12, True, "the arguments after the call")
            if changed:
                return "changes its inputs in place; leave them unmodified and return new values"
        if "grads" in expected:
            found = compare(from_plain(raw.get("grads")), expected["grads"], rtol, atol, secret, "the gradient")
            if found:
                return f"passes wrong gradients back ({found})"
    except (KeyError, TypeError, ValueError) as error:
        return f"produced a result that cannot be read ({type(error).__name__})"
    return None


def check_hidden(fn, grade_id: str, folder: Path | None = None) -> None:
    """Run ``fn`` on the cases of ``grade_id`` in this process and raise AssertionError unless they pass.

    The instructor's way to run a solution notebook's hidden tests by hand: the answer
    key is found in the ``answer_keys/`` folder of the course (searched from ``folder``,
    default the working folder, upwards). Grading never calls this: it runs the
    probe in a sandbox and judges outside (:mod:`course_tools.grading.autograde`).
    """
    from course_tools.authoring.answer_keys import load

    start = (folder or Path.cwd()).resolve()
    for base in [start, *start.parents]:
        # the key of the assignment whose folder we are in first: ids such as hidden_beam_search recur
        for path in sorted((base / "answer_keys").glob("*.key"), key=lambda p: (p.stem not in start.parts, p.stem)):
            entry = load(path.stem, base).get(grade_id)
            if entry:
                verdict = judge(entry, {"cases": outcomes_in_process(fn, entry)}, secret=False)
                if not verdict.passed:
                    raise AssertionError(verdict.message)
                print(verdict.message)
                return
    raise FileNotFoundError(f"no answer key holds {grade_id}: run `python3 tasks.py sync` in the course")

