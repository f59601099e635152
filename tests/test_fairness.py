"""Scores that mean what they say: the answer keys accept every correct answer and catch realistic bugs.

For every exercise function of course_lib, this file holds answers written as a
student could write them, as source strings: the released stub's first part (the
``def`` line, docstring and argument checks, everything before ``### BEGIN
SOLUTION``, taken from course_lib as the student sees it) followed by a body
written here.

- **Alternative-correct answers** (other numpy formulations, loops, ``np.einsum``,
  scipy, ``math``...) must pass every entry of the function's answer key, visible
  (recorded) and hidden.
- **Subtly-wrong answers** (off-by-one, wrong axis, modifying an input in place, a
  naive ``exp`` that overflows, gradients cut by a detour through numpy, the wrong
  gate order, a forgotten bias...) must fail, for the reason named here, and, for a
  function with a hidden test cell, in at least two of its hidden cases: a bug must
  not cost points or not depending on one draw of the generator.

Each answer is executed in a namespace built like the notebook's: ``np``, ``math``
and what the assignment's setup cell imports (``expect_shape``,
``flatten_positions``, ``check_cell_args``...), with ``__name__ == "__main__"`` as
in a kernel, so that the probe records library calls as it does in the sandbox and
never counts the answer's own helpers. The cases run in this process through
:func:`course_tools.grading.verdicts.outcomes_in_process` (the probe's ``run_case``, then
plain JSON) and are judged by :func:`course_tools.grading.verdicts.judge` and
:func:`~course_tools.grading.verdicts.case_problems`, as grading judges the sandbox's output.
An answer cannot affect another function's verdicts here: each function is judged
on its own entries with its own answer (in the sandbox too, a test cell probes only
its own function).
"""

from __future__ import annotations

import copy
import functools
import importlib
import itertools
import math
import pickle
import subprocess
import sys
import textwrap
import warnings

import nbformat
import numpy as np
import pytest

from course_tools import ROOT
from course_tools.authoring import answer_keys, cases as hidden_cases
from course_tools.authoring.cases import ps08_bert
from course_tools.grading import verdicts
from course_tools.exercises import BEGIN, find_exercises, owners, solution_notebooks

# ---------------------------------------------------------------------------------------------
# The answers: {key: {"correct": {name: body}, "wrong": {name: (body, reason)}}}
# ``reason`` is a phrase of the verdict that the bug must produce in at least one case
# ("wrong result", "in place", "gradients", "calls", "dtype", "raised"), or None.
# ---------------------------------------------------------------------------------------------

ANSWERS: dict[str, dict] = {}


def mistake(correct: str, old: str, new: str) -> str:
    """``correct``, an answer of this file, with one piece changed: a mistake (the piece must be in it)."""
    assert old in correct, old
    return correct.replace(old, new)


def answers(key, correct, wrong):
    ANSWERS[key] = {"correct": correct, "wrong": wrong}


answers("vectors.counts.one_hot", correct={
    "rows_of_eye": "return np.eye(vocab_size)[ids]",
    "loop": """
        out = np.zeros((len(ids), vocab_size))
        for t, word in enumerate(ids):
            out[t, word] = 1.0
        return out""",
    "comparison": "return (ids[:, None] == np.arange(vocab_size)[None, :]).astype(np.float64)",
}, wrong={
    "int_dtype": ("""
        out = np.zeros((len(ids), vocab_size), dtype=int)
        out[np.arange(len(ids)), ids] = 1
        return out""", "dtype"),
    "whole_columns": ("""
        out = np.zeros((len(ids), vocab_size))
        out[:, ids] = 1.0
        return out""", "wrong result"),
    "transposed": ("return np.eye(vocab_size)[:, ids]", "shape"),
    "width_from_largest_id": ("""
        out = np.zeros((len(ids), ids.max() + 1))
        out[np.arange(len(ids)), ids] = 1.0
        return out""", None),
})

_IDF = """
        n_docs = counts.shape[0]
        idf = np.log((1 + n_docs) / (1 + df)) + 1 if smooth_idf else np.log(n_docs / np.maximum(df, 1)) + 1"""
answers("vectors.counts.tfidf", correct={
    "dense": """
        c = counts.toarray()
        df = (c > 0).sum(axis=0)""" + _IDF + """
        weighted = c * idf
        if normalize:
            norms = np.sqrt((weighted ** 2).sum(axis=1, keepdims=True))
            weighted = weighted / np.where(norms > 0, norms, 1.0)
        return sp.csr_matrix(weighted)""",
    "sklearn": ("from sklearn.feature_extraction.text import TfidfTransformer\n\n\n", """
        transformer = TfidfTransformer(norm="l2" if normalize else None, smooth_idf=smooth_idf)
        return sp.csr_matrix(transformer.fit_transform(counts))"""),
    "diagonal_matrices": """
        from scipy.sparse.linalg import norm as sparse_norm
        df = np.diff(sp.csc_matrix(counts > 0).indptr)""" + _IDF + """
        weighted = counts @ sp.diags(idf)
        if normalize:
            norms = sparse_norm(weighted, axis=1)
            weighted = sp.diags(1 / np.where(norms > 0, norms, 1.0)) @ weighted
        return sp.csr_matrix(weighted)""",
}, wrong={
    "df_is_total_count": ("""
        df = np.asarray(counts.sum(axis=0)).ravel()""" + _IDF + """
        weighted = counts.toarray() * idf
        if normalize:
            weighted /= np.maximum(np.linalg.norm(weighted, axis=1, keepdims=True), 1e-300)
        return sp.csr_matrix(weighted)""", "wrong result"),
    "column_norms": ("""
        c = counts.toarray()
        df = (c > 0).sum(axis=0)""" + _IDF + """
        weighted = c * idf
        if normalize:
            norms = np.linalg.norm(weighted, axis=0, keepdims=True)
            weighted = weighted / np.where(norms > 0, norms, 1.0)
        return sp.csr_matrix(weighted)""", "wrong result"),
    "idf_without_plus_one": ("""
        c = counts.toarray()
        df = (c > 0).sum(axis=0)
        n_docs = c.shape[0]
        idf = np.log((1 + n_docs) / (1 + df)) if smooth_idf else np.log(n_docs / np.maximum(df, 1))
        weighted = c * idf
        if normalize:
            norms = np.linalg.norm(weighted, axis=1, keepdims=True)
            weighted = weighted / np.where(norms > 0, norms, 1.0)
        return sp.csr_matrix(weighted)""", "wrong result"),
    "weights_in_place": ("""
        df = np.bincount(counts.indices, minlength=counts.shape[1])""" + _IDF + """
        counts.data *= idf[counts.indices]  # counts may share its data with the caller's matrix
        if normalize:
            rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
            norms = np.sqrt(np.bincount(rows, counts.data ** 2, minlength=counts.shape[0]))
            counts.data /= norms[rows]
        return counts""", "in place"),
})

answers("vectors.counts.ppmi", correct={
    "dense": """
        c = cooc.toarray()
        total = c.sum()
        p_word = c.sum(axis=1) / total
        n_c = c.sum(axis=0) ** alpha
        p_context = n_c / n_c.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(c / total) - np.log(np.outer(p_word, p_context))
        return sp.csr_matrix(np.where(c > 0, np.maximum(pmi, 0.0), 0.0))""",
    "loop_over_nonzeros": """
        coo = cooc.tocoo()
        word = np.asarray(coo.sum(axis=1)).ravel()
        context = np.asarray(coo.sum(axis=0)).ravel() ** alpha
        rows, cols, values = [], [], []
        for w, c, n in zip(coo.row, coo.col, coo.data):
            if n > 0:
                pmi = math.log(n * context.sum() / (word[w] * context[c]))
                if pmi > 0:
                    rows.append(w); cols.append(c); values.append(pmi)
        values, rows, cols = np.array(values, dtype=np.float64), np.array(rows, dtype=int), np.array(cols, dtype=int)
        return sp.csr_matrix((values, (rows, cols)), shape=coo.shape)""",
}, wrong={
    "context_power_not_renormalized": ("""
        c = cooc.toarray()
        total = c.sum()
        p_word = c.sum(axis=1) / total
        p_context = (c.sum(axis=0) / total) ** alpha
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(c / total) - np.log(np.outer(p_word, p_context))
        return sp.csr_matrix(np.where(c > 0, np.maximum(pmi, 0.0), 0.0))""", "wrong result"),
    "words_smoothed_too": ("""
        c = cooc.toarray()
        total = c.sum()
        n_w, n_c = c.sum(axis=1) ** alpha, c.sum(axis=0) ** alpha
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(c / total) - np.log(np.outer(n_w / n_w.sum(), n_c / n_c.sum()))
        return sp.csr_matrix(np.where(c > 0, np.maximum(pmi, 0.0), 0.0))""", "wrong result"),
    "negative_values_kept": ("""
        c = cooc.toarray()
        total = c.sum()
        n_c = c.sum(axis=0) ** alpha
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(c / total) - np.log(np.outer(c.sum(axis=1) / total, n_c / n_c.sum()))
        return sp.csr_matrix(np.where(c > 0, pmi, 0.0))""", "wrong result"),
    "divides_the_input_in_place": ("""
        total = cooc.sum()
        cooc.data /= total  # cooc may share its data with the caller's matrix
        p_word = np.asarray(cooc.sum(axis=1)).ravel()
        n_c = np.asarray(cooc.sum(axis=0)).ravel() ** alpha
        p_context = n_c / n_c.sum()
        rows = np.repeat(np.arange(cooc.shape[0]), np.diff(cooc.indptr))
        pmi = np.log(cooc.data) - np.log(p_word[rows]) - np.log(p_context[cooc.indices])
        return sp.csr_matrix((np.maximum(pmi, 0), cooc.indices, cooc.indptr), shape=cooc.shape)""", "in place"),
})

answers("vectors.counts.cosine_similarity", correct={
    "outer_of_norms": """
        norms_a, norms_b = np.sqrt((a * a).sum(axis=1)), np.sqrt((b * b).sum(axis=1))
        denominator = np.outer(norms_a, norms_b)
        with np.errstate(divide="ignore", invalid="ignore"):
            sims = (a @ b.T) / denominator
        return np.where(denominator > 0, sims, 0.0)""",
    "loops": """
        out = np.zeros((len(a), len(b)))
        for i, u in enumerate(a):
            for j, v in enumerate(b):
                nu, nv = math.sqrt(float(u @ u)), math.sqrt(float(v @ v))
                if nu > 0 and nv > 0:
                    out[i, j] = float(u @ v) / (nu * nv)
        return out""",
    "scipy_cdist": """
        from scipy.spatial.distance import cdist
        with np.errstate(divide="ignore", invalid="ignore"):
            sims = 1.0 - cdist(a, b, "cosine")
        zero = (np.linalg.norm(a, axis=1)[:, None] == 0) | (np.linalg.norm(b, axis=1)[None, :] == 0)
        return np.where(zero, 0.0, sims)""",
}, wrong={
    "no_zero_vector_guard": ("""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (a @ b.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1))""", "wrong result"),
    "norms_over_columns": ("""
        def unit(x):
            norms = np.linalg.norm(x, axis=0, keepdims=True)
            return x / np.where(norms == 0, 1.0, norms)
        return unit(a) @ unit(b).T""", "wrong result"),
    "frobenius_norms": ("""
        denominator = np.linalg.norm(a) * np.linalg.norm(b)
        return (a @ b.T) / (denominator if denominator > 0 else 1.0)""", "wrong result"),
})

answers("vectors.word2vec.skipgram_pairs", correct={
    "loops": """
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window + 1, size=n)
        centers, contexts = [], []
        for i in range(n):
            for j in range(max(0, i - reach[i]), min(n, i + reach[i] + 1)):
                if j != i:
                    centers.append(ids[i])
                    contexts.append(ids[j])
        return np.array(centers, dtype=np.int64), np.array(contexts, dtype=np.int64)""",
    "offsets_then_sort": """
        n = len(ids)
        reach = np.full(n, window) if rng is None else rng.integers(1, window + 1, size=n)
        i = np.arange(n)
        pairs = [np.zeros((0, 2), dtype=np.int64)]
        for k in range(1, window + 1):
            for j in (i - k, i + k):
                keep = (j >= 0) & (j < n) & (reach >= k)
                pairs.append(np.stack([i[keep], j[keep]], axis=1))
        pairs = np.concatenate(pairs)
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]  # by center, then by context position
        return ids[pairs[:, 0]].astype(np.int64), ids[pairs[:, 1]].astype(np.int64)""",
}, wrong={
    "float_arrays_when_empty": ("""
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window + 1, size=n)
        pairs = [(ids[i], ids[j]) for i in range(n) for j in range(max(0, i - reach[i]), min(n, i + reach[i] + 1))
                 if j != i]
        return np.array([c for c, _ in pairs]), np.array([o for _, o in pairs])""", "dtype"),
    "window_high_excluded": ("""
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window, size=n)
        pairs = [(ids[i], ids[j]) for i in range(n) for j in range(max(0, i - reach[i]), min(n, i + reach[i] + 1))
                 if j != i]
        return np.array([c for c, _ in pairs], dtype=np.int64), np.array([o for _, o in pairs], dtype=np.int64)""",
                             None),
    "last_context_missed": ("""
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window + 1, size=n)
        pairs = [(ids[i], ids[j]) for i in range(n) for j in range(max(0, i - reach[i]), min(n, i + reach[i]))
                 if j != i]
        return np.array([c for c, _ in pairs], dtype=np.int64), np.array([o for _, o in pairs], dtype=np.int64)""",
                            "wrong result"),
    "positions_not_ids": ("""
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window + 1, size=n)
        pairs = [(i, j) for i in range(n) for j in range(max(0, i - reach[i]), min(n, i + reach[i] + 1)) if j != i]
        return np.array([c for c, _ in pairs], dtype=np.int64), np.array([o for _, o in pairs], dtype=np.int64)""",
                          "wrong result"),
})

answers("vectors.word2vec.negative_samples", correct={
    "choice": "return rng.choice(len(noise), size=shape, p=noise)",
    "inverse_cdf": """
        cumulative = np.cumsum(noise)
        draws = np.searchsorted(cumulative, rng.random(shape) * cumulative[-1], side="right")
        return np.minimum(draws, len(noise) - 1).astype(np.int64)""",
}, wrong={
    "uniform_ids": ("return rng.integers(0, len(noise), size=shape)", "wrong result"),
    "smoothed_twice": ("""
        weights = noise ** 0.75
        return rng.choice(len(noise), size=shape, p=weights / weights.sum())""", "wrong result"),
    "float_ids": ("return rng.choice(len(noise), size=shape, p=noise).astype(np.float64)", "dtype"),
})

_SGNS_DOTS = """
        batch = len(center)
        pos = np.einsum("bd,bd->b", context, center)  # (B,)
        neg = np.einsum("bkd,bd->bk", negatives, center)  # (B, K)"""
_SGNS_GRADS = """
        g_pos, g_neg = (sigmoid(pos) - 1) / batch, sigmoid(neg) / batch
        grad_center = g_pos[:, None] * context + np.einsum("bk,bkd->bd", g_neg, negatives)
        return float(loss), grad_center, g_pos[:, None] * center, g_neg[:, :, None] * center[:, None, :]"""
answers("vectors.word2vec.sgns_loss_and_grads", correct={
    "scipy_log_expit": """
        from scipy.special import expit, log_expit""" + _SGNS_DOTS + """
        loss = -(log_expit(pos).sum() + log_expit(-neg).sum()) / batch
        g_pos, g_neg = (expit(pos) - 1) / batch, expit(neg) / batch
        grad_center = g_pos[:, None] * context + (g_neg[:, :, None] * negatives).sum(axis=1)
        return float(loss), grad_center, g_pos[:, None] * center, g_neg[:, :, None] * center[:, None, :]""",
    "loops_with_math": """
        def softplus(x):  # log(1 + exp(x)), finite for any x
            return max(x, 0.0) + math.log1p(math.exp(-abs(x)))

        def logistic(x):
            return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))

        batch, k = negatives.shape[:2]
        loss = 0.0
        g_c, g_o, g_n = np.zeros_like(center), np.zeros_like(context), np.zeros_like(negatives)
        for b in range(batch):
            s = float(context[b] @ center[b])
            loss += softplus(-s)
            g_c[b] += (logistic(s) - 1) * context[b] / batch
            g_o[b] = (logistic(s) - 1) * center[b] / batch
            for j in range(k):
                s = float(negatives[b, j] @ center[b])
                loss += softplus(s)
                g_c[b] += logistic(s) * negatives[b, j] / batch
                g_n[b, j] = logistic(s) * center[b] / batch
        return loss / batch, g_c, g_o, g_n""",
    "softplus_by_cases": _SGNS_DOTS + """
        def softplus(x):  # log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|))
            return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))

        loss = (softplus(-pos).sum() + softplus(neg).sum()) / batch""" + _SGNS_GRADS,
}, wrong={
    "log_of_sigmoid": (_SGNS_DOTS + """
        with np.errstate(divide="ignore"):
            loss = -(np.log(sigmoid(pos)).sum() + np.log(sigmoid(-neg)).sum()) / batch""" + _SGNS_GRADS,
                       "wrong result"),
    "naive_exp": (_SGNS_DOTS + """
        with np.errstate(over="ignore"):
            loss = (np.log(1 + np.exp(-pos)).sum() + np.log(1 + np.exp(neg)).sum()) / batch""" + _SGNS_GRADS,
                  "wrong result"),
    "summed_not_averaged": (_SGNS_DOTS + """
        loss = np.logaddexp(0, -pos).sum() + np.logaddexp(0, neg).sum()
        batch = 1""" + _SGNS_GRADS, "wrong result"),
    "center_gradient_without_noise": (_SGNS_DOTS + """
        loss = (np.logaddexp(0, -pos).sum() + np.logaddexp(0, neg).sum()) / batch
        g_pos, g_neg = (sigmoid(pos) - 1) / batch, sigmoid(neg) / batch
        grad_negatives = g_neg[:, :, None] * center[:, None, :]
        return float(loss), g_pos[:, None] * context, g_pos[:, None] * center, grad_negatives""",
                                      "wrong result"),
})

# numerical_gradient: the hidden cases hold losses that read x in place (gradcheck.SmoothLoss with weights=x) and
# Fortran-ordered x; every mistake below perturbs x itself unless perturbing copies or views is the mistake.
_PROBE_IN_PLACE = """
        grad = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            saved = x[index]
            x[index] = saved + eps
            plus = f(x)
            x[index] = saved - eps
            minus = f(x)
            x[index] = saved
            grad[index] = (plus - minus) / (2 * eps)
        return grad"""



answers("vectors.gradcheck.numerical_gradient", correct={
    "index_tuples_in_place": """
        import itertools
        grad = np.empty(x.shape)
        for index in itertools.product(*(range(n) for n in x.shape)):  # () once for a 0-d x
            old = float(x[index])
            x[index] = old + eps
            f_plus = f(x)
            x[index] = old - eps
            f_minus = f(x)
            x[index] = old
            grad[index] = (f_plus - f_minus) / (2 * eps)
        return grad""",
    "flat_iterator": """
        grad = np.zeros(x.shape)
        for i in range(x.size):
            x.flat[i] += eps  # x.flat writes into x whatever its memory order
            plus = f(x)
            x.flat[i] -= 2 * eps
            minus = f(x)
            x.flat[i] += eps
            grad.flat[i] = (plus - minus) / (2 * eps)
        return grad""",
    "nditer_readwrite": """
        grad = np.zeros(x.shape)
        with np.nditer(x, flags=["multi_index"], op_flags=["readwrite"]) as entries:
            for entry in entries:
                saved = float(entry)
                entry[...] = saved + eps
                plus = f(x)
                entry[...] = saved - eps
                minus = f(x)
                entry[...] = saved
                grad[entries.multi_index] = (plus - minus) / (2 * eps)
        return grad""",
}, wrong={
    "perturbed_copies": ("""
        grad = np.empty_like(x)
        for index in np.ndindex(x.shape):
            plus, minus = x.copy(), x.copy()
            plus[index] += eps
            minus[index] -= eps
            grad[index] = (f(plus) - f(minus)) / (2 * eps)
        return grad""", "wrong result"),  # a loss that reads x in place sees no change: 0
    "unit_steps_added_to_copies": ("""
        grad = np.zeros(x.size)
        for i in range(x.size):
            step = np.zeros(x.size)
            step[i] = eps
            step = step.reshape(x.shape)
            grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
        return grad.reshape(x.shape)""", "wrong result"),
    "reshape_assumed_a_view": ("""
        grad = np.zeros_like(x)
        flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # copies, not views, for a Fortran-ordered x
        for i in range(flat_x.size):
            saved = flat_x[i]
            flat_x[i] = saved + eps
            plus = f(x)
            flat_x[i] = saved - eps
            minus = f(x)
            flat_x[i] = saved
            flat_grad[i] = (plus - minus) / (2 * eps)
        return grad""", "wrong result"),
    "ravel_assumed_a_view": ("""
        grad = np.zeros(x.size)
        flat = x.ravel()
        for i in range(flat.size):
            flat[i] += eps
            plus = f(x)
            flat[i] -= 2 * eps
            minus = f(x)
            flat[i] += eps
            grad[i] = (plus - minus) / (2 * eps)
        return grad.reshape(x.shape)""", "wrong result"),
    "not_restored": ("""
        grad = np.zeros_like(x)
        for i in range(x.size):
            x.flat[i] += eps
            plus = f(x)
            x.flat[i] -= 2 * eps
            grad.flat[i] = (plus - f(x)) / (2 * eps)
        return grad""", "in place"),
    "divides_by_eps": (mistake(_PROBE_IN_PLACE, "(plus - minus) / (2 * eps)", "(plus - minus) / eps"), "wrong result"),
    "forward_difference": (mistake(_PROBE_IN_PLACE, """            x[index] = saved - eps
            minus = f(x)
            x[index] = saved""", """            x[index] = saved
            minus = f(x)""").replace("(2 * eps)", "eps"), "wrong result"),  # (f(x + eps) - f(x)) / eps
    "step_fixed_at_1e-6": (mistake(_PROBE_IN_PLACE, "saved + eps", "saved + 1e-6").replace("saved - eps", "saved - 1e-6")
                           .replace("(2 * eps)", "2e-6"), "wrong result"),
    "first_axis_only": ("""
        grad = np.zeros(x.shape)
        for i in range(len(x)):
            saved = x[i].copy()
            x[i] = saved + eps
            plus = f(x)
            x[i] = saved - eps
            minus = f(x)
            x[i] = saved
            grad[i] = (plus - minus) / (2 * eps)
        return grad""", "wrong result"),
})

answers("vectors.alignment.procrustes", correct={
    "scipy": """
        from scipy.linalg import orthogonal_procrustes
        rotation, _scale = orthogonal_procrustes(source, target)  # minimizes ||source R' - target||: R' = R^T
        return rotation.T""",
    "svd_of_the_transpose": """
        u, _s, vt = np.linalg.svd(source.T @ target)
        return (u @ vt).T""",
    "polar_decomposition": """
        from scipy.linalg import polar
        return polar(target.T @ source)[0]""",
}, wrong={
    "transposed": ("""
        u, _s, vt = np.linalg.svd(source.T @ target)
        return u @ vt""", "wrong result"),
    "singular_values_kept": ("""
        u, s, vt = np.linalg.svd(target.T @ source)
        return u @ np.diag(s) @ vt""", "wrong result"),
    "least_squares": ("return np.linalg.lstsq(source, target, rcond=None)[0].T", "wrong result"),
})

answers("recurrent.elman.rnn_step", correct={
    "einsum": 'return np.tanh(np.einsum("bi,hi->bh", x, W) + np.einsum("bk,hk->bh", h_prev, U) + b)',
    "row_loop": """
        out = np.empty((len(x), len(W)))
        for i in range(len(x)):
            out[i] = np.tanh(W @ x[i] + U @ h_prev[i] + b)
        return out""",
    "math_loops": """
        out = np.zeros((len(x), len(W)))
        for i in range(len(x)):
            for j in range(len(W)):
                out[i, j] = math.tanh(float(W[j] @ x[i] + U[j] @ h_prev[i] + b[j]))
        return out""",
}, wrong={
    "U_not_transposed": ("return np.tanh(x @ W.T + h_prev @ U + b)", "wrong result"),
    "bias_forgotten": ("return np.tanh(x @ W.T + h_prev @ U.T)", "wrong result"),
    "torch_shortcut": ("""
        import torch
        cell = lambda *a: torch.tanh(torch.from_numpy(a[0]) @ torch.from_numpy(a[1]).T
                                     + torch.from_numpy(a[2]) @ torch.from_numpy(a[3]).T + torch.from_numpy(a[4]))
        return cell(x, W, h_prev, U, b).numpy()""", "calls"),
})

answers("recurrent.elman.rnn_backward", correct={
    "accumulate_in_the_loop": """
        dxs, dW, dU, db = np.zeros_like(xs), np.zeros_like(W), np.zeros_like(U), np.zeros(len(W))
        dh_next = np.zeros_like(h0)
        for t in range(steps - 1, -1, -1):
            da = (dhs[:, t] + dh_next) * (1 - hs[:, t] ** 2)
            h_prev = hs[:, t - 1] if t > 0 else h0
            dW += da.T @ xs[:, t]
            dU += da.T @ h_prev
            db += da.sum(axis=0)
            dxs[:, t] = da @ W
            dh_next = da @ U
        return dxs, dh_next, dW, dU, db""",
    "einsum_after_the_loop": """
        das = [None] * steps
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            das[t] = (dhs[:, t] + dh_next) * (1 - hs[:, t] ** 2)
            dh_next = das[t] @ U
        das = np.stack(das, axis=1)  # (B, T, H)
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        return (np.einsum("bth,hi->bti", das, W), dh_next, np.einsum("bth,bti->hi", das, xs),
                np.einsum("bth,btk->hk", das, h_prevs), np.einsum("bth->h", das))""",
}, wrong={
    "future_gradient_forgotten": ("""
        das = dhs * (1 - hs ** 2)
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        return (das @ W, das[:, 0] @ U, np.einsum("bth,bti->hi", das, xs), np.einsum("bth,btk->hk", das, h_prevs),
                das.sum(axis=(0, 1)))""", "wrong result"),
    "dU_with_h_t": ("""
        das = np.empty_like(hs)
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            das[:, t] = (dhs[:, t] + dh_next) * (1 - hs[:, t] ** 2)
            dh_next = das[:, t] @ U
        return (das @ W, dh_next, np.einsum("bth,bti->hi", das, xs), np.einsum("bth,btk->hk", das, hs),
                das.sum(axis=(0, 1)))""", "wrong result"),
    "U_transposed_going_back": ("""
        das = np.empty_like(hs)
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            das[:, t] = (dhs[:, t] + dh_next) * (1 - hs[:, t] ** 2)
            dh_next = das[:, t] @ U.T
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        return (das @ W, dh_next, np.einsum("bth,bti->hi", das, xs), np.einsum("bth,btk->hk", das, h_prevs),
                das.sum(axis=(0, 1)))""", "wrong result"),
    "adds_into_dhs": ("""
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            dhs[:, t] += dh_next  # writes into the caller's array
            dh_next = (dhs[:, t] * (1 - hs[:, t] ** 2)) @ U
        das = dhs * (1 - hs ** 2)
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        return (das @ W, dh_next, np.einsum("bth,bti->hi", das, xs), np.einsum("bth,btk->hk", das, h_prevs),
                das.sum(axis=(0, 1)))""", "in place"),
})

answers("recurrent.clipping.clip_gradients", correct={
    "concatenate": """
        total_norm = float(np.linalg.norm(np.concatenate([g.ravel() for g in grads])))
        scale = min(1.0, max_norm / (total_norm + 1e-6))
        return [g * scale for g in grads], total_norm""",
    "math_loop": """
        squares = 0.0
        for g in grads:
            for value in g.ravel():
                squares += float(value) ** 2
        total_norm = math.sqrt(squares)
        if total_norm + 1e-6 > max_norm:
            return [g * (max_norm / (total_norm + 1e-6)) for g in grads], total_norm
        return [g.copy() for g in grads], total_norm""",
}, wrong={
    "scaled_in_place": ("""
        total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        scale = min(1.0, max_norm / (total_norm + 1e-6))
        for g in grads:
            g *= scale
        return grads, total_norm""", "in place"),
    "each_array_clipped_alone": ("""
        total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        return [g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6)) for g in grads], total_norm""", "wrong result"),
    "epsilon_left_out": ("""
        total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        scale = min(1.0, max_norm / total_norm)
        return [g * scale for g in grads], total_norm""", None),
    "norm_after_clipping": ("""
        total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        clipped = [g * min(1.0, max_norm / (total_norm + 1e-6)) for g in grads]
        return clipped, math.sqrt(sum(float(np.sum(g * g)) for g in clipped))""", "wrong result"),
})

_ROWS = "np.arange(len(targets)), targets"
answers("recurrent.perplexity.perplexity", correct={
    "scipy_logsumexp": f"""
        from scipy.special import logsumexp
        nll = logsumexp(logits, axis=1) - logits[{_ROWS}]
        return float(np.exp(np.mean(nll)))""",
    "math_loop": """
        total = 0.0
        for row, target in zip(logits.tolist(), targets.tolist()):
            top = max(row)
            total += top + math.log(sum(math.exp(z - top) for z in row)) - row[target]
        try:
            return math.exp(total / len(targets))
        except OverflowError:  # the docstring: inf when the perplexity is beyond float64
            return math.inf""",
    "log_softmax": f"""
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        with np.errstate(over="ignore"):
            return float(np.exp(-log_probs[{_ROWS}].mean()))""",
}, wrong={
    "naive_softmax": (f"""
        with np.errstate(all="ignore"):
            probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            return float(np.exp(-np.log(probs[{_ROWS}]).mean()))""", "wrong result"),
    "log_of_a_softmax_that_underflows": (f"""
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        with np.errstate(all="ignore"):
            return float(np.exp(-np.log(probs[{_ROWS}]).mean()))""", "wrong result"),
    "mean_of_exponentials": (f"""
        top = logits.max(axis=1)
        nll = top + np.log(np.exp(logits - top[:, None]).sum(axis=1)) - logits[{_ROWS}]
        with np.errstate(over="ignore"):
            return float(np.mean(np.exp(nll)))""", "wrong result"),
    "torch_cross_entropy": ("""
        import torch
        loss = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(targets))
        return float(torch.exp(loss))""", "calls"),
})

answers("recurrent.cells.lstm_cell", correct={
    "slices": """
        size = h.shape[1]
        a = x @ weight_ih.T + h @ weight_hh.T + bias_ih + bias_hh
        i, f = torch.sigmoid(a[:, :size]), torch.sigmoid(a[:, size:2 * size])
        g, o = torch.tanh(a[:, 2 * size:3 * size]), torch.sigmoid(a[:, 3 * size:])
        c_next = f * c + i * g
        return o * torch.tanh(c_next), c_next""",
    "linear_and_split": """
        import torch.nn.functional as F
        gates = F.linear(x, weight_ih, bias_ih) + F.linear(h, weight_hh, bias_hh)
        i, f, g, o = gates.split(h.shape[1], dim=1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c_next), c_next""",
    "einsum_sigmoid_everything": """
        a = torch.einsum("bi,gi->bg", x, weight_ih) + torch.einsum("bk,gk->bg", h, weight_hh) + bias_ih + bias_hh
        s = torch.sigmoid(a)
        size = h.shape[1]
        c_next = s[:, size:2 * size] * c + s[:, :size] * torch.tanh(a[:, 2 * size:3 * size])
        return s[:, 3 * size:] * torch.tanh(c_next), c_next""",
}, wrong={
    "gate_order_i_f_o_g": ("""
        a = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh
        a_i, a_f, a_o, a_g = a.chunk(4, dim=1)
        c_next = torch.sigmoid(a_f) * c + torch.sigmoid(a_i) * torch.tanh(a_g)
        return torch.sigmoid(a_o) * torch.tanh(c_next), c_next""", "wrong result"),
    "bias_hh_forgotten": ("""
        a_i, a_f, a_g, a_o = (x @ weight_ih.T + bias_ih + h @ weight_hh.T).chunk(4, dim=1)
        c_next = torch.sigmoid(a_f) * c + torch.sigmoid(a_i) * torch.tanh(a_g)
        return torch.sigmoid(a_o) * torch.tanh(c_next), c_next""", "wrong result"),
    "detour_through_numpy": ("""
        def sig(v):
            return 1 / (1 + np.exp(-v))
        n = lambda t: t.detach().numpy()
        a = n(x) @ n(weight_ih).T + n(bias_ih) + n(h) @ n(weight_hh).T + n(bias_hh)
        a_i, a_f, a_g, a_o = np.split(a, 4, axis=1)
        c_next = sig(a_f) * n(c) + sig(a_i) * np.tanh(a_g)
        return torch.from_numpy(sig(a_o) * np.tanh(c_next)), torch.from_numpy(c_next)""", "gradient"),
    "cell_state_updated_in_place": ("""
        a_i, a_f, a_g, a_o = (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)
        c_next = c
        c_next *= torch.sigmoid(a_f)
        c_next += torch.sigmoid(a_i) * torch.tanh(a_g)
        return torch.sigmoid(a_o) * torch.tanh(c_next), c_next""", "in place"),
})

answers("recurrent.cells.gru_cell", correct={
    "slices": """
        size = h.shape[1]
        gi, gh = x @ weight_ih.T + bias_ih, h @ weight_hh.T + bias_hh
        r = torch.sigmoid(gi[:, :size] + gh[:, :size])
        z = torch.sigmoid(gi[:, size:2 * size] + gh[:, size:2 * size])
        n = torch.tanh(gi[:, 2 * size:] + r * gh[:, 2 * size:])
        return n + z * (h - n)""",
    "linear_and_split": """
        import torch.nn.functional as F
        size = h.shape[1]
        gi, gh = F.linear(x, weight_ih, bias_ih), F.linear(h, weight_hh, bias_hh)
        r, z = torch.sigmoid(gi[:, :2 * size] + gh[:, :2 * size]).split(size, dim=1)
        n = torch.tanh(gi[:, 2 * size:] + r * gh[:, 2 * size:])
        return (1 - z) * n + z * h""",
}, wrong={
    "reset_before_the_bias": ("""
        size = h.shape[1]
        x_r, x_z, x_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)
        h_r, h_z, _ = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * (h @ weight_hh[2 * size:].T) + bias_hh[2 * size:])
        return (1 - z) * n + z * h""", "wrong result"),
    "update_gate_swapped": ("""
        x_r, x_z, x_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)
        h_r, h_z, h_n = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return z * n + (1 - z) * h""", "wrong result"),
    "gate_order_z_r_n": ("""
        x_z, x_r, x_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)
        h_z, h_r, h_n = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return (1 - z) * n + z * h""", "wrong result"),
    "detour_through_numpy": ("""
        n_ = lambda t: t.detach().numpy()
        sig = lambda v: 1 / (1 + np.exp(-v))
        x_r, x_z, x_n = np.split(n_(x) @ n_(weight_ih).T + n_(bias_ih), 3, axis=1)
        h_r, h_z, h_n = np.split(n_(h) @ n_(weight_hh).T + n_(bias_hh), 3, axis=1)
        r, z = sig(x_r + h_r), sig(x_z + h_z)
        n = np.tanh(x_n + r * h_n)
        return torch.from_numpy((1 - z) * n + z * n_(h))""", "gradient"),
})

_FLIP_EACH = """
        def flip_each(seq):  # each sequence reversed within its length, padding left in place
            return torch.stack([torch.cat([seq[b, :n].flip(0), seq[b, n:]]) for b, n in enumerate(lengths.tolist())])
"""
answers("recurrent.layers.bidirectional", correct={
    "flip_each_sequence": _FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(flip_each(x), lengths)
        return torch.cat([out_f, flip_each(out_b)], dim=-1), (final_f, final_b)""",
    "index_tensor": """
        batch, steps = x.shape[:2]
        index = torch.arange(steps).repeat(batch, 1)  # (B, T)
        for b in range(batch):
            n = int(lengths[b])
            index[b, :n] = torch.arange(n - 1, -1, -1)
        rows = torch.arange(batch)[:, None]
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(x[rows, index], lengths)
        return torch.cat([out_f, out_b[rows, index]], dim=-1), (final_f, final_b)""",
}, wrong={
    "flips_the_padding_too": ("""
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(x.flip(1), lengths)
        return torch.cat([out_f, out_b.flip(1)], dim=-1), (final_f, final_b)""", "wrong result"),
    "backward_outputs_left_reversed": (_FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(flip_each(x), lengths)
        return torch.cat([out_f, out_b], dim=-1), (final_f, final_b)""", "wrong result"),
    "backward_first": (_FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(flip_each(x), lengths)
        return torch.cat([flip_each(out_b), out_f], dim=-1), (final_f, final_b)""", "wrong result"),
    "reversed_through_numpy": ("""
        array = x.detach().numpy().copy()
        for b, n in enumerate(lengths.tolist()):
            array[b, :n] = array[b, :n][::-1].copy()
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(torch.from_numpy(array), lengths)
        index = torch.arange(x.shape[1]).repeat(x.shape[0], 1)
        for b, n in enumerate(lengths.tolist()):
            index[b, :n] = torch.arange(n - 1, -1, -1)
        return torch.cat([out_f, out_b[torch.arange(x.shape[0])[:, None], index]], dim=-1), (final_f, final_b)""",
                               "gradient"),
})

_BROADCAST = "s.reshape(-1, *[1] * (layers.dim() - 1))"
answers("recurrent.elmo.scalar_mix", correct={
    "softmax_by_hand": f"""
        e = torch.exp(weights - weights.max())
        s = e / e.sum()
        return gamma.reshape(()) * ({_BROADCAST} * layers).sum(dim=0)""",
    "einsum_log_softmax": """
        s = torch.log_softmax(weights, dim=0).exp()
        return torch.einsum("l,l...->...", s, layers) * gamma.sum()""",
    "loop_over_layers": """
        s = torch.softmax(weights, dim=0)
        mixed = sum(s[j] * layers[j] for j in range(len(layers)))
        return gamma.flatten()[0] * mixed""",
}, wrong={
    "naive_softmax": (f"""
        s = torch.exp(weights) / torch.exp(weights).sum()
        return gamma.reshape(()) * ({_BROADCAST} * layers).sum(dim=0)""", "wrong result"),
    "gamma_as_a_float": (f"""
        s = torch.softmax(weights, dim=0)
        return float(gamma) * ({_BROADCAST} * layers).sum(dim=0)""", "gradient"),
    "weights_without_softmax": (f"""
        s = weights
        return gamma.reshape(()) * ({_BROADCAST} * layers).sum(dim=0)""", "wrong result"),
    "detour_through_numpy": ("""
        w = weights.detach().numpy()
        s = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
        return gamma.reshape(()) * torch.from_numpy(np.tensordot(s, layers.detach().numpy(), axes=1))""", "gradient"),
})

# The student's own masked_softmax, defined in an earlier cell: general_attention and additive_attention call it.
_MASKED_SOFTMAX = '''
def masked_softmax(scores, mask):
    """The notebook's part 1, as a student wrote it."""
    shifted = scores.masked_fill(~mask[:, None, :], float("-inf"))
    exps = torch.exp(shifted - shifted.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


'''
_WEIGHTS = """
        weights = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)  # (B, Tq, Tk)
        return weights @ keys, weights"""
answers("attention.masking.masked_softmax", correct={
    "exp_of_the_real_maximum": """
        shifted = scores.masked_fill(~mask[:, None, :], float("-inf"))
        shifted = shifted - shifted.amax(dim=-1, keepdim=True)
        exps = torch.exp(shifted)
        return exps / exps.sum(dim=-1, keepdim=True)""",
    "where_and_log_softmax": """
        keep = mask.unsqueeze(1).expand_as(scores)
        filled = torch.where(keep, scores, torch.full_like(scores, -math.inf))
        return torch.log_softmax(filled, dim=2).exp()""",
    "fill_minus_1e9": """
        return torch.softmax(scores.masked_fill(~mask[:, None, :], -1e9), dim=-1)""",
    "loop_over_sources": """
        weights = torch.zeros_like(scores)
        for b in range(scores.shape[0]):
            weights[b, :, mask[b]] = torch.softmax(scores[b][:, mask[b]], dim=-1)
        return weights""",
}, wrong={
    "naive_exp": ("""
        exps = torch.exp(scores) * mask[:, None, :]
        return exps / exps.sum(dim=-1, keepdim=True)""", "wrong result"),
    "maximum_over_the_padding_too": ("""
        exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * mask[:, None, :]
        return exps / exps.sum(dim=-1, keepdim=True)""", "wrong result"),
    "padding_filled_with_zero": ("""
        return torch.softmax(scores.masked_fill(~mask[:, None, :], 0.0), dim=-1)""", "wrong result"),
    "fill_minus_1e4": ("""
        return torch.softmax(scores.masked_fill(~mask[:, None, :], -1e4), dim=-1)""", "wrong result"),
    "masked_after_the_softmax": ("""
        return torch.softmax(scores, dim=-1) * mask[:, None, :]""", "wrong result"),
    "filled_in_place": ("""
        scores.masked_fill_(~mask[:, None, :], float("-inf"))
        return torch.softmax(scores, dim=-1)""", "in-place"),  # autograd refuses it on the hidden cases' leaves
})

answers("attention.scores.general_attention", correct={
    "einsum": (_MASKED_SOFTMAX, """
        weights = masked_softmax(torch.einsum("bqh,hg,big->bqi", query, weight, keys), mask)
        return torch.einsum("bqi,bih->bqh", weights, keys), weights"""),
    "query_times_w_first": """
        scores = torch.bmm(query @ weight, keys.transpose(1, 2))  # (B, Tq, Tk)""" + _WEIGHTS,
}, wrong={
    "w_not_transposed": ("""
        scores = query @ (keys @ weight).transpose(1, 2)""" + _WEIGHTS, "wrong result"),
    "mask_ignored": ("""
        weights = torch.softmax(query @ weight @ keys.transpose(1, 2), dim=-1)
        return weights @ keys, weights""", "wrong result"),
    "softmax_over_the_queries": ("""
        scores = (query @ weight @ keys.transpose(1, 2)).masked_fill(~mask[:, None, :], float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=1))
        return weights @ keys, weights""", "wrong result"),
    "detour_through_numpy": ("""
        n = lambda t: t.detach().numpy()
        scores = np.einsum("bqh,hg,big->bqi", n(query), n(weight), n(keys))
        scores = np.where(n(mask)[:, None, :], scores, -np.inf)
        exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = torch.from_numpy(exps / exps.sum(axis=-1, keepdims=True))
        return weights @ keys, weights""", "gradient"),
})

answers("attention.scores.additive_attention", correct={
    "einsum": (_MASKED_SOFTMAX, """
        inner = torch.einsum("ah,bqh->bqa", weight_query, query)[:, :, None] + \\
            torch.einsum("ah,bih->bia", weight_key, keys)[:, None]
        weights = masked_softmax(torch.einsum("bqia,a->bqi", torch.tanh(inner), v), mask)
        return torch.einsum("bqi,bih->bqh", weights, keys), weights"""),
    "loop_over_keys": """
        import torch.nn.functional as F
        projected = F.linear(query, weight_query)  # (B, Tq, A)
        scores = torch.stack([torch.tanh(projected + F.linear(keys[:, i:i + 1], weight_key)) @ v
                              for i in range(keys.shape[1])], dim=-1)  # (B, Tq, Tk)""" + _WEIGHTS,
}, wrong={
    "v_before_tanh": ("""
        inner = (query @ weight_query.T)[:, :, None] + (keys @ weight_key.T)[:, None]
        scores = torch.tanh(inner @ v)""" + _WEIGHTS, "wrong result"),
    "projections_swapped": ("""
        inner = (query @ weight_key.T)[:, :, None] + (keys @ weight_query.T)[:, None]
        scores = torch.tanh(inner) @ v""" + _WEIGHTS, "wrong result"),
    "one_projection_for_both": ("""
        inner = (query @ weight_query.T)[:, :, None] + (keys @ weight_query.T)[:, None]
        scores = torch.tanh(inner) @ v""" + _WEIGHTS, "wrong result"),
    "mask_ignored": ("""
        inner = (query @ weight_query.T)[:, :, None] + (keys @ weight_key.T)[:, None]
        weights = torch.softmax(torch.tanh(inner) @ v, dim=-1)
        return weights @ keys, weights""", "wrong result"),
})

answers("attention.seq2seq.attention_decoder_step", correct={
    "gru_by_hand": """
        context, weights = decoder.attention(s_prev.unsqueeze(1), memory, mask)
        context, weights = context.squeeze(1), weights.squeeze(1)
        cell, size = decoder.cell, s_prev.shape[1]
        a = torch.cat([decoder.embedding(y_prev), context], dim=1) @ cell.weight_ih.T + cell.bias_ih
        b = s_prev @ cell.weight_hh.T + cell.bias_hh
        r = torch.sigmoid(a[:, :size] + b[:, :size])
        z = torch.sigmoid(a[:, size:2 * size] + b[:, size:2 * size])
        n = torch.tanh(a[:, 2 * size:] + r * b[:, 2 * size:])
        state = (1 - z) * n + z * s_prev
        return decoder.readout(torch.cat([state, context], dim=1)), state, weights""",
    "readout_split": """
        context, weights = decoder.attention(s_prev[:, None], memory, mask)
        context = context.reshape(s_prev.shape)
        state = decoder.cell(torch.cat((decoder.embedding.weight[y_prev], context), dim=-1), s_prev)
        size = state.shape[1]
        readout = decoder.readout
        logits = state @ readout.weight[:, :size].T + context @ readout.weight[:, size:].T + readout.bias
        return logits, state, weights.reshape(memory.shape[:2])""",
}, wrong={
    "readout_from_the_previous_state": ("""
        context, weights = decoder.attention(s_prev[:, None, :], memory, mask)
        context = context[:, 0]
        state = decoder.cell(torch.cat([decoder.embedding(y_prev), context], dim=-1), s_prev)
        return decoder.readout(torch.cat([s_prev, context], dim=-1)), state, weights[:, 0]""", "wrong result"),
    "readout_context_from_the_new_state": ("""
        context, _ = decoder.attention(s_prev[:, None, :], memory, mask)
        state = decoder.cell(torch.cat([decoder.embedding(y_prev), context[:, 0]], dim=-1), s_prev)
        context, weights = decoder.attention(state[:, None, :], memory, mask)
        return decoder.readout(torch.cat([state, context[:, 0]], dim=-1)), state, weights[:, 0]""", "wrong result"),
    "cell_input_order_swapped": ("""
        context, weights = decoder.attention(s_prev[:, None, :], memory, mask)
        context = context[:, 0]
        state = decoder.cell(torch.cat([context, decoder.embedding(y_prev)], dim=-1), s_prev)
        return decoder.readout(torch.cat([state, context], dim=-1)), state, weights[:, 0]""", None),
    "weights_left_with_the_query_axis": ("""
        context, weights = decoder.attention(s_prev[:, None, :], memory, mask)
        context = context[:, 0]
        state = decoder.cell(torch.cat([decoder.embedding(y_prev), context], dim=-1), s_prev)
        return decoder.readout(torch.cat([state, context], dim=-1)), state, weights""", "wrong result"),
    "context_detached": ("""
        context, weights = decoder.attention(s_prev[:, None, :], memory, mask)
        context = context[:, 0].detach()
        state = decoder.cell(torch.cat([decoder.embedding(y_prev), context], dim=-1), s_prev)
        return decoder.readout(torch.cat([state, context], dim=-1)), state, weights[:, 0]""", "gradient"),
})

_BEAM_LOOP = """
        live, finished = [([], 0.0)], []
        tokens = torch.tensor([bos])
        for _ in range(max_len):
            log_probs, state = step_fn(tokens, state)
            candidates = [(total + float(log_probs[k, w]), k, w) for k, (_, total) in enumerate(live)
                          for w in range(log_probs.shape[1])]"""
_BEAM = _BEAM_LOOP + """
            candidates.sort(key=lambda c: -c[0])
            kept = []
            for total, k, w in candidates[:beam_width]:
                (finished if w == eos else kept).append((live[k][0] + [w], total, k))
            if not kept:
                break
            live = [(words, total) for words, total, _ in kept]
            state = None if state is None else state[torch.tensor([k for _, _, k in kept])]
            tokens = torch.tensor([words[-1] for words, _ in live])
        else:
            finished += [(words, total, None) for words, total in live]
        words, total, _ = max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)
        return words, total"""



answers("attention.decoding.beam_search", correct={
    "python_lists": _BEAM,
    "topk_and_index_select": """
        import heapq
        hypotheses, totals = [[]], torch.zeros(1, dtype=torch.float64)
        tokens, finished = torch.tensor([bos]), []
        for step in range(max_len):
            log_probs, state = step_fn(tokens, state)
            flat = (totals.unsqueeze(1) + log_probs.double()).flatten()
            best, where = torch.topk(flat, k=min(beam_width, flat.numel()))
            rows, words = torch.div(where, log_probs.shape[1], rounding_mode="floor"), where % log_probs.shape[1]
            alive = words != eos
            for total, row, word in zip(best[~alive].tolist(), rows[~alive].tolist(), words[~alive].tolist()):
                finished.append((hypotheses[row] + [word], total))
            if not bool(alive.any()):
                break
            rows, words, totals = rows[alive], words[alive], best[alive]
            hypotheses = [hypotheses[r] + [w] for r, w in zip(rows.tolist(), words.tolist())]
            if state is not None:
                state = state.index_select(0, rows)
            tokens = words
            if step == max_len - 1:
                finished += list(zip(hypotheses, totals.tolist()))
        return heapq.nlargest(1, finished, key=lambda f: f[1] / len(f[0]) ** alpha)[0]""",
}, wrong={
    "no_length_normalisation": (mistake(_BEAM, "key=lambda f: f[1] / len(f[0]) ** alpha)", "key=lambda f: f[1])"),
                                "wrong result"),
    "normalised_score_returned": (mistake(_BEAM, "return words, total", "return words, total / len(words) ** alpha"),
                                  "wrong result"),
    "finished_take_no_place": (_BEAM_LOOP + """
            candidates.sort(key=lambda c: -c[0])
            finished += [(live[k][0] + [w], total, k) for total, k, w in candidates[:beam_width] if w == eos]
            kept = [(live[k][0] + [w], total, k) for total, k, w in candidates if w != eos][:beam_width]
            live = [(words, total) for words, total, _ in kept]
            state = None if state is None else state[torch.tensor([k for _, _, k in kept])]
            tokens = torch.tensor([words[-1] for words, _ in live])
            if len(finished) >= beam_width:
                break
        else:
            finished += [(words, total, None) for words, total in live]
        words, total, _ = max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)
        return words, total""", "wrong result"),
    "states_not_reordered": (mistake(_BEAM,   # the states stay in the order of the old beam
        "            state = None if state is None else state[torch.tensor([k for _, _, k in kept])]\n", ""), None),
    "live_hypotheses_dropped_at_max_len": (mistake(_BEAM, 
        "        else:\n            finished += [(words, total, None) for words, total in live]\n",
        "        if not finished:\n            return [], 0.0\n"), "wrong result"),
})


# ps06: the Transformer's parts. multi_head_attention gets an attention_fn and pre_ln_encoder_block a block
# in every case (course_lib.testing's), so these answers call what they are given.
_SDPA = """
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, -math.inf)
        elif mask is not None:
            scores = scores + mask
        weights = torch.softmax(scores, dim=-1)
        return weights @ value, weights"""



answers("transformer.scaled_attention.scaled_dot_product_attention", correct={
    "einsum_and_where": """
        scores = torch.einsum("...qd,...kd->...qk", query, key) / query.shape[-1] ** 0.5
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf) if mask.dtype == torch.bool else scores + mask
        weights = scores.softmax(dim=-1)
        return torch.einsum("...qk,...kd->...qd", weights, value), weights""",
    "scaled_query_fill_minus_1e9": """
        q = query * (1.0 / math.sqrt(query.size(-1)))
        scores = torch.matmul(q, key.transpose(-1, -2))
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(mask.logical_not(), -1e9)
        elif mask is not None:
            scores = scores + mask
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, value), weights""",
    "exp_by_hand": """
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
        if mask is not None:
            bias = torch.zeros_like(scores).masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else mask
            scores = scores + bias
        exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        weights = exps / exps.sum(dim=-1, keepdim=True)
        return weights @ value, weights""",
}, wrong={
    "no_scale": (mistake(_SDPA, " / math.sqrt(query.shape[-1])", ""), "wrong result"),
    "scaled_by_the_number_of_keys": (mistake(_SDPA, "math.sqrt(query.shape[-1])", "math.sqrt(key.shape[-2])"),
                                     "wrong result"),
    "divided_by_hs": (mistake(_SDPA, "math.sqrt(query.shape[-1])", "query.shape[-1]"), "wrong result"),
    "mask_multiplies_the_scores": (mistake(_SDPA, "scores.masked_fill(~mask, -math.inf)", "scores * mask"),
                                   "wrong result"),
    "float_mask_ignored": (mistake(_SDPA, "scores = scores + mask", "pass"), "wrong result"),
    "softmax_over_the_queries": (mistake(_SDPA, "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
                                 "wrong result"),
    "weights_through_numpy": (mistake(_SDPA, "weights = torch.softmax(scores, dim=-1)", """s = scores.detach().numpy()
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        weights = torch.from_numpy(e / e.sum(axis=-1, keepdims=True))"""), "gradient"),
})

# multi_head_attention's default attention_fn is the notebook's part 1, which must exist (here, undone)
_SDPA_CELL = '''
def scaled_dot_product_attention(query, key, value, mask=None):
    """The notebook's part 1, left undone: the tests of part 2 pass their own attention_fn."""
    raise NotImplementedError()


'''
_MHA = """
        size = query.shape[-1] // num_heads
        w_q, w_k, w_v = in_weight.chunk(3)
        b_q, b_k, b_v = in_bias.chunk(3)
        def heads(x, w, b):  # (B, T, D) -> (B, nh, T, hs)
            return (x @ w.T + b).reshape(x.shape[0], x.shape[1], num_heads, size).transpose(1, 2)
        out, weights = attention_fn(heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v), mask)
        out = out.transpose(1, 2).reshape(query.shape)
        return out @ out_weight.T + out_bias, weights"""


def _mha_with(old: str, new: str) -> tuple[str, str]:
    """The correct multi-head attention above with one piece changed (a mistake), after part 1's cell."""
    return _SDPA_CELL, mistake(_MHA, old, new)


answers("transformer.multi_head.multi_head_attention", correct={
    "nested_helper": (_SDPA_CELL, _MHA),
    "loop_over_heads": (_SDPA_CELL, """
        size = query.shape[-1] // num_heads
        q, k, v = (x @ w.T + b for x, w, b in zip((query, key, value), in_weight.chunk(3), in_bias.chunk(3)))
        outs, weights = [], []
        for h in range(num_heads):
            cols = slice(h * size, (h + 1) * size)
            m = None if mask is None else mask.expand(query.shape[0], num_heads, query.shape[1], key.shape[1])[:, h:h + 1]
            o, w = attention_fn(q[:, None, :, cols], k[:, None, :, cols], v[:, None, :, cols], m)
            outs.append(o[:, 0])
            weights.append(w[:, 0])
        return torch.nn.functional.linear(torch.cat(outs, dim=-1), out_weight, out_bias), torch.stack(weights, dim=1)"""),
    "library_helpers": (_SDPA_CELL, """
        q, k, v = (split_heads(torch.nn.functional.linear(x, w, b), num_heads)
                   for x, w, b in zip((query, key, value), in_weight.split(query.shape[-1]),
                                      in_bias.split(query.shape[-1])))
        out, weights = attention_fn(q, k, v, mask=mask)
        return torch.nn.functional.linear(merge_heads(out), out_weight, out_bias), weights"""),
}, wrong={
    "heads_without_transpose": (_mha_with(
        ".reshape(x.shape[0], x.shape[1], num_heads, size).transpose(1, 2)",
        ".reshape(x.shape[0], num_heads, x.shape[1], size)"), "wrong result"),
    "key_and_value_blocks_swapped": (_mha_with("w_q, w_k, w_v = in_weight.chunk(3)", "w_q, w_v, w_k = in_weight.chunk(3)"),
                                     "wrong result"),
    "output_projection_not_transposed": (_mha_with("out @ out_weight.T", "out @ out_weight"), "wrong result"),
    "output_bias_forgotten": (_mha_with("return out @ out_weight.T + out_bias, weights", "return out @ out_weight.T, weights"),
                              "wrong result"),
    "weights_averaged_over_heads": (_mha_with("+ out_bias, weights", "+ out_bias, weights.mean(dim=1)"), "shape"),
    "mask_dropped": (_mha_with("heads(value, w_v, b_v), mask)", "heads(value, w_v, b_v), None)"), "wrong result"),
})

answers("transformer.positions.sinusoidal_encoding", correct={
    "numpy_then_torch": """
        angles = np.arange(steps)[:, None] / base ** (np.arange(0, width, 2) / width)
        table = np.zeros((steps, width))
        table[:, ::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
        return torch.from_numpy(table).float()""",
    "outer_and_stack": """
        t = torch.arange(steps, dtype=torch.float64)
        w = torch.exp(-math.log(base) * torch.arange(width // 2, dtype=torch.float64) * 2 / width)
        angles = torch.outer(t, w)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(steps, width).to(torch.float32)""",
    "python_loops": """
        rows = []
        for t in range(steps):
            row = []
            for i in range(width // 2):
                row += [math.sin(t * base ** (-2 * i / width)), math.cos(t * base ** (-2 * i / width))]
            rows.append(row)
        return torch.tensor(rows, dtype=torch.float32)""",
}, wrong={
    "column_index_in_the_speed": ("""
        speeds = base ** (-torch.arange(width, dtype=torch.float64) / width)  # one per column
        angles = torch.arange(steps, dtype=torch.float64)[:, None] * speeds
        table = torch.where(torch.arange(width) % 2 == 0, angles.sin(), angles.cos())
        return table.float()""", "wrong result"),
    "sines_then_cosines": ("""
        angles = torch.arange(steps, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, width, 2) / width)
        return torch.cat([angles.sin(), angles.cos()], dim=1).float()""", "wrong result"),
    "sin_and_cos_swapped": ("""
        angles = torch.arange(steps, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, width, 2) / width)
        return torch.stack([angles.cos(), angles.sin()], dim=-1).reshape(steps, width).float()""", "wrong result"),
    "float32_angles": ("""
        t = torch.arange(steps, dtype=torch.float32)[:, None]
        speeds = base ** (-torch.arange(0, width, 2, dtype=torch.float32) / width)
        return torch.stack([(t * speeds).sin(), (t * speeds).cos()], dim=-1).reshape(steps, width)""", "wrong result"),
    "float64_returned": ("""
        angles = torch.arange(steps, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, width, 2) / width)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(steps, width)""", "dtype"),
})

answers("transformer.positions.rope", correct={
    "complex_numbers": """
        size, steps = x.shape[-1], x.shape[-2]
        pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], size // 2, 2).contiguous())
        t = torch.arange(start, start + steps, dtype=torch.float64)[:, None]
        turn = torch.polar(torch.ones(steps, size // 2, dtype=torch.float64), t * base ** (-torch.arange(0, size, 2) / size))
        return torch.view_as_real(pairs * turn.to(pairs.dtype)).reshape(x.shape)""",
    "partner_and_repeat_interleave": """
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)
        theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        angles = torch.repeat_interleave(t[:, None] * theta, 2, dim=-1)  # (T, hs): each angle twice
        partner = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)  # (-x1, x0, -x3, x2, ...)
        return x * angles.cos().to(x.dtype) + partner * angles.sin().to(x.dtype)""",
}, wrong={
    "pairs_of_halves": ("""
        half = x.shape[-1] // 2
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]
        angles = t * base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)""", "wrong result"),
    "start_ignored": ("""
        t = torch.arange(x.shape[-2], dtype=torch.float64)[:, None]
        angles = t * base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        even, odd = x[..., ::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)""", "wrong result"),
    "theta_from_the_pair_index_alone": ("""
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]
        angles = t * base ** (-torch.arange(x.shape[-1] // 2, dtype=torch.float64) / x.shape[-1])
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        even, odd = x[..., ::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)""", "wrong result"),
    "turned_backwards": ("""
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]
        angles = t * base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        even, odd = x[..., ::2], x[..., 1::2]
        return torch.stack([even * cos + odd * sin, odd * cos - even * sin], dim=-1).flatten(-2)""", "wrong result"),
})

answers("transformer.layer_norm.layer_norm", correct={
    "var_unbiased_false": """
        mu = x.mean(-1, keepdim=True)
        return (x - mu) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * weight + bias""",
    "centred_then_rms": """
        centred = x - x.sum(dim=-1, keepdim=True) / x.shape[-1]
        return weight * centred / (centred * centred).mean(dim=-1, keepdim=True).add(eps).sqrt() + bias""",
}, wrong={
    "unbiased_variance": ("""
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias""", "wrong result"),
    "eps_outside_the_square_root": ("""
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias""", "wrong result"),
    "mean_of_squares_minus_square_of_mean": ("""
        mu = x.mean(-1, keepdim=True)
        variance = (x ** 2).mean(-1, keepdim=True) - mu ** 2
        return (x - mu) / torch.sqrt(variance + eps) * weight + bias""", "wrong result"),
    "statistics_over_every_axis": ("""
        return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps) * weight + bias""", "wrong result"),
    "weight_and_bias_swapped": ("""
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * bias + weight""", "wrong result"),
})

answers("transformer.blocks.pre_ln_encoder_block", correct={
    "other_names": """
        residual = x + block.self_attention(block.norm1(x), mask)
        return residual + block.feed_forward(block.norm2(residual))""",
    "loop_over_sublayers": """
        for norm, sublayer in ((block.norm1, lambda z: block.self_attention(z, mask)), (block.norm2, block.feed_forward)):
            x = x + sublayer(norm(x))
        return x""",
}, wrong={
    "post_ln": ("""
        h = block.norm1(x + block.self_attention(x, mask))
        return block.norm2(h + block.feed_forward(h))""", "wrong result"),
    "norms_swapped": ("""
        h = x + block.self_attention(block.norm2(x), mask)
        return h + block.feed_forward(block.norm1(h))""", "wrong result"),
    "residual_from_the_normalised_input": ("""
        n = block.norm1(x)
        h = n + block.self_attention(n, mask)
        n = block.norm2(h)
        return n + block.feed_forward(n)""", "wrong result"),
    "mask_dropped": ("""
        h = x + block.self_attention(block.norm1(x), None)
        return h + block.feed_forward(block.norm2(h))""", "wrong result"),
    "one_residual_for_both": ("""
        return x + block.feed_forward(block.norm2(block.self_attention(block.norm1(x), mask)))""", "wrong result"),
})


# ps07: GPT. causal_self_attention gets an attention_fn (course_lib's PlainScaledAttention but in one case) and
# beam_search tiny GPTs of course_lib.testing.PlainCausalAttention, some of which refuse reading without the cache.
_CAUSAL = """
        size = width // num_heads
        def heads(block):  # (B, T, D) -> (B, nh, T, hs)
            return block.reshape(batch, steps, num_heads, size).transpose(1, 2)
        q, k, v = (heads(block) for block in torch.nn.functional.linear(x, in_weight, in_bias).chunk(3, dim=-1))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)
        mask = torch.ones(steps, past + steps, dtype=torch.bool).tril(diagonal=past)
        out, _ = attention_fn(q, k, v, mask)
        out = out.transpose(1, 2).reshape(batch, steps, width)
        return out @ out_weight.T + out_bias, (k, v)"""



answers("gpt.causal_attention.causal_self_attention", correct={
    "linear_and_chunk": _CAUSAL,
    "library_helpers": """
        w_q, w_k, w_v = in_weight.split(width)
        b_q, b_k, b_v = in_bias.split(width)
        q, k, v = (split_heads(x @ w.T + b, num_heads) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
        if cache is not None:
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        heads, _weights = attention_fn(q, k, v, mask=causal_mask_after(past, steps))
        return merge_heads(heads) @ out_weight.T + out_bias, (k, v)""",
    "one_head_at_a_time": """
        size = width // num_heads
        q, k, v = (x @ w.T + b for w, b in zip(in_weight.chunk(3), in_bias.chunk(3)))  # (B, T, D) each
        k, v = split_heads(k, num_heads), split_heads(v, num_heads)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        mask = torch.arange(past + steps)[None, :] <= torch.arange(past, past + steps)[:, None]
        outs = [attention_fn(q[:, None, :, h * size:(h + 1) * size], k[:, h:h + 1], v[:, h:h + 1], mask)[0][:, 0]
                for h in range(num_heads)]
        return torch.cat(outs, dim=-1) @ out_weight.T + out_bias, (k, v)""",
}, wrong={
    "mask_without_the_cache_offset": (mistake(_CAUSAL, ".tril(diagonal=past)", ".tril(diagonal=0)"), "wrong result"),
    "no_mask_when_there_is_a_cache": (mistake(_CAUSAL, "out, _ = attention_fn(q, k, v, mask)",
                                                   "out, _ = attention_fn(q, k, v, None if cache is not None else mask)"),
                                      "wrong result"),
    "new_positions_before_the_cache": (mistake(_CAUSAL, "torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)",
                                                    "torch.cat([k, cache[0]], dim=-2), torch.cat([v, cache[1]], dim=-2)"),
                                       "wrong result"),
    "only_the_new_keys_returned": (mistake(_CAUSAL, """        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)
        mask = torch.ones(steps, past + steps, dtype=torch.bool).tril(diagonal=past)
        out, _ = attention_fn(q, k, v, mask)""", """        new = (k, v)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)
        mask = torch.ones(steps, past + steps, dtype=torch.bool).tril(diagonal=past)
        out, _ = attention_fn(q, k, v, mask)
        k, v = new"""), "wrong result"),
    "output_through_numpy": (mistake(_CAUSAL, "out = out.transpose(1, 2).reshape(batch, steps, width)",
                                          "out = torch.from_numpy(out.transpose(1, 2).reshape(batch, steps, width)"
                                          ".detach().numpy())"), "gradient"),
})

_TOP_K_HEAD = """
        scaled = logits / temperature
        if k is None or k >= logits.shape[-1]:
            return scaled"""
answers("gpt.filters.temperature_top_k", correct={
    "sort_and_where": _TOP_K_HEAD + """
        threshold = scaled.sort(dim=-1, descending=True).values[..., k - 1].unsqueeze(-1)
        return torch.where(scaled >= threshold, scaled, torch.full_like(scaled, -math.inf))""",
    "kthvalue_before_dividing": """
        if k is None or k >= logits.shape[-1]:
            return logits / temperature
        kth = torch.kthvalue(logits, logits.shape[-1] - k + 1, dim=-1, keepdim=True).values  # the k-th largest
        return (logits / temperature).masked_fill(logits < kth, -math.inf)""",
    "rows_in_a_loop": """
        rows = (logits / temperature).reshape(-1, logits.shape[-1])
        out = []
        for row in rows:
            keep = row >= sorted(row.tolist(), reverse=True)[min(k or len(row), len(row)) - 1]
            out.append(torch.where(keep, row, -math.inf))
        return torch.stack(out).reshape(logits.shape) if out else rows.reshape(logits.shape)""",
}, wrong={
    "exactly_k_by_index": (_TOP_K_HEAD + """
        index = scaled.topk(k, dim=-1).indices
        return torch.full_like(scaled, -math.inf).scatter(-1, index, scaled.gather(-1, index))""", "wrong result"),
    "temperature_multiplies": ("""
        scaled = logits * temperature
        if k is None or k >= logits.shape[-1]:
            return scaled
        return scaled.masked_fill(scaled < scaled.topk(k, dim=-1).values[..., -1:], -math.inf)""", "wrong result"),
    "one_token_too_many": (_TOP_K_HEAD + """
        threshold = scaled.sort(dim=-1, descending=True).values[..., min(k, logits.shape[-1] - 1)].unsqueeze(-1)
        return scaled.masked_fill(scaled < threshold, -math.inf)""", "wrong result"),
    "no_guard_for_k_above_v": ("""
        scaled = logits / temperature
        if k is None:
            return scaled
        return scaled.masked_fill(scaled < scaled.topk(k, dim=-1).values[..., -1:], -math.inf)""", "raised"),
    "filtered_in_place": ("""
        logits /= temperature
        if k is not None and k < logits.shape[-1]:
            logits.masked_fill_(logits < logits.topk(k, dim=-1).values[..., -1:], -math.inf)
        return logits""", "in place"),
})

_TOP_P_SORTED = """
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= p  # (..., V) in sorted order: the mass before reaches p
        drop[..., 0] = False"""
answers("gpt.filters.top_p_filter", correct={
    "mass_strictly_ahead": """
        probs = torch.softmax(logits.double(), dim=-1)
        ahead = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(dim=-1)  # (..., V)
        return logits.masked_fill(ahead >= p, -math.inf)""",
    "sorted_logits_then_ties": _TOP_P_SORTED + """
        smallest = sorted_logits.masked_fill(drop, math.inf).amin(dim=-1, keepdim=True)  # the least probable kept
        return logits.masked_fill(logits < smallest, -math.inf)""",
}, wrong={
    "ties_cut_by_the_sort": (_TOP_P_SORTED + """
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), -math.inf)""", "wrong result"),
    "cumulative_mass_including_itself": ("""
        probs = torch.softmax(logits.double(), dim=-1)
        ordered = probs.sort(dim=-1, descending=True).values
        kept = (ordered.cumsum(dim=-1) < p).sum(dim=-1, keepdim=True).clamp(min=1)
        return logits.masked_fill(probs < ordered.gather(-1, kept - 1), -math.inf)""", "wrong result"),
    "renormalised_log_probabilities": (_TOP_P_SORTED + """
        smallest = sorted_logits.masked_fill(drop, math.inf).amin(dim=-1, keepdim=True)
        kept = logits.masked_fill(logits < smallest, -math.inf)
        return torch.log_softmax(kept, dim=-1)""", "wrong result"),
    "probabilities_returned": ("""
        probs = torch.softmax(logits.double(), dim=-1)
        ahead = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(dim=-1)
        return probs.masked_fill(ahead >= p, 0.0).to(logits.dtype)""", "wrong result"),
})

_GPT_BEAM = """
        with eval_mode(model):
            logits, cache = model(prompt[None])
            live, finished = [([], 0.0)], []
            for step in range(max_new_tokens):
                if step:
                    rows = torch.tensor([parent for _, _, parent in kept])
                    logits, cache = model(torch.tensor([[tokens[-1]] for tokens, _ in live]), reorder_cache(cache, rows))
                log_probs = torch.log_softmax(logits[:, -1].double(), dim=-1)
                candidates = [(total + float(log_probs[k, w]), k, w) for k, (_, total) in enumerate(live)
                              for w in range(log_probs.shape[1])]
                candidates.sort(key=lambda c: -c[0])
                kept = []
                for total, k, w in candidates[:beam_width]:
                    if w == eos:
                        finished.append((live[k][0] + [w], total))
                    else:
                        kept.append((live[k][0] + [w], total, k))
                if not kept:
                    break
                live = [(tokens, total) for tokens, total, _ in kept]
            else:
                finished += live
        return max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)"""



answers("gpt.beam.beam_search", correct={
    "python_lists": _GPT_BEAM,
    "topk_and_index_select": """
        import heapq
        with eval_mode(model):
            logits, cache = model(prompt.unsqueeze(0))
            hypotheses, totals, finished = [[]], torch.zeros(1, dtype=torch.float64), []
            for step in range(max_new_tokens):
                log_probs = logits[:, -1].double().log_softmax(dim=-1)  # (K, V)
                flat = (totals.unsqueeze(1) + log_probs).flatten()
                best, where = torch.topk(flat, k=min(beam_width, flat.numel()))
                rows, tokens = torch.div(where, log_probs.shape[1], rounding_mode="floor"), where % log_probs.shape[1]
                ended = tokens == eos if eos is not None else torch.zeros_like(tokens, dtype=torch.bool)
                for total, row, token in zip(best[ended].tolist(), rows[ended].tolist(), tokens[ended].tolist()):
                    finished.append((hypotheses[row] + [token], total))
                if bool(ended.all()):
                    break
                rows, tokens, totals = rows[~ended], tokens[~ended], best[~ended]
                hypotheses = [hypotheses[r] + [t] for r, t in zip(rows.tolist(), tokens.tolist())]
                if step == max_new_tokens - 1:  # no model call after the last step
                    finished += list(zip(hypotheses, totals.tolist()))
                    break
                cache = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in cache]
                logits, cache = model(tokens.unsqueeze(1), cache)
        return heapq.nlargest(1, finished, key=lambda f: f[1] / len(f[0]) ** alpha)[0]""",
}, wrong={
    "cache_not_reordered": (mistake(_GPT_BEAM, "reorder_cache(cache, rows)", "cache"), None),
    "whole_sequence_every_step": (mistake(_GPT_BEAM, """                    logits, cache = model(torch.tensor([[tokens[-1]] for tokens, _ in live]), reorder_cache(cache, rows))""",
                                                 """                    logits, _ = model(torch.cat([prompt.expand(len(live), -1),
                                                                 torch.tensor([tokens for tokens, _ in live])], dim=1))"""),
                                  "raised"),  # right values, but the models that insist on the cache refuse it
    "no_length_normalisation": (mistake(_GPT_BEAM, "key=lambda f: f[1] / len(f[0]) ** alpha)", "key=lambda f: f[1])"),
                                "wrong result"),
    "normalised_score_returned": (mistake(_GPT_BEAM, "return max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)",
                                                 "best = max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)\n"
                                                 "        return best[0], best[1] / len(best[0]) ** alpha"), "wrong result"),
    "finished_take_no_place": (mistake(_GPT_BEAM, """                for total, k, w in candidates[:beam_width]:
                    if w == eos:
                        finished.append((live[k][0] + [w], total))
                    else:
                        kept.append((live[k][0] + [w], total, k))""", """                finished += [(live[k][0] + [w], total) for total, k, w in candidates[:beam_width] if w == eos]
                kept = [(live[k][0] + [w], total, k) for total, k, w in candidates if w != eos][:beam_width]"""),
                               "wrong result"),
    "live_hypotheses_dropped_at_max_len": (mistake(_GPT_BEAM, "            else:\n                finished += live\n",
                                                          "            if not finished:\n                return [], 0.0\n"),
                                           "wrong result"),
})


# ps07: byte-pair encoding. most_frequent_pair and apply_merges take plain lists and dicts; their hidden cases hold
# ties arranged so that every other tie rule (largest, first or last seen, compared as text) picks another pair,
# pairs that would win across words, counts that outweigh numbers of words, the winner at the end of every word,
# runs of one symbol, and rank tables where a merge creates a pair of lower rank.
_PAIR = """
        totals = {}
        for word, count in zip(words, counts):
            for i in range(len(word) - 1):
                totals[(word[i], word[i + 1])] = totals.get((word[i], word[i + 1]), 0) + count
        if not totals:
            return None
        return min(totals, key=lambda pair: (-totals[pair], pair))"""



answers("gpt.bpe.most_frequent_pair", correct={
    "dict_and_min": _PAIR,
    "counter_of_zips": """
        from collections import Counter
        pairs = Counter()
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        return min(pairs.items(), key=lambda item: (-item[1], item[0]))[0] if pairs else None""",
    "sorted_then_first": """
        from collections import defaultdict
        totals = defaultdict(int)
        for k in range(len(words)):
            for left, right in zip(words[k][:-1], words[k][1:]):
                totals[left, right] += counts[k]
        ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
        return tuple(ranked[0][0]) if ranked else None""",
    "best_count_then_smallest": """
        totals = {}
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                totals[pair] = totals.get(pair, 0) + count
        if not totals:
            return None
        best = max(totals.values())
        return min(pair for pair, total in totals.items() if total == best)""",
}, wrong={
    "ties_to_the_largest_pair": (mistake(_PAIR, "return min(totals, key=lambda pair: (-totals[pair], pair))",
                                            "return max(totals, key=lambda pair: (totals[pair], pair))"), "wrong result"),
    "ties_to_the_first_seen": (mistake(_PAIR, "return min(totals, key=lambda pair: (-totals[pair], pair))",
                                          "return max(totals, key=totals.get)"), "wrong result"),
    "counter_most_common": ("""
        from collections import Counter
        pairs = Counter(pair for word, count in zip(words, counts) for pair in zip(word, word[1:]) for _ in range(count))
        return pairs.most_common(1)[0][0] if pairs else None""", "wrong result"),
    "ties_to_the_last_seen": ("""
        totals, best = {}, None
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                totals[pair] = totals.get(pair, 0) + count
        for pair, total in totals.items():
            if best is None or total >= totals[best]:
                best = pair
        return best""", "wrong result"),
    "ties_by_text": (mistake(_PAIR, "return min(totals, key=lambda pair: (-totals[pair], pair))",
                                "return min(totals, key=lambda pair: (-totals[pair], str(pair)))"), "wrong result"),
    "ties_by_joined_ids": (mistake(_PAIR, "return min(totals, key=lambda pair: (-totals[pair], pair))",
                                      "return min(totals, key=lambda pair: (-totals[pair], f'{pair[0]}{pair[1]}'))"),
                           "wrong result"),
    "words_run_together": ("""
        stream = [symbol for word, count in zip(words, counts) for _ in range(count) for symbol in word]
        totals = {}
        for pair in zip(stream, stream[1:]):
            totals[pair] = totals.get(pair, 0) + 1
        return min(totals, key=lambda pair: (-totals[pair], pair)) if totals else None""", "wrong result"),
    "counts_ignored": (mistake(_PAIR, ".get((word[i], word[i + 1]), 0) + count", ".get((word[i], word[i + 1]), 0) + 1"),
                       "wrong result"),
    "each_word_counted_once_per_pair": ("""
        totals = {}
        for word, count in zip(words, counts):
            for pair in set(zip(word, word[1:])):
                totals[pair] = totals.get(pair, 0) + count
        return min(totals, key=lambda pair: (-totals[pair], pair)) if totals else None""", "wrong result"),
    "last_pair_lost": (mistake(_PAIR, "for i in range(len(word) - 1):", "for i in range(len(word) - 2):"), "wrong result"),
    "runs_counted_without_overlap": ("""
        totals = {}
        for word, count in zip(words, counts):
            i = 0
            while i < len(word) - 1:
                pair = (word[i], word[i + 1])
                totals[pair] = totals.get(pair, 0) + count
                i += 2 if word[i] == word[i + 1] else 1
        return min(totals, key=lambda pair: (-totals[pair], pair)) if totals else None""", "wrong result"),
    "empty_table_raises": (mistake(_PAIR, """        if not totals:
            return None
""", ""), "raised"),
})


_MERGES = """
        merged = list(symbols)
        while len(merged) > 1:
            best = None
            for i in range(len(merged) - 1):
                rank = ranks.get((merged[i], merged[i + 1]))
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, i)
            if best is None:
                break
            i = best[1]
            merged = merged[:i] + [merged[i] + merged[i + 1]] + merged[i + 2:]
        return merged"""



answers("gpt.bpe.apply_merges", correct={
    "explicit_loop": _MERGES,
    "min_over_positions": """
        merged = list(symbols)
        while len(merged) > 1:
            i = min(range(len(merged) - 1), key=lambda j: (ranks.get((merged[j], merged[j + 1]), math.inf), j))
            if (merged[i], merged[i + 1]) not in ranks:
                break
            merged[i:i + 2] = [merged[i] + merged[i + 1]]
        return merged""",
    "sorted_candidates": """
        merged = [s for s in symbols]
        while True:
            candidates = sorted((ranks[pair], i) for i, pair in enumerate(zip(merged, merged[1:])) if pair in ranks)
            if not candidates:
                return merged
            i = candidates[0][1]
            merged = merged[:i] + ["".join(merged[i:i + 2])] + merged[i + 2:]""",
}, wrong={
    "leftmost_learned_pair": (mistake(_MERGES, "if rank is not None and (best is None or rank < best[0]):",
                                           "if rank is not None and best is None:"), "wrong result"),
    "highest_rank_first": (mistake(_MERGES, "if rank is not None and (best is None or rank < best[0]):",
                                        "if rank is not None and (best is None or rank > best[0]):"), "wrong result"),
    "rightmost_occurrence": (mistake(_MERGES, "if rank is not None and (best is None or rank < best[0]):",
                                          "if rank is not None and (best is None or rank <= best[0]):"), "wrong result"),
    "each_rank_once": ("""
        merged = list(symbols)
        for left, right in sorted(ranks, key=ranks.get):
            out, i = [], 0
            while i < len(merged):
                if i + 1 < len(merged) and merged[i] == left and merged[i + 1] == right:
                    out.append(left + right)
                    i += 2
                else:
                    out.append(merged[i])
                    i += 1
            merged = out
        return merged""", "wrong result"),
    "last_pair_lost": (mistake(_MERGES, "for i in range(len(merged) - 1):", "for i in range(len(merged) - 2):"),
                       "wrong result"),
    "merged_in_place": (mistake(_MERGES, """            merged = merged[:i] + [merged[i] + merged[i + 1]] + merged[i + 2:]""",
                                     """            merged[i:i + 2] = [merged[i] + merged[i + 1]]""")
                        .replace("merged = list(symbols)", "merged = symbols"), "in place"),
    "one_merge_only": (mistake(_MERGES, """            merged = merged[:i] + [merged[i] + merged[i + 1]] + merged[i + 2:]
        return merged""", """            merged = merged[:i] + [merged[i] + merged[i + 1]] + merged[i + 2:]
            break
        return merged"""), "wrong result"),
})


# ps08: BERT. mlm_mask draws at random: its cases are judged by its property in cases.ps08_bert (counts within 5 standard
# deviations), so answers that draw in another order, or only at the chosen positions, pass; its mistakes must show
# in the counts or the exact rules of at least two cases, and so must a pattern of positions (every k-th position
# chosen, fates dealt in turn: exact shares without randomness). One call cannot show whether the draws came from
# the generator given: an answer that draws from a generator of its own with a fixed seed passes the property (only
# torch's global generator is caught, by the probe's second call), and so do calls into transformers and tokenizers,
# which the probe does not record (WordPiece, BertSelfAttention); neither is in the tables below.
_WORDPIECE = """
        if len(word) > max_chars:
            return [unk_token]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start and ("##" if start else "") + word[start:end] not in vocab:
                end -= 1
            if end == start:
                return [unk_token]
            pieces.append(("##" if start else "") + word[start:end])
            start = end
        return pieces"""



answers("bert.wordpiece.wordpiece_word", correct={
    "shrink_from_the_end": _WORDPIECE,
    "recursive": """
        if len(word) > max_chars:
            return [unk_token]
        def cut(rest, prefix):  # the pieces of rest, or None
            if not rest:
                return []
            for end in range(len(rest), 0, -1):
                if prefix + rest[:end] in vocab:
                    tail = cut(rest[end:], "##")
                    return None if tail is None else [prefix + rest[:end]] + tail
            return None
        pieces = cut(word, "")
        return [unk_token] if pieces is None else pieces""",
    "longest_piece_length_capped": """
        if len(word) > max_chars:
            return [unk_token]
        longest = max(map(len, vocab), default=0)  # no piece is longer: shorter windows suffice
        pieces, start = [], 0
        while start < len(word):
            prefix = "##" if start else ""
            for end in range(min(len(word), start + longest), start, -1):
                if prefix + word[start:end] in vocab:
                    pieces.append(prefix + word[start:end])
                    start = end
                    break
            else:
                return [unk_token]
        return pieces""",
    "every_end_then_the_longest": """
        if len(word) > max_chars:
            return [unk_token]
        out, rest, prefix = [], word, ""
        while rest:
            fits = [end for end in range(1, len(rest) + 1) if prefix + rest[:end] in vocab]
            if not fits:
                return [unk_token]
            out.append(prefix + rest[:max(fits)])
            rest, prefix = rest[max(fits):], "##"
        return out""",
}, wrong={
    "tokenizers_wordpiece": ("""
        from tokenizers.models import WordPiece
        model = WordPiece({piece: i for i, piece in enumerate(vocab)}, unk_token=unk_token,
                          max_input_chars_per_word=max_chars)
        return [token.value for token in model.tokenize(word)] if word else []""", "calls"),
    "shortest_match_first": ("""
        if len(word) > max_chars:
            return [unk_token]
        pieces, start = [], 0
        while start < len(word):
            end = next((e for e in range(start + 1, len(word) + 1) if ("##" if start else "") + word[start:e] in vocab), None)
            if end is None:
                return [unk_token]
            pieces.append(("##" if start else "") + word[start:end])
            start = end
        return pieces""", "wrong result"),
    "unknown_piece_only": (mistake(_WORDPIECE, """            if end == start:
                return [unk_token]""", """            if end == start:
                return pieces + [unk_token]"""), "wrong result"),
    "max_chars_off_by_one": (mistake(_WORDPIECE, "if len(word) > max_chars:", "if len(word) >= max_chars:"), "wrong result"),
    "hashes_on_every_piece": (mistake(_WORDPIECE, 'while end > start and ("##" if start else "") + word[start:end] not in vocab:',
                                              'while end > start and "##" + word[start:end] not in vocab:')
                              .replace('pieces.append(("##" if start else "") + word[start:end])',
                                       'pieces.append("##" + word[start:end])'), "wrong result"),
    "empty_word_is_unknown": (mistake(_WORDPIECE, "if len(word) > max_chars:", "if not word or len(word) > max_chars:"),
                              "wrong result"),
    "backtracks": ("""
        if len(word) > max_chars:
            return [unk_token]
        def cut(rest, prefix):  # tries shorter pieces when the longest leads nowhere
            if not rest:
                return []
            for end in range(len(rest), 0, -1):
                if prefix + rest[:end] in vocab:
                    tail = cut(rest[end:], "##")
                    if tail is not None:
                        return [prefix + rest[:end]] + tail
            return None
        pieces = cut(word, "")
        return [unk_token] if pieces is None else pieces""", "wrong result"),
})

_EMBEDDINGS = """
        summed = token_weight[ids] + segment_weight[segments] + position_weight[:ids.shape[1]]
        return layer_norm(summed, norm_weight, norm_bias, eps)"""
answers("bert.embeddings.bert_embeddings", correct={
    "index_and_layer_norm": _EMBEDDINGS,
    "embedding_functions": """
        F = torch.nn.functional
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        summed = F.embedding(ids, token_weight) + F.embedding(segments, segment_weight) + F.embedding(positions, position_weight)
        return F.layer_norm(summed, (summed.shape[-1],), norm_weight, norm_bias, eps=eps)""",
    "one_hot_and_own_normalisation": """
        F = torch.nn.functional
        tokens = F.one_hot(ids, token_weight.shape[0]).to(token_weight.dtype) @ token_weight
        kinds = F.one_hot(segments, segment_weight.shape[0]).to(token_weight.dtype) @ segment_weight
        z = tokens + kinds + position_weight[:ids.shape[1]].unsqueeze(0)
        mean = z.mean(dim=-1, keepdim=True)
        variance = ((z - mean) ** 2).mean(dim=-1, keepdim=True)
        return (z - mean) / torch.sqrt(variance + eps) * norm_weight + norm_bias""",
}, wrong={
    "torch_default_eps": ("""
        summed = token_weight[ids] + segment_weight[segments] + position_weight[:ids.shape[1]]
        return torch.nn.functional.layer_norm(summed, (summed.shape[-1],), norm_weight, norm_bias)""", "wrong result"),
    "segments_forgotten": (_EMBEDDINGS.replace(" + segment_weight[segments]", ""), "wrong result"),
    "unbiased_variance": ("""
        z = token_weight[ids] + segment_weight[segments] + position_weight[:ids.shape[1]]
        return (z - z.mean(dim=-1, keepdim=True)) / torch.sqrt(z.var(dim=-1, keepdim=True) + eps) * norm_weight + norm_bias""",
                          "wrong result"),
    "positions_added_after_the_norm": ("""
        normalised = layer_norm(token_weight[ids] + segment_weight[segments], norm_weight, norm_bias, eps)
        return normalised + position_weight[:ids.shape[1]]""", "wrong result"),
    "through_numpy": ("""
        summed = token_weight.detach().numpy()[ids.numpy()] + segment_weight.detach().numpy()[segments.numpy()] \\
            + position_weight.detach().numpy()[:ids.shape[1]]
        return layer_norm(torch.from_numpy(summed), norm_weight, norm_bias, eps)""", "gradient"),
})

_BERT_ATTENTION = """
        q, k, v = (split_heads(x @ w.T + b, num_heads) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if padding is not None:
            scores = scores.masked_fill(~padding[:, None, None, :], -math.inf)
        weights = torch.softmax(scores, dim=-1)
        used = weights if dropout is None else dropout(weights)
        return merge_heads(used @ v), weights"""



answers("bert.self_attention.bert_self_attention", correct={
    "split_heads_and_masked_fill": _BERT_ATTENTION,
    "padding_filled_with_minus_1e9": _BERT_ATTENTION.replace("-math.inf", "-1e9"),  # exp(-1e9) is exactly 0 too
    "einsum_and_additive_mask": """
        batch, steps, width = x.shape
        size = width // num_heads
        def heads(w, b):  # (B, T, D) -> (B, nh, T, hs)
            return torch.nn.functional.linear(x, w, b).view(batch, steps, num_heads, size).permute(0, 2, 1, 3)
        q, k, v = heads(w_q, b_q), heads(w_k, b_k), heads(w_v, b_v)
        scores = torch.einsum("bhqs,bhks->bhqk", q, k) * size ** -0.5
        if padding is not None:  # transformers' way: the smallest float added where a key is padding
            scores = scores + (~padding).to(x.dtype)[:, None, None, :] * torch.finfo(x.dtype).min
        weights = scores.softmax(dim=-1)
        mixed = torch.einsum("bhqk,bhks->bhqs", weights if dropout is None else dropout(weights), v)
        return mixed.permute(0, 2, 1, 3).reshape(batch, steps, width), weights""",
    "one_head_at_a_time": """
        size = x.shape[-1] // num_heads
        q, k, v = x @ w_q.T + b_q, x @ w_k.T + b_k, x @ w_v.T + b_v
        keep = torch.ones(x.shape[:2], dtype=torch.bool) if padding is None else padding
        heads = []
        for h in range(num_heads):
            part = slice(h * size, (h + 1) * size)
            scores = q[..., part] @ k[..., part].transpose(1, 2) / math.sqrt(size)  # (B, T, T)
            heads.append(torch.where(keep[:, None, :], scores, torch.tensor(-math.inf, dtype=x.dtype)).softmax(dim=-1))
        weights = torch.stack(heads, dim=1)  # (B, nh, T, T)
        used = weights if dropout is None else dropout(weights)
        return torch.cat([used[:, h] @ v[..., h * size:(h + 1) * size] for h in range(num_heads)], dim=-1), weights""",
}, wrong={
    "padding_on_the_queries": (mistake(_BERT_ATTENTION, "~padding[:, None, None, :]", "~padding[:, None, :, None]"),
                               "wrong result"),
    "no_scaling": (mistake(_BERT_ATTENTION, " / math.sqrt(q.shape[-1])", ""), "wrong result"),
    "dropped_weights_returned": (mistake(_BERT_ATTENTION, "return merge_heads(used @ v), weights",
                                                      "return merge_heads(used @ v), used"), "wrong result"),
    "dropout_ignored": (mistake(_BERT_ATTENTION, "used = weights if dropout is None else dropout(weights)", "used = weights"),
                        "wrong result"),
    "padding_set_to_minus_ten_thousand": (mistake(_BERT_ATTENTION, "-math.inf", "-1e4"), "wrong result"),
    "minus_ten_thousand_added_to_padding": (mistake(_BERT_ATTENTION, 
        "scores = scores.masked_fill(~padding[:, None, None, :], -math.inf)",
        "scores = scores - 1e4 * (~padding[:, None, None, :]).to(scores.dtype)"), "wrong result"),
    "heads_without_a_transpose": (mistake(_BERT_ATTENTION, 
        "q, k, v = (split_heads(x @ w.T + b, num_heads) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))",
        "q, k, v = ((x @ w.T + b).reshape(x.shape[0], num_heads, x.shape[1], -1) for w, b in ((w_q, b_q), (w_k, b_k), "
        "(w_v, b_v)))"), "wrong result"),
    "softmax_over_the_queries": (mistake(_BERT_ATTENTION, "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),
                                 "wrong result"),
})

answers("bert.pooling.mean_pool", correct={
    "masked_fill_and_sum": """
        summed = hidden.masked_fill(~padding.unsqueeze(-1), 0.0).sum(dim=1)
        return summed / padding.sum(dim=1, keepdim=True).to(hidden.dtype)""",
    "einsum": """
        weights = padding.to(hidden.dtype)
        return torch.einsum("btd,bt->bd", hidden, weights) / weights.sum(dim=1, keepdim=True)""",
    "row_by_row": "return torch.stack([row[keep].mean(dim=0) for row, keep in zip(hidden, padding)])",
    "nanmean": "return torch.where(padding.unsqueeze(-1), hidden, torch.nan).nanmean(dim=1)",
}, wrong={
    "mean_over_every_position": ("return hidden.mean(dim=1)", "wrong result"),
    "divided_by_t": ("return (hidden * padding.unsqueeze(-1)).sum(dim=1) / hidden.shape[1]", "wrong result"),
    "count_of_the_whole_batch": ("return (hidden * padding.unsqueeze(-1)).sum(dim=1) / padding.sum()", "wrong result"),
    "padding_zeroed_in_place": ("""
        with torch.no_grad():
            hidden[~padding] = 0.0
        return hidden.sum(dim=1) / padding.sum(dim=1, keepdim=True)""", "in place"),
})

_MLM = """
        special = special_token_mask(ids, special_ids)
        chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~special
        fate = torch.rand(ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        random_tokens = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        inputs = torch.where(chosen & (fate < 0.8), torch.full_like(ids, mask_id), ids)
        inputs = torch.where(chosen & (fate >= 0.8) & (fate < 0.9), random_tokens, inputs)
        return inputs, torch.where(chosen, ids, torch.full_like(ids, IGNORE))"""



answers("bert.masking.mlm_mask", correct={
    "three_draws_everywhere": _MLM,
    "draws_at_the_chosen_positions_only": """
        special = torch.isin(ids, torch.tensor(list(special_ids)))
        chosen = torch.bernoulli(torch.full(ids.shape, float(probability)), generator=generator).bool() & ~special
        inputs, labels = ids.clone(), torch.full_like(ids, -100)
        labels[chosen] = ids[chosen]
        where = chosen.nonzero(as_tuple=True)
        n = len(where[0])
        fate = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), n, replacement=True, generator=generator) if n \\
            else torch.zeros(0, dtype=torch.int64)
        allowed = torch.tensor(sorted(set(range(vocab_size)) - set(special_ids)))
        drawn = allowed[torch.randint(len(allowed), (n,), generator=generator)]
        inputs[where] = torch.where(fate == 0, torch.tensor(mask_id), torch.where(fate == 1, drawn, ids[where]))
        return inputs, labels""",
    "random_first_and_rejection": """
        specials = torch.tensor(list(special_ids))
        random_tokens = torch.randint(vocab_size, ids.shape, generator=generator)
        while torch.isin(random_tokens, specials).any():  # draw the special ones again: uniform over the others
            again = torch.isin(random_tokens, specials)
            random_tokens[again] = torch.randint(vocab_size, (int(again.sum()),), generator=generator)
        fate = torch.rand(ids.shape, generator=generator)
        chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~torch.isin(ids, specials)
        inputs = ids.clone()
        inputs[chosen & (fate < 0.1)] = random_tokens[chosen & (fate < 0.1)]
        inputs[chosen & (fate >= 0.2)] = mask_id
        return inputs, torch.where(chosen, ids, -100)""",
    "binomial_count_then_permutation": """
        special = special_token_mask(ids, special_ids)
        where = (~special).flatten().nonzero().squeeze(1)
        count = int(torch.binomial(torch.tensor(float(len(where))), torch.tensor(float(probability)), generator=generator))
        chosen = torch.zeros(ids.numel(), dtype=torch.bool)
        chosen[where[torch.randperm(len(where), generator=generator)[:count]]] = True  # count of n at random
        chosen = chosen.view(ids.shape)
        fate = torch.rand(ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        drawn = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        inputs = torch.where(chosen & (fate < 0.8), mask_id, torch.where(chosen & (fate >= 0.9), drawn, ids))
        return inputs, torch.where(chosen, ids, -100)""",
}, wrong={
    "ignores_the_generator": ("\n        generator = torch.Generator().manual_seed(0)  # its own, whatever it is given"
                              + _MLM, "another seed"),
    "mask_and_random_swapped": (mistake(_MLM, "(fate < 0.8), torch.full_like(ids, mask_id)", "(fate < 0.1), torch.full_like(ids, mask_id)")
                                .replace("(fate >= 0.8) & (fate < 0.9)", "(fate >= 0.1) & (fate < 0.9)"), "wrong result"),
    "specials_may_be_chosen": (mistake(_MLM, "< probability) & ~special", "< probability)"), "wrong result"),
    "labels_are_the_inputs": (mistake(_MLM, "return inputs, torch.where(chosen, ids, torch.full_like(ids, IGNORE))",
                                        "return inputs, torch.where(chosen, inputs, torch.full_like(ids, IGNORE))"),
                              "wrong result"),
    "random_tokens_from_the_whole_vocabulary": (mistake(_MLM, "allowed[torch.randint(len(allowed), ids.shape, generator=generator)]",
                                                          "torch.randint(vocab_size, ids.shape, generator=generator)"),
                                                "wrong result"),
    "random_tokens_from_the_batch": (mistake(_MLM, "allowed[torch.randint(len(allowed), ids.shape, generator=generator)]",
                                               "ids.flatten()[torch.randint(ids.numel(), ids.shape, generator=generator)]"),
                                     "wrong result"),
    "labels_everywhere": (mistake(_MLM, "return inputs, torch.where(chosen, ids, torch.full_like(ids, IGNORE))",
                                    "return inputs, ids.clone()"), "wrong result"),
    "global_generator": (_MLM.replace(", generator=generator)", ")"), "same arguments"),
    "every_seventh_position": ("""
        special = special_token_mask(ids, special_ids)
        order = torch.cumsum((~special).flatten().long(), 0).view(ids.shape)  # 1, 2, ... over non-special positions
        step = max(1, round(1 / probability)) if probability else 0
        chosen = ~special & (order % step == 0) if step else torch.zeros_like(special)
        turn = torch.cumsum(chosen.flatten().long(), 0).view(ids.shape) % 10  # 8 [MASK], 1 random, 1 kept
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        inputs = torch.where(chosen & (turn < 8), mask_id, ids)
        inputs = torch.where(chosen & (turn == 8), allowed[order % len(allowed)], inputs)
        return inputs, torch.where(chosen, ids, -100)""", "pattern"),
    "fates_dealt_in_turn": (mistake(_MLM, "inputs = torch.where(chosen & (fate < 0.8)",
                                      "fate = (torch.cumsum(chosen.flatten().long(), 0).view(ids.shape) % 10) / 10\n"
                                      "        inputs = torch.where(chosen & (fate < 0.8)"), "pattern"),
    "random_token_never_the_original": (mistake(_MLM, 
        "random_tokens = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]",
        "others = torch.randint(len(allowed) - 1, ids.shape, generator=generator)  # every allowed id but the original\n"
        "        others = others + (others >= torch.searchsorted(allowed, ids)).long()\n"
        "        random_tokens = allowed[others.clamp(max=len(allowed) - 1)]"), "random token"),
    "every_chosen_position_masked": (mistake(_MLM, "(fate < 0.8), torch.full_like(ids, mask_id)",
                                               "(fate < 2), torch.full_like(ids, mask_id)"), "[MASK]"),
    "ids_changed_in_place": ("""
        special = special_token_mask(ids, special_ids)
        chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~special
        labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
        fate = torch.rand(ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        drawn = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        ids[chosen & (fate < 0.8)] = mask_id
        ids[chosen & (fate >= 0.8) & (fate < 0.9)] = drawn[chosen & (fate >= 0.8) & (fate < 0.9)]
        return ids, labels""", "in place"),
})


# ps09: fine-tuning. lora_linear's and adamw_step's cases hold arrays made tensors for the call; early_stopping's, plain
# lists of floats; fine_tune_loop's, small float64 models (a perceptron, one with BatchNorm1d, a tiny BERT classifier
# read from its layer 1 with frozen layers and a pooler the loss never reaches) and their batches, and it steps with
# the reference adamw_step and early_stopping by default (the grader puts course_lib's test doubles in their place:
# they agree to rounding). adamw_step's answer runs inside the stub's `with torch.no_grad():`, so its bodies are
# indented once more (_NO_GRAD). What no hidden case can see: whether the loop leaves the kept parameters in the model
# (a model is not plain data; the visible test checks it), and a loop that steps with torch.optim.AdamW itself instead
# of step_fn (the grader's step_fn is AdamW's).
def _no_grad(body: str) -> str:
    """``body`` one level deeper, inside the stub's ``with torch.no_grad():`` (a last comment at the function's level
    keeps :func:`answer_source`'s dedent from undoing it)."""
    return textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n# (the lines above run without gradients)"


_LORA = """
        y = x @ weight.T + scale * ((x @ lora_a.T) @ lora_b.T)
        return y if bias is None else y + bias"""

answers("transfer.lora.lora_linear", correct={
    "low_rank_path": _LORA,
    "functional_linear": "return F.linear(x, weight, bias) + scale * F.linear(F.linear(x, lora_a), lora_b)",
    "einsum": """
        low = torch.einsum("...i,ri->...r", x, lora_a)
        y = torch.einsum("...i,oi->...o", x, weight) + scale * torch.einsum("...r,or->...o", low, lora_b)
        return y if bias is None else y + bias""",
    "merged_weight": """
        merged = weight + scale * (lora_b @ lora_a)  # forms B A, which the layer avoids, but computes the same
        return F.linear(x, merged, bias)""",
}, wrong={
    "scale_missing": (mistake(_LORA, "scale * ((x @ lora_a.T) @ lora_b.T)", "(x @ lora_a.T) @ lora_b.T"), "wrong result"),
    "scale_on_the_frozen_layer_too": (mistake(_LORA, "y = x @ weight.T + scale * ((x @ lora_a.T) @ lora_b.T)",
                                              "y = scale * (x @ weight.T + (x @ lora_a.T) @ lora_b.T)"), "wrong result"),
    "a_and_b_swapped": (mistake(_LORA, "(x @ lora_a.T) @ lora_b.T", "(x @ lora_b.T) @ lora_a.T"), "wrong result"),
    "a_and_b_not_transposed": (mistake(_LORA, "(x @ lora_a.T) @ lora_b.T", "(x @ lora_a) @ lora_b"), "wrong result"),
    "bias_twice": ("return F.linear(x, weight, bias) + scale * ((x @ lora_a.T) @ lora_b.T) + bias", "wrong result"),
    "bias_dropped": ("return x @ weight.T + scale * ((x @ lora_a.T) @ lora_b.T)", "wrong result"),
    "bias_never_none": ("return x @ weight.T + bias + scale * ((x @ lora_a.T) @ lora_b.T)", "raised"),
    "through_numpy": ("""
        low = (x.detach().numpy() @ lora_a.detach().numpy().T) @ lora_b.detach().numpy().T
        y = x @ weight.T + scale * torch.from_numpy(low)
        return y if bias is None else y + bias""", "gradient"),
})

_ADAMW = _no_grad("""
    beta1, beta2 = betas
    decayed = param * (1 - lr * weight_decay)
    m = beta1 * exp_avg + (1 - beta1) * grad
    v = beta2 * exp_avg_sq + (1 - beta2) * grad ** 2
    m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
    return decayed - lr * m_hat / (v_hat.sqrt() + eps), m, v""")

answers("transfer.adamw.adamw_step", correct={
    "the_equations": _ADAMW,
    "torch_s_formulation": _no_grad("""
        beta1, beta2 = betas
        m = exp_avg.lerp(grad, 1 - beta1)
        v = exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)
        step_size = lr / (1 - beta1 ** step)
        denominator = v.sqrt() / math.sqrt(1 - beta2 ** step) + eps
        return param.mul(1 - lr * weight_decay).addcdiv(m, denominator, value=-step_size), m, v"""),
    "clones_then_in_place": _no_grad("""
        beta1, beta2 = betas
        new, m, v = param.clone(), exp_avg.clone(), exp_avg_sq.clone()
        new.mul_(1 - lr * weight_decay)
        m.mul_(beta1).add_(grad, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        new.addcdiv_(m / (1 - beta1 ** step), (v / (1 - beta2 ** step)).sqrt() + eps, value=-lr)
        return new, m, v"""),
}, wrong={
    "no_bias_correction": (mistake(_ADAMW, "m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)",
                                   "m_hat, v_hat = m, v"), "wrong result"),
    "l2_added_to_the_gradient": (mistake(_ADAMW, "decayed = param * (1 - lr * weight_decay)",
                                         "grad = grad + weight_decay * param\n    decayed = param"), "wrong result"),
    "decay_after_the_update": (mistake(mistake(_ADAMW, "decayed = param * (1 - lr * weight_decay)", "decayed = param"),
                                       "return decayed - lr * m_hat / (v_hat.sqrt() + eps), m, v",
                                       "return (decayed - lr * m_hat / (v_hat.sqrt() + eps)) * (1 - lr * weight_decay), m, v"),
                               "wrong result"),
    "decay_without_lr": (mistake(_ADAMW, "param * (1 - lr * weight_decay)", "param * (1 - weight_decay)"), "wrong result"),
    "eps_under_the_root": (mistake(_ADAMW, "(v_hat.sqrt() + eps)", "(v_hat + eps).sqrt()"), "wrong result"),
    "step_counted_from_zero": (mistake(_ADAMW, "m / (1 - beta1 ** step), v / (1 - beta2 ** step)",
                                       "m / (1 - beta1 ** (step + 1)), v / (1 - beta2 ** (step + 1))"), "wrong result"),
    "betas_swapped": (mistake(_ADAMW, "beta1, beta2 = betas", "beta2, beta1 = betas"), "wrong result"),
    "averages_updated_in_place": (_no_grad("""
        beta1, beta2 = betas
        m = exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        v = exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
        return param * (1 - lr * weight_decay) - lr * m_hat / (v_hat.sqrt() + eps), m, v"""), "in place"),
})

_STOPPING = """
        best = 0
        for epoch in range(1, len(losses)):
            if losses[epoch] < losses[best] - min_delta:
                best = epoch
        return best, len(losses) - 1 - best >= patience"""

answers("transfer.early_stopping.early_stopping", correct={
    "scan_from_epoch_one": _STOPPING,
    "patience_counter": """
        best, best_loss, waited = 0, losses[0], 0
        for epoch, loss in enumerate(losses[1:], start=1):
            if loss < best_loss - min_delta:
                best, best_loss, waited = epoch, loss, 0
            else:
                waited += 1
        return best, waited >= patience""",
    "numpy_scan": """
        values = np.asarray(losses, dtype=np.float64)
        best = 0
        for epoch in range(1, len(values)):
            if values[epoch] < values[best] - min_delta:
                best = epoch
        return int(best), bool(len(values) - 1 - best >= patience)""",
}, wrong={
    "ties_improve": (mistake(_STOPPING, "losses[epoch] < losses[best] - min_delta",
                             "losses[epoch] <= losses[best] - min_delta"), "wrong result"),
    "argmin_ignoring_min_delta": ("""
        best = int(np.argmin(losses))
        return best, len(losses) - 1 - best >= patience""", "wrong result"),
    "patience_exceeded": (mistake(_STOPPING, ">= patience", "> patience"), "wrong result"),
    "min_delta_from_the_previous_epoch": (mistake(_STOPPING, "losses[epoch] < losses[best] - min_delta",
                                                  "losses[epoch] < losses[epoch - 1] - min_delta"), "wrong result"),
    "the_last_best": ("""
        best = 0
        for epoch in range(1, len(losses)):
            if losses[epoch] <= min(losses[:epoch]) - min_delta:
                best = epoch
        return best, len(losses) - 1 - best >= patience""", "wrong result"),
})

_LOOP_PRELUDE = "from course_lib.transfer.adamw import adamw_step\nfrom course_lib.transfer.early_stopping import early_stopping\n"
_LOOP = """
        trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
        averages = {name: (torch.zeros_like(p), torch.zeros_like(p)) for name, p in trained.items()}
        losses, valid_losses, kept, step = [], [], None, 0
        for epoch in range(epochs):
            model.train()
            for inputs, labels in batches:
                step += 1
                model.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(*inputs), labels)
                loss.backward()
                with torch.no_grad():
                    for name, p in trained.items():
                        if p.grad is not None:
                            new, m, v = step_fn(p, p.grad, *averages[name], step, lr, betas, eps, weight_decay)
                            p.copy_(new)
                            averages[name] = (m, v)
                losses.append(loss.item())
            model.eval()
            with torch.no_grad():
                valid_losses.append(F.cross_entropy(model(*valid[0]), valid[1]).item())
            best, stop = stop_fn(valid_losses, patience)
            if best == epoch:
                kept = {name: p.detach().clone() for name, p in trained.items()}
            if stop:
                break
        with torch.no_grad():
            for name, p in trained.items():
                p.copy_(kept[name])
        model.eval()
        return {"loss": losses, "valid_loss": valid_losses, "best_epoch": best, "best_state": kept}"""


def _loop_with(old: str, new: str) -> tuple[str, str]:
    """The loop above with one piece changed (a mistake), after the cells of adamw_step and early_stopping."""
    return _LOOP_PRELUDE, mistake(_LOOP, old, new)


answers("transfer.fine_tuning.fine_tune_loop", correct={
    "named_parameters": (_LOOP_PRELUDE, _LOOP),
    "lists_and_a_step_formula": (_LOOP_PRELUDE, """
        names = [name for name, p in model.named_parameters() if p.requires_grad]
        params = dict(model.named_parameters())
        state = {name: [torch.zeros_like(params[name]), torch.zeros_like(params[name])] for name in names}
        record = {"loss": [], "valid_loss": [], "best_epoch": 0, "best_state": None}
        for epoch in range(epochs):
            model.train()
            for i, (inputs, labels) in enumerate(batches):
                t = epoch * len(batches) + i + 1
                for name in names:
                    params[name].grad = None
                loss = F.cross_entropy(model(*inputs), labels, reduction="mean")
                loss.backward()
                for name in names:
                    p = params[name]
                    if p.grad is None:
                        continue
                    with torch.no_grad():
                        new, state[name][0], state[name][1] = step_fn(p.detach(), p.grad, state[name][0],
                                                                      state[name][1], t, lr, betas, eps, weight_decay)
                        p.copy_(new)
                record["loss"].append(float(loss.detach()))
            with torch.no_grad():
                model.eval()
                record["valid_loss"].append(float(F.cross_entropy(model(*valid[0]), valid[1])))
            record["best_epoch"], stop = stop_fn(record["valid_loss"], patience)
            if record["best_epoch"] == epoch:
                record["best_state"] = {name: params[name].detach().clone() for name in names}
            if stop:
                break
        with torch.no_grad():
            for name in names:
                params[name].copy_(record["best_state"][name])
        return record"""),
    "deep_copy_and_load_state_dict": (_LOOP_PRELUDE, """
        trained = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        m = [torch.zeros_like(p) for _, p in trained]
        v = [torch.zeros_like(p) for _, p in trained]
        losses, valid_losses, kept, best, t = [], [], {}, 0, 0
        for epoch in range(epochs):
            model.train()
            for inputs, labels in batches:
                t += 1
                for _, p in trained:
                    if p.grad is not None:
                        p.grad.zero_()
                loss = F.cross_entropy(model(*inputs), labels)
                loss.backward()
                for i, (_, p) in enumerate(trained):
                    if p.grad is not None:
                        with torch.no_grad():
                            new, m[i], v[i] = step_fn(p, p.grad, m[i], v[i], t, lr, betas, eps, weight_decay)
                            p.copy_(new)
                losses.append(loss.item())
            model.eval()
            with torch.no_grad():
                valid_losses.append(F.cross_entropy(model(*valid[0]), valid[1]).item())
            best, stop = stop_fn(valid_losses, patience)
            if best == epoch:
                kept = copy.deepcopy({name: p.detach() for name, p in trained})
            if stop:
                break
        model.load_state_dict(kept, strict=False)
        model.eval()
        return {"loss": losses, "valid_loss": valid_losses, "best_epoch": best, "best_state": kept}"""),
}, wrong={
    "gradients_never_zeroed": (_loop_with("                model.zero_grad(set_to_none=True)\n", ""), "wrong result"),
    "step_counted_per_epoch": (_loop_with("            model.train()\n", "            model.train()\n            step = 0\n"),
                               "wrong result"),
    "validation_in_training_mode": (_loop_with("            model.eval()\n            with torch.no_grad():",
                                               "            with torch.no_grad():"), "wrong result"),
    "the_last_epoch_kept": (_loop_with("            if best == epoch:\n", "            best = epoch\n            if True:\n"),
                            "wrong result"),
    "kept_state_aliased": (_loop_with("kept = {name: p.detach().clone() for name, p in trained.items()}",
                                      "kept = {name: p for name, p in trained.items()}"), "wrong result"),
    "one_epoch_too_many": (_loop_with("for epoch in range(epochs):", "for epoch in range(epochs + 1):"), "wrong result"),
    "summed_loss": (_loop_with("loss = F.cross_entropy(model(*inputs), labels)",
                               "loss = F.cross_entropy(model(*inputs), labels, reduction='sum')"), "wrong result"),
    "gradless_parameters_stepped": (_loop_with("""                        if p.grad is not None:
                            new, m, v = step_fn(p, p.grad, *averages[name], step, lr, betas, eps, weight_decay)""",
                                               """                        if True:
                            grad = p.grad if p.grad is not None else torch.zeros_like(p)
                            new, m, v = step_fn(p, grad, *averages[name], step, lr, betas, eps, weight_decay)"""),
                                    "wrong result"),
    "frozen_parameters_trained": (_loop_with(
        "trained = {name: p for name, p in model.named_parameters() if p.requires_grad}",
        "trained = dict(model.named_parameters())"), "wrong result"),
})


# ---------------------------------------------------------------------------------------------
# Bug classes (issue 23): for every exercise, the realistic kinds of mistake its docstring rules out, each made by
# one or more wrong answers, every one of which must fail at least two hidden cases (the test above). The mistakes
# below complete the tables above; two classes that apply to nearly every function are planted by closures around
# the reference (GENERIC): a write into an input after computing the right result, and float32 inputs computed
# (and returned) in float64, as when a default-dtype tensor (float64 in the notebooks) enters the computation.
# ---------------------------------------------------------------------------------------------


def more_wrong(key, wrong):
    ANSWERS[key]["wrong"].update(wrong)


_TFIDF_DENSE = """
        c = counts.toarray()
        df = (c > 0).sum(axis=0)""" + _IDF + """
        weighted = c * idf
        if normalize:
            norms = np.linalg.norm(weighted, axis=1, keepdims=True)
            weighted = weighted / np.where(norms > 0, norms, 1.0)
        return sp.csr_matrix(weighted)"""
assert "smooth_idf else" in _TFIDF_DENSE and "if normalize:" in _TFIDF_DENSE
more_wrong("vectors.counts.one_hot", {
    "bool_dtype": ("return ids[:, None] == np.arange(vocab_size)[None, :]", "dtype"),
    "one_row_per_distinct_id": ("return np.eye(vocab_size)[np.unique(ids)]", "shape"),
})
more_wrong("vectors.counts.tfidf", {
    "smooth_idf_ignored": (_TFIDF_DENSE.replace(" if smooth_idf else np.log(n_docs / np.maximum(df, 1)) + 1", ""),
                           "wrong result"),
    "normalize_ignored": (_TFIDF_DENSE.replace("if normalize:", "if True:"), "wrong result"),
    "l1_rows": (_TFIDF_DENSE.replace("np.linalg.norm(weighted, axis=1, keepdims=True)",
                                     "np.abs(weighted).sum(axis=1, keepdims=True)"), "wrong result"),
    "log10": (_TFIDF_DENSE.replace("np.log(", "np.log10("), "wrong result"),
    "dense_result": (_TFIDF_DENSE.replace("return sp.csr_matrix(weighted)", "return weighted"), "sparse"),
})
_PPMI_DENSE = """
        c = cooc.toarray()
        total = c.sum()
        n_c = c.sum(axis=0) ** alpha
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(c / total) - np.log(np.outer(c.sum(axis=1) / total, n_c / n_c.sum()))
        return sp.csr_matrix(np.where(c > 0, np.maximum(pmi, 0.0), 0.0))"""
more_wrong("vectors.counts.ppmi", {
    "alpha_ignored": (_PPMI_DENSE.replace("c.sum(axis=0) ** alpha", "c.sum(axis=0)"), "wrong result"),
    "words_smoothed_not_contexts": (_PPMI_DENSE.replace("c.sum(axis=0) ** alpha", "c.sum(axis=1) ** alpha")
                          .replace("np.outer(c.sum(axis=1) / total, n_c / n_c.sum())",
                                   "np.outer(n_c / n_c.sum(), c.sum(axis=0) / total)"), "wrong result"),
    "log2": (_PPMI_DENSE.replace("np.log(", "np.log2("), "wrong result"),
    "dense_result": (_PPMI_DENSE.replace("return sp.csr_matrix(", "return ("), "sparse"),
})
more_wrong("vectors.counts.cosine_similarity", {
    "rows_normalised_in_place": ("""
        for x in (a, b) if b is not a else (a,):
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x /= np.where(norms > 0, norms, 1.0)
        return a @ b.T""", "in place"),
    "no_normalisation": ("return a @ b.T", "wrong result"),
})
more_wrong("vectors.word2vec.skipgram_pairs", {
    "center_paired_with_itself": ("""
        n = len(ids)
        reach = [window] * n if rng is None else rng.integers(1, window + 1, size=n)
        pairs = [(ids[i], ids[j]) for i in range(n) for j in range(max(0, i - reach[i]), min(n, i + reach[i] + 1))]
        return np.array([c for c, _ in pairs], dtype=np.int64), np.array([o for _, o in pairs], dtype=np.int64)""",
                                  "wrong result"),
    "ordered_by_distance": ("""
        n = len(ids)
        reach = np.full(n, window) if rng is None else rng.integers(1, window + 1, size=n)
        centers, contexts = [], []
        for k in range(1, window + 1):
            for i in range(n):
                for j in (i - k, i + k):
                    if 0 <= j < n and reach[i] >= k:
                        centers.append(ids[i])
                        contexts.append(ids[j])
        return np.array(centers, dtype=np.int64), np.array(contexts, dtype=np.int64)""", "wrong result"),
})
more_wrong("vectors.word2vec.negative_samples", {
    "numpy_global_generator": ("return np.random.choice(len(noise), size=shape, p=noise)", "same arguments"),
    "flat_draws": ("return rng.choice(len(noise), size=int(np.prod(shape)), p=noise)", "shape"),
})
more_wrong("vectors.word2vec.sgns_loss_and_grads", {
    "context_gradient_sign": (_SGNS_DOTS + """
        loss = (np.logaddexp(0, -pos).sum() + np.logaddexp(0, neg).sum()) / batch
        g_pos, g_neg = (sigmoid(pos) - 1) / batch, sigmoid(neg) / batch
        grad_center = g_pos[:, None] * context + np.einsum("bk,bkd->bd", g_neg, negatives)
        return float(loss), grad_center, -g_pos[:, None] * center, g_neg[:, :, None] * center[:, None, :]""",
                              "wrong result"),
    "noise_gradient_summed_over_k": (_SGNS_DOTS + """
        loss = (np.logaddexp(0, -pos).sum() + np.logaddexp(0, neg).sum()) / batch
        g_pos, g_neg = (sigmoid(pos) - 1) / batch, sigmoid(neg) / batch
        grad_center = g_pos[:, None] * context + np.einsum("bk,bkd->bd", g_neg, negatives)
        summed = (g_neg.sum(axis=1)[:, None] * center)[:, None, :]
        return float(loss), grad_center, g_pos[:, None] * center, np.broadcast_to(summed, negatives.shape).copy()""",
                                     "wrong result"),
})
more_wrong("vectors.alignment.procrustes", {
    "reflections_removed": ("""
        u, _s, vt = np.linalg.svd(target.T @ source)
        d = np.sign(np.linalg.det(u @ vt))  # Kabsch: a rotation, never a reflection
        return u @ np.diag([1.0] * (len(u) - 1) + [d]) @ vt""", "wrong result"),
    "centred_first": ("""
        s, t = source - source.mean(axis=0), target - target.mean(axis=0)
        u, _s, vt = np.linalg.svd(t.T @ s)
        return u @ vt""", "wrong result"),
})
more_wrong("recurrent.elman.rnn_step", {
    "sigmoid_instead_of_tanh": ("return 1 / (1 + np.exp(-(x @ W.T + h_prev @ U.T + b)))", "wrong result"),
    "W_not_transposed": ("return np.tanh(x @ W + h_prev @ U.T + b)", "raised"),
    "written_into_h_prev": ("""
        np.tanh(x @ W.T + h_prev @ U.T + b, out=h_prev)
        return h_prev""", "in place"),
})
_BPTT_END = """
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        return (das @ W, dh_next, np.einsum("bth,bti->hi", das, xs), np.einsum("bth,btk->hk", das, h_prevs),
                das.sum(axis=(0, 1)))"""
more_wrong("recurrent.elman.rnn_backward", {
    "loop_forward_in_time": ("""
        das = np.empty_like(hs)
        dh_next = np.zeros_like(h0)
        for t in range(steps):
            das[:, t] = (dhs[:, t] + dh_next) * (1 - hs[:, t] ** 2)
            dh_next = das[:, t] @ U""" + _BPTT_END, "wrong result"),
    "tanh_derivative_at_the_previous_state": ("""
        h_prevs = np.concatenate([h0[:, None], hs[:, :-1]], axis=1)
        das = np.empty_like(hs)
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            das[:, t] = (dhs[:, t] + dh_next) * (1 - h_prevs[:, t] ** 2)
            dh_next = das[:, t] @ U""" + _BPTT_END, "wrong result"),
    "dh0_before_the_last_tanh": ("""
        das = np.empty_like(hs)
        dh_next = np.zeros_like(h0)
        for t in reversed(range(steps)):
            dh = dhs[:, t] + dh_next
            das[:, t] = dh * (1 - hs[:, t] ** 2)
            dh_next = das[:, t] @ U
        dh_next = dh""" + _BPTT_END, "wrong result"),
})
more_wrong("recurrent.clipping.clip_gradients", {
    "always_rescaled": ("""
        total_norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        return [g * (max_norm / (total_norm + 1e-6)) for g in grads], total_norm""", "wrong result"),
    "sum_of_norms": ("""
        total_norm = sum(float(np.linalg.norm(g)) for g in grads)
        scale = min(1.0, max_norm / (total_norm + 1e-6))
        return [g * scale for g in grads], total_norm""", "wrong result"),
})
_NLL = """
        top = logits.max(axis=1, keepdims=True)
        nll = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1)) - logits[np.arange(len(targets)), targets]"""
more_wrong("recurrent.perplexity.perplexity", {
    "math_exp_overflows": (_NLL + """
        return math.exp(nll.mean())""", "raised OverflowError"),  # the docstring asks for inf
    "geometric_mean_by_product": (_NLL + """
        with np.errstate(over="ignore"):
            return float(np.prod(np.exp(nll)) ** (1 / len(nll)))""", "wrong result"),
    "summed_not_averaged": (_NLL + """
        with np.errstate(over="ignore"):
            return float(np.exp(nll.sum()))""", "wrong result"),
})
more_wrong("recurrent.cells.lstm_cell", {
    "no_tanh_on_the_cell": ("""
        a_i, a_f, a_g, a_o = (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)
        c_next = torch.sigmoid(a_f) * c + torch.sigmoid(a_i) * torch.tanh(a_g)
        return torch.sigmoid(a_o) * c_next, c_next""", "wrong result"),
})
more_wrong("recurrent.cells.gru_cell", {
    "reset_on_the_state": ("""
        size = h.shape[1]
        x_r, x_z, x_n = (x @ weight_ih.T + bias_ih).chunk(3, dim=1)
        h_r, h_z, _ = (h @ weight_hh.T + bias_hh).chunk(3, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + (r * h) @ weight_hh[2 * size:].T + bias_hh[2 * size:])  # Cho et al.'s form, not torch's
        return (1 - z) * n + z * h""", "wrong result"),
})
more_wrong("recurrent.layers.bidirectional", {
    "final_states_swapped": (_FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        out_b, final_b = backward(flip_each(x), lengths)
        return torch.cat([out_f, flip_each(out_b)], dim=-1), (final_b, final_f)""", "wrong result"),
    "forward_layer_both_ways": (_FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        out_b, final_b = forward(flip_each(x), lengths)
        return torch.cat([out_f, flip_each(out_b)], dim=-1), (final_f, final_b)""", "wrong result"),
    "x_reversed_in_place": (_FLIP_EACH + """
        out_f, final_f = forward(x, lengths)
        with torch.no_grad():
            x.copy_(flip_each(x))
        out_b, final_b = backward(x, lengths)
        return torch.cat([out_f, flip_each(out_b)], dim=-1), (final_f, final_b)""", "in place"),
})
more_wrong("recurrent.elmo.scalar_mix", {
    "gamma_ignored": (f"""
        s = torch.softmax(weights, dim=0)
        return ({_BROADCAST} * layers).sum(dim=0)""", "wrong result"),
    "mean_of_the_layers": ("return gamma.reshape(()) * layers.mean(dim=0)", "wrong result"),
})
more_wrong("attention.masking.masked_softmax", {
    "mask_on_the_queries": ("""
        return torch.softmax(scores.masked_fill(~mask[:, :, None], float("-inf")), dim=-1)""", None),
})
more_wrong("attention.scores.general_attention", {
    "no_weight_matrix": ((_MASKED_SOFTMAX, """
        weights = masked_softmax(query @ keys.transpose(1, 2), mask)
        return weights @ keys, weights"""), "wrong result"),
    "scores_average_the_keys": ((_MASKED_SOFTMAX, """
        scores = query @ weight @ keys.transpose(1, 2)
        weights = masked_softmax(scores, mask)
        return scores.masked_fill(~mask[:, None, :], 0.0) @ keys, weights"""), "wrong result"),
})
more_wrong("attention.scores.additive_attention", {
    "no_tanh": ((_MASKED_SOFTMAX, """
        inner = (query @ weight_query.T)[:, :, None] + (keys @ weight_key.T)[:, None]
        weights = masked_softmax(inner @ v, mask)
        return weights @ keys, weights"""), "wrong result"),
    "sigmoid_not_tanh": ((_MASKED_SOFTMAX, """
        inner = (query @ weight_query.T)[:, :, None] + (keys @ weight_key.T)[:, None]
        weights = masked_softmax(torch.sigmoid(inner) @ v, mask)
        return weights @ keys, weights"""), "wrong result"),
})
more_wrong("attention.seq2seq.attention_decoder_step", {
    "readout_without_the_context": ("""
        context, weights = decoder.attention(s_prev[:, None, :], memory, mask)
        context = context[:, 0]
        state = decoder.cell(torch.cat([decoder.embedding(y_prev), context], dim=-1), s_prev)
        return decoder.readout(torch.cat([state, torch.zeros_like(context)], dim=-1)), state, weights[:, 0]""",
                                    "wrong result"),
})
more_wrong("attention.decoding.beam_search", {
    # when a finished hypothesis ranks above a live one, the first len(live) parents of the top beam_width are not
    # the live ones' own: a live hypothesis continues from another's state
    "wrong_state_rows": (mistake(_BEAM, "state[torch.tensor([k for _, _, k in kept])]",
                                    "state[torch.tensor([k for _, k, _ in candidates[:len(kept)]])]"), "wrong result"),
})
more_wrong("transformer.scaled_attention.scaled_dot_product_attention", {
    "bool_mask_inverted": (mistake(_SDPA, "scores.masked_fill(~mask, -math.inf)", "scores.masked_fill(mask, -math.inf)"),
                           "wrong result"),
})
more_wrong("transformer.multi_head.multi_head_attention", {
    "heads_interleaved": (_mha_with(".reshape(x.shape[0], x.shape[1], num_heads, size).transpose(1, 2)",
                                    ".reshape(x.shape[0], x.shape[1], size, num_heads).permute(0, 3, 1, 2)"),
                          "wrong result"),
})
more_wrong("transformer.positions.sinusoidal_encoding", {
    "positions_from_one": ("""
        angles = torch.arange(1, steps + 1, dtype=torch.float64)[:, None] * base ** (-torch.arange(0, width, 2) / width)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(steps, width).float()""", "wrong result"),
})
_ROPE_END = """
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)"""
more_wrong("transformer.positions.rope", {
    "float32_angles": ("""
        t = torch.arange(start, start + x.shape[-2], dtype=x.dtype)[:, None]
        theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=x.dtype) / x.shape[-1])
        cos, sin = torch.cos(t * theta), torch.sin(t * theta)""" + _ROPE_END, "wrong result"),
    "angles_rounded_to_float32": ("""
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]
        angles = (t * base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])).to(x.dtype)
        cos, sin = torch.cos(angles), torch.sin(angles)""" + _ROPE_END, "wrong result"),
    "rotated_in_place": ("""
        t = torch.arange(start, start + x.shape[-2], dtype=torch.float64)[:, None]
        theta = base ** (-torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        cos, sin = torch.cos(t * theta).to(x.dtype), torch.sin(t * theta).to(x.dtype)
        even, odd = x[..., 0::2].clone(), x[..., 1::2].clone()
        with torch.no_grad():
            x[..., 0::2], x[..., 1::2] = even * cos - odd * sin, even * sin + odd * cos
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)""", "in place"),
})
more_wrong("transformer.layer_norm.layer_norm", {
    "eps_ignored": ("""
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True)) * weight + bias""", "wrong result"),
})
more_wrong("transformer.blocks.pre_ln_encoder_block", {
    "residual_added_in_place": ("""
        with torch.no_grad():
            x += block.self_attention(block.norm1(x), mask)
        return x + block.feed_forward(block.norm2(x))""", "in place"),
})
more_wrong("gpt.causal_attention.causal_self_attention", {
    "heads_without_transpose": (mistake(_CAUSAL, "return block.reshape(batch, steps, num_heads, size).transpose(1, 2)",
                                             "return block.reshape(batch, num_heads, steps, size)"), "wrong result"),
})
more_wrong("gpt.filters.temperature_top_k", {
    "kth_itself_dropped": (_TOP_K_HEAD + """
        return scaled.masked_fill(scaled <= scaled.topk(k, dim=-1).values[..., -1:], -math.inf)""", "wrong result"),
})
more_wrong("gpt.filters.top_p_filter", {
    "softmax_over_the_first_axis": ("""
        probs = torch.softmax(logits.double(), dim=0)
        ahead = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(dim=-1)
        return logits.masked_fill(ahead >= p, -math.inf)""", "wrong result"),
    "filtered_in_place": ("""
        probs = torch.softmax(logits.double(), dim=-1)
        ahead = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(dim=-1)
        return logits.masked_fill_(ahead >= p, -math.inf)""", "in place"),
})
more_wrong("gpt.beam.beam_search", {
    # the issue's bug: when a finished hypothesis ranks above a live one, the first len(live) parents of the top
    # beam_width are not the live ones' own, and a live hypothesis continues from another's keys and values
    "wrong_cache_rows": (mistake(_GPT_BEAM, "rows = torch.tensor([parent for _, _, parent in kept])",
                                        "rows = torch.tensor([parent for _, parent, _ in candidates[:len(kept)]])"),
                         "wrong result"),
})
more_wrong("bert.embeddings.bert_embeddings", {
    "positions_from_one": (_EMBEDDINGS.replace("position_weight[:ids.shape[1]]", "position_weight[1:ids.shape[1] + 1]"),
                           None),
})
more_wrong("bert.pooling.mean_pool", {
    "count_of_nonzero_vectors": ("""
        summed = (hidden * padding.unsqueeze(-1)).sum(dim=1)
        return summed / (hidden != 0).any(dim=-1).sum(dim=1, keepdim=True)""", "wrong result"),
})
more_wrong("bert.masking.mlm_mask", {
    # the issue's bug: exactly round(p n) positions of each row, passes every count of the whole batch
    "exactly_round_pn_per_row": ("""
        special = special_token_mask(ids, special_ids)
        chosen = torch.zeros_like(special)
        for row in range(ids.shape[0]):
            where = (~special[row]).nonzero().squeeze(1)
            chosen[row, where[torch.randperm(len(where), generator=generator)[:round(probability * len(where))]]] = True
        fate = torch.rand(ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        drawn = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        inputs = torch.where(chosen & (fate < 0.8), mask_id, torch.where(chosen & (fate >= 0.9), drawn, ids))
        return inputs, torch.where(chosen, ids, -100)""", "too evenly"),
    "exact_fates_per_row": ("""
        special = special_token_mask(ids, special_ids)
        chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~special
        fate = torch.full(ids.shape, 0.95)
        for row in range(ids.shape[0]):
            where = chosen[row].nonzero().squeeze(1)
            order = where[torch.randperm(len(where), generator=generator)]
            masked = round(0.8 * len(where))  # exactly 80 % [MASK], 10 % random, 10 % kept, in a random order
            fate[row, order[:masked]] = 0.0
            fate[row, order[masked:masked + round(0.1 * len(where))]] = 0.85
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        drawn = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        inputs = torch.where(chosen & (fate < 0.8), mask_id, torch.where(chosen & (fate >= 0.8) & (fate < 0.9), drawn, ids))
        return inputs, torch.where(chosen, ids, -100)""", "too evenly"),
    "chance_varies_by_row": ("""
        special = special_token_mask(ids, special_ids)
        chance = (torch.rand(ids.shape[0], 1, generator=generator) * 2 * probability).clamp(max=1)  # p on average
        chosen = (torch.rand(ids.shape, generator=generator) < chance) & ~special
        fate = torch.rand(ids.shape, generator=generator)
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        drawn = allowed[torch.randint(len(allowed), ids.shape, generator=generator)]
        inputs = torch.where(chosen & (fate < 0.8), mask_id, torch.where(chosen & (fate >= 0.9), drawn, ids))
        return inputs, torch.where(chosen, ids, -100)""", "too unevenly"),
})

IN_PLACE, UPCAST = "<writes into an input>", "<float64 for float32 inputs>"
"""The generic mistakes, planted by closures around the reference (:data:`GENERIC`)."""

BUG_CLASSES: dict[str, dict[str, list[str]]] = {
    "vectors.counts.one_hot": {
        "a dtype other than float64": ["int_dtype", "bool_dtype"],
        "whole columns set instead of one entry per row": ["whole_columns"],
        "a wrong shape (transposed, V from the ids, one row per distinct id)":
            ["transposed", "width_from_largest_id", "one_row_per_distinct_id"],
        "ids changed in place": [IN_PLACE]},
    "vectors.counts.tfidf": {
        "document frequency from the total count": ["df_is_total_count"],
        "the idf formula (no + 1, log10, smooth_idf ignored)": ["idf_without_plus_one", "log10", "smooth_idf_ignored"],
        "the normalisation (columns, L1, always)": ["column_norms", "l1_rows", "normalize_ignored"],
        "a dense array instead of a sparse matrix": ["dense_result"],
        "counts changed in place": ["weights_in_place", IN_PLACE]},
    "vectors.counts.ppmi": {
        "the smoothing (not renormalised, of the words too or instead, ignored)":
            ["context_power_not_renormalized", "words_smoothed_too", "words_smoothed_not_contexts", "alpha_ignored"],
        "negative values kept": ["negative_values_kept"],
        "another logarithm": ["log2"],
        "a dense array instead of a sparse matrix": ["dense_result"],
        "cooc changed in place": ["divides_the_input_in_place", IN_PLACE]},
    "vectors.counts.cosine_similarity": {
        "NaN for zero vectors": ["no_zero_vector_guard"],
        "the wrong norms (of the columns, of the matrix, none)": ["norms_over_columns", "frobenius_norms",
                                                                  "no_normalisation"],
        "inputs normalised in place": ["rows_normalised_in_place", IN_PLACE]},
    "vectors.word2vec.skipgram_pairs": {
        "float arrays when there is no pair": ["float_arrays_when_empty"],
        "the window off by one (dynamic windows, the last context)": ["window_high_excluded", "last_context_missed"],
        "positions instead of ids": ["positions_not_ids"],
        "a center paired with itself": ["center_paired_with_itself"],
        "another order of the pairs": ["ordered_by_distance"],
        "ids changed in place": [IN_PLACE]},
    "vectors.word2vec.negative_samples": {
        "another distribution (uniform, smoothed again)": ["uniform_ids", "smoothed_twice"],
        "draws not from rng": ["numpy_global_generator"],
        "a wrong dtype or shape": ["float_ids", "flat_draws"],
        "noise changed in place": [IN_PLACE]},
    "vectors.word2vec.sgns_loss_and_grads": {
        "overflow (log of a sigmoid, exp of a large dot product)": ["log_of_sigmoid", "naive_exp"],
        "summed instead of averaged": ["summed_not_averaged"],
        "a wrong gradient term (noise forgotten, a sign, summed over k)":
            ["center_gradient_without_noise", "context_gradient_sign", "noise_gradient_summed_over_k"],
        "inputs changed in place": [IN_PLACE]},
    "vectors.gradcheck.numerical_gradient": {
        "perturbed copies of x (a loss that reads x in place sees no change)":
            ["perturbed_copies", "unit_steps_added_to_copies"],
        "a perturbed 'view' that is a copy (x in Fortran order)": ["reshape_assumed_a_view", "ravel_assumed_a_view"],
        "x not restored": ["not_restored", IN_PLACE],
        "the difference formula (forward, over eps, a fixed step)":
            ["forward_difference", "divides_by_eps", "step_fixed_at_1e-6"],
        "not every entry (the first axis only)": ["first_axis_only"]},
    "vectors.alignment.procrustes": {
        "R transposed": ["transposed"],
        "not orthogonal (singular values kept, least squares)": ["singular_values_kept", "least_squares"],
        "reflections removed (Kabsch's rotation)": ["reflections_removed"],
        "centred first": ["centred_first"],
        "inputs changed in place": [IN_PLACE]},
    "recurrent.elman.rnn_step": {
        "a weight not transposed": ["U_not_transposed", "W_not_transposed"],
        "the bias forgotten": ["bias_forgotten"],
        "another nonlinearity": ["sigmoid_instead_of_tanh"],
        "a library's RNN": ["torch_shortcut"],
        "h_prev overwritten": ["written_into_h_prev", IN_PLACE]},
    "recurrent.elman.rnn_backward": {
        "the gradient from later steps (forgotten, the loop forwards)": ["future_gradient_forgotten",
                                                                         "loop_forward_in_time"],
        "the wrong state (h_t in dU, tanh' at h_{t-1})": ["dU_with_h_t", "tanh_derivative_at_the_previous_state"],
        "U transposed going back": ["U_transposed_going_back"],
        "dh0 one step short": ["dh0_before_the_last_tanh"],
        "dhs changed in place": ["adds_into_dhs", IN_PLACE]},
    "recurrent.clipping.clip_gradients": {
        "the wrong norm (per array, sum of norms)": ["each_array_clipped_alone", "sum_of_norms"],
        "the 1e-6 left out": ["epsilon_left_out"],
        "rescaled below the threshold too": ["always_rescaled"],
        "the norm after clipping returned": ["norm_after_clipping"],
        "gradients scaled in place": ["scaled_in_place", IN_PLACE]},
    "recurrent.perplexity.perplexity": {
        "overflow or underflow (naive softmax, log of a rounded probability, a product of exps)":
            ["naive_softmax", "log_of_a_softmax_that_underflows", "geometric_mean_by_product"],
        "OverflowError where the docstring asks for inf": ["math_exp_overflows"],
        "the wrong mean (of the exps, a sum)": ["mean_of_exponentials", "summed_not_averaged"],
        "a library's cross-entropy": ["torch_cross_entropy"],
        "inputs changed in place": [IN_PLACE]},
    "recurrent.cells.lstm_cell": {
        "the gate order": ["gate_order_i_f_o_g"],
        "a bias forgotten": ["bias_hh_forgotten"],
        "tanh of the cell forgotten": ["no_tanh_on_the_cell"],
        "gradients cut (a detour through numpy)": ["detour_through_numpy"],
        "c updated in place": ["cell_state_updated_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "recurrent.cells.gru_cell": {
        "the reset gate (before the bias, on the state)": ["reset_before_the_bias", "reset_on_the_state"],
        "the update gate swapped": ["update_gate_swapped"],
        "the gate order": ["gate_order_z_r_n"],
        "gradients cut (a detour through numpy)": ["detour_through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "recurrent.layers.bidirectional": {
        "padding reversed too": ["flips_the_padding_too"],
        "backward outputs left reversed": ["backward_outputs_left_reversed"],
        "the halves or the final states in the wrong order": ["backward_first", "final_states_swapped"],
        "the wrong layer backwards": ["forward_layer_both_ways"],
        "gradients cut (a detour through numpy)": ["reversed_through_numpy"],
        "x reversed in place": ["x_reversed_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "recurrent.elmo.scalar_mix": {
        "exp overflows (no maximum subtracted)": ["naive_softmax"],
        "no softmax (raw weights, a plain mean)": ["weights_without_softmax", "mean_of_the_layers"],
        "gamma (a float, ignored)": ["gamma_as_a_float", "gamma_ignored"],
        "gradients cut (a detour through numpy)": ["detour_through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "attention.masking.masked_softmax": {
        "exp overflows (raw scores, the padding's maximum)": ["naive_exp", "maximum_over_the_padding_too"],
        "a finite fill (0, -1e4)": ["padding_filled_with_zero", "fill_minus_1e4"],
        "masked after the softmax": ["masked_after_the_softmax"],
        "the mask on the wrong axis": ["mask_on_the_queries"],
        "scores filled in place": ["filled_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "attention.scores.general_attention": {
        "W transposed or left out": ["w_not_transposed", "no_weight_matrix"],
        "the mask ignored": ["mask_ignored"],
        "the softmax over the wrong axis": ["softmax_over_the_queries"],
        "the scores average the keys": ["scores_average_the_keys"],
        "gradients cut (a detour through numpy)": ["detour_through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "attention.scores.additive_attention": {
        "the tanh (after v, left out, a sigmoid)": ["v_before_tanh", "no_tanh", "sigmoid_not_tanh"],
        "the projections (swapped, one for both)": ["projections_swapped", "one_projection_for_both"],
        "the mask ignored": ["mask_ignored"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "attention.seq2seq.attention_decoder_step": {
        "the readout's inputs (the previous state, a new context, no context)":
            ["readout_from_the_previous_state", "readout_context_from_the_new_state", "readout_without_the_context"],
        "the cell's input order": ["cell_input_order_swapped"],
        "the weights' shape": ["weights_left_with_the_query_axis"],
        "gradients cut (the context detached)": ["context_detached"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "attention.decoding.beam_search": {
        "the length normalisation (none, returned normalised)": ["no_length_normalisation",
                                                                 "normalised_score_returned"],
        "finished hypotheses take no place in the beam": ["finished_take_no_place"],
        "the states (not reordered, the wrong rows when a finished one ranks above a live one)":
            ["states_not_reordered", "wrong_state_rows"],
        "live hypotheses dropped at max_len": ["live_hypotheses_dropped_at_max_len"],
        "the state changed in place": [IN_PLACE]},
    "transformer.scaled_attention.scaled_dot_product_attention": {
        "the scale (none, sqrt(Tk), hs)": ["no_scale", "scaled_by_the_number_of_keys", "divided_by_hs"],
        "the mask (multiplied, inverted, a float mask ignored)": ["mask_multiplies_the_scores", "bool_mask_inverted",
                                                                  "float_mask_ignored"],
        "the softmax over the wrong axis": ["softmax_over_the_queries"],
        "gradients cut (a detour through numpy)": ["weights_through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transformer.multi_head.multi_head_attention": {
        "the heads split wrongly (no transpose, interleaved columns)": ["heads_without_transpose", "heads_interleaved"],
        "the Q, K, V blocks in another order": ["key_and_value_blocks_swapped"],
        "the output projection (not transposed, no bias)": ["output_projection_not_transposed",
                                                            "output_bias_forgotten"],
        "the weights averaged over heads": ["weights_averaged_over_heads"],
        "the mask dropped": ["mask_dropped"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transformer.positions.sinusoidal_encoding": {
        "speeds from the column index": ["column_index_in_the_speed"],
        "the columns' layout (halves, sin and cos swapped)": ["sines_then_cosines", "sin_and_cos_swapped"],
        "positions from 1": ["positions_from_one"],
        "angles in float32": ["float32_angles"],
        "float64 returned": ["float64_returned"]},
    "transformer.positions.rope": {
        "halves instead of neighbouring pairs": ["pairs_of_halves"],
        "start ignored": ["start_ignored"],
        "theta from the pair index alone": ["theta_from_the_pair_index_alone"],
        "turned backwards": ["turned_backwards"],
        "angles in float32 (computed, or rounded)": ["float32_angles", "angles_rounded_to_float32"],
        "x rotated in place": ["rotated_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transformer.layer_norm.layer_norm": {
        "the variance (unbiased, E[x^2] - mu^2)": ["unbiased_variance", "mean_of_squares_minus_square_of_mean"],
        "eps (outside the square root, ignored)": ["eps_outside_the_square_root", "eps_ignored"],
        "statistics over every axis": ["statistics_over_every_axis"],
        "weight and bias swapped": ["weight_and_bias_swapped"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transformer.blocks.pre_ln_encoder_block": {
        "where the norms go (post-LN, swapped, the residual from the normalised input)":
            ["post_ln", "norms_swapped", "residual_from_the_normalised_input"],
        "one residual for both sublayers": ["one_residual_for_both"],
        "the mask dropped": ["mask_dropped"],
        "the residual added into x": ["residual_added_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "gpt.causal_attention.causal_self_attention": {
        "the causal mask (no offset for the cache, none with a cache)": ["mask_without_the_cache_offset",
                                                                         "no_mask_when_there_is_a_cache"],
        "the cache (after the new positions, only the new keys returned)": ["new_positions_before_the_cache",
                                                                            "only_the_new_keys_returned"],
        "the heads split wrongly": ["heads_without_transpose"],
        "gradients cut (a detour through numpy)": ["output_through_numpy"],
        "inputs or the cache changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "gpt.filters.temperature_top_k": {
        "ties with the k-th (exactly k, the k-th dropped, one too many)": ["exactly_k_by_index", "kth_itself_dropped",
                                                                           "one_token_too_many"],
        "the temperature multiplies": ["temperature_multiplies"],
        "k above V": ["no_guard_for_k_above_v"],
        "logits filtered in place": ["filtered_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "gpt.filters.top_p_filter": {
        "ties cut by the sort": ["ties_cut_by_the_sort"],
        "the mass including the token itself": ["cumulative_mass_including_itself"],
        "something else than the logits returned": ["renormalised_log_probabilities", "probabilities_returned"],
        "the softmax over the wrong axis": ["softmax_over_the_first_axis"],
        "logits filtered in place": ["filtered_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "gpt.beam.beam_search": {
        "the cache (not reordered, the wrong rows when a finished one ranks above a live one)":
            ["cache_not_reordered", "wrong_cache_rows"],
        "the prompt read again instead of the cache": ["whole_sequence_every_step"],
        "the length normalisation (none, returned normalised)": ["no_length_normalisation",
                                                                 "normalised_score_returned"],
        "finished hypotheses take no place in the beam": ["finished_take_no_place"],
        "live hypotheses dropped at the end": ["live_hypotheses_dropped_at_max_len"],
        "the prompt changed in place": [IN_PLACE]},
    "gpt.bpe.most_frequent_pair": {
        "ties broken another way (largest, first or last seen, as text)": [
            "ties_to_the_largest_pair", "ties_to_the_first_seen", "counter_most_common", "ties_to_the_last_seen",
            "ties_by_text", "ties_by_joined_ids"],
        "pairs counted across word boundaries": ["words_run_together"],
        "counts ignored, or a pair counted once per word": ["counts_ignored", "each_word_counted_once_per_pair"],
        "the end of a word lost, or runs counted without overlap": ["last_pair_lost", "runs_counted_without_overlap"],
        "no pair at all: an error instead of None": ["empty_table_raises"],
        "the words changed in place": [IN_PLACE]},
    "gpt.bpe.apply_merges": {
        "merges in the wrong order (leftmost learned pair, highest rank, each rank once)": [
            "leftmost_learned_pair", "highest_rank_first", "each_rank_once"],
        "the rightmost occurrence first": ["rightmost_occurrence"],
        "the end of the word lost, or one merge only": ["last_pair_lost", "one_merge_only"],
        "the symbols merged in place": ["merged_in_place", IN_PLACE]},
    "bert.wordpiece.wordpiece_word": {
        "a library's WordPiece": ["tokenizers_wordpiece"],
        "another matching (shortest first, backtracking)": ["shortest_match_first", "backtracks"],
        "unknown words (the pieces so far kept, the empty word unknown)": ["unknown_piece_only",
                                                                           "empty_word_is_unknown"],
        "max_chars off by one": ["max_chars_off_by_one"],
        "'##' on every piece": ["hashes_on_every_piece"],
        "the vocabulary changed in place": [IN_PLACE]},
    "bert.embeddings.bert_embeddings": {
        "torch's default eps": ["torch_default_eps"],
        "segments forgotten": ["segments_forgotten"],
        "the unbiased variance": ["unbiased_variance"],
        "the positions (after the norm, from 1)": ["positions_added_after_the_norm", "positions_from_one"],
        "gradients cut (a detour through numpy)": ["through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "bert.self_attention.bert_self_attention": {
        "the padding mask (on the queries, -1e4 set or added)": ["padding_on_the_queries",
                                                                 "padding_set_to_minus_ten_thousand",
                                                                 "minus_ten_thousand_added_to_padding"],
        "no scaling": ["no_scaling"],
        "dropout (ignored, the dropped weights returned)": ["dropout_ignored", "dropped_weights_returned"],
        "the heads split wrongly": ["heads_without_a_transpose"],
        "the softmax over the wrong axis": ["softmax_over_the_queries"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "bert.pooling.mean_pool": {
        "padding counted (in the mean, T, non-zero vectors)": ["mean_over_every_position", "divided_by_t",
                                                               "count_of_nonzero_vectors"],
        "the count of the whole batch": ["count_of_the_whole_batch"],
        "padding zeroed in place": ["padding_zeroed_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "bert.masking.mlm_mask": {
        "draws not from the generator (its own seed, the global one)": ["ignores_the_generator", "global_generator"],
        "the fates' shares (swapped, all [MASK])": ["mask_and_random_swapped", "every_chosen_position_masked"],
        "specials or labels (specials chosen, labels of the inputs, labels everywhere)":
            ["specials_may_be_chosen", "labels_are_the_inputs", "labels_everywhere"],
        "the random tokens (any id, ids of the batch, never the original)":
            ["random_tokens_from_the_whole_vocabulary", "random_tokens_from_the_batch",
             "random_token_never_the_original"],
        "a pattern of positions or fates": ["every_seventh_position", "fates_dealt_in_turn"],
        "the spread of the rows' counts (a fixed number per row, a chance that varies by row)":
            ["exactly_round_pn_per_row", "exact_fates_per_row", "chance_varies_by_row"],
        "ids changed in place": ["ids_changed_in_place", IN_PLACE]},
    "transfer.lora.lora_linear": {
        "the scale (missing, on the frozen layer too)": ["scale_missing", "scale_on_the_frozen_layer_too"],
        "A and B (swapped, not transposed)": ["a_and_b_swapped", "a_and_b_not_transposed"],
        "the bias (twice, dropped, added when None)": ["bias_twice", "bias_dropped", "bias_never_none"],
        "gradients cut (a detour through numpy)": ["through_numpy"],
        "inputs changed in place": [IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transfer.adamw.adamw_step": {
        "the bias correction (none, counted from step 0)": ["no_bias_correction", "step_counted_from_zero"],
        "the weight decay (added to the gradient, after the update, without lr)": [
            "l2_added_to_the_gradient", "decay_after_the_update", "decay_without_lr"],
        "eps under the square root": ["eps_under_the_root"],
        "the betas swapped": ["betas_swapped"],
        "inputs changed in place": ["averages_updated_in_place", IN_PLACE],
        "float64 for float32 inputs": [UPCAST]},
    "transfer.early_stopping.early_stopping": {
        "ties (an equal loss improves, the last best kept)": ["ties_improve", "the_last_best"],
        "min_delta (ignored by an argmin, measured from the previous epoch)": [
            "argmin_ignoring_min_delta", "min_delta_from_the_previous_epoch"],
        "patience off by one": ["patience_exceeded"],
        "the losses changed in place": [IN_PLACE]},
    "transfer.fine_tuning.fine_tune_loop": {
        "the steps (gradients never zeroed, counted per epoch, a summed loss)": [
            "gradients_never_zeroed", "step_counted_per_epoch", "summed_loss"],
        "validation in training mode": ["validation_in_training_mode"],
        "the kept epoch (the last one, an alias of the parameters)": ["the_last_epoch_kept", "kept_state_aliased"],
        "one epoch too many": ["one_epoch_too_many"],
        "parameters that must not change (frozen ones trained, ones without a gradient stepped)": [
            "frozen_parameters_trained", "gradless_parameters_stepped"],
        "the batches changed in place": [IN_PLACE]},
}
"""For every exercise, its realistic bug classes and the wrong answers (or generic closures) that make each."""


# ---------------------------------------------------------------------------------------------
# Machinery: the notebook-like namespace, the answers' sources, the entries of the answer keys
# ---------------------------------------------------------------------------------------------

EXERCISES = find_exercises()
OWNERS = owners()


@functools.lru_cache(maxsize=None)
def setup_source(assignment: str) -> str:
    nb = nbformat.read(solution_notebooks(assignment)[0], as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")


@functools.lru_cache(maxsize=None)
def key_of(assignment: str) -> dict:
    return answer_keys.load(assignment)


def entries(key: str) -> list[dict]:
    """The answer-key entries (visible and hidden) of exercise ``key``."""
    return [e for e in key_of(OWNERS[key]).values() if e["key"] == key]


def stub_head(key: str) -> str:
    """The function as released, up to its solution: ``def`` line, docstring and argument checks."""
    lines = EXERCISES[key].source().splitlines()
    return "\n".join(lines[:next(i for i, line in enumerate(lines) if line.strip() == BEGIN)])


def answer_source(key: str, body: str, prelude: str = "") -> str:
    return prelude + stub_head(key) + "\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def load_answer(key: str, source: str):
    """Execute ``source`` as an answer cell after the setup cell, in a fresh notebook-like namespace."""
    namespace = {"__name__": "__main__", "np": np, "math": math}
    with answer_keys.torch_state():
        exec(compile(setup_source(OWNERS[key]), "<setup>", "exec"), namespace)  # noqa: S102 - our notebook
    exec(compile(source, f"<answer {key}>", "exec"), namespace)  # noqa: S102 - answers written in this file
    return namespace[key.rsplit(".", 1)[1]]


def run(key: str, fn, kind: str | None = None) -> list[tuple[dict, list]]:
    """``(entry, outcomes)`` for each entry of ``key`` (of one ``kind``, if given: "visible" or "hidden"), run as in
    the notebook's kernel (float64 torch, one thread)."""
    out = []
    with answer_keys.torch_state() as torch, np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the answers warn about (e.g. float() of a tensor) is not judged
        torch.set_default_dtype(torch.float64)
        torch.set_num_threads(1)
        for entry in entries(key):
            if kind is None or entry["kind"] == kind:
                out.append((entry, verdicts.outcomes_in_process(fn, entry)))
    return out


def _reference(key: str):
    """The reference answer of exercise ``key`` (course_lib's own function)."""
    module, name = key.rsplit(".", 1)
    return getattr(importlib.import_module(f"course_lib.{module}"), name)


def _writes_into_an_input(reference):
    """The reference, then a write into its first array, tensor or dict argument (the result itself is right)."""
    @functools.wraps(reference)
    def answer(*args, **kwargs):
        import torch

        result = reference(*args, **kwargs)
        for arg in args:
            if isinstance(arg, np.ndarray) and arg.size:
                arg.flat[0] = not arg.flat[0] if arg.dtype == bool else arg.flat[0] + 1
                break
            if isinstance(arg, torch.Tensor) and arg.numel() and arg.is_contiguous():
                with torch.no_grad():
                    flat = arg.view(-1)
                    flat[0] = ~flat[0] if arg.dtype == torch.bool else flat[0] + 1
                break
            if isinstance(arg, dict):
                arg["##written"] = len(arg)
                break
            if isinstance(arg, list) and arg and isinstance(arg[0], np.ndarray):
                arg[0].flat[0] += 1
                break
        else:  # plain lists only (BPE's words and symbols): one more element in the first list
            for arg in args:
                if isinstance(arg, list):
                    arg.append(arg[0] if arg else 0)
                    break
        return result
    return answer


def _float64_for_float32(reference):
    """The reference on float32 tensor arguments cast to float64 (as when a float64 tensor enters the computation)."""
    @functools.wraps(reference)
    def answer(*args, **kwargs):
        import torch

        def wider(x):
            return x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
        return reference(*map(wider, args), **{k: wider(v) for k, v in kwargs.items()})
    return answer


GENERIC = {IN_PLACE: (_writes_into_an_input, ("in place",)), UPCAST: (_float64_for_float32, ("dtype", "raised"))}
"""Each generic mistake: the closure that plants it, and the verdicts it may get (a float32 scaffold raises on float64)."""
UPCAST_KEYS = hidden_cases.TORCH - {"transformer.positions.sinusoidal_encoding", "attention.decoding.beam_search",
                                    "gpt.beam.beam_search"}
"""The exercises that take float tensors and return tensors of their dtype (the others return float32, or lists)."""


def _params(kind):
    return [pytest.param(key, name, id=f"{key.rsplit('.', 1)[1]}-{name}")
            for key, answer in ANSWERS.items() for name in answer[kind]]


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------


def test_every_exercise_has_two_correct_and_two_wrong_answers():
    assert set(ANSWERS) == set(EXERCISES)
    for key, answer in ANSWERS.items():
        assert len(answer["correct"]) >= 2 and len(answer["wrong"]) >= 2, key
        assert entries(key), f"{key} has no entry in answer_keys/{OWNERS[key]}.key: run `python3 tasks.py sync`"


@pytest.mark.parametrize("key,name", _params("correct"))
def test_a_correct_answer_passes_every_case(key, name):
    answer = ANSWERS[key]["correct"][name]
    prelude, body = answer if isinstance(answer, tuple) else ("", answer)  # prelude: the cell's imports
    fn = load_answer(key, answer_source(key, body, prelude))
    for entry, outcomes in run(key, fn):
        verdict = verdicts.judge(entry, {"cases": outcomes}, secret=entry["kind"] == "hidden")
        assert verdict.passed, f"{entry['kind']} {key}: {verdict.message}"


@pytest.mark.parametrize("key,name", _params("wrong"))
def test_a_wrong_answer_fails_in_several_hidden_cases(key, name):
    answer, reason = ANSWERS[key]["wrong"][name]
    prelude, body = answer if isinstance(answer, tuple) else ("", answer)  # prelude: earlier cells
    fn = load_answer(key, answer_source(key, body, prelude))
    failed = {"visible": [], "hidden": []}
    for entry, outcomes in run(key, fn):
        problems = verdicts.case_problems(entry, outcomes, secret=entry["kind"] == "hidden")
        failed[entry["kind"]] += [problem for _number, problem in problems]
        assert verdicts.judge(entry, {"cases": outcomes}, secret=True).passed == (not problems)
    everything = failed["visible"] + failed["hidden"]
    assert everything, f"the bug {name!r} of {key} passes every case"
    if reason:
        assert any(reason in p for p in everything), f"{name}: expected a verdict about {reason!r}, got {everything}"
    if any(e["kind"] == "hidden" for e in entries(key)):
        assert len(failed["hidden"]) >= 2, f"the bug {name!r} of {key} fails only {failed['hidden']}"


def test_hints_name_a_mistake_for_every_exercise():
    assert set(hidden_cases.HINTS) == set(EXERCISES)
    for key, hint in hidden_cases.HINTS.items():
        assert hint.endswith(".") and hint.count(". ") == 0, f"{key}: one sentence"
        assert all(entry["hint"] == hint for entry in entries(key)), f"{key}: run `python3 tasks.py sync`"


def test_stability_cases_really_overflow_float64():
    """Where a docstring promises stability, hidden cases have scores where a naive exp overflows
    (``exp(x) = inf`` for ``x > 709.78``) or underflows to 0 (``x < -745.1``), in at least two cases;
    and in at least two perplexity cases the mean -log p itself is beyond 709.78, where the docstring
    asks for ``inf`` (``math.exp`` raises ``OverflowError``), the others being finite."""
    def extreme(values):
        return bool(np.max(np.abs(values)) > 745.2)

    def dots(case):
        center, context, negatives = case["args"]
        return np.concatenate([np.sum(center * context, axis=1), np.einsum("bkd,bd->bk", negatives, center).ravel()])

    checks = {"recurrent.elmo.scalar_mix": lambda case: case["args"][1],
              "attention.masking.masked_softmax": lambda case: case["args"][0],
              "recurrent.perplexity.perplexity": lambda case: case["args"][0],
              "vectors.word2vec.sgns_loss_and_grads": dots}
    for key, values in checks.items():
        hidden = next(e for e in entries(key) if e["kind"] == "hidden")
        assert sum(extreme(values(case)) for case in hidden["cases"]) >= 2, key
    perplexity = next(e for e in entries("recurrent.perplexity.perplexity") if e["kind"] == "hidden")
    values = np.array([case["expected"]["value"] for case in perplexity["cases"]])
    assert np.sum(values == np.inf) >= 2 and np.all(np.isfinite(values) | (values == np.inf)), values


def _read_anyhow(model):
    """A copy of a case's GPT that may be read without its cache (``PlainCausalAttention`` without a prompt length)."""
    import copy

    from course_lib.testing import PlainCausalAttention

    model = copy.deepcopy(model)
    for block in model.blocks:
        block.self_attn.causal_attention_fn = PlainCausalAttention()
    return model


def _log_prob(model, prompt, tokens) -> float:
    """``log p(tokens | prompt)``, by one pass of the whole sequence through ``model`` (no cache, no beam)."""
    import torch

    ids = torch.cat([torch.as_tensor(prompt), torch.tensor(tokens, dtype=torch.int64)])[None]
    with torch.no_grad():
        logits, _ = model(ids[:, :-1])
    log_probs = torch.log_softmax(logits[0, len(prompt) - 1:].double(), dim=-1)
    return float(log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


def test_ps07_beam_search_cases_agree_with_exhaustive_search_and_greedy_generation():
    """ps07's beam-search cases are judged by the reference's answers; here those answers are checked without it.

    Where the beam holds every output (``beam_width >= V ** max_new_tokens``) the expected answer is the best
    output of an exhaustive enumeration; with ``beam_width = 1`` it is greedy generation (``generate``); always,
    the expected log-probability is the model's own for the expected tokens, read in one pass without the cache,
    and the cases' GPT (``PlainCausalAttention``) is the GPT of the reference ``causal_self_attention``. The cases
    also hold what tells beam search apart: an output ending with eos before the end, a narrow beam that beats
    greedy search, an alpha that changes the answer, models that insist on the cache."""
    import torch

    from course_lib.gpt.beam import beam_search
    from course_lib.gpt.generation import generate
    from course_lib.gpt.model import GPT

    hidden = next(e for e in entries("gpt.beam.beam_search") if e["kind"] == "hidden")
    early_eos = beats_greedy = alpha_matters = enforced = exhaustive = 0
    with answer_keys.torch_state():
        torch.set_num_threads(1)
        for case in hidden["cases"]:
            model, prompt, width, new = case["args"]
            eos, alpha = case["kwargs"].get("eos"), case["kwargs"]["alpha"]
            tokens, total = case["expected"]["value"]
            free, prompt = _read_anyhow(model), torch.as_tensor(prompt)
            reference = GPT(model.config).double()  # the reference's attention layer, the same weights
            reference.load_state_dict(free.state_dict())
            ids = torch.cat([prompt, torch.tensor(tokens)])[None, :-1]
            assert torch.allclose(reference(ids)[0], free(ids)[0], rtol=1e-12, atol=1e-12)
            assert np.isclose(total, _log_prob(free, prompt, tokens), rtol=1e-12, atol=1e-12)
            assert len(tokens) == new or tokens[-1] == eos
            vocab = model.config.vocab_size
            if width >= vocab ** new:
                outputs = [list(t) for n in range(1, new + 1) for t in itertools.product(range(vocab), repeat=n)
                           if eos not in t[:-1] and (t[-1] == eos or n == new)]
                best = max(outputs, key=lambda t: _log_prob(free, prompt, t) / len(t) ** alpha)
                assert tokens == best, (case["kwargs"], tokens, best)
                exhaustive += 1
            greedy = generate(free, prompt[None], new, eos=eos)[0, len(prompt):].tolist()
            greedy = greedy[:greedy.index(eos) + 1] if eos in greedy else greedy
            if width == 1:
                assert tokens == greedy
            beats_greedy += 1 < width < vocab ** new and total > _log_prob(free, prompt, greedy) + 1e-9
            early_eos += len(tokens) < new
            alpha_matters += alpha > 0 and beam_search(free, prompt, width, new, eos=eos, alpha=0.0)[0] != tokens
            enforced += model.blocks[0].self_attn.causal_attention_fn.prompt_length is not None
    assert exhaustive >= 3 and early_eos >= 2 and beats_greedy >= 2 and alpha_matters >= 2 and enforced >= 4, \
        (exhaustive, early_eos, beats_greedy, alpha_matters, enforced)


_OWN_HELPER = '''
def cross_entropy(logits, targets):
    """The student's own helper: the mean of -log p(target), with numpy."""
    top = logits.max(axis=1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(targets)), targets].mean()


'''
_TORCH_HELPER = '''
def mean_loss(logits, targets):
    import torch
    return torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(targets)).item()


'''


def _perplexity_answer(prelude, call):
    key = "recurrent.perplexity.perplexity"
    body = f"""
        with np.errstate(over="ignore"):
            return float(np.exp({call}(logits, targets)))"""
    return load_answer(key, answer_source(key, body, prelude))


def _perplexity_verdicts(prelude, call):
    fn = _perplexity_answer(prelude, call)
    return [(entry, verdicts.judge(entry, {"cases": outcomes}, secret=entry["kind"] == "hidden"), outcomes)
            for entry, outcomes in run("recurrent.perplexity.perplexity", fn)]


def test_own_helper_named_like_a_forbidden_function_passes():
    """The shortcut check judges what the code calls: a helper of the student's own named
    ``cross_entropy`` (numpy only) is no library call, although the name is forbidden; the
    notebook's ``assert_own_code`` agrees."""
    from course_lib.testing import assert_own_code

    results = _perplexity_verdicts(_OWN_HELPER, "cross_entropy")
    assert all("cross_entropy" in entry["forbidden"] for entry, _v, _o in results)
    for entry, verdict, _outcomes in results:
        assert verdict.passed, f"{entry['kind']}: {verdict.message}"
    assert_own_code(_perplexity_answer(_OWN_HELPER, "cross_entropy"), results[0][0]["forbidden"], "perplexity")


def test_a_forbidden_library_call_hidden_in_a_helper_fails():
    """``torch.nn.functional.cross_entropy`` called from a helper with an innocent name is still caught."""
    from course_lib.testing import assert_own_code

    results = _perplexity_verdicts(_TORCH_HELPER, "mean_loss")
    for entry, verdict, outcomes in results:
        assert not verdict.passed and "calls torch" in verdict.message, verdict.message
        assert all(any(c.startswith("torch.nn.functional.cross_entropy") for c in o["calls"]) for o in outcomes)
    with pytest.raises(AssertionError, match="torch"):
        assert_own_code(_perplexity_answer(_TORCH_HELPER, "mean_loss"), results[0][0]["forbidden"], "perplexity")


def test_a_first_import_inside_the_function_is_no_error():
    """In the sandbox a student's function first runs inside the probe, so an import in its body runs
    under the profile hook. Checked in a fresh interpreter, where sklearn is not imported yet."""
    code = textwrap.dedent("""
        import numpy as np
        from course_tools.in_sandbox.probe import run_case

        def tfidf(counts):
            from sklearn.feature_extraction.text import TfidfTransformer
            return TfidfTransformer().fit_transform(counts)

        outcome = run_case(tfidf, {"args": (np.eye(3),), "kwargs": {}}, record_calls=True)
        assert "error" not in outcome, outcome["error"]
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-500:]


def test_every_exercise_names_its_bug_classes():
    """The table of bug classes covers every exercise and every wrong answer, and each class names its mistakes;
    the generic ones apply wherever they can: a write into an input (every function with an array argument), float64
    for float32 inputs (every function of float tensors that returns their dtype)."""
    assert set(BUG_CLASSES) == set(EXERCISES)
    for key, classes in BUG_CLASSES.items():
        named = [name for names in classes.values() for name in names]
        assert len(classes) >= 3 and all(classes.values()), key
        assert len(named) == len(set(named)), f"{key}: a mistake named twice"
        assert {n for n in named if n not in GENERIC} == set(ANSWERS[key]["wrong"]), \
            f"{key}: every wrong answer belongs to one class, and every class names wrong answers that exist"
        assert (IN_PLACE in named) == (key != "transformer.positions.sinusoidal_encoding"), key
        assert (UPCAST in named) == (key in UPCAST_KEYS), key


@pytest.mark.parametrize("key,mistake", [pytest.param(key, mistake, id=f"{key.rsplit('.', 1)[1]}-{mistake.strip('<>')}")
                                         for key, classes in BUG_CLASSES.items()
                                         for names in classes.values() for mistake in names if mistake in GENERIC])
def test_a_generic_mistake_fails_in_several_hidden_cases(key, mistake):
    plant, reasons = GENERIC[mistake]
    hidden = [(entry, outcomes) for entry, outcomes in run(key, plant(_reference(key)), kind="hidden")]
    problems = [p for entry, outcomes in hidden for _n, p in verdicts.case_problems(entry, outcomes, secret=True)]
    assert len(problems) >= 2, f"{mistake} in {key} fails only {problems}"
    assert all(any(reason in p for reason in reasons) for p in problems), problems


@pytest.mark.parametrize("key", sorted(EXERCISES), ids=lambda key: key.rsplit(".", 1)[1])
def test_the_reference_passes_every_case(key):
    for entry, outcomes in run(key, _reference(key)):
        verdict = verdicts.judge(entry, {"cases": outcomes}, secret=entry["kind"] == "hidden")
        assert verdict.passed, f"{entry['kind']} {key}: {verdict.message}"


def test_losses_that_read_x_in_place_hold_the_very_array_of_their_case():
    """numerical_gradient's hidden cases with a loss that reads x in place stay such cases wherever they go: stored
    in the key, pickled into the sandbox (one pickle for all cases) and copied by the probe, the loss's weights are
    the case's x; and some x are in Fortran order, where x.reshape(-1) is a copy."""
    import cloudpickle

    from course_lib.vectors.gradcheck import SmoothLoss

    hidden = next(e for e in entries("vectors.gradcheck.numerical_gradient") if e["kind"] == "hidden")
    sandbox = pickle.loads(cloudpickle.dumps(answer_keys.probe_inputs(hidden), protocol=4))
    for cases in (hidden["cases"], sandbox, [{"args": copy.deepcopy(case["args"])} for case in sandbox]):
        shared = [case for case in cases if isinstance(case["args"][0], SmoothLoss) and case["args"][0].weights is not None]
        assert len(shared) >= 2 and all(case["args"][0].weights is case["args"][1] for case in shared)
    fortran = [case for case in sandbox if not case["args"][1].flags.c_contiguous]
    assert len(fortran) >= 2 and not any(np.shares_memory(case["args"][1].reshape(-1), case["args"][1])
                                         for case in fortran)


def test_the_spread_check_accepts_independent_counts_and_refuses_fixed_ones():
    """mlm_mask's spread check (``ps08_bert._spread``): binomial counts per row pass as often as its bound says
    (each side at most ``tail``, here 0.05, in 100 draws: at most 5 expected, 20 allowed), while a fixed number per
    row is far too even and a chance that varies by row far too uneven, at the real tail of 1e-12."""
    rng = np.random.default_rng(23)
    totals = rng.choice([12, 40, 64, 100, 128], size=64)  # rows of a few lengths: a quick check
    for p in (0.15, 0.5, 0.8):
        verdicts_seen = [ps08_bert._spread(rng.binomial(totals, p), totals, p, tail=0.05) for _ in range(100)]
        assert verdicts_seen.count("too evenly") <= 20 and verdicts_seen.count("too unevenly") <= 20, p
        assert ps08_bert._spread(np.round(totals * p), totals, p) == "too evenly"
        assert ps08_bert._spread(rng.binomial(totals, rng.uniform(0, min(1, 2 * p), size=64)), totals, p) \
            == "too unevenly"
