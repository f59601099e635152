"""course_lib's LSTM layer against torch.nn.LSTM, same weights, one process.

    .venv/bin/python benchmarks/lstm_vs_torch.py [--threads 2] [--rounds 5] [--runs 10]

One layer, batch 32, sequence length 64, input and hidden size 256, float32, batch
first. ``RecurrentNetwork.from_torch`` copies the weights of a ``torch.nn.LSTM``;
the script first prints how far the two outputs, final states and weight
gradients are apart, then times each side with the other's runs interleaved:
after a warm-up, ``rounds`` rounds of ``runs`` consecutive calls per side
(alternating which side goes first), reporting the median and the best of the
rounds' mean time per call. Forward+backward is ``(out * probe).sum().backward()``
with a fixed random ``probe``; forward alone runs under ``torch.no_grad()``.

On CPU, ``torch.nn.LSTM`` runs oneDNN's fused LSTM kernel by default; each
measurement is repeated with oneDNN disabled (``torch.backends.mkldnn.flags``),
where PyTorch falls back to its own per-step loop, the fairer comparison for
course_lib's Python loop over time steps. Target: course_lib within 1.5x of
torch.nn.LSTM (oneDNN on) for forward+backward. Each ratio is the median of the per-round
ratios, with their range in brackets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import warnings

import torch

from course_lib.recurrent.layers import RecurrentNetwork
from timing import cpu_name, interleaved, ratios, record, spread_text

BATCH, STEPS, HIDDEN = 32, 64, 256
TARGET = 1.5


def forward_backward(module, x, probe):
    def step():
        module.zero_grad(set_to_none=True)
        out, _ = module(x)  # (B, T, H)
        (out * probe).sum().backward()
    return step


def forward_only(module, x):
    def step():
        with torch.no_grad():
            module(x)
    return step


def max_differences(ours, theirs, x, probe) -> dict:
    """Largest absolute differences of outputs, final states and weight gradients."""
    results = {}
    grads = []
    for module in (ours, theirs):
        module.zero_grad(set_to_none=True)
        out, (h, c) = module(x)
        (out * probe).sum().backward()
        grads.append((out, h, c))
    for name, a, b in zip(("outputs", "h_n", "c_n"), *grads):
        results[name] = (a - b).abs().max().item()
    cell = ours.layers[0][0].cell
    results["weight gradients (relative)"] = max(
        ((getattr(cell, n).grad - getattr(theirs, n + "_l0").grad).abs().max()
         / getattr(theirs, n + "_l0").grad.abs().max()).item() for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")  # said on every flags() exit
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(HIDDEN, HIDDEN, batch_first=True)
    ours = RecurrentNetwork.from_torch(theirs)
    x = torch.randn(BATCH, STEPS, HIDDEN)
    probe = torch.randn(BATCH, STEPS, HIDDEN)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_name()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"one LSTM layer: batch {BATCH}, length {STEPS}, hidden {HIDDEN}, float32; "
          f"median (best) of {args.rounds} rounds x {args.runs} runs, interleaved; ratio: median [range] of the rounds")
    differences = max_differences(ours, theirs, x, probe)
    print("max |course_lib - torch|: " + ", ".join(f"{k} {v:.1e}" for k, v in differences.items()) + "\n")

    print(f"{'pass':<18}{'oneDNN':<8}{'torch.nn.LSTM ms':>18}{'course_lib ms':>16}{'ours/torch':>20}")
    for label, make in (("forward+backward", lambda m: forward_backward(m, x, probe)),
                        ("forward only", lambda m: forward_only(m, x))):
        for onednn in (True, False):
            with torch.backends.mkldnn.flags(enabled=onednn):
                steps = {"torch": make(theirs), "ours": make(ours)}
                for step in steps.values():
                    for _ in range(args.warmup):
                        step()
                times = interleaved(steps, args.rounds, args.runs)
            median = {name: statistics.median(t) * 1e3 for name, t in times.items()}
            best = {name: min(t) * 1e3 for name, t in times.items()}
            ratio, low, high = ratios(times["ours"], times["torch"])
            targeted = label == "forward+backward" and onednn
            target = f"  (target <= {TARGET:g}: {'met' if ratio <= TARGET else 'missed'})" if targeted else ""
            print(f"{label:<18}{'on' if onednn else 'off':<8}"
                  f"{median['torch']:>9.1f} ({best['torch']:>5.1f}){median['ours']:>8.1f} ({best['ours']:>5.1f})"
                  f"{spread_text(ratio, low, high):>20}{target}")
            record("lstm_vs_torch", f"LSTM layer {label}, oneDNN {'on' if onednn else 'off'}: time ours/torch.nn.LSTM",
                   ratio, low, high, f"<= {TARGET:g}" if targeted else None, ratio <= TARGET if targeted else None,
                   args.rounds)

if __name__ == "__main__":
    main()
