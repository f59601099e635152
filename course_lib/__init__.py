"""course_lib: the reference library of *From one-hot to BERT*.

One module per concept, each backing a chapter of the book:

- :mod:`course_lib.corpus`: real English text shipped offline, tokenizing, vocabularies.
- :mod:`course_lib.counts`: chapter 1, from one-hot vectors to count-based embeddings.
- :mod:`course_lib.plotting`: the figures the chapters draw.
- :mod:`course_lib.testing`: the checks the assignments' test cells call.

Importing the package imports nothing heavy; import the module you need.
"""

__version__ = "0.1.0"
