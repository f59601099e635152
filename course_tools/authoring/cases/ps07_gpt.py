"""Hidden cases of ps07_gpt: causal attention with a cache, sampling filters, beam search and BPE for GPT (chapter 7).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np


def causal_self_attention(rng):
    from course_lib.testing import PlainScaledAttention

    # (B, P cached positions or None, T new ones, D, nh, dtype, attention_fn): no cache, caches of several lengths
    # (an empty one too) before one or several new positions, heads of size 1, float32; course_lib's attention
    # (ps06's, revealed in the student edition) in the last case, PlainScaledAttention in the others.
    # The cache is an argument (not a keyword), so that the grader checks that it is left unmodified.
    for b, past, steps, d, nh, dtype, plain in [
            (1, None, 1, 2, 1, np.float64, True), (2, None, 5, 8, 2, np.float64, True), (2, 3, 1, 8, 2, np.float64, True),
            (3, 4, 3, 12, 3, np.float64, True), (1, 7, 2, 6, 6, np.float64, True), (2, 0, 4, 8, 4, np.float64, True),
            (2, 1, 6, 16, 4, np.float64, True), (2, 10, 1, 4, 2, np.float64, True), (2, 5, 3, 8, 2, np.float32, True),
            (1, None, 4, 8, 4, np.float32, True),
            (1, 2, 3, 6, 2, np.float64, False)]:
        scale = rng.uniform(0.5, 2.0)
        x = rng.normal(size=(b, steps, d)) * scale
        weights = (rng.normal(size=(3 * d, d)) / np.sqrt(d), rng.normal(size=3 * d) * 0.5,
                   rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5)
        cache = None if past is None else tuple(rng.normal(size=(b, nh, past, d // nh)) * scale for _ in range(2))
        args = tuple(a.astype(dtype) for a in (x, *weights)) + (nh,)
        if cache is not None:
            args += (tuple(c.astype(dtype) for c in cache),)
        yield args, ({"attention_fn": PlainScaledAttention()} if plain else {})


def temperature_top_k(rng):
    # (shape (..., V), temperature, k, kind): k None, 1, below V, equal to V and above it; ties with the k-th
    # largest and at the top; -inf already there (as after another filter); V = 1; an int temperature; float32
    for shape, temperature, k, kind in [
            ((6,), 1.0, 3, "normal"), ((3, 7), 0.5, 2, "normal"), ((2, 3, 10), 2.0, 4, "normal"),
            ((4, 5), 0.7, None, "normal"), ((2, 6), 1.3, 6, "normal"), ((3, 4), 1.0, 9, "normal"),
            ((5, 8), 1.0, 3, "ties"), ((4, 6), 0.8, 1, "top ties"), ((3, 9), 1.5, 2, "inf"), ((1, 1), 0.3, 1, "normal"),
            ((2, 12), 0.25, 5, "float32"), ((3, 5), 3, 2, "normal"), ((2, 8), 0.1, 3, "large"), ((6, 7), 1.0, 4, "ties"),
            ((2, 2, 3), 0.9, 4, "normal"), ((3, 9), 0.7, 3, "float32")]:
        logits = rng.normal(size=shape) * rng.uniform(0.5, 3)
        if kind == "ties":  # few distinct values: the k-th largest is tied with others in most rows
            logits = rng.integers(-2, 3, size=shape).astype(np.float64)
        elif kind == "top ties":  # two equal largest logits in every row
            rows = logits.reshape(-1, shape[-1])
            for row in rows:
                first, second = rng.choice(shape[-1], size=2, replace=False)
                row[second] = row[first] = row.max() + 1.0
        elif kind == "inf":  # tokens removed before: fewer than k finite logits in the first row
            logits[0, rng.choice(shape[-1], size=shape[-1] - 1, replace=False)] = -np.inf
            logits[1:, rng.choice(shape[-1], size=3, replace=False)] = -np.inf
        elif kind == "large":
            logits = logits * 100
        elif kind == "float32":
            logits = logits.astype(np.float32)
        yield (logits, temperature, k), {}


def _mass_edges(logits):
    """The cumulative masses of each row's tokens sorted from the most probable, ``(..., V)``: top-p's edges."""
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.cumsum(-np.sort(-probs, axis=-1), axis=-1)


def _clear_p(rng, logits, low=0.05, high=0.97):
    """A ``p`` in ``(low, high)`` at least 1e-4 away from every cumulative mass, so rounding cannot move an edge."""
    edges = _mass_edges(np.asarray(logits, dtype=np.float64))
    while True:
        p = float(rng.uniform(low, high))
        if np.all(np.abs(edges - p) > 1e-4):
            return p


def top_p_filter(rng):
    # Random logits (p kept clear of every row's cumulative masses); rows that are permutations of one set of
    # logits with ties, p inside the tied group (all of it is kept); two tied maxima and a tiny p; one token
    # holding all the mass, or nearly; p = 1; -inf already there; float32; large logits
    for shape, scale in [((8,), 2.0), ((3, 10), 1.5), ((2, 3, 12), 1.0), ((2, 6), 8.0)]:
        logits = rng.normal(size=shape) * scale
        yield (logits, _clear_p(rng, logits)), {}
    logits = rng.normal(size=(4, 6)) * 3
    yield (logits, _clear_p(rng, logits, 0.005, 0.03)), {}  # below the top token's mass: the top token alone
    for values, group in [([2.0, 1.0, 1.0, 1.0, 0.0, -1.0], 1.0), ([3.0, 2.5, 0.5, 0.5, 0.5, 0.5, -1.0, -2.0], 0.5),
                          ([1.0, 1.0, 0.0, 0.0, 0.0, -3.0], 0.0)]:
        values = np.array(values)
        probs = np.exp(values) / np.exp(values).sum()
        before = probs[values > group].sum()  # the mass of the tokens more probable than the tied group
        p = before + probs[values == group][0] * rng.uniform(0.2, 0.8)  # the edge falls inside the group
        logits = np.stack([rng.permutation(values) for _ in range(3)])  # (3, V): the same masses in every row
        yield (logits, float(p)), {}
    logits = rng.normal(size=(3, 7))
    for row in logits:
        row[rng.choice(7, size=2, replace=False)] = row.max() + 0.5  # two tied maxima
    yield (logits, 0.01), {}
    logits = np.full((4, 5), -1000.0)
    logits[np.arange(4), rng.integers(0, 5, size=4)] = 0.0  # one token holds all the mass (the others underflow to 0)
    yield (logits, 0.9), {}
    logits = np.zeros((2, 6), dtype=np.float32)
    logits[:, 0] = 20.0  # one token holds all but 2.5e-8 of the mass
    yield (logits, 0.5), {}
    logits = rng.normal(size=(3, 8))
    yield (logits, 1.0), {}  # every token kept
    logits = rng.normal(size=(3, 9)) * 2
    logits[np.arange(3)[:, None], np.stack([rng.choice(9, size=4, replace=False) for _ in range(3)])] = -np.inf
    yield (logits, _clear_p(rng, logits)), {}  # tokens removed before (-inf, probability 0)
    logits = (rng.normal(size=(2, 2, 7)) * 2).astype(np.float32)
    yield (logits, _clear_p(rng, logits)), {}
    logits = rng.normal(size=(4, 10)) * 40
    yield (logits, _clear_p(rng, logits, 0.5, 0.999)), {}


def _tiny_gpt(rng, vocab, context, width, heads, layers, prompt_length=None):
    """A float64 GPT with ``PlainCausalAttention`` (no exercise inside), every weight drawn from ``rng``."""
    import torch

    from course_lib.gpt.model import GPT, GPTConfig
    from course_lib.testing import PlainCausalAttention
    from course_lib.training import torch_seed

    with torch_seed(0):
        model = GPT(GPTConfig(vocab, context=context, width=width, num_heads=heads, layers=layers),
                    causal_attention_fn=PlainCausalAttention(prompt_length)).double()
    with torch.no_grad():  # spread weights: distinct, confident next-token distributions that depend on the
        for name, parameter in model.named_parameters():  # earlier positions (small embeddings, larger blocks)
            drawn = rng.normal(size=tuple(parameter.shape)) * (0.3 if "embedding" in name else 0.7)
            if "norm" in name and name.endswith("weight"):
                drawn = drawn + 1.0  # LayerNorm gains around 1
            parameter.copy_(torch.from_numpy(drawn))
    return model


def gpt_beam_search(rng):
    # (V, layers, prompt length T, beam_width, max_new_tokens, eos or None, alpha, cache enforced): beam width 1
    # (greedy); beams as wide as every output (V ** max_new_tokens), where beam search is exhaustive search; narrow
    # beams with and without <eos>; alpha 0, 0.6 and 1; one new token; a prompt that fills the context. "cache
    # enforced": the model refuses to read more than the prompt without its cache (PlainCausalAttention(T)).
    for vocab, layers, prompt, width, new, eos, alpha, enforced in [
            (4, 1, 2, 1, 5, None, 0.0, False), (5, 2, 3, 1, 6, 1, 0.0, True), (3, 1, 1, 27, 3, None, 0.0, False),
            (4, 2, 2, 64, 3, 1, 0.0, True), (4, 1, 2, 64, 3, 2, 1.0, False), (3, 2, 3, 81, 4, 0, 0.6, True),
            (6, 2, 4, 3, 6, 5, 0.0, True), (8, 1, 2, 4, 7, 3, 1.0, False), (7, 2, 5, 2, 5, None, 0.0, True),
            (10, 2, 3, 5, 6, 0, 0.6, False), (5, 1, 2, 8, 4, 4, 1.0, True), (6, 2, 3, 3, 1, 2, 0.0, False),
            (5, 2, 6, 3, 5, 0, 1.0, True), (6, 2, 2, 2, 6, 0, 0.0, False), (5, 2, 3, 4, 6, 3, 0.6, True),
            (8, 2, 3, 3, 6, None, 0.0, False), (6, 2, 2, 3, 5, 4, 1.0, True)]:
        context = prompt + new - 1 if prompt == 6 else prompt + new + 2  # the 6-token prompt: the whole context used
        model = _tiny_gpt(rng, vocab, context, 8, 2, layers, prompt if enforced else None)
        kwargs = {"alpha": alpha} if eos is None else {"eos": eos, "alpha": alpha}
        yield (model, rng.integers(0, vocab, size=prompt), width, new), kwargs
    # Three models (of 3000 seeds searched) where a finished hypothesis taking its place among the beam_width kept
    # changes the answer: a beam that keeps beam_width live ones besides the finished ones finds another output.
    # Three more (6 of the first 400 seeds do) where handing the live hypotheses the wrong cache rows when a finished
    # one ranks above a live one (the first len(live) parents of the top beam_width, not the live ones' own) changes
    # the output: the rows shift, and a live hypothesis continues from another's keys and values
    for seed in (209, 1442, 2639, 236, 337, 352):
        draw = np.random.default_rng(seed)
        vocab, width, new, prompt = (int(draw.integers(low, high)) for low, high in ((3, 7), (2, 5), (4, 8), (1, 4)))
        eos = int(draw.integers(vocab))
        model = _tiny_gpt(draw, vocab, prompt + new + 2, 8, 2, int(draw.integers(1, 3)), prompt_length=prompt)
        yield (model, draw.integers(0, vocab, size=prompt), width, new), {"eos": eos, "alpha": 1.0}


def _word(rng, symbols, longest):
    """A word of 1 to ``longest`` symbol ids below ``symbols``, as a list of Python ints."""
    return [int(i) for i in rng.integers(0, symbols, size=int(rng.integers(1, longest + 1)))]


def most_frequent_pair(rng):
    # Random tables (N words, ids below S, at most so many symbols, counts 1 to 5), words as tuples in one; then
    # cases that only the stated rules pass: ties (the smallest pair by id in the middle of the table, neither the
    # first nor the last seen, nor the largest, nor the smallest as text: (10, 3) < (2, 5) and (4, 11) < (4, 2)
    # as strings), pairs across words that would win if words ran together, counts that outweigh numbers of
    # words, the winner at the end of every word, runs of one symbol ("aaa" holds (a, a) twice), no pair at all
    for n, symbols, longest in [(6, 3, 5), (12, 4, 8), (25, 6, 6), (40, 5, 4), (15, 2, 8), (20, 14, 5)]:
        words = [_word(rng, symbols, longest) for _ in range(n)]
        counts = [int(c) for c in rng.integers(1, 6, size=n)]
        yield (words if symbols != 5 else [tuple(w) for w in words], counts), {}
    for pairs in [[(3, 4), (0, 5), (1, 2)], [(10, 3), (2, 5), (12, 1)], [(4, 9), (4, 2), (4, 11)],
                  [(13, 0), (6, 7), (9, 8), (11, 2)]]:
        count = int(rng.integers(1, 4))
        filler = [[int(rng.integers(0, 14))] for _ in range(3)]  # one-symbol words: no pair
        yield ([list(pair) for pair in pairs] + filler, [count] * (len(pairs) + 3)), {}
    for n in (5, 8):  # (0, 1) would win across words; inside them (5, 6) is the only pair, or (1, 3) ties (2, 0)
        yield ([[0], [1]] * n + [[5, 6]], [1] * (2 * n + 1)), {}
        yield ([[2, 0], [1, 3]] * n, [int(rng.integers(1, 3))] * (2 * n)), {}
    for rare in (3, 4):  # (0, 1) in many words of count 1; (2, 3) and (3, 4) in one word of a larger count
        yield ([[0, 1]] * rare + [[2, 3, 4]], [1] * rare + [rare + 2]), {}
    yield ([[5, 0, 1], [6, 0, 1], [2, 0, 1], [3, 4]], [1, 1, 1, 1]), {}  # the last pair of the words wins
    yield ([[3, 2], [7, 1, 3, 2], [0, 4, 3, 2], [9, 8, 4]], [2, 1, 1, 3]), {}
    yield ([[0, 0, 0, 0], [1, 2]], [2, 5]), {}  # (0, 0) three times per word: 6 against 5
    yield ([[1, 2], [3, 3, 3]], [1, 1]), {}  # (3, 3) twice against once
    yield ([[3], [4, 2], [1]], [2, 1, 5]), {}
    yield ([[7], [2], [0]], [1, 3, 2]), {}  # no word of two symbols: None
    yield ([[], [5], []], [4, 1, 1]), {}


def _merge_table(rng, alphabet: str, merges: int) -> tuple[dict, list[str]]:
    """``({(left, right): rank}, symbols)``: ``merges`` pairs of symbols, each merged symbol made of earlier ones, its
    ranks shuffled, so that a later rank may create a pair of an earlier rank (one pass over the ranks is then not
    enough); and every symbol, the alphabet's and the merged ones."""
    symbols, pairs = list(alphabet), []
    while len(pairs) < merges:
        pair = (symbols[int(rng.integers(len(symbols)))], symbols[int(rng.integers(len(symbols)))])
        if pair not in pairs and len(pair[0] + pair[1]) <= 4:
            pairs.append(pair)
            symbols.append(pair[0] + pair[1])
    return {pair: int(rank) for pair, rank in zip(pairs, rng.permutation(merges))}, symbols


def apply_merges(rng):
    # Merges learned by train_bpe from random tables, applied to words of the table and to new ones; merge tables
    # whose ranks are shuffled; then cases where a wrong order shows: the leftmost learned pair is not the lowest
    # rank, a merge creates (or re-creates) a pair of lower rank, runs of one symbol (leftmost occurrence first), the
    # only merge at the end of the word; one symbol, no symbol, no merge
    from course_lib.gpt.bpe import train_bpe

    for alphabet, size in [("ab", 8), ("abc", 12), ("abcd", 16), ("lowenstid", 30)]:
        table = {"".join(rng.choice(list(alphabet), size=int(rng.integers(1, 9)))): int(rng.integers(1, 6))
                 for _ in range(20)}
        _vocab, merges = train_bpe(table, size)
        ranks = {pair: rank for rank, pair in enumerate(merges)}
        for word in [*list(table)[:2], "".join(rng.choice(list(alphabet), size=10))]:
            yield (list(word), ranks), {}
    for alphabet, merges in [("ab", 6), ("abc", 10), ("xyz", 12)]:
        ranks, symbols = _merge_table(rng, alphabet, merges)
        for _ in range(3):  # the characters of merged symbols side by side, so that many merges apply
            yield (list("".join(symbols[int(i)] for i in rng.integers(0, len(symbols), size=4))), ranks), {}
    yield (list("bab"), {("a", "b"): 0, ("b", "ab"): 1, ("b", "a"): 2}), {}
    yield (list("cbabab"), {("a", "b"): 0, ("c", "b"): 3, ("b", "a"): 1, ("ab", "ab"): 2}), {}
    yield (list("abc"), {("a", "bc"): 0, ("b", "c"): 1}), {}
    yield (list("xabcy"), {("x", "abc"): 0, ("a", "bc"): 1, ("b", "c"): 2, ("abc", "y"): 3}), {}
    yield (list("abab"), {("ab", "ab"): 0, ("a", "b"): 1}), {}  # (ab, ab) appears only after the later (a, b)
    yield (list("aaaa"), {("aa", "aa"): 0, ("a", "a"): 1}), {}
    yield (list("aaaaa"), {("a", "a"): 0}), {}
    yield (list("aaa"), {("a", "a"): 0, ("a", "aa"): 1}), {}
    yield (list("xyz"), {("y", "z"): 0}), {}
    yield (["lo", "w", "e", "s", "t"], {("e", "s"): 0, ("es", "t"): 1, ("lo", "w"): 2}), {}
    yield (["a"], {("a", "a"): 0}), {}
    yield ([], {("a", "b"): 0}), {}
    yield (list("hello"), {}), {}


GENERATORS = {
    "gpt.causal_attention.causal_self_attention": causal_self_attention,
    "gpt.filters.temperature_top_k": temperature_top_k,
    "gpt.filters.top_p_filter": top_p_filter,
    "gpt.beam.beam_search": gpt_beam_search,
    "gpt.bpe.most_frequent_pair": most_frequent_pair,
    "gpt.bpe.apply_merges": apply_merges,
}

GRADIENTS = {
    "gpt.causal_attention.causal_self_attention": (0, 1, 2, 3, 4),  # x and every weight; the cache is a pair
}

HINTS: dict[str, str] = {
    "gpt.causal_attention.causal_self_attention":
        "Put the cached keys and values before the new ones along the positions (torch.cat on dim 2, never into the "
        "cache itself), attend with causal_mask_after(P, T), so that new position i sees the keys up to P + i, and "
        "return the projected output with the new cache (keys, values) of all P + T positions.",
    "gpt.filters.temperature_top_k":
        "Divide by the temperature, then set to -inf, in a new tensor, every logit below the k-th largest of its row "
        "(topk(k).values[..., -1:]), so that ties with the k-th are kept, and keep every token when k is None or k >= V.",
    "gpt.filters.top_p_filter":
        "Keep token v when the tokens strictly more probable than v hold less than p of the softmax's mass (so the "
        "top token and every token tied with the least probable kept one stay), and return the logits themselves "
        "with the others set to -inf.",
    "gpt.beam.beam_search":
        "Read the prompt once, then run the K live hypotheses' last tokens as one (K, 1) batch with the cache "
        "reordered by their parents (reorder_cache), keep the beam_width best of all K x V extensions by total "
        "log-probability (finished ones take a place too), and divide by len(tokens) ** alpha only to choose among "
        "finished hypotheses.",
    "gpt.bpe.most_frequent_pair":
        "Count every adjacent pair inside each word (a run like aaa holds (a, a) twice, and no pair crosses from one "
        "word to the next), weighted by the word's count, and break ties by the smallest ids: min over (-count, pair).",
    "gpt.bpe.apply_merges":
        "On a copy of the symbols, merge again and again the adjacent pair of lowest rank among all pairs now present "
        "(its leftmost occurrence), looking at the whole word again after every merge, until no pair has a rank.",
}

TORCH = {'gpt.causal_attention.causal_self_attention',
         'gpt.filters.temperature_top_k',
         'gpt.filters.top_p_filter',
         'gpt.beam.beam_search'}
