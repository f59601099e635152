"""course_lib: the reference library of *From one-hot to BERT*.

One module per concept, each backing a chapter of the book:

- :mod:`course_lib.corpus`: real English text shipped offline, tokenizing, vocabularies.
- :mod:`course_lib.counts`: chapter 1, from one-hot vectors to count-based embeddings.
- :mod:`course_lib.word2vec`: chapter 2, skip-gram with negative sampling and its trainers.
- :mod:`course_lib.gradcheck`: finite-difference gradient checks (chapter 2 on).
- :mod:`course_lib.alignment`: orthogonal Procrustes between embedding spaces (chapter 2).
- :mod:`course_lib.evaluation`: word-similarity and analogy benchmarks (chapter 2 on).
- :mod:`course_lib.checks`: the argument checks every function starts with.
- :mod:`course_lib.plotting`: the figures the chapters draw.
- :mod:`course_lib.testing`: the checks the assignments' test cells call.

Importing the package imports nothing heavy; import the module you need.
"""

__version__ = "0.1.0"
