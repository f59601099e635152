"""Chapter 6, the Transformer: scaled dot-product and multi-head attention, masks, positional
encodings, LayerNorm, encoder and decoder blocks, the encoder-decoder Transformer.

See :doc:`/chapters/ch06_transformer`.
"""
