"""One mistake, one function: a realistic mistake planted in each exercised function of ps01-ps09 in turn
costs that function's points and nothing else.

Each variant is graded by the grader's own graded run (:func:`course_tools.grading.probe_plan.write` and
:mod:`course_tools.in_sandbox.probe_runner`: a fresh process per test cell, the scaffolds of
:mod:`course_tools.grading.scaffolds` in place of the other exercises a function calls) in the assignment's
student edition, without the sandbox (whose walls are tested in test_sandbox and test_redteam) and
without nbgrader (whose recording of the same verdicts test_grading checks), so that all 43 mistakes
take seconds. Verdicts are the grader's: :func:`course_tools.grading.verdicts.judge` on the answer keys.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import nbformat
import pytest

from grading_helpers import edition_namespace
from course_tools.authoring import answer_keys
from course_tools import exercises
from course_tools.grading import probe_plan, sandbox
from course_tools.in_sandbox import probe_runner
from course_tools.grading.autograde import edition_dir, experiment_sources
from course_tools.grading.verdicts import judge

ROOT = Path(__file__).resolve().parents[1]

# (assignment, function) -> (text of the reference answer, the mistaken text): mistakes students make
MISTAKES = {
    ("ps01_counts", "one_hot"): ("vocab_size))", "vocab_size + 1))"),  # one column too many
    ("ps01_counts", "tfidf"): ("np.log((1 + n_docs) / (1 + df)) + 1", "np.log((1 + n_docs) / (1 + df))"),  # no +1
    ("ps01_counts", "ppmi"): ("np.maximum(pmi, 0.0)", "pmi"),  # PMI, not positive PMI
    ("ps01_counts", "cosine_similarity"): ("axis=1, keepdims=True", "axis=0, keepdims=True"),  # column norms
    ("ps02_word2vec", "skipgram_pairs"): ("np.arange(1, window + 1)", "np.arange(0, window + 1)"),  # center too
    ("ps02_word2vec", "negative_samples"): ("len(noise) - 1)", "len(noise) - 2)"),  # the last word never drawn
    ("ps02_word2vec", "sgns_loss_and_grads"): ("sigmoid(negative) / batch", "sigmoid(negative)"),  # no mean
    ("ps02_word2vec", "numerical_gradient"): ("(plus - minus) / (2 * eps)", "(plus - minus) / eps"),
    ("ps02_word2vec", "procrustes"): ("return u @ vt", "return vt.T @ u.T"),  # the inverse rotation
    ("ps03_rnn", "rnn_step"): ("h_prev @ U.T", "h_prev @ U"),
    ("ps03_rnn", "rnn_backward"): ("(1.0 - hs[:, t] ** 2)", "(1.0 - hs[:, t])"),  # tanh' wrong
    ("ps03_rnn", "clip_gradients"): ("min(1.0, max_norm / (total_norm + 1e-6))", "max_norm / (total_norm + 1e-6)"),
    ("ps03_rnn", "perplexity"): ("np.exp(nll.mean())", "np.exp(nll.sum())"),
    ("ps04_lstm", "lstm_cell"): ("a_i, a_f, a_g, a_o = a.chunk", "a_f, a_i, a_g, a_o = a.chunk"),  # gates swapped
    ("ps04_lstm", "gru_cell"): ("return (1 - z) * n + z * h", "return z * n + (1 - z) * h"),
    ("ps04_lstm", "bidirectional"): ("reverse(out_backward)]", "out_backward]"),  # not reversed back
    ("ps04_lstm", "scalar_mix"): ("torch.softmax(weights, dim=0)", "weights"),  # weights not normalised
    ("ps05_attention", "masked_softmax"): ("~keep", "keep"),  # the mask inverted
    ("ps05_attention", "general_attention"): ("keys @ weight.T", "keys @ weight"),
    ("ps05_attention", "additive_attention"): ("torch.tanh(projected_query + projected_keys)",
                                               "(projected_query + projected_keys)"),  # no tanh
    ("ps05_attention", "attention_decoder_step"): ("torch.cat([state, context]", "torch.cat([s_prev, context]"),
    ("ps05_attention", "beam_search"): ("f[1] / len(f[0]) ** alpha", "f[1]"),  # no length normalisation
    ("ps06_transformer", "scaled_dot_product_attention"): (" / math.sqrt(query.shape[-1])", ""),
    ("ps06_transformer", "multi_head_attention"): ("merge_heads(heads) @ out_weight.T", "merge_heads(heads) @ out_weight"),
    ("ps06_transformer", "sinusoidal_encoding"): ("torch.sin(t * speeds)", "torch.cos(t * speeds)"),
    ("ps06_transformer", "rope"): ("even * sin + odd * cos", "even * sin - odd * cos"),
    ("ps06_transformer", "layer_norm"): ("torch.sqrt(variance + eps)", "(torch.sqrt(variance) + eps)"),
    ("ps06_transformer", "pre_ln_encoder_block"): ("block.feed_forward(block.norm2(h))",
                                                   "block.feed_forward(block.norm2(x))"),
    ("ps07_gpt", "causal_self_attention"): ("causal_mask_after(past, steps)", "None"),  # attends to the future
    ("ps07_gpt", "temperature_top_k"): ("scaled < kth", "scaled <= kth"),  # drops the k-th too
    ("ps07_gpt", "top_p_filter"): ("before = ordered.cumsum(dim=-1) - ordered", "before = ordered.cumsum(dim=-1)"),
    ("ps07_gpt", "beam_search"): ("reorder_cache(cache, parents)", "cache"),  # caches not reordered
    ("ps07_gpt", "most_frequent_pair"): ("min(totals, key=lambda pair: (-totals[pair], pair))",
                                         "max(totals, key=totals.get)"),  # a tie goes to the pair seen first
    ("ps07_gpt", "apply_merges"): ("_, i = min(found)", "_, i = found[0]"),  # the leftmost learned pair first
    ("ps08_bert", "wordpiece_word"): ('"##" + word[start:end]', "word[start:end]"),  # no ## on later pieces
    ("ps08_bert", "bert_embeddings"): (" + position_weight[positions]", ""),  # no positions
    ("ps08_bert", "bert_self_attention"): ("(q / math.sqrt(q.shape[-1]))", "q"),  # not scaled
    ("ps08_bert", "mean_pool"): ("/ weights.sum(dim=1)", "/ hidden.shape[1]"),  # padding counted
    ("ps08_bert", "mlm_mask"): ("(fate >= 0.8) & (fate < 0.9)", "(fate >= 0.8)"),  # 20 % random tokens
    ("ps09_fine_tuning", "lora_linear"): ("scale * ((x @ lora_a.T) @ lora_b.T)", "((x @ lora_a.T) @ lora_b.T)"),  # no scale
    ("ps09_fine_tuning", "adamw_step"): ("m / (1 - beta1 ** step)", "m"),  # no bias correction of m
    ("ps09_fine_tuning", "early_stopping"): ("if loss < losses[best] - min_delta:",
                                             "if loss <= losses[best] - min_delta:"),  # a tie improves
    ("ps09_fine_tuning", "fine_tune_loop"): ("kept = {name: p.detach().clone() for name, p in trained.items()}",
                                             "kept = {name: p.detach() for name, p in trained.items()}"),  # aliased
}
ASSIGNMENTS = sorted({a for a, _ in MISTAKES})


def test_every_exercised_function_has_a_planted_mistake():
    owners = exercises.owners(ROOT)
    assert {(a, key.rsplit(".", 1)[-1]) for key, a in owners.items()} == set(MISTAKES)


def _answers(assignment: str) -> dict[str, str]:
    nb = nbformat.read(ROOT / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}


def _notebook(release, answers: dict[str, str]):
    nb = nbformat.from_dict(json.loads(json.dumps(release)))
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def _grade_variants(assignment: str, job: Path) -> dict[str, dict[str, bool]]:
    """``variant -> {grade_id: passed}`` for the reference answers ("none") and each planted mistake,
    graded in two children of this process whose course_lib is the assignment's student edition."""
    release = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    key = answer_keys.load(assignment, ROOT)
    answers = _answers(assignment)
    variants = {"none": answers}
    for (owner, function), (right, wrong) in MISTAKES.items():
        if owner == assignment:
            assert right in answers[function], f"{assignment}: {right!r} is no longer in the answer of {function}"
            variants[function] = dict(answers, **{function: answers[function].replace(right, wrong)})
    plans = {}
    for name, chosen in variants.items():
        folder = job / name
        (folder / "in").mkdir(parents=True)
        plans[name], _ = probe_plan.write(folder, _notebook(release, chosen), release, key, assignment,
                                          sandbox.Limits(), False, experiment_sources(release))
    edition = str(edition_dir(assignment, ROOT))
    names = sorted(plans)
    halves = [names[0::2], names[1::2]]  # two children at a time: one per core
    children = [_grade_in_child(edition, plans, key, half) for half in halves if half]
    passed = {}
    for pid, read in children:
        chunks = []
        while chunk := os.read(read, 1 << 16):
            chunks.append(chunk)
        os.close(read)
        os.waitpid(pid, 0)
        passed.update(json.loads(b"".join(chunks)))
    return passed


def _grade_in_child(edition: str, plans: dict, key: dict, names: list[str]) -> tuple[int, int]:
    """Fork a child that grades the variants ``names``; return its pid and the pipe its verdicts come through.
    The student edition and the setup's imports stay in the child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    try:
        os.close(read)
        namespace = edition_namespace(edition, plans["none"]["setup"])
        passed = {}
        for name in names:
            plan = plans[name]
            passed[name] = {}
            for cell in plan["cells"]:
                with open(Path(plan["cases_dir"]) / f"{cell['grade_id']}.pkl", "rb") as f:
                    cases = pickle.load(f)
                outcome, _ = probe_runner.run_cell(dict(namespace), plan, dict(cell, cpu_limit=60), cases)
                entry = key[cell["grade_id"]]
                passed[name][cell["grade_id"]] = judge(entry, outcome, secret=entry["kind"] == "hidden").passed
        data = json.dumps(passed).encode()
        while data:
            data = data[os.write(write, data):]
    finally:
        os._exit(0)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_planted_mistake_costs_its_function_and_nothing_else(assignment, tmp_path):
    release = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in release.cells
              if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}
    key = answer_keys.load(assignment, ROOT)
    graded = _grade_variants(assignment, tmp_path)
    assert all(graded["none"].values()), f"the reference answers fail: {graded['none']}"
    for function, passed in graded.items():
        if function == "none":
            continue
        own = {g for g in passed if key[g]["function"] == function}
        others_lost = {g: points[g] for g, ok in passed.items() if not ok and g not in own}
        assert not others_lost, f"{assignment}: a mistake in {function} also cost {others_lost}"
        assert not passed[f"hidden_{function}"], f"{assignment}: the mistake in {function} kept its hidden points"
