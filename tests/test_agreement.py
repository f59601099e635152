"""What passes on the student's machine passes in the grader: the local and the graded verdicts of a visible test agree.

A student runs a visible test cell on their own machine: it calls their function and
checks what comes back with ``assert_close`` and plain Python. When the notebook is
graded, the grader replays the calls that cell made (recorded into the answer key by
``tasks.py sync``) on the student's function in a sandbox and judges the returned values
outside it (:mod:`course_tools.grading.verdicts`). The two must agree, by construction:

- the replay of a **visible** cell judges with :func:`course_tools.grading.verdicts.lenient_difference`,
  which accepts every form a cell accepts (``assert_close``'s: tuples and lists, tensors and
  arrays, any dtype compared by value; and plain Python's: ``list(words)``, ``float(loss)``);
- the **hidden** cases stay strict (:func:`~course_tools.grading.verdicts.difference`) about what the
  docstring promises, so every visible cell checks those promises itself, with a message
  ("beam_search must return its words as a list of ints (got a Tensor: use .tolist())"): numpy
  functions their arrays and float64, torch functions a tensor of their input's dtype, with a
  float32 call where the hidden cases hold float32 ones.

The tests here check both halves on real answers. For every exercise function of ps01-ps09,
every answer of a set (the reference, the alternative-correct answers of
``tests/test_fairness.py`` and the new ones below) is run through the real visible test cell
of the *release* notebook, ``exercises/psNN/psNN.ipynb`` (after its setup cell, in a
namespace where the function is that answer): the local verdict; and through
``verdicts.judge`` on the visible entry ``test_<function>``: the graded verdict. They must be
equal. Then the reference's result is handed back in every other form a student could give it
(tensor for array, float32, list for tuple...): whatever form the visible cell accepts must
pass every entry of the answer key, hidden ones included. Everything runs in this process, in
seconds; no experiment runs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import warnings

import nbformat
import numpy as np
import pytest
import scipy.sparse as sp
import torch

import test_fairness as fairness
from course_tools import ROOT
from course_tools.authoring import answer_keys
from course_tools.in_sandbox import probe
from course_tools.grading import verdicts
from course_lib.testing import assert_close

# ---------------------------------------------------------------------------------------------
# New alternative-correct answers: other containers and other exact formulations. Each is a body
# (or ``(prelude, body)``) completing the released stub, as in tests/test_fairness.py, and must get
# full marks on the visible and the hidden entries of its function.
# ---------------------------------------------------------------------------------------------

NEW_ANSWERS: dict[str, dict[str, str | tuple[str, str]]] = {}


def correct(key: str, **bodies) -> None:
    NEW_ANSWERS.setdefault(key, {}).update(bodies)


# ps01
correct("vectors.counts.one_hot", put_along_axis="""
        out = np.zeros((ids.shape[0], vocab_size))
        np.put_along_axis(out, ids[:, None], 1.0, axis=1)
        return out""")
correct("vectors.counts.tfidf", csr_array="""
        dense = counts.toarray()
        n_docs = dense.shape[0]
        df = np.count_nonzero(dense, axis=0)
        idf = np.log((1 + n_docs) / (1 + df)) + 1 if smooth_idf else np.log(n_docs / np.maximum(df, 1)) + 1
        weighted = dense * idf
        if normalize:
            norms = np.linalg.norm(weighted, axis=1, keepdims=True)
            weighted = np.divide(weighted, norms, out=np.zeros_like(weighted), where=norms > 0)
        return sp.csr_array(weighted)  # the newer sparse container: still a scipy sparse CSR""")
correct("vectors.counts.ppmi", sum_of_logs="""
        coo = cooc.tocoo()
        total = coo.sum()
        n_w = np.asarray(coo.sum(axis=1)).ravel()
        n_c = np.asarray(coo.sum(axis=0)).ravel() ** alpha
        positive = coo.data > 0
        rows, cols, counts = coo.row[positive], coo.col[positive], coo.data[positive]
        pmi = np.log(counts) + np.log(total) - np.log(n_w[rows]) - np.log(n_c[cols]) + np.log(n_c.sum()) - np.log(total)
        keep = pmi > 0
        return sp.csr_matrix((pmi[keep], (rows[keep], cols[keep])), shape=coo.shape)""")
correct("vectors.counts.cosine_similarity", normalise_rows_first_in_longdouble="""
        def unit_rows(m):  # rows of length 1, rows of zeros left at zero, in extended precision
            m = m.astype(np.longdouble)
            norms = np.sqrt(np.einsum("ne,ne->n", m, m))[:, None]
            return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
        return np.einsum("ne,me->nm", unit_rows(a), unit_rows(b)).astype(np.float64)""")

# ps02
correct("vectors.word2vec.skipgram_pairs", distance_matrix="""
        n = len(ids)
        reach = np.full(n, window) if rng is None else rng.integers(1, window + 1, size=n)
        distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (T, T)
        centers, contexts = np.nonzero((distance > 0) & (distance <= reach[:, None]))
        return ids[centers].astype(np.int64), ids[contexts].astype(np.int64)""")
correct("vectors.word2vec.sgns_loss_and_grads", softplus_and_numpy_scalar_loss="""
        def softplus(z):  # log(1 + exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|))
            return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))
        batch = center.shape[0]
        positive = np.einsum("be,be->b", context, center)
        negative = np.einsum("bke,be->bk", negatives, center)
        loss = (softplus(-positive).sum() + softplus(negative).sum()) / batch  # a numpy float64: a float too
        sig_pos = np.exp(-softplus(-positive))  # sigma(x) = exp(-softplus(-x))
        sig_neg = np.exp(-softplus(-negative))
        grad_center = ((sig_pos - 1)[:, None] * context + np.einsum("bk,bke->be", sig_neg, negatives)) / batch
        grad_context = (sig_pos - 1)[:, None] * center / batch
        grad_negatives = sig_neg[:, :, None] * center[:, None, :] / batch
        return loss, grad_center, grad_context, grad_negatives""")
correct("vectors.gradcheck.numerical_gradient", unravelled_flat_index="""
        grad = np.zeros(x.shape)
        for flat in range(x.size):
            index = np.unravel_index(flat, x.shape)
            saved = x[index]
            x[index] = saved + eps
            plus = f(x)
            x[index] = saved - eps
            minus = f(x)
            x[index] = saved
            grad[index] = (plus - minus) / (2 * eps)
        return grad""")
correct("vectors.alignment.procrustes", einsum_then_svd="""
        u, _, vt = np.linalg.svd(np.einsum("ni,nj->ij", target, source))
        return np.einsum("ik,kj->ij", u, vt)""")

# ps03
correct("recurrent.elman.rnn_step", longdouble_then_cast="""
        pre = x.astype(np.longdouble) @ W.T.astype(np.longdouble) + h_prev.astype(np.longdouble) @ U.T + b
        return np.tanh(pre).astype(np.float64)""")
correct("recurrent.clipping.clip_gradients", vdot_norm_numpy_scalar="""
        total_norm = np.sqrt(sum(np.vdot(g, g) for g in grads))  # a numpy float64: a float too
        scale = min(1.0, max_norm / (total_norm + 1e-6))
        return [np.multiply(g, scale) for g in grads], total_norm""")
correct("recurrent.perplexity.perplexity", logaddexp_reduce="""
        nll = np.logaddexp.reduce(logits, axis=1) - np.take_along_axis(logits, targets[:, None], axis=1)[:, 0]
        return np.exp(nll.mean())  # a numpy float64, inf beyond the float64 range""")

# ps04
correct("recurrent.cells.lstm_cell", addmm_and_split="""
        gates = torch.addmm(bias_ih + bias_hh, x, weight_ih.T).addmm(h, weight_hh.T)  # (B, 4H)
        i, f, g, o = torch.split(gates, h.shape[1], dim=1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c_next), c_next""")
correct("recurrent.cells.gru_cell", einsum="""
        x_r, x_z, x_n = (torch.einsum("bi,gi->bg", x, weight_ih) + bias_ih).chunk(3, dim=1)
        h_r, h_z, h_n = (torch.einsum("bh,gh->bg", h, weight_hh) + bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        return (1 - z) * torch.tanh(x_n + r * h_n) + z * h""")
correct("recurrent.elmo.scalar_mix", logsumexp_and_tensordot="""
        s = torch.exp(weights - torch.logsumexp(weights, dim=0))  # softmax(w), no overflow
        return gamma.reshape(()) * torch.tensordot(s, layers, dims=1)""")

# ps05
correct("attention.masking.masked_softmax", logsumexp_of_the_real_positions="""
        filled = scores.masked_fill(~mask[:, None, :], -math.inf)
        return torch.exp(filled - torch.logsumexp(filled, dim=-1, keepdim=True))""",
        float64_inside_then_cast="""
        filled = scores.double().masked_fill(~mask[:, None, :], -math.inf)
        return torch.softmax(filled, dim=-1).to(scores.dtype)""")
correct("attention.scores.general_attention", keys_transformed_by_einsum=(fairness._MASKED_SOFTMAX, """
        transformed = torch.einsum("bih,gh->big", keys, weight)  # K W^T
        weights = masked_softmax(torch.einsum("bqg,big->bqi", query, transformed), mask)
        return torch.einsum("bqi,bih->bqh", weights, keys), weights"""))
correct("attention.decoding.beam_search", log_probs_in_float64_lists=r"""
        live, scores, state_now, finished = [[]], torch.zeros(1, dtype=torch.float64), state, []
        for _ in range(max_len):
            last = torch.tensor([words[-1] if words else bos for words in live])
            log_probs, state_now = step_fn(last, state_now)
            vocab = log_probs.shape[1]
            totals = (scores[:, None] + log_probs.double()).flatten()
            best, index = torch.topk(totals, min(beam_width, totals.numel()))
            kept, kept_scores, parents = [], [], []
            for total, flat in zip(best.tolist(), index.tolist()):
                parent, word = divmod(flat, vocab)
                words = live[parent] + [word]
                if word == eos:
                    finished.append((words, total))
                else:
                    kept.append(words); kept_scores.append(total); parents.append(parent)
            if not kept:
                break
            live, scores = kept, torch.tensor(kept_scores, dtype=torch.float64)
            if state_now is not None:
                state_now = state_now[torch.tensor(parents)]
        else:
            finished += list(zip(live, scores.tolist()))
        words, total = max(finished, key=lambda wt: wt[1] / len(wt[0]) ** alpha)
        return list(words), float(total)""")

# ps06
correct("transformer.scaled_attention.scaled_dot_product_attention", float64_inside_then_cast="""
        q, k, v = query.double(), key.double(), value.double()
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask.double()
        weights = torch.softmax(scores, dim=-1)
        return (weights @ v).to(query.dtype), weights.to(query.dtype)""",
        logsumexp_softmax="""
        scores = torch.matmul(query, key.transpose(-1, -2)) * query.shape[-1] ** -0.5
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), -math.inf) if mask.dtype == torch.bool else scores + mask
        weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
        return torch.matmul(weights, value), weights""")
correct("transformer.layer_norm.layer_norm", float64_statistics_then_cast="""
        wide = x.double()
        mean = wide.mean(dim=-1, keepdim=True)
        variance = ((wide - mean) ** 2).mean(dim=-1, keepdim=True)
        return ((wide - mean) / torch.sqrt(variance + eps) * weight.double() + bias.double()).to(x.dtype)""")
correct("transformer.positions.rope", rotation_in_float64_then_cast="""
        size, steps = x.shape[-1], x.shape[-2]
        theta = base ** (-torch.arange(0, size, 2, dtype=torch.float64) / size)  # (hs/2,)
        angles = torch.arange(start, start + steps, dtype=torch.float64)[:, None] * theta  # (T, hs/2)
        pairs = x.double().reshape(*x.shape[:-1], size // 2, 2)
        even, odd = pairs[..., 0], pairs[..., 1]
        turned = torch.stack([even * angles.cos() - odd * angles.sin(), even * angles.sin() + odd * angles.cos()], -1)
        return turned.reshape(x.shape).to(x.dtype)""")

# ps07
correct("gpt.filters.temperature_top_k", float64_division_then_cast="""
        scaled = (logits.double() / temperature).to(logits.dtype)
        if k is None or k >= logits.shape[-1]:
            return scaled
        threshold = torch.topk(scaled, k, dim=-1).values[..., -1:]
        return torch.where(scaled >= threshold, scaled, torch.full_like(scaled, -math.inf))""")
correct("gpt.causal_attention.causal_self_attention", einsum_projections="""
        def heads(z):  # (B, T, D) -> (B, nh, T, hs)
            return z.reshape(batch, steps, num_heads, width // num_heads).transpose(1, 2)
        q, k, v = (heads(z) for z in (torch.einsum("btd,ed->bte", x, in_weight) + in_bias).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        out, _ = attention_fn(q, k, v, causal_mask_after(past, steps))
        merged = out.transpose(1, 2).reshape(batch, steps, width)
        return torch.einsum("btd,ed->bte", merged, out_weight) + out_bias, (k, v)""",
        float64_inside_then_cast="""
        def heads(z):  # (B, T, D) -> (B, nh, T, hs)
            return z.reshape(batch, steps, num_heads, width // num_heads).transpose(1, 2)
        q, k, v = (heads(z) for z in (x.double() @ in_weight.double().T + in_bias.double()).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0].double(), k], dim=2), torch.cat([cache[1].double(), v], dim=2)
        out, _ = attention_fn(q, k, v, causal_mask_after(past, steps))
        merged = out.transpose(1, 2).reshape(batch, steps, width)
        output = merged @ out_weight.double().T + out_bias.double()
        return output.to(x.dtype), (k.to(x.dtype), v.to(x.dtype))""")

# ps08
correct("bert.pooling.mean_pool", float64_sums_then_cast="""
        weights = padding.double()  # (B, T)
        sums = torch.einsum("bt,btd->bd", weights, hidden.double())
        return (sums / weights.sum(dim=1, keepdim=True)).to(hidden.dtype)""")
correct("bert.self_attention.bert_self_attention", float64_inside_then_cast="""
        batch, steps, width = x.shape
        size = width // num_heads
        def heads(z):  # (B, T, D) -> (B, nh, T, hs)
            return z.reshape(batch, steps, num_heads, size).transpose(1, 2)
        wide = x.double()
        q, k, v = (heads(wide @ w.double().T + b.double()) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)  # (B, nh, T, T)
        if padding is not None:
            scores = scores.masked_fill(~padding[:, None, None, :], -math.inf)
        weights = torch.softmax(scores, dim=-1).to(x.dtype)
        used = weights if dropout is None else dropout(weights)
        out = (used.double() @ v).transpose(1, 2).reshape(batch, steps, width)
        return out.to(x.dtype), weights""")
correct("bert.wordpiece.wordpiece_word", ends_from_the_longest="""
        if len(word) > max_chars:
            return [unk_token]
        pieces, start = [], 0
        while start < len(word):
            prefix = "##" if start else ""
            end = next((e for e in range(len(word), start, -1) if prefix + word[start:e] in vocab), None)
            if end is None:
                return [unk_token]
            pieces.append(prefix + word[start:end])
            start = end
        return pieces""")

# ps09 (adamw_step's body runs inside the stub's `with torch.no_grad():`: fairness._no_grad indents it)
correct("transfer.lora.lora_linear", float64_inside_then_cast="""
        wide = x.double()
        y = wide @ weight.double().T + scale * ((wide @ lora_a.double().T) @ lora_b.double().T)
        if bias is not None:
            y = y + bias.double()
        return y.to(x.dtype)""")
correct("transfer.adamw.adamw_step", a_list_of_three=fairness._no_grad("""
        beta1, beta2 = betas
        m = beta1 * exp_avg + (1 - beta1) * grad
        v = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
        update = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps)
        return [param - lr * weight_decay * param - lr * update, m, v]"""))
correct("transfer.early_stopping.early_stopping", numpy_integer_best="""
        best = np.int64(0)
        for epoch, loss in enumerate(losses):
            if loss < losses[best] - min_delta:
                best = np.int64(epoch)
        return best, bool(len(losses) - 1 - best >= patience)""")
correct("transfer.fine_tuning.fine_tune_loop", records_as_tuples=(fairness._LOOP_PRELUDE, fairness._LOOP.replace(
    'return {"loss": losses, "valid_loss": valid_losses, "best_epoch": best, "best_state": kept}',
    'return {"loss": tuple(losses), "valid_loss": tuple(valid_losses), "best_epoch": int(best), "best_state": kept}')))


# ---------------------------------------------------------------------------------------------
# Machinery: the released notebook's cells, the two verdicts
# ---------------------------------------------------------------------------------------------

OWNERS = fairness.OWNERS


def short(key: str) -> str:
    """``decoding.beam_search`` for ``attention.decoding.beam_search``: unique among the exercises, short."""
    return ".".join(key.split(".")[-2:])


def reference(key: str):
    module, name = key.rsplit(".", 1)
    return getattr(importlib.import_module(f"course_lib.{module}"), name)


@functools.lru_cache(maxsize=None)
def release_cells(assignment: str) -> tuple[str, dict[str, str]]:
    """The setup cell's source and ``function -> visible test cell source`` of the released notebook."""
    nb = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    setup, visible = "", {}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id == "setup":
            setup = cell.source
        elif grade_id.startswith("test_"):
            visible[grade_id.removeprefix("test_")] = cell.source
    return setup, visible


@contextlib.contextmanager
def kernel_like():
    """The state a notebook's cells run in: torch's state restored afterwards, no output, no warnings."""
    with answer_keys.torch_state() as torch_module, contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield torch_module


def local_verdict(key: str, fn) -> tuple[bool, str]:
    """Run the released visible test cell of ``key`` on ``fn``, after the setup cell: (passed, message)."""
    name = key.rsplit(".", 1)[1]
    setup, visible = release_cells(OWNERS[key])
    namespace = {"__name__": "__main__"}
    with kernel_like():
        exec(compile(setup, "<setup>", "exec"), namespace)  # noqa: S102 - our own notebook
        namespace[name] = fn
        try:
            exec(compile(visible[name], f"<test_{name}>", "exec"), namespace)  # noqa: S102
        except Exception as error:  # noqa: BLE001 - whatever fails the cell fails it for the student
            return False, f"{type(error).__name__}: {error}"
    return True, f"{name}: all visible tests passed"


def graded_verdicts(key: str, fn, kinds=("visible",)) -> dict[str, verdicts.Verdict]:
    """``grade_id -> verdict`` of the entries of ``key`` of the given kinds, judged as grading judges them."""
    out = {}
    with kernel_like() as torch_module:
        torch_module.set_default_dtype(torch_module.float64)  # as the setup cells leave the kernel
        torch_module.set_num_threads(1)
        for grade_id, entry in fairness.key_of(OWNERS[key]).items():
            if entry["key"] == key and entry["kind"] in kinds:
                outcomes = verdicts.outcomes_in_process(fn, entry)
                out[grade_id] = verdicts.judge(entry, {"cases": outcomes}, secret=entry["kind"] == "hidden")
    return out


def visible_entry_id(key: str) -> str:
    return f"test_{key.rsplit('.', 1)[1]}"


def load(key: str, answer) -> object:
    """An answer (a body, or ``(prelude, body)``) completing the released stub, executed after the setup cell."""
    prelude, body = answer if isinstance(answer, tuple) else ("", answer)
    return fairness.load_answer(key, fairness.answer_source(key, body, prelude))


def _every_answer():
    """``(key, label)`` of every answer: ``"reference"``, ``"fairness:<name>"``, ``"new:<name>"``."""
    params = []
    for key in OWNERS:
        params.append(pytest.param(key, "reference", id=f"{short(key)}-reference"))
        for source, answers in (("fairness", fairness.ANSWERS.get(key, {}).get("correct", {})),
                                ("new", NEW_ANSWERS.get(key, {}))):
            params += [pytest.param(key, f"{source}:{name}", id=f"{short(key)}-{name}") for name in answers]
    return params


def answer_function(key: str, label: str):
    """The function of the answer ``label`` of :func:`_every_answer`, loaded as a notebook would hold it."""
    if label == "reference":
        return reference(key)
    source, name = label.split(":", 1)
    answers = fairness.ANSWERS[key]["correct"] if source == "fairness" else NEW_ANSWERS[key]
    return load(key, answers[name])


# ---------------------------------------------------------------------------------------------
# The tests: the mechanism, the agreement on correct answers, the forms a visible cell accepts
# ---------------------------------------------------------------------------------------------


def _as_graded(value):
    """``value`` as the grader sees it: through the probe's plain data and back."""
    return verdicts.from_plain(json.loads(json.dumps(probe.to_plain(value))))


ACCEPTED_BY_ASSERT_CLOSE = [  # (what a student returns, what the cell expects): assert_close passes
    (np.arange(3.0).astype(np.float32), np.arange(3.0)),
    (torch.arange(3.0, dtype=torch.float64), np.arange(3.0)),
    (np.arange(3.0), torch.arange(3.0, dtype=torch.float64)),
    (np.arange(3), np.arange(3.0)),
    ([0.0, 1.0, 2.0], np.arange(3.0)),
    ((np.ones(2), 2.0), [np.ones(2), 2.0]),
    ([np.ones(2), 2.0], (np.ones(2), 2.0)),
    (np.float64(2.0), 2.0),
    (torch.tensor(2.0, dtype=torch.float64), 2.0),
    (np.array(2.0), 2.0),
    (3, 3.0),
    (sp.csr_matrix(np.eye(2, dtype=np.float32)), sp.csr_matrix(np.eye(2))),
    (sp.csr_array(np.eye(2)), sp.csr_matrix(np.eye(2))),
    (np.float32(1 / 3), 1 / 3),
]
REJECTED_BY_ASSERT_CLOSE = [  # wrong values, shapes, lengths, structure
    (np.arange(3.0) + 1e-3, np.arange(3.0)),
    (np.arange(4.0), np.arange(3.0)),
    (np.arange(3.0)[None], np.arange(3.0)),
    ((np.ones(2),), (np.ones(2), 2.0)),
    (np.ones(2), (np.ones(2), 2.0)),
    (np.eye(2), sp.csr_matrix(np.eye(2))),
    (None, 1.0),
    (np.ones(1), 1.0),
]


@pytest.mark.parametrize("actual,expected", ACCEPTED_BY_ASSERT_CLOSE)
def test_what_assert_close_accepts_the_visible_replay_accepts(actual, expected):
    assert_close(actual, expected, "the value")  # the student's machine
    assert verdicts.lenient_difference(_as_graded(actual), _as_graded(expected), 1e-5, 1e-8, secret=False) is None


@pytest.mark.parametrize("actual,expected", REJECTED_BY_ASSERT_CLOSE)
def test_wrong_values_and_shapes_fail_the_visible_replay_too(actual, expected):
    with pytest.raises(AssertionError):
        assert_close(actual, expected, "the value")
    assert verdicts.lenient_difference(_as_graded(actual), _as_graded(expected), 1e-5, 1e-8, secret=False)


def test_what_plain_python_accepts_the_visible_replay_accepts():
    # cells read word ids with list(words) == [3, 1] and numbers with float(loss)
    words = torch.tensor([3, 1])
    assert list(words) == [3, 1]
    assert verdicts.lenient_difference(_as_graded(words), _as_graded([3, 1]), 1e-5, 1e-8, secret=False) is None
    assert verdicts.lenient_difference(_as_graded(np.array([3, 2])), _as_graded([3, 1]), 1e-5, 1e-8, secret=False)
    # ... while the hidden cases hold the function to the list its docstring promises
    assert "list" in verdicts.difference(_as_graded(words), _as_graded([3, 1]), 1e-5, 1e-8, secret=True)


def test_visible_entries_are_judged_leniently_and_hidden_ones_strictly():
    key = "attention.decoding.beam_search"
    as_tensor = _tensor_words(reference(key))
    assert graded_verdicts(key, as_tensor)[visible_entry_id(key)].passed
    hidden = graded_verdicts(key, as_tensor, kinds=("hidden",))
    assert hidden and not any(v.passed for v in hidden.values()), "the hidden cases demand the list of the docstring"


def _tensor_words(beam_search):
    def beam_search_with_tensor_words(*args, **kwargs):
        words, log_prob = beam_search(*args, **kwargs)
        return torch.tensor(words), log_prob
    return beam_search_with_tensor_words


def test_a_tensor_of_words_fails_the_visible_test_with_a_message():
    """The case of the issue: beam search's words as a tensor. It used to print "all visible tests
    passed" and lose every point when graded; now the student's own run says what to change."""
    key = "attention.decoding.beam_search"
    passed, message = local_verdict(key, _tensor_words(reference(key)))
    assert not passed and "list of ints" in message and "Tensor" in message and "docstring" in message


@pytest.mark.parametrize("key,label", _every_answer())
def test_local_and_graded_verdicts_of_a_correct_answer_agree(key, label):
    """The visible test passes on the student's machine, and so does its replay in the grader."""
    fn = answer_function(key, label)
    passed, message = local_verdict(key, fn)
    graded = graded_verdicts(key, fn)[visible_entry_id(key)]
    assert passed == graded.passed, f"local: {message} | graded: {graded.message}"
    assert passed, f"{label} is correct but fails the visible test: {message}"


@pytest.mark.parametrize("key,name", [pytest.param(k, n, id=f"{short(k)}-{n}")
                                      for k, answers in NEW_ANSWERS.items() for n in answers])
def test_a_new_alternative_answer_gets_full_marks(key, name):
    """Other containers and other exact formulations get every point, visible and hidden."""
    for grade_id, verdict in graded_verdicts(key, load(key, NEW_ANSWERS[key][name]), ("visible", "hidden")).items():
        assert verdict.passed, f"{grade_id}: {verdict.message}"


def test_every_problem_set_has_new_alternative_answers():
    """At least two new answers per problem set, each for an exercise of course_lib."""
    per_assignment = {}
    for key, answers in NEW_ANSWERS.items():
        assert key in OWNERS, key
        per_assignment[OWNERS[key]] = per_assignment.get(OWNERS[key], 0) + len(answers)
    assert set(per_assignment) == set(OWNERS.values())
    assert min(per_assignment.values()) >= 2, per_assignment


# The other forms of a correct result: each function of these turns every value of one kind in a
# result (nested in tuples, lists and dicts) into another form, or leaves it.

def _tensor_to_array(v):
    return v.detach().numpy().copy() if isinstance(v, torch.Tensor) else v


def _array_to_tensor(v):
    return torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" else v


def _to_float32(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dtype != torch.float32:
        return v.to(torch.float32)
    if (isinstance(v, np.ndarray) or sp.issparse(v)) and v.dtype.kind == "f" and v.dtype != np.float32:
        return v.astype(np.float32)
    return v


def _to_float64(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dtype != torch.float64:
        return v.to(torch.float64)
    if (isinstance(v, np.ndarray) or sp.issparse(v)) and v.dtype.kind == "f" and v.dtype != np.float64:
        return v.astype(np.float64)
    return v


def _integers_to_floats(v):
    if isinstance(v, torch.Tensor) and not v.is_floating_point() and v.dtype != torch.bool:
        return v.to(torch.float64)
    return v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind in "iu" else v


def _to_int32(v):
    if isinstance(v, torch.Tensor) and v.dtype == torch.int64:
        return v.to(torch.int32)
    return v.astype(np.int32) if isinstance(v, np.ndarray) and v.dtype == np.int64 else v


def _number_to_numpy(v):
    return np.float64(v) if type(v) is float else np.int64(v) if type(v) is int else v


def _number_to_tensor(v):
    return torch.tensor(float(v)) if type(v) is float or isinstance(v, np.floating) else v


def _zero_d_to_python(v):
    if isinstance(v, torch.Tensor) and v.dim() == 0 or isinstance(v, np.generic):
        return v.item()
    return v


def _sparse_to_dense(v):
    return v.toarray() if sp.issparse(v) else v


def _is_numbers(v) -> bool:
    return isinstance(v, list) and all(isinstance(i, (int, float, np.number)) and not isinstance(i, bool) for i in v)


FORMS = {  # name: (what it changes in a value, whether a container is changed as a whole)
    "tensors as numpy arrays": (_tensor_to_array, False),
    "numpy arrays as tensors": (_array_to_tensor, False),
    "float32 values": (_to_float32, False),
    "float64 values": (_to_float64, False),
    "integer arrays as floats": (_integers_to_floats, False),
    "int32 integers": (_to_int32, False),
    "numbers as numpy scalars": (_number_to_numpy, False),
    "numbers as 0-d tensors": (_number_to_tensor, False),
    "0-d values as Python numbers": (_zero_d_to_python, False),
    "sparse matrices as dense arrays": (_sparse_to_dense, False),
    "tuples as lists": (lambda v: list(v) if isinstance(v, tuple) else v, True),
    "lists as tuples": (lambda v: tuple(v) if isinstance(v, list) else v, True),
    "lists of numbers as tensors": (lambda v: torch.tensor(v) if _is_numbers(v) else v, True),
    "lists of numbers as arrays": (lambda v: np.array(v) if _is_numbers(v) else v, True),
}
MAKES_TENSORS = {"numpy arrays as tensors", "numbers as 0-d tensors", "lists of numbers as tensors"}


def _reshaped(value, change, whole: bool, changed: list):
    """``value`` with ``change`` applied to every leaf (and, if ``whole``, every tuple or list first)."""
    if whole and isinstance(value, (tuple, list)):
        new = change(value)
        if new is not value:
            changed.append(True)
            value = new
    if isinstance(value, (tuple, list)):
        return type(value)(_reshaped(v, change, whole, changed) for v in value)
    if isinstance(value, dict):
        return {k: _reshaped(v, change, whole, changed) for k, v in value.items()}
    if whole:
        return value
    new = change(value)
    if new is not value:
        changed.append(True)
    return new


def in_form(fn, form: str):
    """``fn`` returning its results in ``form``."""
    change, whole = FORMS[form]

    def answer(*args, **kwargs):
        return _reshaped(fn(*args, **kwargs), change, whole, [])

    return answer


def _live(value):
    """A decoded expected value as the reference returned it: :class:`verdicts.Tensor` back to a torch tensor."""
    if isinstance(value, verdicts.Tensor):
        return torch.from_numpy(np.asarray(value).copy())
    if isinstance(value, (tuple, list)):
        return type(value)(_live(v) for v in value)
    if isinstance(value, dict):
        return {k: _live(v) for k, v in value.items()}
    return value


def changes(form: str, entries: list[dict]) -> bool:
    """Whether ``form`` changes any of the reference's results stored in ``entries`` (unknown counts as a change:
    a random exercise's key keeps no results)."""
    change, whole = FORMS[form]
    changed = []
    for entry in entries:
        for case in entry["cases"]:
            if entry.get("property") or "value" not in case["expected"]:
                return True
            _reshaped(_live(case["expected"]["value"]), change, whole, changed)
    return bool(changed)


@pytest.mark.parametrize("key", [pytest.param(k, id=short(k)) for k in OWNERS])
def test_a_form_the_visible_test_accepts_passes_every_entry(key):
    """Whatever form of the reference's result the student's visible test accepts, the grader accepts, in the
    replay of that test and in the hidden cases: a type the hidden cases insist on is checked by the visible test.

    Forms that need torch are skipped where the visible test forbids torch (``assert_own_code``: a real
    answer that returns a tensor names torch and fails there). A form that changes none of the results the
    visible test's calls give is the reference itself there, which passes; one that changes no result at all
    needs no grading."""
    entries = fairness.entries(key)
    visible = [e for e in entries if e["kind"] == "visible"]
    for form in FORMS:
        if form in MAKES_TENSORS and "torch" in visible[0]["forbidden"] or not changes(form, entries):
            continue
        fn = in_form(reference(key), form)
        if changes(form, visible) and not local_verdict(key, fn)[0]:
            continue  # the student is told: nothing to agree on
        for grade_id, verdict in graded_verdicts(key, fn, ("visible", "hidden")).items():
            assert verdict.passed, f"{form}: the visible test passes on the student's machine, but {grade_id} " \
                                   f"fails: {verdict.message}"
