"""The grader's side of a verdict: plain data decoded without running anything, compared with the key.

Everything here runs in the test process: the probe's outcomes are produced by
``course_tools.in_sandbox.probe.run_case`` and passed through JSON, as they come out of a sandbox.
"""

from __future__ import annotations

import os

import json

import numpy as np
import pytest
import scipy.sparse as sp

from course_tools.authoring import answer_keys
from course_tools.in_sandbox import probe
from course_tools.grading import verdicts


def _roundtrip(value):
    return verdicts.from_plain(json.loads(json.dumps(probe.to_plain(value))))


@pytest.mark.parametrize("value", [
    3, 2.5, float("inf"), "text", None, True, (1, 2.0), [np.arange(3)], {"a": np.eye(2)},
    np.float32(1.5), np.arange(6, dtype=np.int32).reshape(2, 3), sp.csr_matrix(np.eye(3)),
])
def test_plain_data_round_trip_keeps_types_shapes_and_dtypes(value):
    back = _roundtrip(value)
    assert type(back) is type(value) or isinstance(value, np.generic) or sp.issparse(value)
    assert verdicts.difference(back, value, 0, 0, secret=False) is None


def test_objects_are_never_rebuilt_outside_the_sandbox():
    class AlwaysEqual:
        def __eq__(self, other):
            return True

    back = _roundtrip((AlwaysEqual(), np.array([object()], dtype=object)))
    assert all(isinstance(v, verdicts.Unsupported) for v in back)
    assert verdicts.difference(back[0], 1.0, 1e-6, 1e-9, secret=True)  # not equal to anything expected
    with pytest.raises(ValueError):
        verdicts.from_plain({"array": "AAAA", "dtype": "|O", "shape": [1]})  # no object arrays
    with pytest.raises(ValueError):
        verdicts.from_plain({"__reduce__": "os.system"})


def test_tensors_are_told_from_arrays():
    torch = pytest.importorskip("torch")
    back = _roundtrip(torch.ones(2, 3, dtype=torch.float64))
    assert isinstance(back, verdicts.Tensor) and back.shape == (2, 3)
    assert "torch tensor" in verdicts.difference(np.ones((2, 3)), back, 1e-6, 1e-9, secret=True)


def _entry(assignment: str, grade_id: str) -> dict:
    return answer_keys.load(assignment)[grade_id]


def test_hidden_messages_show_no_expected_value():
    entry = _entry("ps01_counts", "hidden_cosine_similarity")

    def off(a, b=None):
        from course_lib.vectors.counts import cosine_similarity
        return cosine_similarity(a, b) * 1.01

    verdict = verdicts.judge(entry, {"cases": verdicts.outcomes_in_process(off, entry)}, secret=True)
    assert not verdict.passed and "expected" not in verdict.message.split("differs")[-1]
    assert "hidden test 1 of" in verdict.message and "array (" in verdict.message  # shapes, not values
    assert len(verdict.message) < 400


def test_modifying_an_input_in_place_fails():
    entry = _entry("ps03_rnn", "hidden_clip_gradients")
    from course_lib.recurrent.clipping import clip_gradients

    def in_place(grads, max_norm):
        clipped, norm = clip_gradients(grads, max_norm)
        for g, c in zip(grads, clipped):
            g[...] = c
        return list(grads), norm

    verdict = verdicts.judge(entry, {"cases": verdicts.outcomes_in_process(in_place, entry)}, secret=True)
    assert not verdict.passed and "changes its inputs in place" in verdict.message


def test_a_numpy_detour_loses_the_gradient():
    torch = pytest.importorskip("torch")
    entry = _entry("ps04_lstm", "hidden_lstm_cell")
    from course_lib.recurrent.cells import lstm_cell

    def through_numpy(*args):
        h, c = lstm_cell(*args)
        return torch.from_numpy(h.detach().numpy().copy()), torch.from_numpy(c.detach().numpy().copy())

    verdict = verdicts.judge(entry, {"cases": verdicts.outcomes_in_process(through_numpy, entry)}, secret=True)
    assert not verdict.passed and "gradient" in verdict.message


def test_a_forbidden_library_call_is_judged_by_what_runs():
    torch = pytest.importorskip("torch")
    entry = _entry("ps04_lstm", "hidden_lstm_cell")

    def helper(x, state, w_ih, w_hh, b_ih, b_hh):
        return torch.lstm_cell(x, state, w_ih, w_hh, b_ih, b_hh)

    def innocent_name(*args):
        return helper(*args)

    verdict = verdicts.judge(entry, {"cases": verdicts.outcomes_in_process(innocent_name, entry)}, secret=True)
    assert not verdict.passed and "lstm_cell" in verdict.message and "yourself" in verdict.message


def test_missing_or_broken_results_fail_plainly(tmp_path):
    entry = _entry("ps01_counts", "test_one_hot")
    assert "produced no results" in verdicts.judge(entry, None, secret=False).message
    assert "not defined" in verdicts.judge(entry, {"missing": "x"}, secret=False).message
    assert "did not run to the end" in verdicts.judge(entry, {"cases": []}, secret=False).message
    garbage = tmp_path / "r.json"
    garbage.write_bytes(b"\x00\xff not json")
    assert verdicts.read_results(garbage) is None


def test_files_the_sandbox_wrote_are_read_as_untrusted_data(tmp_path):
    """A named pipe (which would block a reader), a link to /dev/zero (endless), a file over the cap and
    JSON nested 100,000 deep (which makes a decoder recurse) are each refused at once, not read."""
    import json
    import threading

    good = tmp_path / "good.json"
    good.write_text(json.dumps({"cases": []}))
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    endless = tmp_path / "zero.json"
    endless.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (verdicts.MAX_RESULT_BYTES + 1))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    results = {}

    def read_all():
        for path in (good, pipe, endless, big, deep):
            results[path.name] = verdicts.read_results(path)
    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading what the sandbox wrote blocked the grader"
    assert results == {"good.json": {"cases": []}, "pipe.json": None, "zero.json": None, "big.json": None,
                       "deep.json": None}
    assert verdicts.read_untrusted(endless, 10) is None and verdicts.read_untrusted(good, 100) == good.read_bytes()


def test_the_runners_report_is_decoded_as_untrusted_data():
    from course_tools.grading.autograde import read_report

    assert read_report(b'{"cells": {}}') == {"cells": {}}
    assert read_report(b"[" * 100_000 + b"]" * 100_000) == {}
    assert read_report(b"\xff\xfe not json") == {} and read_report(b"[1, 2]") == {}


def test_check_hidden_reads_the_key_of_the_assignment_it_runs_in(capsys):
    """ps05 and ps07 both have a hidden_beam_search: run by hand in an assignment's folder, each
    notebook's check must find its own key, whatever the keys' alphabetical order."""
    from course_lib.attention.decoding import beam_search as seq2seq_beam_search
    from course_lib.gpt.beam import beam_search as gpt_beam_search
    from course_tools import ROOT

    verdicts.check_hidden(gpt_beam_search, "hidden_beam_search", ROOT / "solutions" / "ps07_gpt")
    verdicts.check_hidden(seq2seq_beam_search, "hidden_beam_search", ROOT / "solutions" / "ps05_attention")
    with pytest.raises(AssertionError):  # the other assignment's function fails the key
        verdicts.check_hidden(seq2seq_beam_search, "hidden_beam_search", ROOT / "solutions" / "ps07_gpt")


def test_float32_entries_that_cancel_are_judged_on_the_arrays_scale():
    """A float32 sum rounds relative to its terms: where an entry cancels to near zero, another CPU or
    another correct order of summation moves it by units of its neighbours' last bits (3e-6 on a
    gradient entry of 0.07 beside entries of 18, seen between two machines). That is no error, in the
    grader or in ``sync --check``; a wrong entry of any size still is."""
    from course_tools.authoring import sync

    rng = np.random.default_rng(1)
    terms = rng.normal(size=(64, 200)).astype(np.float32) * 30
    terms[0] -= terms[0].mean()  # a row that cancels to about zero
    forward = terms.sum(axis=1)
    backward = terms[:, ::-1].sum(axis=1)  # the same sums in the other order, also correct
    assert not np.allclose(forward, backward, rtol=1e-5, atol=1e-7), "the orders do differ entry by entry"
    assert verdicts.difference(backward, forward, 1e-5, 1e-7, secret=True) is None
    assert sync.case_difference(forward, backward) is None
    for wrong in (forward * np.float32(1 + 1e-4), forward + np.float32(0.05) * np.eye(64, dtype=np.float32)[3]):
        assert verdicts.difference(wrong, forward, 1e-5, 1e-7, secret=True)
        assert sync.case_difference(forward, wrong)
    as64 = forward.astype(np.float64)  # float64 keeps its strict per-entry tolerance
    assert verdicts.difference(as64 + 1e-5 * np.abs(as64).max() * np.eye(64)[0], as64, 1e-5, 1e-9, secret=True)
