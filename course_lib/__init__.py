"""course_lib: the reference library of *From one-hot to BERT*.

One module per concept, each backing a chapter of the book:

- :mod:`course_lib.text.corpus`: real English text shipped offline, tokenizing, vocabularies.
- :mod:`course_lib.vectors.counts`: chapter 1, from one-hot vectors to count-based embeddings.
- :mod:`course_lib.vectors.word2vec`: chapter 2, skip-gram with negative sampling and its trainers.
- :mod:`course_lib.vectors.gradcheck`: finite-difference gradient checks (chapter 2 on).
- :mod:`course_lib.vectors.alignment`: orthogonal Procrustes between embedding spaces (chapter 2).
- :mod:`course_lib.vectors.evaluation`: word-similarity and analogy benchmarks (chapter 2 on).
- :mod:`course_lib.activations`: chapter 3, activation functions and their derivatives.
- :mod:`course_lib.recurrent.elman`: chapter 3, the Elman RNN, backpropagation through time and a numpy language model.
- :mod:`course_lib.recurrent.clipping`, :mod:`course_lib.recurrent.perplexity`, :mod:`course_lib.recurrent.sampling`: chapter 3.
- :mod:`course_lib.recurrent.cells`, :mod:`course_lib.recurrent.layers`: chapters 3 and 4, RNN/LSTM/GRU cells and layers in PyTorch.
- :mod:`course_lib.recurrent.language_model`, :mod:`course_lib.recurrent.gradient_flow`: chapters 3 and 4, training and measuring them.
- :mod:`course_lib.recurrent.elmo`: chapter 4, contextual embeddings from a bidirectional language model.
- :mod:`course_lib.checks`: the argument checks every function starts with.
- :mod:`course_lib.progress`: the progress bars of the training loops.
- :mod:`course_lib.plotting`: the figures the chapters draw.
- :mod:`course_lib.testing`: the checks the assignments' test cells call.

Importing the package imports nothing heavy; import the module you need.
"""

__version__ = "0.1.0"
