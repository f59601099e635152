"""course_lib's attention against PyTorch's, same inputs, one process.

    .venv/bin/python benchmarks/attention_vs_torch.py [--threads 1] [--rounds 5] [--runs 20]

1. ``dot_attention`` (scores, masked softmax, weighted sum; returns the weights too)
   against ``torch.nn.functional.scaled_dot_product_attention`` with ``scale=1`` and the
   same boolean padding mask, at the size of chapter 5's decoder (batch 64, one query,
   17 keys, H = 128) and at a larger size (batch 32, 128 queries and keys, H = 256).
2. The plain decoder of chapter 5 under teacher forcing, a Python loop over
   ``torch.nn.GRUCell`` steps, against ``torch.nn.GRU`` run over the whole target at once
   with the same weights (batch 64, 17 steps, E = 64, H = 128).

Each comparison first prints the largest difference of the results, then times both
sides, forward+backward, with their runs interleaved (after a warm-up, ``rounds``
rounds of ``runs`` calls per side); it reports the median of the rounds' mean time per
call and the ratio ours/torch. Target: at most 1.5 for attention. The recurrent loop
cannot match a fused kernel; its ratio is reported, not targeted.
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
from torch.nn import functional as F

from course_lib.attention.masking import padding_mask
from course_lib.attention.scores import dot_attention
from course_lib.attention.seq2seq import Decoder
from timing import cpu_name, interleaved, ratios, record, spread_text

TARGET = 1.5


def median_times(steps: dict, rounds: int, runs: int) -> dict:
    """Seconds per call of each step function, one per round, rounds interleaved, after 3 warm-up calls."""
    return interleaved(steps, rounds, runs, warmup=3)


def attention_case(batch, queries, keys, hidden, rounds, runs):
    torch.manual_seed(0)
    q = torch.randn(batch, queries, hidden, requires_grad=True)
    k = torch.randn(batch, keys, hidden, requires_grad=True)
    mask = padding_mask(torch.randint(1, keys + 1, (batch,)), keys)
    probe = torch.randn(batch, queries, hidden)

    def ours():
        context, _ = dot_attention(q, k, mask)
        q.grad = k.grad = None
        (context * probe).sum().backward()

    def theirs():
        context = F.scaled_dot_product_attention(q, k, k, attn_mask=mask[:, None, :], scale=1.0)
        q.grad = k.grad = None
        (context * probe).sum().backward()

    difference = (dot_attention(q, k, mask)[0]
                  - F.scaled_dot_product_attention(q, k, k, attn_mask=mask[:, None, :], scale=1.0)).abs().max().item()
    times = median_times({"torch": theirs, "ours": ours}, rounds, runs)
    label = f"attention B={batch} Tq={queries} Tk={keys} H={hidden}"
    return label, difference, times


def decoder_case(rounds, runs, batch=64, steps=17, embed=64, hidden=128, vocab=37):
    torch.manual_seed(0)
    decoder = Decoder(vocab, embed, hidden)  # plain: GRUCell steps
    gru = torch.nn.GRU(embed, hidden, batch_first=True)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(gru, name + "_l0").copy_(getattr(decoder.cell, name))
    targets = torch.randint(3, vocab, (batch, steps))
    s0 = torch.randn(batch, hidden)
    memory, mask = torch.zeros(batch, 1, hidden), torch.ones(batch, 1, dtype=torch.bool)

    def ours_forward():
        state, logits = s0, []
        for t in range(steps):
            step_logits, state, _ = decoder.step(targets[:, t], state, memory, mask)
            logits.append(step_logits)
        return torch.stack(logits, 1)

    def theirs_forward():
        states, _ = gru(decoder.embedding(targets), s0[None])
        return decoder.readout(states)

    def backward(forward):
        def step():
            decoder.zero_grad(set_to_none=True)
            gru.zero_grad(set_to_none=True)
            forward().logsumexp(-1).sum().backward()
        return step

    difference = (ours_forward() - theirs_forward()).abs().max().item()
    times = median_times({"torch": backward(theirs_forward), "ours": backward(ours_forward)}, rounds, runs)
    return f"plain decoder B={batch} T={steps} H={hidden}", difference, times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_name()}, "
          f"load average {os.getloadavg()[0]:.1f}; forward+backward, median of {args.rounds} rounds x {args.runs} "
          f"runs, interleaved; ratio: median [range] of the rounds")
    print(f"{'case':<40}{'max |diff|':>12}{'torch ms':>10}{'ours ms':>10}{'ours/torch':>20}")
    cases = [attention_case(64, 1, 17, 128, args.rounds, args.runs),
             attention_case(32, 128, 128, 256, args.rounds, args.runs),
             decoder_case(args.rounds, args.runs)]
    for label, difference, times in cases:
        ratio, low, high = ratios(times["ours"], times["torch"])
        targeted = label.startswith("attention")
        verdict = f"  (target <= {TARGET:g}: {'met' if ratio <= TARGET else 'missed'})" if targeted else ""
        print(f"{label:<40}{difference:>12.1e}{statistics.median(times['torch']) * 1e3:>10.2f}"
              f"{statistics.median(times['ours']) * 1e3:>10.2f}{spread_text(ratio, low, high):>20}{verdict}")
        record("attention_vs_torch", f"{label}, forward+backward: time ours/torch", ratio, low, high,
               f"<= {TARGET:g}" if targeted else None, ratio <= TARGET if targeted else None, args.rounds)


if __name__ == "__main__":
    main()
