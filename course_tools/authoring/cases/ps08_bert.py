"""Hidden cases of ps08_bert: WordPiece, BERT's embeddings, self-attention, pooling and masking (chapter 8).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np

from .common import key_mask


# ps08: BERT. wordpiece_word gets small vocabularies written for each case; mlm_mask draws at random and is judged
# by _mlm_mask_property (its cases hold torch tensors and a torch.Generator, never the reference's draws).
def _vocab(*tokens):
    """A vocabulary (token -> id) of the given tokens, in this order, after ``[UNK]``."""
    return {token: i for i, token in enumerate(("[UNK]", *tokens))}


def wordpiece_word(rng):
    pieces = _vocab("un", "##aff", "##able", "a", "##a", "b", "##b", "ab", "##ab", "##c")
    # (word, vocab, kwargs): continuations; whole word in the vocabulary; a piece missing at the start, in the middle
    # and at the end (the whole word is [UNK], never the pieces found so far); the longest match first
    # ("bank" + "##ing", not "b" + "##an" + ...), and no backtracking when the longest prefix leads nowhere
    # ("ab" then nothing, although "a" + "##bcd" would do); "##" only on continuations; max_chars: words of exactly
    # max_chars and max_chars + 1 characters (default 100 too); single characters; the empty word; unicode; another
    # unk_token
    longest = _vocab("b", "ba", "ban", "bank", "##a", "##an", "##k", "##i", "##in", "##ing", "##n", "##g", "##s")
    fixed = [
        ("unaffable", pieces, {}), ("unaffablec", pieces, {}), ("ab", pieces, {}), ("abab", pieces, {}),
        ("unaffablex", pieces, {}), ("xunaffable", pieces, {}), ("unxaffable", pieces, {}),
        ("banking", longest, {}), ("banks", longest, {}), ("bankings", longest, {}), ("bang", longest, {}),
        ("abcd", _vocab("ab", "a", "##bcd", "##b"), {}), ("abcd", _vocab("ab", "a", "##bc", "##d"), {}),
        ("abcd", _vocab("a", "##b", "##bcd", "##c", "##d"), {}),
        ("ab", _vocab("##ab", "a", "##b"), {}), ("ab", _vocab("##ab", "##a", "##b"), {}),
        ("aaaaa", pieces, {"max_chars": 5}), ("aaaaaa", pieces, {"max_chars": 5}),
        ("ab" * 50, pieces, {}), ("ab" * 50 + "a", pieces, {}), ("ab" * 50 + "c", pieces, {"max_chars": 101}),
        ("a", pieces, {"max_chars": 1}), ("ab", pieces, {"max_chars": 1}),
        ("a", pieces, {}), ("c", pieces, {}), ("z", pieces, {}), ("", pieces, {}), ("", pieces, {"max_chars": 0}),
        ("naïve", _vocab("na", "##ï", "##ve", "##i"), {}), ("café", _vocab("caf", "##é", "cafe"), {}),
        ("café", _vocab("caf", "##e", "cafe"), {}), ("日本語", _vocab("日", "##本", "##語", "本"), {}), ("🙂", pieces, {}),
        ("straße", _vocab("stra", "##ße", "##ss"), {}),
        ("unaffablex", pieces, {"unk_token": "<unk>"}), ("xyz", _vocab("x", "##y"), {"unk_token": "[UNK]"}),
    ]
    for word, vocab, kwargs in fixed:
        yield (word, dict(vocab)), kwargs
    # Random vocabularies of short pieces over a small alphabet, and random words: most cut, some [UNK]
    alphabet = np.array(list("abcde"))
    for size, length in [(12, 6), (20, 9), (30, 12), (16, 4), (40, 15), (25, 7)]:
        tokens = set()
        while len(tokens) < size:
            piece = "".join(rng.choice(alphabet, size=int(rng.integers(1, 4))))
            tokens.add(piece if rng.random() < 0.4 else "##" + piece)
        tokens |= {"a", "##a", "##b"}  # at least some words can be cut
        vocab = _vocab(*sorted(tokens))
        for _ in range(3):
            yield ("".join(rng.choice(alphabet, size=int(rng.integers(1, length + 1)))), vocab), {}


def bert_embeddings(rng):
    # (B, T, V, D, positions, segments, scale, eps, dtype): one token; T below the positions; pairs (segment 0 then 1)
    # and all segment 1; eps given; tiny vectors whose variance is far below 1e-5, where eps = 1e-12 (not torch's
    # default 1e-5) decides the result; float32
    for b, t, v, d, positions, segments, scale, eps, dtype in [
            (1, 1, 3, 2, 1, "zero", 1.0, None, np.float64), (2, 5, 11, 8, 9, "pair", 1.0, None, np.float64),
            (3, 4, 7, 6, 4, "one", 0.5, None, np.float64), (4, 6, 20, 12, 16, "pair", 2.0, 1e-3, np.float64),
            (2, 3, 5, 4, 8, "random", 1e-4, None, np.float64), (3, 7, 9, 8, 12, "pair", 3e-5, None, np.float64),
            (1, 8, 30, 16, 10, "pair", 1.0, None, np.float64), (2, 4, 6, 8, 6, "random", 1.0, None, np.float32),
            (3, 5, 9, 8, 7, "pair", 1.0, None, np.float32),
            (5, 2, 4, 3, 2, "one", 1.0, 1e-5, np.float64)]:
        ids = rng.integers(0, v, size=(b, t))
        if segments == "zero":
            segs = np.zeros((b, t), dtype=np.int64)
        elif segments == "one":
            segs = np.ones((b, t), dtype=np.int64)
        elif segments == "pair":  # [CLS] a [SEP] in segment 0, b [SEP] in segment 1
            segs = (np.arange(t)[None, :] >= rng.integers(1, t + 1, size=b)[:, None]).astype(np.int64)
        else:
            segs = rng.integers(0, 2, size=(b, t))
        weights = [rng.normal(size=(n, d)) * scale for n in (v, 2, positions)]
        args = (ids, segs, *[w.astype(dtype) for w in weights], (rng.normal(size=d) + 1).astype(dtype),
                rng.normal(size=d).astype(dtype))
        yield args, ({} if eps is None else {"eps": eps})


def bert_self_attention(rng):
    import functools

    import torch

    # (B, T, D, nh, padding, dropout, dtype): one token and one head; padding at the end of some rows (the first
    # row full), anywhere, or none (None); heads of size 1; a dropout callable that halves every weight or that
    # zeroes a fixed pattern and doubles the rest (the output must use it, the returned weights must not);
    # float32. Dropout stands for nn.Dropout: a function of the (B, nh, T, T) weights.
    for b, t, d, nh, kind, dropout, dtype in [
            (1, 1, 2, 1, None, None, np.float64), (2, 5, 8, 2, "padding", None, np.float64),
            (3, 4, 12, 3, "padding", None, np.float64), (2, 6, 8, 4, None, None, np.float64),
            (2, 5, 6, 6, "padding", None, np.float64), (4, 7, 16, 4, "any", None, np.float64),
            (3, 6, 8, 2, "padding", "half", np.float64), (2, 5, 8, 4, "padding", "pattern", np.float64),
            (2, 4, 8, 2, None, "pattern", np.float64), (1, 3, 4, 1, None, "half", np.float64),
            (2, 6, 8, 2, "padding", None, np.float32), (3, 5, 8, 4, "any", "pattern", np.float64),
            (3, 4, 8, 4, "padding", "pattern", np.float32)]:
        x = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 2.0)
        weights = []
        for _ in range(3):
            weights += [rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.5]
        padding = None if kind is None else key_mask(rng, b, t, contiguous=kind == "padding")
        kwargs = {}
        if dropout == "half":
            kwargs["dropout"] = functools.partial(torch.mul, other=0.5)
        elif dropout == "pattern":
            keep = torch.from_numpy((rng.random((b, nh, t, t)) < 0.6) * 2.0).to(getattr(torch, np.dtype(dtype).name))
            kwargs["dropout"] = functools.partial(torch.mul, other=keep)
        yield (x.astype(dtype), padding, *[w.astype(dtype) for w in weights], nh), kwargs
    # Scores of tens of thousands. Where padded keys score far above the real ones, adding -1e4 to their scores
    # (instead of -inf) leaves them most of the weight; where every real key scores far below -1e4, setting the
    # padded scores to -1e4 does. The weights of padded keys must be exactly 0.
    for b, t, d, nh, sign in [(2, 5, 4, 2, 1.0), (3, 4, 6, 1, 1.0), (2, 5, 6, 1, -1.0), (3, 4, 4, 2, -1.0)]:
        x = np.abs(rng.normal(size=(b, t, d))) + 0.5  # positive: the sign of every product is the sign of W_K
        if sign > 0:
            x[:, -1] = 200.0  # the padded last key: scores near 3e4 against ~200 for the real ones
        else:
            x *= 15.0  # every score below about -1e4
        padding = key_mask(rng, b, t)
        padding[:, -1] = False  # the last key is padding in every row
        yield (x, padding, np.eye(d) * 10, np.zeros(d), np.eye(d) * 10 * sign, np.zeros(d), rng.normal(size=(d, d)),
               rng.normal(size=d), nh), {}


def mean_pool(rng):
    # (B, T, D, padding, garbage, dtype): one token; padding at the end of some rows (the first full); large values
    # in the padded positions, which must count for nothing; rows with a single real token; no padding; padding
    # anywhere; float32
    for b, t, d, kind, garbage, dtype in [
            (1, 1, 3, "none", False, np.float64), (2, 5, 4, "padding", False, np.float64),
            (3, 6, 8, "padding", True, np.float64), (4, 7, 5, "single", True, np.float64),
            (2, 4, 3, "none", False, np.float64), (3, 8, 6, "any", True, np.float64),
            (2, 5, 16, "padding", True, np.float32), (5, 3, 2, "single", False, np.float64),
            (3, 6, 4, "any", True, np.float32)]:
        hidden = rng.normal(size=(b, t, d)) * rng.uniform(0.5, 3)
        if kind == "none":
            padding = np.ones((b, t), dtype=bool)
        elif kind == "single":  # the first row full, the others a single real token (at the start or anywhere)
            padding = np.zeros((b, t), dtype=bool)
            padding[0] = True
            padding[np.arange(1, b), rng.integers(0, t, size=b - 1)] = True
            padding[1, 1:] = False
            padding[1, 0] = True
        else:
            padding = key_mask(rng, b, t, contiguous=kind == "padding")
        if garbage:
            hidden[~padding] = rng.normal(size=(int((~padding).sum()), d)) * 1e6
        yield (hidden.astype(dtype), padding), {}


def mlm_mask(rng):
    import torch

    # (B, T, V, special ids, mask id, probability, ids): the specials of a tiny vocabulary first, or scattered as in
    # BERT's ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); rows that start with [CLS], end with [SEP] and are
    # padded; words drawn uniformly or very unevenly (the random replacements must still be uniform over the
    # non-special ids); probability 0, 0.15, 0.5 and 1; a batch of specials only; one token; 3 and 2 non-special ids,
    # where a random token is often the original one (a draw from the other ids only is not uniform). Every case has
    # its own torch.Generator (a random function is judged by a property, never by the reference's draws).
    bert = (0, 100, 101, 102, 103)
    for b, t, v, specials, mask_id, p, words in [
            (64, 128, 30, (0, 1, 2, 3, 4), 4, 0.15, "uniform"), (48, 96, 12, (0, 5, 6, 7, 8), 8, 0.5, "uniform"),
            (32, 64, 130, bert, 103, 0.15, "uniform"), (40, 100, 20, (0, 1, 2, 3), 3, 1.0, "zipf"),
            (16, 32, 25, (0, 1, 2, 3, 4), 4, 0.0, "uniform"), (64, 64, 9, (2, 4, 6, 8), 4, 0.3, "zipf"),
            (50, 80, 30522, bert, 103, 0.15, "uniform"), (8, 12, 10, (0, 1, 2, 3, 4), 4, 0.15, "specials"),
            (1, 1, 6, (0, 1), 1, 0.15, "uniform"), (24, 40, 15, (14, 13, 12, 11), 13, 1.0, "uniform"),
            (100, 100, 7, (0, 1, 2, 3), 3, 1.0, "uniform"), (128, 96, 6, (5, 0, 2, 4), 0, 0.5, "uniform")]:
        pad, cls, sep = (specials[0], specials[2], specials[3]) if len(specials) >= 4 else (specials[0],) * 3
        candidates = np.array([i for i in range(v) if i not in specials])
        if words == "zipf":
            chance = 1.0 / np.arange(1, len(candidates) + 1) ** 1.5
            ids = rng.choice(candidates, size=(b, t), p=chance / chance.sum())
        elif words == "specials":
            ids = rng.choice(np.array(specials), size=(b, t))
        else:
            ids = rng.choice(candidates, size=(b, t))
        if t >= 4 and words != "specials":
            lengths = rng.integers(t // 2, t + 1, size=b)
            lengths[0] = t
            ids[:, 0] = cls
            ids[np.arange(b), lengths - 1] = sep
            ids[np.arange(t)[None, :] >= lengths[:, None]] = pad
        generator = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
        special_ids = list(specials) if b % 2 else tuple(specials)
        yield (torch.from_numpy(ids.astype(np.int64)), special_ids, mask_id, v), {"probability": p,
                                                                                  "generator": generator}


def _off(count, total, probability, tail=3e-7):
    """Whether ``count`` successes in ``total`` draws of chance ``probability`` are too few or too many: a binomial
    tail below ``tail`` on either side (3e-7: about 5 standard deviations where the normal approximation holds).
    ``count`` and ``probability`` may be arrays (one answer per entry)."""
    from scipy.stats import binom

    off = (binom.cdf(count, total, probability) < tail) | (binom.sf(np.subtract(count, 1), total, probability) < tail)
    return off if np.ndim(off) else bool(off)


def _spread(counts, totals, probability, tail=1e-12) -> str | None:
    """Whether per-row counts of independent choices are spread too evenly or too unevenly; ``None`` if not.

    Row ``r`` made ``counts[r]`` of ``totals[r]`` choices, each with chance ``probability``, independently, so its
    count is binomial and ``Y_r = (counts[r] - totals[r] p) ** 2 / (totals[r] p (1 - p))`` has mean 1. Their sum ``D``
    over the rows is tested on both sides with Chernoff bounds computed exactly from the binomial laws,
    ``P(D <= d) <= exp(l d) prod_r E[exp(-l Y_r)]`` and ``P(D >= d) <= exp(-l d) prod_r E[exp(l Y_r)]`` for every
    ``l > 0`` (the smallest over a grid of ``l`` is taken): the spread is off when a bound is below ``tail``, so a
    correct answer fails each side with probability below ``tail`` (1e-12), whatever its seed. Exactly
    ``round(p n)`` choices per row give ``D`` near 0 (far too even); choosing whole rows, far too uneven.
    """
    from scipy.special import logsumexp
    from scipy.stats import binom

    totals, counts = np.asarray(totals), np.asarray(counts)
    used = totals > 0
    if not 0 < probability < 1 or used.sum() < 2:
        return None
    totals, counts = totals[used], counts[used]
    variance = totals * probability * (1 - probability)
    d = float(np.sum((counts - totals * probability) ** 2 / variance))
    rates = np.concatenate([-np.logspace(-3, 2, 60), np.logspace(-4, 0.5, 60)])  # l of each side: -l and +l
    log_moments = np.zeros_like(rates)  # sum_r log E[exp(rate Y_r)], rows grouped by their total
    for n, rows in zip(*np.unique(totals, return_counts=True)):
        k = np.arange(n + 1)
        y = (k - n * probability) ** 2 / (n * probability * (1 - probability))  # (n + 1,)
        log_moments += rows * logsumexp(rates[:, None] * y[None, :] + binom.logpmf(k, n, probability)[None, :], axis=1)
    log_bounds = log_moments - rates * d  # log exp(l d) E[exp(-l Y)] on the low side, exp(-l d) E[exp(l Y)] above
    if log_bounds[rates < 0].min() < np.log(tail):
        return "too evenly"
    if log_bounds[rates > 0].min() < np.log(tail):
        return "too unevenly"
    return None


def _mlm_mask_property(case, value) -> str | None:
    """mlm_mask draws at random: any correct corruption passes, whatever its draws and their order.

    Exact rules: two int64 tensors of the shape of ``ids``; labels -100 where a position is not chosen and the
    original id where it is; specials never chosen; unchosen positions unchanged; chosen ones become ``[MASK]``, a
    non-special id or stay; probability 0 chooses nothing and 1 every non-special position. Counts (binomial tails
    of at least 3e-7, about 5 standard deviations): the share chosen, the shares masked, replaced and kept among the
    chosen, how often two neighbours are both chosen and two successive chosen positions both escape [MASK] (no
    pattern of positions), and how often each non-special id comes up as a replacement (uniform over them). The spread
    of the rows' counts of chosen positions and of [MASK] among them (:func:`_spread`: a fixed number per row, or a
    chance that varies by row, fails; a correct answer fails it with probability below 4e-12 per case, two counts
    with two sides each, whatever its seed). What one call cannot show is whether the draws came from ``generator``:
    an answer that draws from a generator of its own with a fixed seed passes here (the probe's second call, with the
    same seed, only catches torch's global one).
    """
    from course_tools.authoring.plain_values import Tensor

    names = ("ids", "special_ids", "mask_id", "vocab_size", "probability", "generator")
    given = {"probability": 0.15, **dict(zip(names, case["args"])), **case.get("kwargs", {})}
    ids = np.asarray(given["ids"])
    specials = sorted({int(i) for i in given["special_ids"]})
    mask_id, vocab_size, probability = int(given["mask_id"]), int(given["vocab_size"]), float(given["probability"])
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return "should return the pair (inputs, labels)"
    for name, x in zip(("inputs", "labels"), value):
        if not isinstance(x, Tensor):
            return f"{name} should be a torch tensor"
        if x.shape != ids.shape:
            return f"{name} has shape {x.shape}, expected the shape of ids, {ids.shape}"
        if x.dtype != np.int64:
            return f"{name} has dtype {x.dtype}, expected int64"
    inputs, labels = (np.asarray(x) for x in value)
    special = np.isin(ids, specials)
    chosen = labels != -100  # -100: the label of a position that is not predicted
    if np.any(chosen & special):
        return "chooses special tokens (their labels must be -100)"
    if np.any(labels[chosen] != ids[chosen]):
        return "gives chosen positions labels other than their original ids"
    if np.any(inputs[~chosen] != ids[~chosen]):
        return "changes positions that were not chosen (label -100)"
    masked = chosen & (inputs == mask_id)
    replaced = chosen & ~masked & (inputs != ids)
    kept = chosen & (inputs == ids)
    drawn = inputs[chosen & ~masked]
    if np.any((drawn < 0) | (drawn >= vocab_size)) or np.any(np.isin(drawn, specials)):
        return "puts special tokens or ids outside [0, vocab_size) at chosen positions (random tokens are " \
               "non-special ids)"
    total, count = int((~special).sum()), int(chosen.sum())
    if probability == 0 and count:
        return "chooses positions with probability 0"
    if probability == 1 and count != total:
        return "leaves non-special positions unchosen with probability 1"
    candidates = np.setdiff1d(np.arange(vocab_size), specials)
    same = 1 / max(len(candidates), 1)  # a random token may be the original one
    if _off(count, total, probability):
        return f"chooses {count} of {total} non-special positions, too far from the probability {probability}"
    for what, positions, share in (("[MASK]", masked, 0.8), ("a random token", replaced, 0.1 * (1 - same)),
                                   ("their own token", kept, 0.1 + 0.1 * same)):
        if _off(int(positions.sum()), count, share):
            return f"gives {int(positions.sum())} of {count} chosen positions {what}, too far from {share:.3g} of them"
    # No pattern of positions: in disjoint neighbours (t, t + 1), t even, both non-special, both are chosen with
    # probability p ** 2 (every k-th position has the right share but never, or always, two neighbours); in disjoint
    # pairs of successive chosen positions (in reading order), neither is [MASK] with probability 0.2 ** 2 (fates dealt in
    # turn, 8 [MASK] then 1 then 1, make it 0.2). Draws in any order, per position or only at the chosen ones, and
    # exact shares dealt by a random permutation all pass.
    pairs = ~special[:, 0:-1:2] & ~special[:, 1::2]
    both = int((pairs & chosen[:, 0:-1:2] & chosen[:, 1::2]).sum())
    if 0 < probability < 1 and _off(both, int(pairs.sum()), probability ** 2):
        return f"chooses positions in a pattern: of {int(pairs.sum())} disjoint pairs of neighbouring non-special " \
               f"positions, {both} are both chosen, too far from {probability ** 2:.3g} of them (choose each " \
               f"position independently, with the generator)"
    unmasked = inputs[chosen] != mask_id  # the chosen positions in reading order
    half = len(unmasked) // 2
    neither = int((unmasked[0:2 * half:2] & unmasked[1:2 * half:2]).sum())
    if _off(neither, half, 0.2 ** 2):
        return f"gives the chosen positions their fate in a pattern: of {half} disjoint pairs of successive chosen " \
               f"positions, {neither} have no [MASK], too far from 0.04 of them (draw each fate independently)"
    # The spread, not only the mean: the rows' counts of chosen positions (of their non-special ones), and of
    # [MASK] (of their chosen ones), vary as independent binomial counts do (a fixed number per row does not)
    rows = ids.reshape(-1, ids.shape[-1]) if ids.ndim else ids.reshape(1, 1)
    special_rows, chosen_rows, masked_rows = (a.reshape(rows.shape) for a in (special, chosen, masked))
    for what, made, out_of, share in (("chooses positions", chosen_rows, ~special_rows, probability),
                                      ("gives [MASK] to chosen positions", masked_rows, chosen_rows, 0.8)):
        off = _spread(made.sum(axis=1), out_of.sum(axis=1), share)
        if off:
            fixed = "not a fixed number per row" if off == "too evenly" else "with the same chance in every row"
            return f"{what} {off} across the rows: their counts per row vary {'less' if fixed[0] == 'n' else 'more'} " \
                   f"than independent draws with chance {share:.3g} do (draw each position independently, {fixed})"
    if 1 < len(candidates) <= 1000:
        # a replaced position holds any id but its original, uniformly: id v with share (1 - q_v) / (N - 1),
        # q_v the share of v among the chosen positions' originals
        originals = np.bincount(ids[chosen], minlength=vocab_size)[candidates] / max(count, 1)
        drawn_counts = np.bincount(inputs[replaced], minlength=vocab_size)[candidates]
        uneven = np.flatnonzero(_off(drawn_counts, int(replaced.sum()), (1 - originals) / (len(candidates) - 1),
                                     tail=1e-9))  # 1e-9: up to 1000 ids, one test each
        if uneven.size:
            v, n = candidates[uneven[0]], int(drawn_counts[uneven[0]])
            return f"draws the random tokens unevenly (id {v} {n} times of {int(replaced.sum())}): " \
                   f"draw them uniformly from the non-special ids"
    return None


def _mlm_mask_varies(case) -> bool:
    """At least 40 positions are chosen on average, so two correct draws with different seeds all but never agree."""
    args, kwargs = case["args"], case.get("kwargs", {})
    ids, special_ids = args[0], args[1]
    probability = args[4] if len(args) > 4 else kwargs.get("probability", 0.15)
    eligible = int((~np.isin(np.asarray(ids), np.asarray(list(special_ids)))).sum())
    return eligible * float(probability) >= 40


GENERATORS = {
    "bert.wordpiece.wordpiece_word": wordpiece_word,
    "bert.embeddings.bert_embeddings": bert_embeddings,
    "bert.self_attention.bert_self_attention": bert_self_attention,
    "bert.pooling.mean_pool": mean_pool,
    "bert.masking.mlm_mask": mlm_mask,
}

GRADIENTS = {
    "bert.embeddings.bert_embeddings": (2, 3, 4, 5, 6),  # the three tables and the LayerNorm's weight and bias
    # x and every weight but b_k: adding b_k adds q . b_k to every score of a row, which the softmax ignores, so its
    # gradient is 0 up to rounding, and comparing rounding errors would judge nothing
    "bert.self_attention.bert_self_attention": (0, 2, 3, 4, 6, 7),
    "bert.pooling.mean_pool": (0,),
}

HINTS: dict[str, str] = {
    "bert.wordpiece.wordpiece_word":
        "At each step take the longest piece that is in the vocabulary (try the end from the word's end down), write "
        "every piece after the first as '##' + piece, and return [unk_token] alone (not the pieces found so far) as "
        "soon as no piece fits, or when the word has more than max_chars characters.",
    "bert.embeddings.bert_embeddings":
        "Add token_weight[ids], segment_weight[segments] and the first T rows of position_weight (the same rows for "
        "every sequence of the batch), then normalise over the last axis with layer_norm and the eps given (BERT's "
        "1e-12, not torch's default 1e-5).",
    "bert.self_attention.bert_self_attention":
        "Project x by each (D, D) weight transposed plus its bias, split the heads with split_heads, divide the scores "
        "by sqrt(hs) and set those of padded keys (padding[:, None, None, :] False) to -inf before one softmax over "
        "the keys, average V with dropout(weights) but return the weights before dropout, and merge the heads "
        "without any output projection.",
    "bert.pooling.mean_pool":
        "Multiply the vectors by the padding mask as floats, (B, T, 1), sum over the positions and divide by each "
        "row's own number of real tokens, padding.sum(dim=1), in new tensors (padded vectors may hold anything).",
    "bert.masking.mlm_mask":
        "Choose each non-special position with the probability given, give a chosen one [MASK] with probability 0.8 "
        "and a uniformly drawn non-special id with probability 0.1 (else its own token), label it with its original "
        "id and every other position -100, and draw everything from the generator given.",
}

TORCH = {'bert.embeddings.bert_embeddings',
         'bert.self_attention.bert_self_attention',
         'bert.pooling.mean_pool'}

PROPERTIES = {'bert.masking.mlm_mask': _mlm_mask_property}

VARIES = {'bert.masking.mlm_mask': _mlm_mask_varies}
