"""Hidden cases of ps02_word2vec: skip-gram with negative sampling (chapter 2).

Generators (inputs only, no answers), and the registries that :mod:`course_tools.authoring.cases` merges:
see its docstring for what each one means.
"""

from __future__ import annotations

import numpy as np


def skipgram_pairs(rng):
    # (0, 3) and (1, 4): documents with no pairs at all (the result is still two int64 arrays)
    for case, (length, window) in enumerate([(1, 2), (2, 1), (9, 3), (25, 5), (6, 10), (40, 2), (0, 3), (1, 4),
                                             (12, 1)]):
        ids = rng.integers(0, 30, size=length)
        if case % 2:  # dynamic windows, drawn as the docstring says
            yield (ids, window, np.random.default_rng(int(rng.integers(1000)))), {}
        else:
            yield (ids, window), {}


def sgns_loss_and_grads(rng):
    for b, k, d in [(1, 1, 1), (3, 2, 4), (8, 5, 10), (16, 3, 7)]:
        scale = rng.uniform(0.1, 3.0)
        yield (rng.normal(size=(b, d)) * scale, rng.normal(size=(b, d)), rng.normal(size=(b, k, d))), {}
    # Dot products beyond +-745, where exp overflows and sigma underflows in float64: the loss must stay finite.
    yield (np.full((2, 3), 20.0), np.full((2, 3), -20.0), np.full((2, 2, 3), 20.0)), {}  # u.v = -1200, u_k.v = 1200
    center, context, negatives = rng.normal(size=(4, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3, 5))
    center[0], context[0] = 15.0, -12.0  # u_o.v = -900 for pair 0
    center[2], negatives[2, 1] = 14.0, 12.0  # u_k.v = 840 for pair 2, noise word 1
    yield (center, context, negatives), {}
    center, context, negatives = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2, 4))
    context[1], negatives[1, 0] = center[1] * -1000 / np.sum(center[1] ** 2), center[1] * 800 / np.sum(center[1] ** 2)
    yield (center, context, negatives), {}  # u_o.v = -1000, u_k.v = 800 for pair 1


def numerical_gradient(rng):
    from course_lib.vectors.gradcheck import SmoothLoss

    # (shape, memory order, the loss reads x in place, eps): functions of their argument, as in the visible tests,
    # and losses that ignore it and read the array they hold, x itself (as a model's loss reads its parameters: the
    # docstring allows it), where a gradient taken on perturbed copies of x is 0; arrays in Fortran order (a
    # transposed weight), of which x.reshape(-1) or x.ravel() is a copy, not a view, so that perturbing it leaves x
    # as it was; a 0-d array; steps eps given by the caller, where the central difference of w ** 3 and w ** 4 differs
    # from the derivative. The loss holds the very array passed as x: pickling and copying a case keep them one.
    for shape, order, in_place, eps in [
            ((3,), "C", False, None), ((2, 3), "C", False, None), ((4, 1, 3), "C", False, None),
            ((2, 3), "C", True, None), ((3, 1, 2), "C", True, None), ((5,), "C", True, None),
            ((3, 4), "F", False, None), ((2, 3, 2), "F", True, None), ((4, 2), "F", False, 1e-2),
            ((3, 2), "C", False, 3e-2), ((2, 2), "C", True, 1e-1), ((), "C", True, None)]:
        x = np.asarray(rng.normal(size=shape), order=order)  # (shape) float64
        loss = SmoothLoss(rng.normal(size=shape), float(rng.normal()) * 0.5, weights=x if in_place else None)
        yield (loss, x), ({} if eps is None else {"eps": eps})


def procrustes(rng):
    for n, d in [(5, 2), (30, 4), (100, 8), (12, 12), (9, 3)]:
        source = rng.normal(size=(n, d))
        rotation, _ = np.linalg.qr(rng.normal(size=(d, d)))
        yield (source, source @ rotation.T + rng.normal(size=(n, d)) * rng.uniform(0, 0.5)), {}


def _negative_samples_property(case, value) -> str | None:
    """negative_samples draws at random: any correct sampler passes, whatever its draws."""
    noise, size = np.asarray(case["args"][0], dtype=np.float64), case["args"][1]
    draws = np.asarray(value)
    if draws.shape != tuple(np.atleast_1d(size)):
        return f"the draws have shape {draws.shape}, expected {tuple(np.atleast_1d(size))}"
    if draws.dtype.kind not in "iu":
        return f"the draws have dtype {draws.dtype}: word ids are integers"
    if draws.size and (draws.min() < 0 or draws.max() >= len(noise)):
        return "some draws are not word ids of the noise distribution"
    frequencies = np.bincount(draws.ravel(), minlength=len(noise)) / max(draws.size, 1)
    if np.any(frequencies[noise == 0] > 0):
        return "a word of probability 0 was drawn"
    allowed = max(0.01, 2.5 / np.sqrt(max(draws.size, 1)))  # about 5 standard deviations of a frequency
    if draws.size >= 1000 and np.max(np.abs(frequencies - noise / noise.sum())) > allowed:
        return f"the draws do not follow the noise distribution (frequencies off by more than {allowed:.2g})"
    return None


GENERATORS = {
    "vectors.word2vec.skipgram_pairs": skipgram_pairs,
    "vectors.word2vec.sgns_loss_and_grads": sgns_loss_and_grads,
    "vectors.gradcheck.numerical_gradient": numerical_gradient,
    "vectors.alignment.procrustes": procrustes,
}

HINTS: dict[str, str] = {
    "vectors.word2vec.skipgram_pairs":
        "Pair each center only with positions inside the document at distance 1 to b_i, with all T "
        "dynamic windows drawn by one rng.integers(1, window + 1, size=T), and return int64 arrays even "
        "when there is no pair.",
    "vectors.word2vec.negative_samples":
        "Draw word w with probability noise[w] exactly as given (it is already smoothed: no second "
        "power 3/4), with rng only, and return integer ids.",
    "vectors.word2vec.sgns_loss_and_grads":
        "Compute -log sigma(x) as np.logaddexp(0, -x): np.log(sigmoid(x)) gives -inf once a dot product "
        "is below about -745, and both the loss and the gradients are averaged over the batch.",
    "vectors.gradcheck.numerical_gradient":
        "Change x itself one entry at a time (f may read x in place, so f of a perturbed copy can miss the change, "
        "and x.reshape(-1) of a transposed x is a copy), take (f(x) at x[i] + eps minus f(x) at x[i] - eps) / (2 eps), "
        "and put x[i] back to its value after probing it.",
    "vectors.alignment.procrustes":
        "Take the SVD of target.T @ source (the SVD of source.T @ target gives R transposed) and "
        "return U @ Vt without the singular values.",
}

PROPERTIES = {'vectors.word2vec.negative_samples': _negative_samples_property}
