"""Chapters 1 and 2, word vectors: counts, PPMI and SVD; word2vec; gradient checks; alignment; evaluation.

See :doc:`/chapters/ch01_counts` and :doc:`/chapters/ch02_word2vec`.
"""
