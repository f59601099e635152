"""Chapters 3 and 4, recurrent networks: the numpy Elman RNN and its language model, PyTorch cells and layers,
language models, gradient flow and ELMo.

See :doc:`/chapters/ch03_rnn` and :doc:`/chapters/ch04_lstm`.
"""
