"""Chapter 5, attention: number phrases as a parallel corpus, sequence-to-sequence models, masked softmax,
additive and multiplicative attention, training with teacher forcing, greedy and beam decoding.

See :doc:`/chapters/ch05_attention`.
"""
