"""course_lib: the reference library of *From one-hot to BERT*.

The library every chapter runs on and every assignment grades against, in parts
that follow the book:

- :mod:`course_lib.text`: real English text that ships offline, a tokenizer and
  vocabularies; used from :doc:`/chapters/ch01_counts` on.
- :mod:`course_lib.vectors`: word vectors, chapters 1 and 2. Counts, PPMI and SVD
  (:doc:`/chapters/ch01_counts`); word2vec, gradient checks, alignment and the
  similarity and analogy benchmarks (:doc:`/chapters/ch02_word2vec`).
- :mod:`course_lib.recurrent`: recurrent networks, chapters 3 and 4. The Elman RNN
  and its language model in numpy, clipping, perplexity, sampling and the n-gram
  baseline (:doc:`/chapters/ch03_rnn`); RNN, LSTM and GRU cells and layers in PyTorch,
  language models, gradient flow, tasks with long-range dependencies and ELMo
  (:doc:`/chapters/ch04_lstm`).
- :mod:`course_lib.attention`: sequence to sequence and attention, chapter 5. Number
  phrases as a parallel corpus, padding masks and the masked softmax, additive and
  multiplicative attention, encoder-decoder models trained with teacher forcing,
  greedy and beam search, translation metrics (:doc:`/chapters/ch05_attention`).
- :mod:`course_lib.transformer`: the Transformer, chapter 6 (and the models built on
  it, chapters 7 and 8). Scaled dot-product and multi-head attention with padding and
  causal masks, sinusoidal, learned, rotary and ALiBi positions, LayerNorm, pre-LN and
  post-LN encoder and decoder blocks, the encoder-decoder Transformer and its decoding
  (:doc:`/chapters/ch06_transformer`).
- :mod:`course_lib.gpt`: GPT, chapter 7. Causal self-attention with a KV cache, the
  decoder-only language model with GPT-2's layout and weight copying to and from
  ``transformers``, the warm-up and cosine schedule, sliding-window perplexity,
  temperature, top-k, top-p and repetition penalties, generation and beam search
  (:doc:`/chapters/ch07_gpt`). Byte-pair encoding, learned and applied at GPT-2's byte level.
- :mod:`course_lib.bert`: BERT, chapter 8. WordPiece tokenization, BERT's inputs,
  embeddings and padding-masked self-attention, the post-LN encoder on chapter 6's
  blocks, pretrained weights from safetensors (all-MiniLM-L6-v2), pooling, masked
  language modelling and next sentence prediction, fine-tuning and the analysis of
  layers and heads (:doc:`/chapters/ch08_bert`).
- :mod:`course_lib.transfer`: after BERT, chapter 9. The attention masks of the three
  families, T5's span corruption and a pre-training on it against masked language
  modelling, LoRA, AdamW, early stopping and the fine-tuning loop,
  grouped-query attention and its cache, and a power law fitted with an interval
  (:doc:`/chapters/ch09_after_bert`).
- Shared by all chapters: :mod:`course_lib.checks` (argument checks),
  :mod:`course_lib.training` (what the training loops return, contexts that
  restore global state), :mod:`course_lib.progress` (progress bars),
  :mod:`course_lib.activations` (activation functions and a stable log-softmax),
  :mod:`course_lib.seeds` (an experiment run over several seeds: every run, the mean and its
  95 % interval, from chapter 5 on), :mod:`course_lib.plotting` (the figures the chapters draw
  and the book's figure style),
  :mod:`course_lib.diagrams` (the architecture diagrams),
  :mod:`course_lib.testing` (the checks the assignments' test cells call),
  :mod:`course_lib.notebook` (glued values and a clean stop, for a chapter run as a
  notebook) and :mod:`course_lib.unrevealed` (the error a student edition raises for an
  answer it does not reveal).

**Shape letters.** The book's :doc:`/notation` page gives the letters of the equations; every shape in a docstring or in a ``# (B, T, H)`` comment is
written with these letters, and each letter has one meaning across the library.
Sums and products are written out (``(G*H, I)``, ``(B, T, 2H)``,
``(L + 1, B, T, 2H)``), ``...`` stands for any number of axes, and a lower-case
name that is not in the table, as in ``(steps,)``, is the value of the
function's argument of that name. No letter counts directions: outputs of
both directions are ``(B, T, 2H)`` and the final states of ``L`` bidirectional
layers ``(2L, B, H)``. A matrix whose name is a letter (the parameters
``params['V']`` or ``params['E']`` of the numpy language model) is named in
equations only; in a shape, ``V`` is always the vocabulary size.

==========  =====================================================================
letter      meaning
==========  =====================================================================
``B``       batch size: the sequences, pairs or examples processed together
``T``       time steps: the length of a sequence, or of a chunk of one
``T_d``     the length of document ``d``, in tokens
``Tq``      query positions of attention (the decoder's steps), chapter 5 on
``Tk``      key positions of attention (the source's tokens), chapter 5 on
``N``       the number of items in a flat list: tokens, ids, pairs, examples, positions, sentences
``M``       the number of items in a second list next to ``N``, e.g. the columns of an ``(N, M)`` table
``V``       vocabulary size
``E``       embedding size: the dimension of a word vector or of a token embedding
``C``       context words: the columns of a word-context co-occurrence matrix
``K``       negative (noise) samples per pair
``S``       noise words shared by a whole batch
``I``       input size of a recurrent cell or layer: the features it reads per step
``H``       hidden size of a recurrent network
``G``       gate blocks stacked in a recurrent weight: 1 (RNN), 3 (GRU), 4 (LSTM)
``L``       number of layers
``A``       the inner size of the additive attention score
``D``       the model width of a Transformer: the size of every position's vector, chapter 6 on
``nh``      attention heads
``hs``      the size of one head, ``D / nh``
``n_kv``    key-value heads of grouped-query attention, dividing ``nh``, chapter 9
``D_in``    the input size of a linear layer adapted by LoRA, chapter 9
``D_out``   the output size of a linear layer adapted by LoRA, chapter 9
``R``       the rank of a LoRA update ``B A`` (the paper's ``r``), chapter 9
``F``       the inner size of a Transformer's feed-forward network
``P``       positions already held in a KV cache, chapter 7 on
``n_docs``  number of documents
``n_eval``  number of evaluations during a training run
==========  =====================================================================

Importing the package imports nothing heavy; import the module you need.
"""

__version__ = "0.1.0"
