"""The graded run's own walls, without the sandbox: forbidden functions unusable by any route, a fresh
process per graded cell, limits in CPU time, and a report no student code can write to.

(tests/test_redteam_later.py grades the same attacks as submissions, in the sandbox, with nbgrader.)
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
import threading
import warnings
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from grading_helpers import edition_namespace
from course_tools.grading import scaffolds
from course_tools.in_sandbox import feedback_runner, forbid, probe_runner

LSTM_NAMES = {"lstm_cell", "LSTMCell", "LSTM", "lstm"}
LAYER_NORM_NAMES = {"layer_norm", "LayerNorm", "native_layer_norm", "group_norm", "GroupNorm", "batch_norm",
                    "instance_norm"}  # ps06's layer_norm
ATTENTION_NAMES = {"scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"}
NUMPY_ONLY = {"torch", "autograd", "jax", "tensorflow"}  # ps03: the shortcut is automatic differentiation


def _in_child(names, routes) -> tuple[dict[str, str], list[str]]:
    """Run each of ``routes`` (``name -> function``) in a forked child, after :func:`forbid.forbid` of ``names``
    and :func:`forbid.no_other_programs`: ``({route: "worked" or the exception it raised}, reports)``."""
    read_result, write_result = os.pipe()
    read_calls, write_calls = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            forbid.forbid(names, write_calls)
            forbid.no_other_programs()
            outcome = {}
            for name, route in routes.items():
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        route()
                    outcome[name] = "worked"
                except Exception as error:  # noqa: BLE001 - what the sentinels raise, and anything else
                    outcome[name] = type(error).__name__
            os.write(write_result, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write_result)
    os.close(write_calls)
    os.waitpid(pid, 0)
    outcome = os.read(read_result, 1 << 20).decode()
    reports = os.read(read_calls, 1 << 20).decode().split()
    os.close(read_result)
    os.close(read_calls)
    outcome = json.loads(outcome or "{}")
    assert set(outcome) == set(routes), "the child ended before trying every route"
    return outcome, reports


def _not_refused(outcome: dict[str, str]) -> dict[str, str]:
    """The routes that were not refused by a sentinel (ForbiddenCall) or by the kernel (no process may start)."""
    return {name: how for name, how in outcome.items() if how not in ("ForbiddenCall", "PermissionError")}


def _module_from_file(name: str):
    """A fresh copy of an installed module, executed from its file (not the loaded one)."""
    spec = importlib.util.spec_from_file_location(f"fresh_{name}", importlib.import_module(name).__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lstm_routes() -> dict:
    x, h, c = torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)
    w, u, b = torch.randn(16, 3), torch.randn(16, 4), torch.randn(16)
    c_function = torch._C._VariableFunctions.lstm_cell
    program = ("import torch; torch.lstm_cell(torch.randn(2, 3), (torch.randn(2, 4), torch.randn(2, 4)), "
               "torch.randn(16, 3), torch.randn(16, 4))")  # a fresh interpreter has no sentinels

    def thread():
        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("out", torch.lstm_cell(x, (h, c), w, u)))
        worker.start()
        worker.join()
        if "out" not in box:
            raise forbid.ForbiddenCall("the thread was refused")

    def pure_python_cell(module):
        cell = module.LSTMCell(3, 4)
        return cell(x, (h, c))

    def forked():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return {
        "torch.lstm_cell": lambda: torch.lstm_cell(x, (h, c), w, u),
        "torch._VF": lambda: torch._VF.lstm_cell(x, (h, c), w, u),
        "C binding through map": lambda: next(map(c_function, [x], [(h, c)], [w], [u])),
        "torch.ops.aten": lambda: torch.ops.aten.lstm_cell(x, [h, c], w, u),
        "nn.LSTMCell": lambda: torch.nn.LSTMCell(3, 4)(x),
        "nn.LSTM subclass": lambda: type("Mine", (torch.nn.LSTM,), {})(3, 4)(x[None]),
        "Python function through map": lambda: next(map(torch.nn.functional.multi_head_attention_forward, [h])),
        "another thread": thread,
        # the oneDNN kernel behind nn.LSTM, under a name without "lstm" (float32: passes a rtol of 1e-5)
        "mkldnn_rnn_layer": lambda: torch.mkldnn_rnn_layer(x[None], w, u, b, b, h[None], c[None], False, [], 2, 4, 1,
                                                           True, False, False, False),
        # a pure-Python LSTM cell (torch.ao's quantizable one computes in float) from its module loaded again
        "a library module loaded again": lambda: pure_python_cell(
            importlib.reload(importlib.import_module("torch.ao.nn.quantizable.modules.rnn"))),
        "a library module executed from its file": lambda: pure_python_cell(
            _module_from_file("torch.ao.nn.quantizable.modules.rnn")),
        "another program": lambda: subprocess.run([sys.executable, "-c", program], check=True, capture_output=True),
        "a forked process": forked,
    }


def test_a_forbidden_operator_is_unusable_by_every_route_and_each_call_is_reported():
    outcome, reports = _in_child(LSTM_NAMES | {"multi_head_attention_forward"}, _lstm_routes())
    assert _not_refused(outcome) == {}, f"reached the forbidden implementation (or failed otherwise): {outcome}"
    assert any("lstm_cell" in r for r in reports) and any("multi_head_attention_forward" in r for r in reports)
    assert any("mkldnn_rnn_layer" in r for r in reports) and any("LSTMCell" in r for r in reports)


def test_what_an_exercise_is_written_with_still_works():
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    box = {}
    routes = {
        "operations": lambda: torch.sigmoid(x) @ w.T + torch.tanh(x).chunk(4, 1)[0].sum(),
        "a thread": lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=lambda: box.update(y=x @ w))),
        "intra-op threads": lambda: (torch.set_num_threads(2), torch.randn(512, 512) @ torch.randn(512, 512)),
        "numpy": lambda: np.linalg.norm(np.arange(5.0)),
        "a library module imported now": lambda: importlib.import_module("email.mime.text"),
    }
    outcome, reports = _in_child(LSTM_NAMES, routes)
    assert set(outcome.values()) == {"worked"} and reports == [], outcome


def test_a_forbidden_layer_norm_is_unusable_through_its_kernels_and_other_normalisations():
    x, g, b = (torch.randn(*shape, dtype=torch.float64) for shape in ((2, 3, 5), (5,), (5,)))
    source = "def f(x, w, b):\n    return torch.ops.aten.layer_norm(x, [5], w, b, 1e-5)\n"
    routes = {
        "F.layer_norm": lambda: torch.nn.functional.layer_norm(x, (5,), g, b),
        "nested tensors (a kernel of their own)": lambda: torch.ops.aten.native_layer_norm(
            torch.nested.nested_tensor([x[0], x[1]]), [5], g, b, 1e-5),
        "group norm's kernel": lambda: torch.ops.aten.native_group_norm(x.reshape(6, 5, 1), None, None, 6, 1, 5, 1,
                                                                       1e-5),
        "batch norm's kernel": lambda: torch.ops.aten._native_batch_norm_legit.no_stats(x.reshape(1, 6, 5), None, None,
                                                                                       True, 0.0, 1e-5),
        "batch norm's other kernel": lambda: torch._batch_norm_impl_index(x.reshape(1, 6, 5), None, None, None, None,
                                                                          True, 0.0, 1e-5, False),
        "an RMS norm of the centred input": lambda: torch.rms_norm(x - x.mean(-1, keepdim=True), [5], g, 1e-5),
        "the Python reference": lambda: torch._refs.native_layer_norm(x, [5], g, b, 1e-5),
        "TorchScript's static runtime": lambda: torch._C._jit_to_static_module(
            torch.jit.CompilationUnit(source).f.graph),
        "the layer norm by hand": lambda: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
            x.var(-1, unbiased=False, keepdim=True) + 1e-5) * g + b,
    }
    outcome, _ = _in_child(LAYER_NORM_NAMES, routes)
    assert outcome.pop("the layer norm by hand") == "worked"
    assert _not_refused(outcome) == {}, outcome


def test_a_forbidden_attention_is_unusable_through_its_kernels_and_other_implementations():
    q = torch.randn(2, 3, 4, dtype=torch.float64)
    eye = torch.eye(4, dtype=torch.float64)
    routes = {
        "the math kernel": lambda: torch.ops.aten._scaled_dot_product_attention_math(q, q, q),
        "the fused multi-head kernel": lambda: torch._native_multi_head_attention(
            q, q, q, 4, 1, torch.cat([eye, eye, eye]), torch.zeros(12, dtype=torch.float64), eye,
            torch.zeros(4, dtype=torch.float64), None, True, True),
        "flex attention": lambda: importlib.import_module("torch.nn.attention.flex_attention").flex_attention(
            q[:, None], q[:, None], q[:, None]),
        "the attention by hand": lambda: torch.softmax(q @ q.transpose(-2, -1) / 2.0, -1) @ q,
    }
    outcome, _ = _in_child(ATTENTION_NAMES, routes)
    assert outcome.pop("the attention by hand") == "worked"
    assert _not_refused(outcome) == {}, outcome


def test_a_numpy_exercise_gets_no_automatic_differentiation_from_torch():
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)  # made before the child, as a setup could
    loss = (torch.tanh(w @ torch.ones(3, dtype=torch.float64)) ** 2).sum()
    one, tangent = torch.ones((), dtype=torch.float64), torch.ones(3, 3, dtype=torch.float64)

    def engine_under_another_name():
        engine = importlib.import_module("torch.autograd.variable").ImperativeEngine()
        return engine.run_backward((loss,), (one,), True, False, (w,), False, False)

    def dual_numbers():
        level = torch._C._enter_dual_level()
        return torch._unpack_dual(torch._make_dual(w.detach(), tangent, level=level), level=level)

    routes = {
        "torch.autograd.grad": lambda: torch.autograd.grad(loss, w, retain_graph=True),
        "the engine under another name": engine_under_another_name,
        "the graph's nodes called by hand": lambda: loss.grad_fn(one),
        "forward-mode dual numbers": dual_numbers,
        "a tensor from numpy": lambda: torch.from_numpy(np.arange(3.0)) * 2,
        "numpy": lambda: np.tanh(np.arange(3.0)) @ np.ones(3),
    }
    outcome, _ = _in_child(NUMPY_ONLY, routes)
    assert outcome.pop("numpy") == "worked"
    assert _not_refused(outcome) == {}, outcome


@pytest.mark.xfail(strict=True, reason="a library's source compiled under another file name is the student's text: "
                                       "no run-time check tells a pasted copy from the student's own work")
def test_a_copy_of_a_library_source_is_refused():
    def pasted_copy():
        path = importlib.import_module("torch.ao.nn.quantizable.modules.rnn").__file__
        namespace = {"__name__": "pasted"}
        exec(compile(open(path).read(), "<answer_lstm_cell>", "exec"), namespace)  # noqa: S102
        return namespace["LSTMCell"](3, 4)(torch.randn(2, 3))

    outcome, _ = _in_child(LSTM_NAMES, {"pasted copy": pasted_copy})
    assert _not_refused(outcome) == {}, outcome


def _plan(tmp_path, source: str, function: str, forbidden=(), cell_cpu=60.0, cell_wall=60.0, stand_ins=(),
          tensors=False) -> tuple[dict, dict]:
    cases = [{"args": (np.arange(3.0),), "kwargs": {}, "forbidden": list(forbidden), "twice": False, "torch": tensors}]
    with open(tmp_path / "test_f.pkl", "wb") as f:
        pickle.dump(cases, f)
    plan = {"setup": ["import numpy as np\nimport torch"], "student": [{"label": "f", "source": source}],
            "cells": [{"grade_id": "test_f", "function": function, "forbidden": list(forbidden), "scaffolds": {},
                       "stand_ins": list(stand_ins)}],
            "sandboxed": False, "cases_dir": str(tmp_path), "feedback": [],
            "limits": {"cell_cpu_seconds": cell_cpu, "notebook_cpu_seconds": 600, "cell_seconds": cell_wall,
                       "notebook_seconds": 600}}
    return plan, {"__builtins__": builtins, "__name__": "__main__"}


def test_each_graded_cell_runs_where_no_student_code_ran_before(tmp_path):
    plan, namespace = _plan(tmp_path, "import numpy as np\nnp.sum = lambda *a, **k: 42\ndef f(x):\n    return np.sum(x)\n",
                            "f")
    report = probe_runner.run(plan, namespace)
    assert report["cells"]["test_f"]["cases"][0]["value"] == 42  # the patch lives in the child only ...
    assert np.sum(np.arange(3.0)) == 3.0  # ... never in the process that forks the next cell


STAND_IN_ANSWERS = {  # what answers an exercise with the course's own code: (source, forbidden names, stand-ins, name)
    # ps06: scaled_dot_product_attention returning the scaffold that replaces it when multi_head_attention is graded
    "attention scaffold": (
        "from course_lib.testing import PlainScaledAttention\n"
        "def f(x):\n    return PlainScaledAttention()(x[None, None], x[None, None], x[None, None])[0]\n",
        ATTENTION_NAMES, ("course_lib.testing:PlainScaledAttention()",), "course_lib.testing.PlainScaledAttention"),
    # ps04: one step of lstm_cell by the layer the library trains with (a Recurrent of one step runs
    # course_lib.recurrent.fused_lstm), which the student edition ships before lstm_cell is revealed
    "fused LSTM layer": (
        "from course_lib.recurrent import cells, layers\n"
        "def f(x):\n    layer = layers.Recurrent(cells.LSTMCell(3, 2))\n"
        "    return layer(torch.as_tensor(x, dtype=torch.float32)[None, None])[0][0, 0].detach()\n",
        LSTM_NAMES, scaffolds.stand_ins("ps04_lstm", "lstm_cell"), "course_lib.recurrent.fused_lstm.lstm_layer"),
    # ps07: causal self-attention by the attention generation decodes with (GPT._decode runs
    # course_lib.gpt.causal_attention._attend_with_kv_cache), shipped before causal_self_attention is revealed
    "cached attention": (
        "from course_lib.gpt import causal_attention\n"
        "def f(x):\n    x = torch.as_tensor(x, dtype=torch.float32)[None, :, None].repeat(1, 1, 2)\n"
        "    cache = causal_attention.KVCache(1, 1, 1, 2, 3)\n"
        "    return causal_attention._attend_with_kv_cache(x, torch.eye(2).repeat(3, 1), torch.zeros(6), "
        "torch.eye(2), torch.zeros(2), 1, cache, 0, 0)\n",
        ATTENTION_NAMES, scaffolds.stand_ins("ps07_gpt", "causal_self_attention"),
        "course_lib.gpt.causal_attention._attend_with_kv_cache"),
    # ps07: causal self-attention by chapter 9's grouped-query attention with as many key-value heads as heads
    "grouped-query attention": (
        "from course_lib.transfer.grouped_query_attention import grouped_query_attention\n"
        "def f(x):\n    x = torch.as_tensor(x, dtype=torch.float32)[None, :, None].repeat(1, 1, 2)\n"
        "    return grouped_query_attention(x, torch.eye(2).repeat(3, 1), torch.zeros(6), torch.eye(2), "
        "torch.zeros(2), 1, 1)[0]\n",
        ATTENTION_NAMES, scaffolds.stand_ins("ps07_gpt", "causal_self_attention"),
        "course_lib.transfer.grouped_query_attention.grouped_query_attention"),
    # ps07: most_frequent_pair by the first merge of course_lib's incremental BPE trainer, which is no exercise
    "BPE trainer": (
        "from course_lib.gpt.bpe import train_bpe\n"
        "def f(x):\n    return train_bpe({'abab': 2, 'ba': 1}, 3)[1][0]\n",
        {"BpeTrainer"}, scaffolds.stand_ins("ps07_gpt", "most_frequent_pair"), "course_lib.gpt.bpe.train_bpe"),
}


def test_the_grader_names_the_course_s_stand_ins_for_each_exercise():
    assert set(scaffolds.stand_ins("ps04_lstm", "lstm_cell")) == {"course_lib.recurrent.fused_lstm:lstm_layer",
                                                                  "course_lib.recurrent.fused_lstm:_LSTMLayer"}
    assert set(scaffolds.stand_ins("ps07_gpt", "causal_self_attention")) == {
        "course_lib.testing:PlainCausalAttention", "course_lib.gpt.causal_attention:_attend_with_kv_cache",
        "course_lib.transfer.grouped_query_attention:grouped_query_attention",
        "course_lib.transfer.grouped_query_attention:GroupedQueryAttention"}
    assert scaffolds.stand_ins("ps07_gpt", "most_frequent_pair") == ("course_lib.gpt.bpe:train_bpe",)
    assert scaffolds.stand_ins("ps07_gpt", "apply_merges") == ()  # BPETokenizer applies the merges with apply_merges


@pytest.mark.parametrize("source, names, stand_ins, refused", list(STAND_IN_ANSWERS.values()), ids=list(STAND_IN_ANSWERS))
def test_the_course_s_own_stand_in_for_an_exercise_is_not_its_answer(tmp_path, source, names, stand_ins, refused):
    plan, namespace = _plan(tmp_path, source, "f", names, stand_ins=stand_ins, tensors=True)
    outcome = probe_runner.run(plan, namespace)["cells"]["test_f"]
    assert outcome["forbidden"] == [refused], outcome
    plan, namespace = _plan(tmp_path, source, "f", names, tensors=True)  # grading another function: allowed
    outcome = probe_runner.run(plan, namespace)["cells"]["test_f"]
    assert outcome["forbidden"] == [] and "value" in outcome["cases"][0], outcome


def test_a_forbidden_call_outside_the_test_cases_costs_only_its_own_line(tmp_path):
    # a top-level experiment left in an answer cell: it fails there, and the function (which does not use it) passes
    source = ("def f(x):\n    return x\n"
              "_spare = torch.lstm_cell(torch.zeros(1, 1), (torch.zeros(1, 1), torch.zeros(1, 1)), torch.zeros(4, 1),"
              " torch.zeros(4, 1))\n")
    plan, namespace = _plan(tmp_path, source, "f", LSTM_NAMES)
    outcome = probe_runner.run(plan, namespace)["cells"]["test_f"]
    assert outcome["forbidden"] == [] and outcome["cases"][0]["value"]["array"], outcome
    assert outcome["cell_errors"][0][1].startswith("ForbiddenCall"), outcome


def test_a_child_cannot_write_into_the_report(tmp_path):
    # every descriptor the child holds (in a long session the pipes' numbers can be far above 64)
    source = ("import os\nfor fd in [int(n) for n in os.listdir('/proc/self/fd')]:\n    try:\n"
              "        os.write(fd, b'FORGED') if fd > 2 else None\n    except OSError:\n"
              "        pass\ndef f(x):\n    return x\n")
    plan, namespace = _plan(tmp_path, source, "f")
    read_fd, write_fd = os.pipe()
    saved = os.dup(1)
    os.dup2(write_fd, 1)  # the parent's report channel, as in the sandbox
    try:
        report = probe_runner.run(plan, namespace)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(write_fd)
    os.set_blocking(read_fd, False)
    try:
        leaked = os.read(read_fd, 65536)
    except BlockingIOError:
        leaked = b""
    os.close(read_fd)
    assert leaked == b"", "a graded cell's process wrote into the parent's report"
    # what it wrote into its own pipes only spoils its own outcome
    assert "cases" not in report["cells"]["test_f"] or report["cells"]["test_f"]["forbidden"]


def test_a_report_the_grader_would_decode_into_gigabytes_is_cut_in_the_sandbox(tmp_path, monkeypatch):
    # 250,000 empty lists: a megabyte of JSON that decodes into some 20 MB (the course's cells send < 5,000 values)
    plan, namespace = _plan(tmp_path, "def f(x):\n    return [[]] * 250_000\n", "f")
    outcome = probe_runner.run(plan, namespace)["cells"]["test_f"]
    assert outcome["stopped"] == "sent more than the grader reads" and "cases" not in outcome
    # and the whole report has bounds of its own: a cell past them is replaced by a note
    monkeypatch.setattr(probe_runner, "MAX_REPORT_VALUES", 1000)
    plan, namespace = _plan(tmp_path, "def f(x):\n    return [[]] * 300\n", "f")  # some 600 values a cell
    plan["cells"].append(dict(plan["cells"][0], grade_id="test_g"))
    (tmp_path / "test_g.pkl").write_bytes((tmp_path / "test_f.pkl").read_bytes())
    cells = probe_runner.run(plan, namespace)["cells"]
    assert "cases" in cells["test_f"] and "cases" not in cells["test_g"] and "larger" in cells["test_g"]["stopped"]


@pytest.mark.slow
def test_cpu_time_stops_a_cell_and_a_sleeping_cell_is_stopped_only_by_the_wall_clock(tmp_path):
    busy, _ = _plan(tmp_path, "def f(x):\n    while True:\n        pass\n", "f", cell_cpu=2)
    outcome = probe_runner.run(busy, {"__builtins__": builtins})["cells"]["test_f"]
    assert outcome.get("cpu_timeout") and "CPU time" in outcome["stopped"], outcome
    sleepy, _ = _plan(tmp_path, "import time\ndef f(x):\n    time.sleep(100)\n", "f", cell_cpu=1, cell_wall=3)
    outcome = probe_runner.run(sleepy, {"__builtins__": builtins})["cells"]["test_f"]
    assert outcome.get("wall_timeout") and "wall clock" in outcome["stopped"] and outcome["cpu"] < 1, outcome


# Cheats against later problem sets, each earning full points before the graded run closed its route (checked
# with the real answer keys and, by hand, in the sandbox); graded here by the grader's own graded run, in process.
LATER_CHEATS = {
    ("ps06_transformer", "scaled_dot_product_attention", "the scaffold that stands in for it"): """
        def scaled_dot_product_attention(query, key, value, mask=None):
            check_attention_inputs(query, key, value, mask)
            return PlainScaledAttention()(query, key, value, mask)
        """,
    ("ps06_transformer", "layer_norm", "nested tensors' own kernel, the recorder off"): """
        import sys, threading
        _off = next(map(sys.setprofile, [None]), None)  # an assignment (graded runs keep it), from C: unseen
        _off = next(map(threading.setprofile, [None]), None)

        def layer_norm(x, weight, bias, eps=1e-5):
            if not isinstance(x, torch.Tensor) or x.dim() < 1 or not x.is_floating_point():
                raise ValueError("x must be a float tensor of shape (..., D)")
            checks.expect_tensor(weight, "weight", (x.shape[-1],), "(D,)")
            checks.expect_tensor(bias, "bias", (x.shape[-1],), "(D,)")
            nested = torch.nested.as_nested_tensor([x.reshape(-1, x.shape[-1])])
            return torch.ops.aten.native_layer_norm(nested, [x.shape[-1]], weight, bias, eps)[0].unbind()[0].reshape(x.shape)
        """,
    ("ps03_rnn", "rnn_backward", "autograd's engine under another name, the recorder off"): """
        import importlib, sys, threading
        _off = next(map(sys.setprofile, [None]), None)
        _off = next(map(threading.setprofile, [None]), None)

        def rnn_backward(dhs, xs, hs, h0, W, U):
            xs = expect_shape(xs, "xs", (None, None, None), "(B, T, I)")
            batch, steps, dim = xs.shape
            W = expect_shape(W, "W", (None, dim), "(H, I)")
            U = expect_shape(U, "U", (len(W), len(W)), "(H, H)")
            hs = expect_shape(hs, "hs", (batch, steps, len(W)), "(B, T, H)")
            dhs = expect_shape(dhs, "dhs", (batch, steps, len(W)), "(B, T, H)")
            h0 = expect_shape(h0, "h0", (batch, len(W)), "(B, H)")
            t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))
            xs_, h0_, W_, U_ = (t(a).requires_grad_() for a in (xs, h0, W, U))
            b_ = torch.zeros(len(W), dtype=torch.float64, requires_grad=True)
            h, total = h0_, 0
            for step in range(steps):  # the forward pass again, shifted to give back hs
                pre = xs_[:, step] @ W_.T + h @ U_.T
                h = torch.tanh(pre + (torch.atanh(t(hs)[:, step]) - pre).detach() + b_)
                total = total + (t(dhs)[:, step] * h).sum()
            engine = importlib.import_module("torch.autograd.variable").ImperativeEngine()
            grads = engine.run_backward((total,), (torch.ones((), dtype=torch.float64),), False, False,
                                        (xs_, h0_, W_, U_, b_), False, False)
            return tuple(g.detach().numpy() for g in grads)
        """,
    # ps09: the course's own computations of each exercise, which the grader makes unusable while it is graded
    ("ps09_fine_tuning", "lora_linear", "the merged weight of course_lib's LoRA layers"): """
        def lora_linear(x, weight, bias, lora_a, lora_b, scale):
            from course_lib.transfer import lora
            scale = check_lora_args(x, weight, bias, lora_a, lora_b, scale)
            return F.linear(x, weight + lora.lora_delta(lora_a, lora_b, scale), bias)
        """,
    ("ps09_fine_tuning", "adamw_step", "torch.optim.AdamW under another name"): """
        def adamw_step(param, grad, exp_avg, exp_avg_sq, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
            import importlib
            make = getattr(importlib.import_module("torch." + "optim"), "Adam" + "W")
            copy = param.detach().clone().requires_grad_(True)
            optimizer = make([copy], lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
            optimizer.state[copy] = {"step": torch.tensor(float(step - 1)), "exp_avg": exp_avg.clone(),
                                     "exp_avg_sq": exp_avg_sq.clone()}
            copy.grad = grad.clone()
            optimizer.step()
            return copy.detach(), optimizer.state[copy]["exp_avg"], optimizer.state[copy]["exp_avg_sq"]
        """,
    ("ps09_fine_tuning", "early_stopping", "the scaffold that stands in for it"): """
        def early_stopping(losses, patience=2, min_delta=0.0):
            check_stopping_args(losses, patience, min_delta)
            best, stop = patience_counter(losses, patience, min_delta)
            return best, bool(stop)
        """,
}


def _graded_with_keys(assignment: str, variants: dict[str, tuple[str, str]], tmp_path) -> dict[str, dict[str, bool]]:
    """``variant -> {grade_id: passed}``: each variant (``function, answer``; the reference answers elsewhere)
    graded by the graded run on the function's cells, in a child of this process with the student edition."""
    from course_tools.authoring import answer_keys
    from course_tools.grading import probe_plan, sandbox
    from course_tools.grading.autograde import edition_dir, experiment_sources
    from course_tools.grading.verdicts import judge

    root = Path(__file__).resolve().parents[1]
    release = nbformat.read(root / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    solution = nbformat.read(root / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
    key = answer_keys.load(assignment, root)
    plans = {}
    for name, (function, answer) in variants.items():
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell.source = textwrap.dedent(answer) if grade_id == function and answer else answers[grade_id]
        (tmp_path / name / "in").mkdir(parents=True)
        plans[name], _ = probe_plan.write(tmp_path / name, nb, release, key, assignment, sandbox.Limits(), False,
                                          experiment_sources(release))
    edition = str(edition_dir(assignment, root))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the student edition and the setup's imports stay in this child
        try:
            os.close(read)
            namespace = edition_namespace(edition, next(iter(plans.values()))["setup"])
            passed = {}
            for name, plan in plans.items():
                passed[name] = {}
                for cell in (c for c in plan["cells"] if c["function"] == variants[name][0]):
                    with open(Path(plan["cases_dir"]) / f"{cell['grade_id']}.pkl", "rb") as f:
                        cases = pickle.load(f)
                    outcome, _ = probe_runner.run_cell(dict(namespace), plan, dict(cell, cpu_limit=60), cases)
                    entry = key[cell["grade_id"]]
                    passed[name][cell["grade_id"]] = judge(entry, outcome, secret=entry["kind"] == "hidden").passed
            os.write(write, json.dumps(passed).encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 1 << 16):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


@pytest.mark.parametrize("assignment", sorted({a for a, _, _ in LATER_CHEATS}))
def test_later_cheats_lose_their_function_s_points_under_the_real_answer_keys(assignment, tmp_path):
    """Each cheat loses its function's visible and hidden points; that function's reference answer keeps them
    (a few seconds per problem set: its setup and the function's cells)."""
    cheats = {f"{function}: {how}": (function, source) for (a, function, how), source in LATER_CHEATS.items()
              if a == assignment}
    references = {f"{function}: reference": (function, None) for function, _ in cheats.values()}
    graded = _graded_with_keys(assignment, {**references, **cheats}, tmp_path)
    for name in references:
        assert graded[name] and all(graded[name].values()), f"{assignment}: the reference fails: {graded[name]}"
    for name in cheats:
        assert graded[name] and not any(graded[name].values()), f"{assignment}: {name} kept points: {graded[name]}"


def test_feedback_records_written_just_before_the_child_exits_are_all_read(tmp_path):
    # The feedback child may write its last records and exit while the grader is still busy with an earlier
    # one; those records are in the pipe and must be read, not taken for a kernel that died (a red-team
    # batch once reported "the kernel died in tfidf" for a notebook whose every cell ran).
    plan, namespace = _plan(tmp_path, "def f(x):\n    return x\n", "f")
    plan["feedback"] = [{"index": 1, "label": "first", "source": "print('one')"},
                        {"index": 2, "label": "second", "source": "import time\ntime.sleep(0.3)\nprint('two')"}]
    records = []

    def slow_emit(line: bytes) -> None:
        records.append(json.loads(line))
        if len(records) == 1:
            time.sleep(1.5)  # a busy grader: the child finishes cell 2 and exits meanwhile

    feedback_runner.run_feedback(namespace, plan, slow_emit, started=time.monotonic())
    assert [r.get("index") for r in records] == [1, 2], records
    assert records[1]["text"] == "two\n" and not any("died" in r for r in records), records
