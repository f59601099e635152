"""Part 1 of course_lib, text: loaders of real English text that ships offline, tokenizers, vocabularies.

Used from chapter 1 on; see :doc:`/chapters/ch01_counts`.
"""
