"""course_lib's BERT and WordPiece tokenizer against ``transformers`` with the same MiniLM files, one process.

    .venv/bin/python benchmarks/bert_vs_transformers.py [--threads 2] [--rounds 5] [--runs 2] [--clock cpu]
                                                        [--no-tokenizer] [--no-model] [--profile]

all-MiniLM-L6-v2 (6 layers, width 384, 12 heads, float32), loaded by course_lib
(``load_pretrained``) and by ``transformers.BertModel.from_pretrained`` from the packaged
files (nothing is downloaded), both in eval mode under ``torch.no_grad()``.

1. (unless ``--no-model``) Encoding throughput, batch 32 of 128 tokens: the review sentences run together,
   tokenized and cut into 32 windows of ``[CLS]`` + 126 WordPieces + ``[SEP]`` (no
   padding), and a second batch of the same windows cut to lengths from 16 to 128 and
   padded to 128 (padding mask). Three models: course_lib, ``transformers`` with its
   default attention (named in the table; PyTorch's fused
   ``scaled_dot_product_attention``, "sdpa") and ``transformers`` with
   ``attn_implementation="eager"`` (the same operations as ours). Printed: sequences per
   second and ours/transformers in throughput. Target: at least 0.8 of the default.
2. (unless ``--no-tokenizer``) Tokenizing the 4,866 review sentences into ids with
   ``[CLS]`` and ``[SEP]``: course_lib's ``encode`` on each sentence, ``transformers``'
   pure-Python ``BertTokenizerLegacy`` (its ``PythonBackend``; ``BertTokenizer`` is the Rust
   one in transformers 5) called on the list, and for context the Rust tokenizer, as
   ``transformers.BertTokenizer`` (``TokenizersBackend``) and as ``tokenizers.Tokenizer``'s
   ``encode_batch``. course_lib's tokenizer remembers the pieces of the words it has cut
   (``cache_size``), so after the warm-up it cuts no word again; a second row runs it with
   ``cache_size=0``, cutting every word of every call. Printed: each tokenizer's time over the
   pure-Python one's, the median and range of the rounds' ratios (each round times both).
   Target: course_lib's time at most 1.0 of the pure-Python one's, with and without the cache.

First the correctness lines: the largest difference of the last hidden states (real
tokens) and whether every tokenizer gives the same ids. Then each table: the median
(best) of ``rounds`` rounds, each the mean of ``runs`` calls, the sides interleaved
(``timing.interleaved``). ``--clock cpu`` counts the process's CPU time instead of the
wall clock. ``--profile`` adds the operators where course_lib's forward spends its time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import tokenizers
import transformers
from course_lib.bert.inputs import BertBatch, encode
from course_lib.bert.pretrained import load_pretrained, minilm_directory
from course_lib.bert.wordpiece import WordPieceTokenizer
from course_lib.text.movie_reviews import movie_review_sentences
from timing import cpu_name, interleaved, record

BATCH, STEPS = 32, 128
TARGET_MODEL, TARGET_TOKENIZER = 0.8, 1.0


def windows(tokenizer, padded: bool) -> BertBatch:
    """32 inputs of 128 tokens from the review sentences run together; ``padded``: cut to 16..128 tokens."""
    text = " ".join(movie_review_sentences().texts[:400])
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
    inner = STEPS - 2
    assert len(ids) >= BATCH * inner, "not enough text"
    rows = [[tokenizer.cls_id] + ids[b * inner:(b + 1) * inner] + [tokenizer.sep_id] for b in range(BATCH)]
    padding = torch.ones(BATCH, STEPS, dtype=torch.bool)
    if padded:
        lengths = torch.linspace(16, STEPS, BATCH).round().long().tolist()
        for b, length in enumerate(lengths):
            rows[b] = rows[b][:length - 1] + [tokenizer.sep_id] + [tokenizer.pad_id] * (STEPS - length)
            padding[b, length:] = False
    return BertBatch(torch.tensor(rows), torch.zeros(BATCH, STEPS, dtype=torch.int64), padding)


def forwards(ours, default, eager, batch: BertBatch) -> dict:
    mask = batch.padding.long()

    def run(call):
        def step():
            with torch.no_grad():
                return call()
        return step

    return {"course_lib": run(lambda: ours(batch.ids, batch.segments, batch.padding).last),
            f"transformers ({default.config._attn_implementation})":
                run(lambda: default(input_ids=batch.ids, token_type_ids=batch.segments,
                                    attention_mask=mask).last_hidden_state),
            "transformers (eager)": run(lambda: eager(input_ids=batch.ids, token_type_ids=batch.segments,
                                                      attention_mask=mask).last_hidden_state)}


def summary(times: dict) -> dict:
    return {name: (statistics.median(t), min(t)) for name, t in times.items()}


def model_table(ours, default, eager, tokenizer, args, clock):
    print(f"\n1. encoding throughput, batch {BATCH} x {STEPS} tokens, eval mode, no_grad, {args.runs} runs per round")
    print(f"{'':<13}{'model':<28}{'seconds':>16}{'sequences/s':>13}{'ours/theirs':>13}  (in sequences/s)")
    for padded in (False, True):
        batch = windows(tokenizer, padded)
        steps = forwards(ours, default, eager, batch)
        outputs = {name: step() for name, step in steps.items()}
        differences = [(out - outputs["course_lib"])[batch.padding].abs().max().item() for out in outputs.values()]
        rounds = interleaved(steps, args.rounds, args.runs, args.warmup, clock)
        times = summary(rounds)
        case = f"{batch.padding.sum().item()} real" if padded else "no padding"
        ours_median, ours_best = times["course_lib"]
        for number, (name, (median, best)) in enumerate(times.items()):
            ratio = "" if name == "course_lib" else f"{median / ours_median:>8.2f} ({best / ours_best:.2f})"
            print(f"{case if number == 0 else '':<13}{name:<28}{median:>8.3f} ({best:.3f}){BATCH / median:>13.1f}"
                  f"{ratio:>13}")
        default_name = next(n for n in times if n.startswith("transformers (") and "eager" not in n)
        ratio = times[default_name][0] / ours_median
        print(f"{'':<13}max |course_lib - transformers| at real tokens: {max(differences):.1e}; "
              f"ours/{default_name}: {ratio:.2f} (target >= {TARGET_MODEL}: "
              f"{'met' if ratio >= TARGET_MODEL else 'missed'})")
        per_round = [theirs / ours for theirs, ours in zip(rounds[default_name], rounds["course_lib"])]
        record("bert_vs_transformers", f"BERT encoding ({case}), sequences/s course_lib/{default_name}", ratio,
               min(per_round), max(per_round), f">= {TARGET_MODEL}", ratio >= TARGET_MODEL, len(per_round))


def tokenizer_table(tokenizer, args, clock):
    texts = list(movie_review_sentences().texts)
    folder = str(minilm_directory())
    legacy = transformers.BertTokenizerLegacy.from_pretrained(folder)
    fast = transformers.AutoTokenizer.from_pretrained(folder)
    rust = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    rust.no_padding()
    rust.no_truncation()
    uncached = WordPieceTokenizer(tokenizer.vocab, tokenizer.lowercase, tokenizer.max_chars, cache_size=0)
    legacy_name = f"{type(legacy).__name__} ({type(legacy).__mro__[1].__name__})"
    calls = {"course_lib encode": lambda: [encode(tokenizer, t)[0] for t in texts],
             "course_lib encode, cache_size=0": lambda: [encode(uncached, t)[0] for t in texts],
             legacy_name: lambda: legacy(texts)["input_ids"],
             f"{type(fast).__name__} ({type(fast).__mro__[1].__name__})": lambda: fast(texts)["input_ids"],
             "tokenizers encode_batch": lambda: [e.ids for e in rust.encode_batch(texts)]}
    results = {name: call() for name, call in calls.items()}
    same = {name: ids == results["course_lib encode"] for name, ids in results.items()}
    tokens = sum(len(ids) for ids in results["course_lib encode"])
    print(f"\n2. tokenizing the {len(texts)} review sentences ({tokens} ids with [CLS] and [SEP]), "
          f"{args.runs} runs per round")
    print("the same ids as course_lib encode: " + ", ".join(f"{name} {ok}" for name, ok in same.items()
                                                          if name != "course_lib encode"))
    rounds = interleaved(calls, args.rounds, args.runs, args.warmup, clock)
    times = summary(rounds)
    print(f"{'tokenizer':<44}{'seconds':>16}{'sentences/s':>13}  time / {legacy_name}'s: median [range] of the rounds")
    for name, (median, best) in times.items():
        ratios = [ours / theirs for ours, theirs in zip(rounds[name], rounds[legacy_name])]  # round by round
        print(f"{name:<44}{median:>8.3f} ({best:.3f}){len(texts) / median:>13.0f}  "
              f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]")
    for name in ("course_lib encode", "course_lib encode, cache_size=0"):
        ratios = [ours / theirs for ours, theirs in zip(rounds[name], rounds[legacy_name])]
        ratio = statistics.median(ratios)
        print(f"{name} / the pure-Python tokenizer, in time: {ratio:.2f} [{min(ratios):.2f}, {max(ratios):.2f}] "
              f"(target <= {TARGET_TOKENIZER:.1f}: {'met' if ratio <= TARGET_TOKENIZER else 'missed'})")
        record("bert_vs_transformers", f"WordPiece, {name}: time course_lib/{legacy_name}", ratio, min(ratios),
               max(ratios), f"<= {TARGET_TOKENIZER:.1f}", ratio <= TARGET_TOKENIZER, len(ratios))


def profile(ours, tokenizer):
    batch = windows(tokenizer, padded=False)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            ours(*batch)
    print("\n3. where course_lib's forward spends its time (torch.profiler, 2 passes, no padding)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--no-tokenizer", action="store_true", help="skip the tokenizer table")
    parser.add_argument("--no-model", action="store_true", help="skip the encoding table (tokenizers only)")
    parser.add_argument("--profile", action="store_true", help="profile course_lib's forward pass")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
          f"{torch.get_num_threads()} threads, {cpu_name()}, load average {os.getloadavg()[0]:.1f}")
    print(f"all-MiniLM-L6-v2, float32; median (best) of {args.rounds} rounds, interleaved, {args.clock} clock")
    ours, tokenizer = load_pretrained()
    folder = str(minilm_directory())
    if not args.no_model:
        default = transformers.BertModel.from_pretrained(folder).eval()
        eager = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
        model_table(ours, default, eager, tokenizer, args, clock)
    if not args.no_tokenizer:
        tokenizer_table(tokenizer, args, clock)
    if args.profile:
        profile(ours, tokenizer)


if __name__ == "__main__":
    main()
