"""The BERT encoder: embeddings, ``L`` post-LN Transformer blocks that see both directions, a pooler. Chapter 8.

``h_0 = Embed(ids, segments)``; each block, chapter 6's post-LN
:class:`~course_lib.transformer.blocks.EncoderBlock`, computes
``g = LN_1(h + SelfAttention(h))`` and ``h' = LN_2(g + FFN(g))`` with
``FFN(x) = W_2 GELU(W_1 x + b_1) + b_2`` (the exact, erf GELU) and a padding mask; the
pooler is ``tanh(W_p h_L[:, 0] + b_p)``, the ``[CLS]`` vector through one layer
(Devlin et al., 2019). See :doc:`/chapters/ch08_bert`. Tested against
``transformers.BertModel`` with the same weights: every layer's hidden states and
attention weights, with padding and two segments.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from course_lib import checks
from course_lib.bert.embeddings import BertEmbeddings
from course_lib.bert.self_attention import BertSelfAttention
from course_lib.transformer.blocks import EncoderBlock, Stack
from course_lib.transformer.layer_norm import LayerNorm

# transformers' BertConfig name -> BertConfig field, for reading a pretrained model's config.json.
_HF_NAMES = {"vocab_size": "vocab_size", "hidden_size": "width", "num_attention_heads": "num_heads",
             "num_hidden_layers": "layers", "intermediate_size": "ff_size", "max_position_embeddings": "context",
             "type_vocab_size": "segments", "hidden_dropout_prob": "dropout",
             "attention_probs_dropout_prob": "attention_dropout", "layer_norm_eps": "eps"}


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The size of a BERT. Chapter 8.

    Attributes:
        vocab_size: ``V``. width: ``D``. num_heads: ``nh``. layers: ``L``.
        ff_size: ``F`` (``None``: ``4D``). context: the number of positions.
        segments: the number of segment ids (2). dropout: on the embeddings and each
        sub-layer's output. attention_dropout: on the attention weights. eps: the
        LayerNorms' epsilon (BERT: ``1e-12``).
    """

    vocab_size: int
    width: int = 256
    num_heads: int = 4
    layers: int = 4
    ff_size: int | None = None
    context: int = 512
    segments: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    eps: float = 1e-12

    def __post_init__(self):
        checks.transformer_config(self, ("vocab_size", "width", "num_heads", "layers", "context", "segments"),
                                  ("dropout", "attention_dropout"))

    @classmethod
    def from_json(cls, path) -> "BertConfig":
        """The config of a pretrained model's ``config.json`` (``transformers``' names)."""
        found = json.loads(Path(path).read_text(encoding="utf-8"))
        if found.get("model_type", "bert") != "bert" or found.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{path} is not a BERT with GELU: model_type {found.get('model_type')!r}, "
                             f"hidden_act {found.get('hidden_act')!r}")
        if found.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute positions are supported")
        return cls(**{ours: found[theirs] for theirs, ours in _HF_NAMES.items() if theirs in found})

    def hf_config_kwargs(self) -> dict:
        """The arguments of ``transformers.BertConfig`` for the same model."""
        return {theirs: getattr(self, ours) for theirs, ours in _HF_NAMES.items()} | {"hidden_act": "gelu"}


class BertOutput(NamedTuple):
    """What :class:`BertModel` returns: ``last`` ``(B, T, D)``, ``pooled`` ``(B, D)``, ``hidden_states`` (``L + 1`` of ``(B, T, D)``, the embeddings first) and ``attentions`` (``L`` of ``(B, nh, T, T)``, detached). Chapter 8."""

    last: torch.Tensor
    pooled: torch.Tensor
    hidden_states: tuple
    attentions: tuple


def fused_layer_norm(x, weight, bias, eps: float = 1e-12):
    """Chapter 6's :func:`~course_lib.transformer.layer_norm.layer_norm` as one fused torch kernel, ``(..., D) -> (..., D)``. Chapter 8.

    The same equation, ``(x - mu) / sqrt(sigma^2 + eps) * gamma + beta``; the blocks of
    :class:`BertModel` use it because chapter 6's version, a chain of element-wise
    operations, made up a tenth of BERT's time on the CPU.
    """
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


class BertLayer(EncoderBlock):
    """One BERT block: chapter 6's post-LN encoder block with BERT's attention, GELU and dropout. Chapter 8.

    Parameters ``self_attn`` (a :class:`~course_lib.bert.self_attention.BertSelfAttention`),
    ``norm1``, ``linear1``, ``linear2``, ``norm2``; ``forward(x, padding)`` is
    :class:`~course_lib.transformer.blocks.EncoderBlock`'s, with
    :func:`~course_lib.transformer.blocks.post_ln_encoder_block`. Its LayerNorms use
    :func:`fused_layer_norm`.
    """

    def __init__(self, config: BertConfig, attention_fn: Callable | None = None):
        super().__init__(config.width, config.num_heads, config.ff_size, norm_first=False)
        self.self_attn = BertSelfAttention(config.width, config.num_heads, config.dropout,
                                           config.attention_dropout, attention_fn)
        self.norm1 = LayerNorm(config.width, config.eps, norm_fn=fused_layer_norm)
        self.norm2 = LayerNorm(config.width, config.eps, norm_fn=fused_layer_norm)
        self.dropout = nn.Dropout(config.dropout)

    def feed_forward(self, x):
        """``FFN(x) = W_2 GELU(W_1 x + b_1) + b_2``, then dropout; ``(..., D) -> (..., D)`` through ``(..., F)``."""
        return self.dropout(self.linear2(F.gelu(self.linear1(x))))


class BertModel(nn.Module):
    """BERT: :class:`~course_lib.bert.embeddings.BertEmbeddings`, ``L`` :class:`BertLayer` blocks and the pooler. Chapter 8.

    ``forward(ids, segments, padding)`` returns a :class:`BertOutput`. Weights start as
    BERT's (``N(0, 0.02^2)``, biases 0, LayerNorms 1 and 0); load pretrained ones with
    :func:`course_lib.bert.pretrained.load_pretrained`.

    Args:
        config: a :class:`BertConfig`.
        embed_fn: the embedding function (default :func:`~course_lib.bert.embeddings.bert_embeddings`).
        attention_fn: the attention function (default
            :func:`~course_lib.bert.self_attention.bert_self_attention`).
    """

    def __init__(self, config: BertConfig, embed_fn: Callable | None = None, attention_fn: Callable | None = None):
        super().__init__()
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
        self.config = config
        self.embeddings = BertEmbeddings(config.vocab_size, config.width, config.context, config.segments,
                                         config.dropout, config.eps, embed_fn)
        self.encoder = Stack([BertLayer(config, attention_fn) for _ in range(config.layers)], config.width,
                             final_norm=False)
        self.pooler = nn.Linear(config.width, config.width)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """BERT's initialisation: weights ``N(0, 0.02^2)``, biases 0, LayerNorm scales 1."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif "norm" in name:
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, ids, segments=None, padding=None) -> BertOutput:
        """``(B, T)`` ids, segment ids (``None``: all 0) and padding mask (``None``: no padding) ``->`` :class:`BertOutput`."""
        checks.token_batch(ids, "ids")
        if padding is not None:
            checks.expect_tensor(padding, "padding", tuple(ids.shape), "(B, T)")
        x = self.embeddings(ids, segments)  # (B, T, D)
        hidden, attentions = [x], []
        for block in self.encoder.layers:
            x = block(x, padding)
            hidden.append(x)
            attentions.append(block.attention_weights)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, D)
        return BertOutput(x, pooled, tuple(hidden), tuple(attentions))

    def num_parameters(self) -> int:
        """The number of trained numbers."""
        return sum(p.numel() for p in self.parameters())
