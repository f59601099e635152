"""course_lib's byte-pair encoding against the ``tokenizers`` library (Rust), same words, one process.

    .venv/bin/python benchmarks/bpe_vs_tokenizers.py [--vocab-size 2000] [--rounds 3]

Byte-level BPE (GPT-2's rule for words, every byte a symbol) learned from the Lee articles and the
106 Wikipedia articles of the course's corpus (3.5 million characters). First the correctness line: whether both learn
the same merges, and whether both cut every Lee article into the same tokens. Then, each over
``rounds`` rounds with the two sides in turn, the time of:

1. training: ours from the table of words and counts, ``tokenizers``' ``BpeTrainer`` from the
   text (its word counting, in Rust on every core, included; ours counts with ``collections.Counter``,
   which is timed too);
2. encoding every Lee article (ours with its cache of words already split emptied first).

Printed: median (best) seconds and the ratio ours/theirs as the median [range] of the rounds.
Not targeted: a trainer and an encoder in pure Python are expected to be slower than Rust; the
table says by how much. The trainer's merge loop is incremental (only the words that hold the
merged pair are counted again), so its cost does not grow with the corpus at every merge.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from course_lib.gpt import bpe
from course_lib.text import corpus
from timing import cpu_name, ratios, record, spread_text


def theirs_train(texts, size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=size, show_progress=False,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tokenizer


def ours_train(texts, size):
    counts = Counter()
    for text in texts:
        counts.update(bpe.byte_level_words(text))
    return bpe.BPETokenizer(*bpe.train_bpe(counts, size, bpe.byte_alphabet().values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lee = list(corpus.lee_documents())
    texts = lee + [text for _, text in corpus.wikipedia_articles()]
    print(f"{cpu_name()}, load average {os.getloadavg()[0]:.1f}; {len(texts)} texts, "
          f"{sum(map(len, texts))} characters; vocabulary {args.vocab_size}; {args.rounds} rounds, in turn")
    times = {"train ours": [], "train theirs": [], "encode ours": [], "encode theirs": []}
    for number in range(args.rounds):
        for side in (("ours", "theirs") if number % 2 == 0 else ("theirs", "ours")):
            start = time.perf_counter()
            tokenizer = (ours_train if side == "ours" else theirs_train)(texts, args.vocab_size)
            times[f"train {side}"].append(time.perf_counter() - start)
            if side == "ours":
                ours = tokenizer
                ours._cache.clear()
                start = time.perf_counter()
                ours_tokens = [ours.tokenize(text) for text in lee]
            else:
                theirs = tokenizer
                start = time.perf_counter()
                theirs_tokens = [encoding.tokens for encoding in theirs.encode_batch(lee)]
            times[f"encode {side}"].append(time.perf_counter() - start)
    model = json.loads(theirs.to_str())["model"]
    their_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    our_merges = sorted(ours.ranks, key=ours.ranks.get)
    print(f"same merges: {our_merges == their_merges} ({len(our_merges)}); "
          f"same tokens on every Lee article: {ours_tokens == theirs_tokens}\n")
    print(f"{'':<10}{'ours s':>16}{'tokenizers s':>18}{'ours/theirs':>22}")
    for task in ("train", "encode"):
        ours_t, theirs_t = times[f"{task} ours"], times[f"{task} theirs"]
        ratio, low, high = ratios(ours_t, theirs_t)
        print(f"{task:<10}{statistics.median(ours_t):>9.3f} ({min(ours_t):.3f}){statistics.median(theirs_t):>10.3f} "
              f"({min(theirs_t):.3f}){spread_text(ratio, low, high, 1):>22}")
        what = {"train": "training", "encode": "encoding the Lee articles"}[task]
        record("bpe_vs_tokenizers", f"byte-level BPE {what}, vocabulary {args.vocab_size}: time ours/tokenizers",
               ratio, low, high, rounds=args.rounds)


if __name__ == "__main__":
    main()
