"""Chapter 3, recurrent neural networks: the n-gram language model an RNN has to beat.

An n-gram model predicts a token from the ``n - 1`` tokens before it and nothing
else, with probabilities read off counts in the training text. Most longer
contexts are rare or never seen, so the counts are *smoothed*: interpolated
absolute discounting (Ney, Essen and Kneser, 1994) takes a fixed amount ``D``
off every seen count and gives the mass it frees to the model of the next lower
order, down to the uniform distribution. Interpolated Kneser-Ney (Kneser and
Ney, 1995; compared with the other methods by Chen and Goodman, 1999) is the
same recursion whose lower orders count, instead of occurrences, the number of
different tokens that precede an n-gram.

Counts are kept as sorted numpy arrays of n-gram codes (an n-gram of ids
``w_1 .. w_k`` is the integer ``sum_i w_i V^(k - i)``), so fitting and scoring a
few hundred thousand characters takes well under a second.
See :doc:`/chapters/ch03_rnn`.
"""

from __future__ import annotations

import math

import numpy as np

from course_lib import checks


def _codes(ids: np.ndarray, length: int, vocab_size: int) -> np.ndarray:
    """``(N,)`` codes of the ``length`` ids ending at each position; -1 where fewer precede it."""
    codes = np.zeros(len(ids), dtype=np.int64)  # (N,) the empty n-gram has code 0
    for shift in range(length - 1, -1, -1):  # oldest id first, most significant
        codes[shift:] = codes[shift:] * vocab_size + ids[:max(len(ids) - shift, 0)]
    codes[:max(length - 1, 0)] = -1
    return codes


def _lookup(keys: np.ndarray, table: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` of ``keys`` in the sorted ``table``, 0 for keys it does not hold."""
    if len(table) == 0:
        return np.zeros(len(keys), dtype=values.dtype)
    index = np.minimum(np.searchsorted(table, keys), len(table) - 1)  # where each key would sit
    return np.where(table[index] == keys, values[index], 0)


class NGramModel:
    """A smoothed n-gram language model over ids ``0 .. V-1``: ``p(w | h)`` from the previous ``order - 1`` ids. Chapter 3.

    With ``h`` the last ``k`` ids, ``h'`` the last ``k - 1``, ``c(h w)`` the count
    of the n-gram ``h w``, ``c(h) = sum_w c(h w)`` and ``N1(h) = |{w : c(h w) > 0}|``,

    ``p_k(w | h) = (max(c(h w) - D, 0) + D N1(h) p_{k-1}(w | h')) / c(h)``

    if ``c(h) > 0``, else ``p_{k-1}(w | h')``; the recursion ends at
    ``p_{-1}(w) = 1 / V``. ``0 < D <= 1`` keeps every distribution summing to 1.
    With ``kneser_ney=True`` the counts of every order below the highest are
    continuation counts ``c(h w) = |{u : c(u h w) > 0}|``. Build it with :meth:`fit`.

    Attributes:
        grams: one sorted int64 array per context length ``k = 0 .. order - 1``,
            the codes of the n-grams ``h w`` of length ``k + 1`` with a count.
        counts: the matching ``c(h w)``, int64 arrays of the same lengths.
    """

    def __init__(self, vocab_size: int, order: int, discount: float, grams: list, counts: list, kneser_ney: bool):
        self.vocab_size, self.order, self.discount, self.kneser_ney = vocab_size, order, discount, kneser_ney
        self.grams, self.counts = grams, counts  # per context length k: sorted (M,) codes of h w and their counts
        self.contexts, self.totals, self.types = [], [], []  # per k: sorted codes of h, c(h), N1(h)
        for codes, count in zip(grams, counts):
            context, start = np.unique(codes // vocab_size, return_index=True)
            self.contexts.append(context)
            self.totals.append(np.add.reduceat(count, start) if len(codes) else count)
            self.types.append(np.diff(np.append(start, len(codes))))

    @classmethod
    def fit(cls, ids, vocab_size: int, order: int, discount: float = 0.75, kneser_ney: bool = False) -> "NGramModel":
        """Count the n-grams of orders 1 to ``order`` in a stream of ids and return the model. Chapter 3.

        Args:
            ids: ``(N,)`` int token ids in ``[0, V)``, ``N >= 1``; an n-gram may span
                document boundaries (the ``<eos>`` id marks them).
            vocab_size: ``V``.
            order: ``n``, the length of the longest n-gram; ``V ** n`` must stay below ``2 ** 62``.
            discount: ``D``, in ``(0, 1]``.
            kneser_ney: use continuation counts below the highest order.

        Returns:
            the fitted :class:`NGramModel`.
        """
        ids = checks.token_ids(ids, vocab_size)  # (N,)
        order = checks.positive_int(order, "order")
        if len(ids) == 0:
            raise ValueError("ids must hold at least one token to count")
        if order * math.log2(vocab_size) >= 62:
            raise ValueError(f"order {order} is too high for V = {vocab_size}: V ** order must stay below 2 ** 62")
        if isinstance(discount, bool) or not (isinstance(discount, (int, float)) and 0 < discount <= 1):
            raise ValueError(f"discount must be a number in (0, 1], got {discount!r}")
        grams, counts = [], []
        for length in range(1, order + 1):
            codes = _codes(ids, length, vocab_size)  # (N,)
            code, count = np.unique(codes[codes >= 0], return_counts=True)  # (M,), (M,)
            grams.append(code)
            counts.append(count)
        if kneser_ney:  # c(h w) of every lower order becomes |{u : c(u h w) > 0}|
            for k in range(order - 1):
                suffixes = grams[k + 1] % vocab_size ** (k + 1)  # (M,) the code of h w in u h w
                grams[k], counts[k] = np.unique(suffixes, return_counts=True)
        return cls(vocab_size, order, float(discount), grams, counts, kneser_ney)

    def _probs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``(N,)`` p(targets | contexts); column k of ``contexts`` holds the codes of the length-k contexts (-1: none)."""
        V, D = self.vocab_size, self.discount
        p = np.full(len(targets), 1.0 / V)  # (N,) p_{-1}
        for k in range(self.order):
            context = contexts[:, k]  # (N,) codes of h, length k
            total = np.where(context >= 0, _lookup(context, self.contexts[k], self.totals[k]), 0)  # (N,) c(h)
            types = _lookup(context, self.contexts[k], self.types[k])  # (N,) N1(h)
            count = _lookup(context * V + targets, self.grams[k], self.counts[k])  # (N,) c(h w)
            mixed = (np.maximum(count - D, 0) + D * types * p) / np.maximum(total, 1)
            p = np.where(total > 0, mixed, p)
        return p

    def next_log_probs(self, context) -> np.ndarray:
        """The log-probabilities of every next token after ``context``, ``log p(w | h)``. Chapter 3.

        Args:
            context: ``(N,)`` ids read so far (only the last ``order - 1`` matter; may be empty).

        Returns:
            ``(V,)`` float64 natural log-probabilities, whose exponentials sum to 1.
        """
        context = checks.token_ids(context, self.vocab_size, "context")  # (N,)
        codes = [_codes(context, k, self.vocab_size)[-1] if 0 < k <= len(context) else (0 if k == 0 else -1)
                 for k in range(self.order)]
        contexts = np.tile(np.array(codes, dtype=np.int64), (self.vocab_size, 1))  # (V, order)
        return np.log(self._probs(contexts, np.arange(self.vocab_size)))

    def log_probs(self, ids) -> np.ndarray:
        """The log-probability of every token of a stream after the first, given the ones before it. Chapter 3.

        Entry ``t - 1`` is ``log p(w_t | w_{t-n+1} .. w_{t-1})``, with a shorter
        context for ``t < n - 1`` (the stream's start).

        Args:
            ids: ``(N,)`` int ids in ``[0, V)``.

        Returns:
            ``(N - 1,)`` float64 natural log-probabilities.
        """
        ids = checks.token_ids(ids, self.vocab_size)  # (N,)
        if len(ids) < 2:
            raise ValueError(f"ids must hold at least 2 tokens (a context and a target), got {len(ids)}")
        contexts = np.stack([_codes(ids[:-1], k, self.vocab_size) for k in range(self.order)], axis=1)  # (N-1, order)
        return np.log(self._probs(contexts, ids[1:]))

    def perplexity(self, ids) -> float:
        """The perplexity ``exp(-(1/(N-1)) sum_t log p(w_t | context))`` of the tokens after the first. Chapter 3.

        Args:
            ids: ``(N,)`` int ids in ``[0, V)``, ``N >= 2``.

        Returns:
            the perplexity, a float ``>= 1``.
        """
        return float(np.exp(-self.log_probs(ids).mean()))
