"""course_lib's multi-head attention and encoder block against PyTorch's, same weights, one process.

    .venv/bin/python benchmarks/transformer_vs_torch.py [--threads 1] [--rounds 5] [--runs 5] [--clock cpu]

Batch 32, length 128, width D = 256, 8 heads, feed-forward size 1024, float32, batch
first, a key padding mask (lengths drawn between 64 and 128), dropout 0:

1. ``MultiHeadAttention`` (self-attention, returns every head's weights) against
   ``torch.nn.MultiheadAttention`` called as by default (``need_weights=True``, which
   computes the weights too and averages them over the heads) and, for information,
   with ``need_weights=False`` (PyTorch's fused ``scaled_dot_product_attention``).
2. The pre-LN ``EncoderBlock`` against ``torch.nn.TransformerEncoderLayer(norm_first=True)``,
   which calls its attention with ``need_weights=False``.

Weights are copied with ``load_state_dict``. The script first prints the largest
difference of the outputs and of the gradients, then times both sides with their
runs interleaved (after a warm-up, ``rounds`` rounds of ``runs`` calls per side,
alternating which side goes first) and prints the median (best) of the rounds' mean
time per call and the ratio ours/torch. Forward+backward is
``(out * probe).sum().backward()`` with a fixed ``probe``; forward only runs under
``torch.no_grad()`` with both modules in training mode (with dropout 0, the same
computation). In eval mode without gradients, ``TransformerEncoderLayer`` takes its
"fast path", one native fused kernel; that line is printed for information.
Target: ours/torch at most 1.25, forward+backward and forward only, for both modules.

``--clock cpu`` measures the process's CPU time instead of the wall clock: on a shared
machine with one thread it does not count the time other processes hold the core, and
the ratios are much steadier (with several threads it also counts the threads' waiting).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

from course_lib.transformer.blocks import EncoderBlock
from course_lib.transformer.multi_head import MultiHeadAttention, attention_mask
from timing import cpu_name, interleaved, ratios, record, spread_text

BATCH, STEPS, WIDTH, HEADS, FF = 32, 128, 256, 8, 1024
TARGET = 1.25


def forward_backward(module, forward, x, probe):
    def step():
        module.zero_grad(set_to_none=True)
        x.grad = None
        (forward() * probe).sum().backward()
    return step


def forward_only(forward):
    def step():
        with torch.no_grad():
            forward()
    return step


def max_differences(pairs, modules, x, probe) -> str:
    """Largest absolute difference of the outputs and largest relative difference of the gradients."""
    grads = []
    for (forward, module) in zip(pairs, modules):
        module.zero_grad(set_to_none=True)
        x.grad = None
        out = forward()
        (out * probe).sum().backward()
        grads.append((out.detach(), x.grad.clone(), {n: p.grad.clone() for n, p in module.named_parameters()}))
    (out_a, gx_a, gp_a), (out_b, gx_b, gp_b) = grads
    relative = max(((gp_a[n] - gp_b[n]).abs().max() / gp_b[n].abs().max()).item() for n in gp_b)
    relative = max(relative, ((gx_a - gx_b).abs().max() / gx_b.abs().max()).item())
    return f"output {(out_a - out_b).abs().max().item():.1e}, gradients (relative) {relative:.1e}"


def row(label: str, kind: str, times: dict, target: float | None) -> str:
    """One line of the table: median (best) milliseconds of each side and their ratio, median [range] over
    the rounds; the ratio is also recorded for ``benchmarks/all.py``."""
    median = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    best = {name: min(t) * 1e3 for name, t in times.items()}
    ratio, low, high = ratios(times["ours"], times["torch"])
    verdict = f"  (target <= {target:g}: {'met' if ratio <= target else 'missed'})" if target else ""
    record("transformer_vs_torch", f"{label}, {kind}: time ours/torch", ratio, low, high,
           f"<= {target:g}" if target else None, ratio <= target if target else None, len(times["ours"]))
    return (f"{label:<26}{kind:<18}{median['torch']:>9.1f} ({best['torch']:>5.1f}){median['ours']:>11.1f} "
            f"({best['ours']:>5.1f}){spread_text(ratio, low, high):>20}{verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(BATCH, STEPS, WIDTH, requires_grad=True)
    probe = torch.randn(BATCH, STEPS, WIDTH)
    padding = torch.arange(STEPS)[None, :] < torch.randint(STEPS // 2, STEPS + 1, (BATCH,))[:, None]  # True = real
    mask = attention_mask(padding)  # (B, 1, 1, T), ours: True = attend

    torch_mha = nn.MultiheadAttention(WIDTH, HEADS, dropout=0.0, batch_first=True)
    our_mha = MultiHeadAttention(WIDTH, HEADS)
    our_mha.load_state_dict(torch_mha.state_dict())
    torch_layer = nn.TransformerEncoderLayer(WIDTH, HEADS, FF, dropout=0.0, batch_first=True, norm_first=True)
    our_block = EncoderBlock(WIDTH, HEADS, FF, norm_first=True)
    our_block.load_state_dict(torch_layer.state_dict())

    cases = [  # (label, torch module, torch forward, our module, our forward, targeted)
        ("MHA, need_weights=True", torch_mha, lambda: torch_mha(x, x, x, key_padding_mask=~padding)[0],
         our_mha, lambda: our_mha(x, x, x, mask)[0], True),
        ("MHA, need_weights=False", torch_mha,
         lambda: torch_mha(x, x, x, key_padding_mask=~padding, need_weights=False)[0],
         our_mha, lambda: our_mha(x, x, x, mask)[0], False),
        ("encoder block, pre-LN", torch_layer, lambda: torch_layer(x, src_key_padding_mask=~padding),
         our_block, lambda: our_block(x, mask), True),
    ]

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_name()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"batch {BATCH}, length {STEPS}, width {WIDTH}, {HEADS} heads, feed-forward {FF}, float32, padding mask; "
          f"median (best) of {args.rounds} rounds x {args.runs} runs, interleaved, {args.clock} clock")
    for label, theirs, torch_forward, ours, our_forward, _ in cases[::2]:
        print(f"max |course_lib - torch|, {label}: "
              + max_differences((our_forward, torch_forward), (ours, theirs), x, probe))
    print(f"\n{'module':<26}{'pass':<18}{'torch ms':>16}{'course_lib ms':>18}{'ours/torch':>20}")
    for label, theirs, torch_forward, ours, our_forward, targeted in cases:
        for kind in ("forward+backward", "forward only"):
            if kind == "forward+backward":
                steps = {"torch": forward_backward(theirs, torch_forward, x, probe),
                         "ours": forward_backward(ours, our_forward, x, probe)}
            else:
                steps = {"torch": forward_only(torch_forward), "ours": forward_only(our_forward)}
            print(row(label, kind, interleaved(steps, args.rounds, args.runs, args.warmup, clock),
                      TARGET if targeted else None))
    torch_layer.eval()  # the fast path: eval mode, no gradients
    steps = {"torch": forward_only(cases[2][2]), "ours": forward_only(cases[2][4])}
    times = interleaved(steps, args.rounds, args.runs, args.warmup, clock)
    print(row("encoder block, torch eval", "forward only", times, None)
          + "  (torch's fused fast path, for information)")


if __name__ == "__main__":
    main()
