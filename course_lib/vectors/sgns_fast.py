"""Chapter 2, the inner loop of the fast SGNS trainer: one SGD step with shared noise words, and an epoch
shared by worker threads.

:func:`course_lib.vectors.word2vec.train_sgns` is the public trainer; this module holds what it runs.
Nothing here is an exercise: ``sgns_loss_and_grads`` of :mod:`course_lib.vectors.word2vec` teaches the
same gradients one batch at a time, and the tests check that :func:`sgns_step` follows them. (The
pairs come from ``skipgram_pairs``, the exercise, document by document: a second, vectorised pair
generator here would ship ps02's answer in the student editions that do not reveal it yet.)
See :doc:`/chapters/ch02_word2vec`.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


def sgns_step(w_in, w_out, centers, contexts, noise, step: float, weight: float) -> None:
    """One SGD step of SGNS with shared noise words, on the rows of a batch, in place.

    Pair ``b`` has center vector ``v = w_in[centers[b]]``, context vector
    ``u_o = w_out[contexts[b]]`` and shares the ``S`` noise vectors ``u_s = w_out[noise[s]]``
    with the whole batch. The loss summed over the batch,
    ``L = sum_b [-log sigma(u_o . v) - weight * sum_s log sigma(-u_s . v)]``, has the gradients

    ``dL/dv_b = -(1 - sigma(u_o . v)) u_o + weight * sum_s sigma(u_s . v) u_s``
    ``dL/du_o = -(1 - sigma(u_o . v)) v``, summed over the pairs with that context,
    ``dL/du_s = weight * sum_b sigma(u_s . v_b) v_b``,

    those of ``sgns_loss_and_grads`` (times ``B``, the loss being summed, not averaged) with
    the same ``S`` noise vectors for every pair. All of them are computed from the
    weights before the step; then every row moves by ``-step`` times its gradient,
    and a word used several times gets the sum of its gradients. The ``B`` rows of a batch are
    written with ``scatter_add_``, which sums repeated rows like ``index_add_`` but is
    about twice as fast on the CPU. Chapter 2.

    Args:
        w_in: ``(V, E)`` input vectors, updated in place.
        w_out: ``(V, E)`` output vectors, updated in place.
        centers: ``(B,)`` int64 center ids.
        contexts: ``(B,)`` int64 context ids.
        noise: ``(S,)`` int64 noise word ids.
        step: the learning rate of this step.
        weight: the weight of each noise word, ``K / S``.
    """
    import torch

    dim = w_in.shape[1]
    v, u_o, u_s = w_in.index_select(0, centers), w_out.index_select(0, contexts), w_out.index_select(0, noise)
    center_rows = centers.unsqueeze(1).expand(-1, dim)  # (B, E) the row of each entry, for scatter_add_
    context_rows = contexts.unsqueeze(1).expand(-1, dim)  # (B, E)
    miss = torch.sigmoid(-(v * u_o).sum(1)).mul_(step)  # (B,) step * (1 - sigma(u_o . v))
    scores = torch.sigmoid(v @ u_s.T)  # (B, S) sigma(u_s . v)
    v_update = torch.addmm(miss.unsqueeze(1) * u_o, scores, u_s, alpha=-step * weight)  # (B, E) -step dL/dv
    noise_update = torch.mm(scores.T, v)  # (S, E) dL/du_s / weight
    w_out.scatter_add_(0, context_rows, miss.unsqueeze(1) * v)  # -step dL/du_o
    w_out.index_add_(0, noise, noise_update, alpha=-step * weight)
    w_in.scatter_add_(0, center_rows, v_update)


def sgns_epoch(w_in, w_out, centers, contexts, noise, steps, weight: float, batch_size: int, threads: int,
               on_batch=None) -> None:
    """Train one epoch of batches with :func:`sgns_step`, on ``threads`` worker threads sharing the weights.

    Batch ``b`` is ``centers[b*B:(b+1)*B]`` and ``contexts[b*B:(b+1)*B]``, with noise
    words ``noise[b]`` and learning rate ``steps[b]``. With one thread the batches
    run in order in the calling thread, so a run is reproducible. With more, worker
    ``w`` takes batches ``w, w + threads, w + 2*threads, ...`` and all update the same
    two tables without locks, as word2vec's and gensim's worker threads do
    ("Hogwild"): torch releases Python's lock inside each operation, so the
    workers run side by side on the cores, and an update that lands between another
    worker's read and write of a row is simply lost or applied to slightly older
    weights, which SGD tolerates. The result then depends on the threads' timing.
    Chapter 2.

    Args:
        w_in, w_out: ``(V, E)`` input and output vectors, updated in place.
        centers, contexts: ``(N,)`` int64 ids of the epoch's pairs, already shuffled.
        noise: int64 noise ids, one row of ``S`` per batch.
        steps: the learning rate of each batch (a sequence of floats).
        weight: the weight of each noise word, ``K / S``.
        batch_size: ``B``, pairs per batch (the last batch may be smaller).
        threads: the number of worker threads.
        on_batch: called with the number of pairs after every batch (e.g. a progress
            bar's ``update``); calls are serialized by a lock.
    """
    n_batches = len(noise)
    lock = threading.Lock()

    def work(first: int) -> None:
        for b in range(first, n_batches, threads):
            start, stop = b * batch_size, min((b + 1) * batch_size, len(centers))
            sgns_step(w_in, w_out, centers[start:stop], contexts[start:stop], noise[b], steps[b], weight)
            if on_batch is not None:
                with lock:
                    on_batch(stop - start)

    if threads == 1:
        work(0)
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for job in [pool.submit(work, first) for first in range(threads)]:
            job.result()  # re-raises a worker's exception here
