"""Beam search for a decoder-only model: the beams are a batch, their KV caches reordered at every step. Chapter 7.

Chapter 5's :func:`~course_lib.attention.decoding.beam_search` asks a step function
for the next words of every hypothesis. A GPT continues a prompt, and its state is
the KV cache: ``K`` live hypotheses run as a batch of ``K`` rows through the model,
one new position each, and when a hypothesis is extended its row of every layer's
keys and values follows it. See :doc:`/chapters/ch07_gpt`. Tested against exhaustive
search over every output of a tiny model, and against ``transformers``' ``generate``
with ``num_beams``.
"""

from __future__ import annotations

import torch

from course_lib import checks
from course_lib.training import eval_mode


def reorder_cache(cache, rows):
    """The cache of the hypotheses ``rows``: every layer's keys and values indexed along the batch. Chapter 7.

    Args:
        cache: a list of ``L`` pairs ``(keys, values)``, each ``(K, nh, P, hs)``.
        rows: ``(K',)`` int64, the row each new hypothesis continues.

    Returns:
        the same structure with ``K'`` rows.
    """
    return [(keys[rows], values[rows]) for keys, values in cache]


@torch.no_grad()
def beam_search(model, prompt, beam_width: int, max_new_tokens: int, eos: int | None = None, alpha: float = 0.0):
    """The continuation of ``prompt`` found by beam search with a KV cache, and its log-probability.

    Read the prompt once. At every step, extend each of the ``K`` live hypotheses by every
    token, score each extension by its total log-probability ``log p(y_1..y_t | prompt)``
    (``log_softmax`` of the last logits, summed in float64), and keep the ``beam_width``
    best (``torch.topk`` over all ``K * V`` of them). A kept extension that ends with
    ``eos`` is finished; the others stay live, each taking its parent's rows of the
    cache (:func:`reorder_cache`), and run one new position through the model together.
    Stop when no hypothesis is live or after ``max_new_tokens`` tokens, when the live
    ones are finished too. Return the finished hypothesis with the highest
    ``log p / |y|^alpha``, ``|y|`` its number of tokens (``eos`` included). Chapter 7,
    exercise of ps07.

    Args:
        model: a GPT: ``model(ids (K, T), cache) -> (logits (K, T, V), cache)``.
        prompt: ``(T,)`` int64, the prompt of one sequence.
        beam_width: ``K``, the hypotheses kept.
        max_new_tokens: the most tokens to add; ``T + max_new_tokens - 1`` must fit the context.
        eos: the id that finishes a hypothesis, or ``None``.
        alpha: the length normalisation exponent (0: rank by total log-probability).

    Returns:
        ``(tokens, log_prob)``: the new ids as a list of ints, and their total log-probability.
    """
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.dtype != torch.int64 or not len(prompt):
        raise ValueError(f"prompt must be a non-empty (T,) int64 tensor, got {getattr(prompt, 'shape', prompt)!r}")
    beam_width = checks.positive_int(beam_width, "beam_width")
    max_new_tokens = checks.positive_int(max_new_tokens, "max_new_tokens")
    if len(prompt) + max_new_tokens - 1 > model.config.context:
        raise ValueError(f"{len(prompt)} prompt tokens and {max_new_tokens} new ones do not fit the context "
                         f"of {model.config.context}")
    ### BEGIN SOLUTION
    with eval_mode(model):  # no dropout while searching
        logits, cache = model(prompt[None])  # (1, T, V)
        live, scores, finished = [[]], torch.zeros(1, dtype=torch.float64), []
        for step in range(max_new_tokens):
            if step:  # one new position per live hypothesis, each with its parent's cache
                logits, cache = model(torch.tensor([[h[-1]] for h in live]), reorder_cache(cache, parents))
            log_probs = torch.log_softmax(logits[:, -1].double(), dim=-1)  # (K, V)
            vocab = log_probs.shape[1]
            best, index = (scores[:, None] + log_probs).reshape(-1).topk(min(beam_width, log_probs.numel()))
            kept, kept_scores, kept_parents = [], [], []
            for total, parent, token in zip(best.tolist(), (index // vocab).tolist(), (index % vocab).tolist()):
                if token == eos:
                    finished.append((live[parent] + [token], total))
                else:
                    kept.append(live[parent] + [token])
                    kept_scores.append(total)
                    kept_parents.append(parent)
            if not kept:
                break
            live, scores = kept, torch.tensor(kept_scores, dtype=torch.float64)
            parents = torch.tensor(kept_parents)
        else:
            finished.extend(zip(live, scores.tolist()))
    return max(finished, key=lambda f: f[1] / len(f[0]) ** alpha)
    ### END SOLUTION
