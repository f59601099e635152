"""Chapter 8, BERT: WordPiece tokenization, the bidirectional encoder, masked-language-model pre-training, pretrained weights, fine-tuning and what the layers know.

Built on :mod:`course_lib.transformer`'s blocks. See :doc:`/chapters/ch08_bert`.
"""
