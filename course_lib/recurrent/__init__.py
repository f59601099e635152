"""Chapters 3 and 4, recurrent networks: the numpy Elman RNN and its language model, PyTorch cells and layers,
language models, gradient flow and ELMo.
"""
