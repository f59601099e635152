"""course_lib's GPT against ``transformers``' GPT2LMHeadModel with the same weights, one process.

    .venv/bin/python benchmarks/gpt_vs_transformers.py [--threads 2] [--rounds 5] [--runs 3] [--clock cpu]
                                                        [--no-lengths]

Chapter 7's model at the size of the benchmark: vocabulary 73 (the course's
characters), 4 layers, 4 heads, width 128, float32, dropout 0. ``GPT2LMHeadModel`` is built
from ``GPTConfig.gpt2_config_kwargs()`` with random weights (nothing is downloaded) and gets
ours with ``to_gpt2_state_dict``; it runs with its default attention (PyTorch's fused
``scaled_dot_product_attention``).

1. A training step without the optimizer: forward, mean cross-entropy of the next
   token, backward; batch 32, context 128. Target: ours/transformers at most 1.25.
2. Greedy generation of 256 tokens from a 16-token prompt, batch 1, a model of
   context 512: course_lib with the KV cache, course_lib without it (every step runs
   the whole sequence again) and ``transformers``' ``generate`` (with its cache). Printed:
   the times, the cache's speed-up and ours (with the cache)/transformers. Target: at
   most 1.0. course_lib's ``generate`` checks its arguments once and then decodes through
   ``GPT._decode``: a preallocated ``KVCache`` written in place, no per-step checks, fused
   LayerNorm, the logits of the last position only.
3. (unless ``--no-lengths``) the cache's speed-up for 64, 128, 256 and 496 new tokens
   (496 fills the context of 512): without a cache the cost grows with the square of
   the length, with it linearly.

First the correctness lines: the largest difference of the losses, logits and
gradients (relative to the largest gradient), and whether the three generators give
the same tokens. Then each table: the median (best) of ``rounds`` rounds, each the mean
of ``runs`` calls, the sides interleaved (``timing.interleaved``); each targeted ratio is
the median [range] of the rounds' ratios (each round times both sides). ``--clock cpu`` counts
the process's CPU time instead of the wall clock (steadier on a shared machine with one
thread; with several threads it also counts their waiting).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch
from torch.nn import functional as F

import transformers
from course_lib.gpt.generation import generate
from course_lib.gpt.gpt2_weights import to_gpt2_state_dict
from course_lib.gpt.model import GPT, GPTConfig
from timing import cpu_name, interleaved, record

VOCAB, WIDTH, HEADS, LAYERS = 73, 128, 4, 4
BATCH, CONTEXT = 32, 128
PROMPT, NEW, GENERATION_CONTEXT = 16, 256, 512
LENGTHS = (64, 128, 256, 496)
TARGET = 1.25  # training step, ours / transformers
TARGET_GENERATION = 1.0  # greedy generation with the KV cache, ours / transformers

TRAINING, GREEDY = "GPT training step: time ours/GPT2LMHeadModel", "greedy generation, KV cache: time ours/generate"


def twins(context: int):
    """Our GPT and GPT-2 with the same random weights, both in training mode with dropout 0."""
    config = GPTConfig(VOCAB, context=context, width=WIDTH, num_heads=HEADS, layers=LAYERS)
    ours = GPT(config)
    theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config.gpt2_config_kwargs()))
    theirs.load_state_dict(to_gpt2_state_dict(ours))
    return ours, theirs


def training_step(model, forward, ids):
    def step():
        model.zero_grad(set_to_none=True)
        logits = forward(ids[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        return loss
    return step


def training_differences(ours, theirs, ids) -> str:
    our_loss = training_step(ours, lambda x: ours(x)[0], ids)()
    their_loss = training_step(theirs, lambda x: theirs(x).logits, ids)()
    grads = {name: p.grad for name, p in theirs.named_parameters()}
    mine = to_gpt2_state_dict(_grads_as_model(ours))
    relative = max(((mine[n] - g).abs().max() / g.abs().max()).item() for n, g in grads.items())
    with torch.no_grad():
        logits = (ours(ids[:, :-1])[0] - theirs(ids[:, :-1]).logits).abs().max().item()
    return (f"loss {abs(our_loss.item() - their_loss.item()):.1e}, logits {logits:.1e}, "
            f"gradients (relative) {relative:.1e}")


def _grads_as_model(model):
    """A copy of ``model`` whose parameters hold its gradients (to name them as GPT-2 does)."""
    holder = copy.deepcopy(model)
    for p, q in zip(holder.parameters(), model.parameters()):
        p.data = q.grad.clone()
    return holder


def generators(ours, theirs, prompt, new: int) -> dict:
    mask = torch.ones_like(prompt)
    return {"ours, cache": lambda: generate(ours, prompt, new),
            "ours, no cache": lambda: generate(ours, prompt, new, use_cache=False),
            "transformers": lambda: theirs.generate(prompt, attention_mask=mask, max_new_tokens=new,
                                                    do_sample=False, pad_token_id=0)}


def summary(times: dict) -> dict:
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def ratio_against_target(rounds: dict, ours: str, theirs: str, target: float, measure: str) -> str:
    """ours/theirs as the median [min, max] of the rounds' ratios (each round times both sides), and the verdict;
    also recorded for ``benchmarks/all.py`` as ``measure``."""
    ratios = [a / b for a, b in zip(rounds[ours], rounds[theirs])]
    ratio = statistics.median(ratios)
    record("gpt_vs_transformers", measure, ratio, min(ratios), max(ratios), f"<= {target}", ratio <= target,
           len(ratios))
    return (f"{ratio:.2f} [{min(ratios):.2f}, {max(ratios):.2f}]  "
            f"(target <= {target}: {'met' if ratio <= target else 'missed'})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--no-lengths", action="store_true", help="skip the speed-up against the length")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads, "
          f"{cpu_name()}, load average {os.getloadavg()[0]:.1f}")
    print(f"V = {VOCAB}, {LAYERS} layers, {HEADS} heads, width {WIDTH}, float32; median (best) of {args.rounds} "
          f"rounds, interleaved, {args.clock} clock")

    ours, theirs = twins(CONTEXT)
    ids = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1))
    print(f"\n1. training step (forward + cross-entropy + backward), batch {BATCH}, context {CONTEXT}, "
          f"{args.runs} runs per round")
    print(f"max |course_lib - transformers|: {training_differences(ours, theirs, ids)}")
    steps = {"transformers": training_step(theirs, lambda x: theirs(x).logits, ids),
             "ours": training_step(ours, lambda x: ours(x)[0], ids)}
    rounds = interleaved(steps, args.rounds, args.runs, args.warmup, clock)
    times = summary(rounds)
    (theirs_median, theirs_best), (ours_median, ours_best) = times["transformers"], times["ours"]
    print(f"{'':<16}{'transformers s':>17}{'course_lib s':>17}  ours/transformers, median [range] of the rounds")
    print(f"{'training step':<16}{theirs_median:>9.3f} ({theirs_best:.3f}){ours_median:>9.3f} ({ours_best:.3f})"
          f"  {ratio_against_target(rounds, 'ours', 'transformers', TARGET, TRAINING)}")

    ours, theirs = twins(GENERATION_CONTEXT)
    ours.eval(), theirs.eval()
    prompt = torch.randint(0, VOCAB, (1, PROMPT))
    calls = generators(ours, theirs, prompt, NEW)
    outputs = {name: call() for name, call in calls.items()}
    same = all(torch.equal(out, outputs["ours, cache"]) for out in outputs.values())
    print(f"\n2. greedy generation of {NEW} tokens from a {PROMPT}-token prompt, batch 1, context "
          f"{GENERATION_CONTEXT}, 1 run per round")
    print(f"the same {NEW} tokens from all three: {same}")
    rounds = interleaved(calls, args.rounds, 1, args.warmup, clock)
    times = summary(rounds)
    print(f"{'':<18}{'seconds':>16}{'ms / token':>12}")
    for name, (median, best) in times.items():
        print(f"{name:<18}{median:>8.3f} ({best:.3f}){median / NEW * 1e3:>12.2f}")
    print(f"speed-up of the KV cache (ours no cache / ours cache): "
          f"{times['ours, no cache'][0] / times['ours, cache'][0]:.1f}x")
    print(f"ours with cache / transformers generate, median [range] of the rounds: "
          f"{ratio_against_target(rounds, 'ours, cache', 'transformers', TARGET_GENERATION, GREEDY)}")

    if args.no_lengths:
        return
    print(f"\n3. speed-up of the KV cache against the number of new tokens (prompt {PROMPT}), "
          f"median of {max(args.rounds // 2, 1)} rounds")
    print(f"{'new tokens':>10}{'no cache s':>13}{'cache s':>10}{'speed-up':>10}{'transformers s':>16}")
    for new in LENGTHS:
        times = summary(interleaved(generators(ours, theirs, prompt, new), max(args.rounds // 2, 1), 1, 0, clock))
        print(f"{new:>10}{times['ours, no cache'][0]:>13.3f}{times['ours, cache'][0]:>10.3f}"
              f"{times['ours, no cache'][0] / times['ours, cache'][0]:>9.1f}x{times['transformers'][0]:>16.3f}")


if __name__ == "__main__":
    main()
