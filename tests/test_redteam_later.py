"""The red team against a later problem set: a function whose test forbids the library's implementation.

ps04's ``lstm_cell`` may not call PyTorch's LSTM (``assert_own_code(lstm_cell, {"lstm_cell", "LSTMCell",
"LSTM", "lstm"}, ...)``). Each cheat below computes ``lstm_cell`` with exactly that implementation,
hidden from the grader a different way, and answers every other function correctly; three ordinary
classmates are graded in the same batch (``python -m course_tools grade ps04_lstm --no-experiments`` on
two local workers, as an instructor runs it). Every cheat must lose exactly ``lstm_cell``'s points, the
classmates must get what their work earns, and the batch must finish.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from conftest import run
from grading_helpers import answers as solution_answers, submit

ASSIGNMENT = "ps04_lstm"
TORCH_LSTM = "torch.lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh)"

CHEATS = {
    # the recorder switched off by replacing the functions that would install it, before the graded cell runs
    "profiler_off": """
        import sys, threading
        sys.setprofile = lambda *args: None
        threading.setprofile = lambda *args: None
        sys.settrace = lambda *args: None

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            return torch.lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh)
        """,
    # called from C (map), which a profiler never sees, through the binding of the C function itself
    "from_c": """
        _lstm = torch._C._VariableFunctions.lstm_cell

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            return next(map(_lstm, [x], [state], [weight_ih], [weight_hh], [bias_ih], [bias_hh]))
        """,
    # a worker thread started in the answer cell, before any test runs, does the work
    "thread_early": """
        import queue, threading
        _jobs, _done = queue.Queue(), queue.Queue()

        def _worker():
            while True:
                args = _jobs.get()
                try:
                    _done.put(torch.nn.functional.__dict__.get("lstm_cell", torch.lstm_cell)(*args))
                except BaseException as error:
                    _done.put(error)
        _thread = threading.Thread(target=_worker, daemon=True)
        _started = _thread.start()  # an assignment: graded runs keep it, as they keep definitions

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            _jobs.put((x, state, weight_ih, weight_hh, bias_ih, bias_hh))
            out = _done.get(timeout=5)
            if isinstance(out, BaseException):
                raise out
            return out
        """,
    # the grader's own modules patched where the kernel can import them: no calls recorded, no sentinels
    "probe_patched": """
        import sys
        for _name in ("probe", "forbid", "course_tools.in_sandbox.probe", "course_tools.in_sandbox.forbid"):
            try:
                _module = __import__(_name, fromlist=["x"])
            except ImportError:
                continue
            for _attr in ("install", "forbid", "_forbid", "run_case"):
                if hasattr(_module, _attr) and _attr != "run_case":
                    setattr(_module, _attr, lambda *args, **kwargs: None)
            if hasattr(_module, "_Calls"):
                _module._Calls.__call__ = lambda self, *args: None

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            cell = torch.nn.LSTMCell(x.shape[1], state[0].shape[1]).double()
            with torch.no_grad():
                for name, value in (("weight_ih", weight_ih), ("weight_hh", weight_hh),
                                    ("bias_ih", bias_ih), ("bias_hh", bias_hh)):
                    getattr(cell, name).copy_(value)
            return cell(x.double(), tuple(s.double() for s in state))
        """,
    # the probe's output rewritten: forged reports written where the grader once read them, and into the
    # parent's output through /proc, while the forbidden function does the work
    "output_rewritten": """
        import glob, json, os

        _forged = json.dumps({"cells": {"test_lstm_cell": {"cases": [], "forbidden": []},
                                        "hidden_lstm_cell": {"cases": [], "forbidden": []}}})
        for _path in ["/grading/out/test_lstm_cell.json", "/grading/out/hidden_lstm_cell.json",
                      *glob.glob("/proc/*/fd/1")]:
            try:
                with open(_path, "w") as _f:
                    _f.write(_forged)
            except OSError:
                pass

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            return torch.lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh)
        """,
    # the oneDNN kernel behind nn.LSTM, under a name that does not say "lstm" (float32 passes a rtol of 1e-5)
    "kernel_renamed": """
        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            h, c = state
            f = lambda t: t.float()
            out = torch.mkldnn_rnn_layer(f(x)[None], f(weight_ih), f(weight_hh), f(bias_ih), f(bias_hh), f(h)[None],
                                         f(c)[None], False, [], 2, h.shape[1], 1, True, False, False, False)
            return out[0][0].to(x.dtype), out[2][0].to(x.dtype)
        """,
    # the library's own LSTM layer (what Recurrent.forward runs for the reference cell), one step long
    "library_layer": """
        from course_lib.recurrent.fused_lstm import lstm_layer

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            _, (h, c) = lstm_layer(x[:, None], state, weight_ih, weight_hh, bias_ih, bias_hh)
            return h, c
        """,
    # another interpreter, started in the answer cell, computes the cell and its gradients with the library
    "another_program": """
        import pickle, subprocess, sys

        _WORKER = "\\n".join([
            "import pickle, sys, torch",
            "while True:",
            "    try:",
            "        args, grads = pickle.load(sys.stdin.buffer)",
            "    except EOFError:",
            "        break",
            "    args = [a.detach().requires_grad_() for a in args]",
            "    h, c = torch.lstm_cell(args[0], (args[1], args[2]), *args[3:])",
            "    out = (h.detach(), c.detach()) if grads is None else torch.autograd.grad((h, c), args, grads)",
            "    pickle.dump(out, sys.stdout.buffer)",
            "    sys.stdout.buffer.flush()",
        ])
        _worker = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

        def _ask(args, grads=None):
            pickle.dump((args, grads), _worker.stdin)
            _worker.stdin.flush()
            return pickle.load(_worker.stdout)

        class _LibraryCell(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *args):
                ctx.save_for_backward(*args)
                return _ask(list(args))

            @staticmethod
            def backward(ctx, grad_h, grad_c):
                return _ask(list(ctx.saved_tensors), (grad_h, grad_c))

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            return _LibraryCell.apply(x, state[0], state[1], weight_ih, weight_hh, bias_ih, bias_hh)
        """,
    # the dispatcher registrations undone: every Library object and finaliser the cheat can find is destroyed
    "dispatcher_reset": """
        import gc, weakref
        for _obj in gc.get_objects():
            if type(_obj).__name__ == "Library":
                try:
                    _obj._destroy()
                except Exception:
                    pass
        for _finalizer in list(getattr(weakref.finalize, "_registry", {})):
            try:
                _finalizer()
            except Exception:
                pass

        def lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh):
            return torch.lstm_cell(x, state, weight_ih, weight_hh, bias_ih, bias_hh)
        """,
}


def _points(root: Path) -> dict[str, float]:
    nb = nbformat.read(root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, root):
    course = tmp_path_factory.mktemp("redteam_later")
    shutil.copy(root / "nbgrader_config.py", course)
    for name in ("solutions", "exercises", "answer_keys"):
        shutil.copytree(root / name, course / name, ignore=shutil.ignore_patterns("__pycache__"))
    run(["-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"], cwd=course)
    answers = solution_answers(root, ASSIGNMENT)
    submit(course, "full", answers, assignment=ASSIGNMENT)
    submit(course, "blank", {}, assignment=ASSIGNMENT)
    submit(course, "gru_mistake", dict(answers, gru_cell=answers["gru_cell"].replace(
        "return (1 - z) * n + z * h", "return z * n + (1 - z) * h")), assignment=ASSIGNMENT)
    for student, source in CHEATS.items():
        submit(course, student, dict(answers, lstm_cell=textwrap.dedent(source)), assignment=ASSIGNMENT)
    result = run(["-m", "course_tools", "grade", ASSIGNMENT, "--no-experiments"], cwd=course, check=False)
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for sub in gb.find_assignment(ASSIGNMENT).submissions:
            scores[sub.student_id] = {g.name: g.auto_score or 0 for nb in sub.notebooks for g in nb.grades
                                      if not g.name.startswith("written_")}
    print(result.stdout[-3000:])
    return result, scores


def test_the_batch_finishes_and_grades_everyone(graded):
    result, scores = graded
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert set(scores) == {"full", "blank", "gru_mistake", *CHEATS}


def test_the_classmates_get_what_their_work_earns(graded, root):
    _, scores = graded
    points = _points(root)
    autograded = sum(points.values())
    assert sum(scores["full"].values()) == autograded
    assert sum(scores["blank"].values()) == 0
    assert sum(scores["gru_mistake"].values()) == autograded - points["test_gru_cell"] - points["hidden_gru_cell"]


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_hidden_forbidden_call_costs_exactly_lstm_cells_points(graded, root, cheat):
    result, scores = graded
    points = _points(root)
    lost = {g: points[g] - s for g, s in scores[cheat].items() if s < points[g]}
    assert lost == {"test_lstm_cell": points["test_lstm_cell"], "hidden_lstm_cell": points["hidden_lstm_cell"]}, \
        next((line for line in result.stdout.splitlines() if line.strip().startswith(cheat)), result.stdout[-1500:])
