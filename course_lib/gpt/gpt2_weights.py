"""Copying weights between course_lib's GPT and ``transformers``' GPT-2. Chapter 7.

GPT-2 stores its projections as ``Conv1D`` weights of shape ``(in, out)``, the
transpose of ``nn.Linear``'s ``(out, in)``; its attention stacks queries, keys and
values along the output axis as ours does. The names map one to one, so a
``state_dict`` converts both ways without ``transformers`` installed. See
:doc:`/chapters/ch07_gpt`.
"""

from __future__ import annotations

import torch

_GLOBAL = {"token_embedding.weight": "transformer.wte.weight",
           "position_embedding.weight": "transformer.wpe.weight",
           "norm.weight": "transformer.ln_f.weight", "norm.bias": "transformer.ln_f.bias"}
_BLOCK = {"norm1.weight": ("ln_1.weight", False), "norm1.bias": ("ln_1.bias", False),
          "self_attn.in_proj_weight": ("attn.c_attn.weight", True), "self_attn.in_proj_bias": ("attn.c_attn.bias", False),
          "self_attn.out_proj.weight": ("attn.c_proj.weight", True), "self_attn.out_proj.bias": ("attn.c_proj.bias", False),
          "norm2.weight": ("ln_2.weight", False), "norm2.bias": ("ln_2.bias", False),
          "linear1.weight": ("mlp.c_fc.weight", True), "linear1.bias": ("mlp.c_fc.bias", False),
          "linear2.weight": ("mlp.c_proj.weight", True), "linear2.bias": ("mlp.c_proj.bias", False)}


def _pairs(layers: int):
    """(our name, GPT-2's name, transposed) for every parameter of an ``L``-layer model."""
    for ours, theirs in _GLOBAL.items():
        yield ours, theirs, False
    for layer in range(layers):
        for ours, (theirs, transposed) in _BLOCK.items():
            yield f"blocks.{layer}.{ours}", f"transformer.h.{layer}.{theirs}", transposed


def to_gpt2_state_dict(model) -> dict[str, torch.Tensor]:
    """A ``GPT2LMHeadModel`` state dict holding the weights of a :class:`~course_lib.gpt.model.GPT`. Chapter 7.

    ``lm_head.weight`` is the token embedding (tied), ``(V, D)``; projection weights are
    transposed, e.g. ``self_attn.in_proj_weight`` ``(3D, D)`` becomes ``attn.c_attn.weight``
    ``(D, 3D)``. Tensors are copies.
    """
    ours = model.state_dict()
    out = {theirs: (ours[name].T if transposed else ours[name]).clone()
           for name, theirs, transposed in _pairs(model.config.layers)}
    out["lm_head.weight"] = out["transformer.wte.weight"].clone()
    return out


def from_gpt2_state_dict(state: dict, layers: int) -> dict[str, torch.Tensor]:
    """The :class:`~course_lib.gpt.model.GPT` state dict of an ``L``-layer GPT-2 state dict. Chapter 7.

    The inverse of :func:`to_gpt2_state_dict`: ``attn.c_attn.weight`` ``(D, 3D)`` becomes
    ``self_attn.in_proj_weight`` ``(3D, D)``, and so on. Raises ``KeyError`` naming the first
    parameter GPT-2's dict lacks.
    """
    out = {}
    for name, theirs, transposed in _pairs(layers):
        if theirs not in state:
            raise KeyError(f"the GPT-2 state dict has no {theirs!r} (is it a {layers}-layer GPT2LMHeadModel?)")
        out[name] = (state[theirs].T if transposed else state[theirs]).clone()
    return out
