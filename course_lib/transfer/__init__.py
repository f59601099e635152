"""Chapter 9, after BERT: the three families of Transformers, parameter-efficient fine-tuning, scale.

Built on the parts of chapters 6 to 8. See :doc:`/chapters/ch09_after_bert`.
"""
