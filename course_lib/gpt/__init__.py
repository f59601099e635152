"""Chapter 7, GPT: a decoder-only Transformer language model, its training schedule, decoding and the KV cache.

Built on :mod:`course_lib.transformer`'s parts. See :doc:`/chapters/ch07_gpt`.
"""
