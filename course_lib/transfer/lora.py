"""LoRA: fine-tune a frozen model through a trainable low-rank update of some of its weights.

Low-rank adaptation (Hu et al., 2021) keeps a pretrained weight ``W (D_out, D_in)`` frozen and
learns its change as a product of two thin matrices, ``Delta W = (alpha / R) B A`` with
``A (R, D_in)``, ``B (D_out, R)`` and a rank ``R`` (the paper's ``r``) much smaller than ``D_out``
and ``D_in``: a layer ``y = x W^T + b`` becomes ``y = x W^T + b + (alpha / R) (x A^T) B^T``.
``B`` starts at zero, so the adapted model starts as the pretrained one; ``A`` starts random
(the paper draws it from a Gaussian; ``peft``, whose defaults we follow, from Kaiming's uniform
with ``a = sqrt(5)``, as ``torch.nn.Linear`` does). The paper adapts only the attention projections, and in most
experiments only ``W_Q`` and ``W_V``. After training, ``W + (alpha / R) B A`` is one ordinary
weight again (:meth:`LoRALinear.merged`): inference costs nothing extra.

:func:`add_lora` adapts the ``nn.Linear`` layers of a model whose names match, with ``peft``'s
rule, and the query, key or value block of a fused ``in_proj_weight (3D, D)`` (chapter 6's
attention and GPT's). See :doc:`/chapters/ch09_after_bert`. Tested against ``peft``'s
``get_peft_model`` on ``transformers.BertModel`` (outputs, gradients, parameter counts).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import nn
from torch.nn.utils import parametrize

from course_lib import checks

FUSED_BLOCKS = ("query", "key", "value")  # the row blocks of a fused in_proj_weight (3D, D), in order


def check_lora_args(x, weight, bias, lora_a, lora_b, scale) -> float:
    """Return ``scale`` as a float, raising unless the arguments of :func:`lora_linear` fit. Chapter 9.

    ``x (..., D_in)``, ``weight (D_out, D_in)``, ``bias (D_out,)`` or ``None``, ``lora_a (R, D_in)``,
    ``lora_b (D_out, R)``, ``scale`` a finite number.
    """
    checks.expect_tensor(weight, "weight", (None, None), "(D_out, D_in)")
    out_features, in_features = weight.shape
    if bias is not None:
        checks.expect_tensor(bias, "bias", (out_features,), "(D_out,)")
    checks.expect_tensor(lora_a, "lora_a", (None, in_features), "(R, D_in)")
    checks.expect_tensor(lora_b, "lora_b", (out_features, lora_a.shape[0]), "(D_out, R)")
    leading = tuple(x.shape[:-1]) if isinstance(x, torch.Tensor) else ()
    checks.expect_tensor(x, "x", leading + (in_features,), "(..., D_in)")
    if not x.is_floating_point():
        raise TypeError(f"x must be a float tensor, got dtype {x.dtype}")
    return _number(scale, "scale")


def _number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def lora_linear(x, weight, bias, lora_a, lora_b, scale):
    """A linear layer with a low-rank update: ``y = x W^T + b + scale (x A^T) B^T``. Chapter 9.

    The frozen layer ``W``, ``b`` and the trainable path through ``A`` then ``B``: ``x A^T``
    squeezes each input to ``R`` numbers and ``B`` maps them to the ``D_out`` outputs. It equals
    ``x (W + scale B A)^T + b`` but never forms the ``(D_out, D_in)`` matrix ``B A``. Written with
    torch operations; the arguments are not modified. Exercise of ps09.

    Args:
        x: ``(..., D_in)`` inputs (any leading axes, e.g. ``(B, T, D_in)``).
        weight: ``(D_out, D_in)`` the frozen weight ``W``, stored as in ``torch.nn.Linear``.
        bias: ``(D_out,)`` the frozen bias ``b``, or ``None``.
        lora_a: ``(R, D_in)`` the down-projection ``A``.
        lora_b: ``(D_out, R)`` the up-projection ``B``.
        scale: ``alpha / R``, a number.

    Returns:
        ``(..., D_out)``, a tensor of the dtype of ``x``.
    """
    scale = check_lora_args(x, weight, bias, lora_a, lora_b, scale)
    ### BEGIN SOLUTION
    y = x @ weight.T + scale * ((x @ lora_a.T) @ lora_b.T)  # (..., D_out), through (..., R)
    return y if bias is None else y + bias
    ### END SOLUTION


def lora_delta(lora_a, lora_b, scale):
    """The change of the weight, ``Delta W = scale B A``: ``(D_out, R) @ (R, D_in) -> (D_out, D_in)``. Chapter 9.

    A matrix of rank at most ``R``, used to merge the update into ``W``.
    """
    checks.expect_tensor(lora_a, "lora_a", (None, None), "(R, D_in)")
    checks.expect_tensor(lora_b, "lora_b", (None, lora_a.shape[0]), "(D_out, R)")
    return _number(scale, "scale") * (lora_b @ lora_a)


def _check_sizes(rank, alpha, dropout) -> tuple[int, float, float]:
    rank = checks.positive_int(rank, "rank")
    alpha = _number(alpha, "alpha")
    if not 0 <= _number(dropout, "dropout") < 1:
        raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
    return rank, alpha, float(dropout)


def _lora_pair(out_features: int, in_features: int, rank: int, like: torch.Tensor) -> tuple[nn.Parameter, nn.Parameter]:
    """``A (R, D_in)`` Kaiming-uniform, ``a = sqrt(5)`` (bound ``D_in^-1/2``, as peft), ``B (D_out, R)`` zeros."""
    lora_a = nn.Parameter(torch.empty(rank, in_features, dtype=like.dtype, device=like.device))
    nn.init.kaiming_uniform_(lora_a, a=math.sqrt(5))
    return lora_a, nn.Parameter(torch.zeros(out_features, rank, dtype=like.dtype, device=like.device))


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update, ``y = x W^T + b + (alpha / R) (x A^T) B^T``. Chapter 9.

    ``base`` keeps the layer (its weight and bias get ``requires_grad = False``);
    ``lora_a`` ``(R, D_in)`` starts Kaiming-uniform, ``lora_b`` ``(D_out, R)`` at zero, so at first
    the layer computes exactly what ``base`` did. ``forward`` maps ``(..., D_in) -> (..., D_out)``
    with :func:`lora_linear`; in training mode with ``dropout > 0``, the low-rank path
    sees a dropped-out copy of ``x`` and the frozen path the input itself (``peft``'s
    ``lora_dropout``). A model that reads ``layer.weight`` and ``layer.bias`` instead of
    calling the layer (chapter 8's BERT attention does) gets ``W + (alpha / R) B A`` and
    ``b``: the same outputs and gradients, without dropout.

    Args:
        base: the ``nn.Linear(D_in, D_out)`` to adapt.
        rank: ``R``. alpha: ``alpha``; the update is scaled by ``scale = alpha / R``.
        dropout: the probability of dropping an input of the low-rank path.
        lora_fn: the function the layer computes with, :func:`lora_linear`'s arguments and result
            (``None``: :func:`lora_linear`; problem set 9 passes the student's).
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0, lora_fn: Callable | None = None):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"base must be a torch.nn.Linear, got {type(base).__name__}")
        self.rank, self.alpha, p = _check_sizes(rank, alpha, dropout)
        self.scale = self.alpha / self.rank
        self.base = base.requires_grad_(False)
        self.lora_a, self.lora_b = _lora_pair(base.out_features, base.in_features, self.rank, base.weight)
        self.dropout = nn.Dropout(p)
        self.lora_fn = lora_fn

    def forward(self, x):
        """``(..., D_in) -> (..., D_out)``."""
        if self.training and self.dropout.p > 0:  # only the low-rank path sees the dropped-out inputs x'
            return self.base(x) + self.scale * ((self.dropout(x) @ self.lora_a.T) @ self.lora_b.T)  # (..., D_out)
        return (self.lora_fn or lora_linear)(x, self.base.weight, self.base.bias, self.lora_a, self.lora_b, self.scale)

    @property
    def weight(self):
        """``(D_out, D_in)``: the adapted weight ``W + (alpha / R) B A``, for models that read ``layer.weight``."""
        if self.training and self.dropout.p > 0:
            raise RuntimeError("the model reads this LoRA layer's weight instead of calling it, so the dropout of "
                               "its inputs cannot act: use dropout=0 for this target")
        return self.base.weight + lora_delta(self.lora_a, self.lora_b, self.scale)

    @property
    def bias(self):
        """``(D_out,)`` the frozen bias ``b``, or ``None``."""
        return self.base.bias

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear(D_in, D_out)``, weight ``W + (alpha / R) B A`` and bias ``b``: the same outputs."""
        base = self.base
        layer = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                          dtype=base.weight.dtype, device=base.weight.device)
        with torch.no_grad():
            layer.weight.copy_(base.weight + lora_delta(self.lora_a, self.lora_b, self.scale))
            if base.bias is not None:
                layer.bias.copy_(base.bias)
        return layer


class FusedLoRA(nn.Module):
    """LoRA on blocks of a fused ``in_proj_weight (3D, D)``: ``[W_Q; W_K; W_V] + (alpha / R) [B_Q A_Q; 0; B_V A_V]``.

    Chapter 9. Only the blocks named in ``blocks`` (among ``"query"``, ``"key"``, ``"value"``) get
    an update, each with its own ``lora_a[name]`` ``(R, D)`` (Kaiming-uniform) and
    ``lora_b[name]`` ``(D, R)`` (zeros); the other blocks get zeros. Registered with
    ``torch.nn.utils.parametrize.register_parametrization`` by :func:`add_lora`, so the
    attention layer reads its adapted weight as ``in_proj_weight`` unchanged;
    ``parametrize.remove_parametrizations(layer, "in_proj_weight")`` merges it.
    No dropout: a change of the weight cannot drop inputs.

    Args:
        width: ``D``. blocks: the names of the blocks to adapt.
        rank: ``R``. alpha: ``alpha``. like: a tensor whose dtype and device the new parameters take.
    """

    def __init__(self, width: int, blocks: Sequence[str], rank: int, alpha: float, like: torch.Tensor):
        super().__init__()
        unknown = sorted(set(blocks) - set(FUSED_BLOCKS))
        if unknown or not blocks:
            raise ValueError(f"blocks must be some of {FUSED_BLOCKS}, got {list(blocks)}")
        self.width = checks.positive_int(width, "width")
        self.rank, self.alpha, _ = _check_sizes(rank, alpha, 0.0)
        self.scale = self.alpha / self.rank
        pairs = {name: _lora_pair(self.width, self.width, self.rank, like) for name in FUSED_BLOCKS if name in blocks}
        self.lora_a = nn.ParameterDict({name: a for name, (a, _) in pairs.items()})
        self.lora_b = nn.ParameterDict({name: b for name, (_, b) in pairs.items()})

    def forward(self, weight):
        """``(3D, D) -> (3D, D)``: the frozen weight plus the update of each adapted block."""
        checks.expect_tensor(weight, "weight", (3 * self.width, self.width), "(3D, D)")
        deltas = [lora_delta(self.lora_a[name], self.lora_b[name], self.scale) if name in self.lora_a
                  else weight.new_zeros(self.width, self.width) for name in FUSED_BLOCKS]  # three (D, D)
        return weight + torch.cat(deltas)  # (3D, D)


def is_target(name: str, targets: Sequence[str]) -> bool:
    """Whether the module called ``name`` is a target: it is one or ends with ``"." + target``. Chapter 9.

    ``peft``'s rule for a list of names: ``"query"`` matches ``encoder.layers.0.self_attn.query``,
    ``"self_attn.query"`` too, and neither matches ``query_proj``.
    """
    return any(name == target or name.endswith("." + target) for target in targets)


def _fused_width(module: nn.Module) -> int | None:
    weight = getattr(module, "in_proj_weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2 and weight.shape[0] == 3 * weight.shape[1]:
        return weight.shape[1]
    return None


def add_lora(model: nn.Module, targets: Sequence[str], rank: int, alpha: float, dropout: float = 0.0,
             lora_fn: Callable | None = None) -> list[str]:
    """Freeze ``model`` and give each targeted weight a LoRA update; return the adapted names. Chapter 9.

    A module is a target when its dotted name equals one of ``targets`` or ends with
    ``"." + target`` (``peft``'s rule for a list: ``"query"`` matches
    ``encoder.layers.0.self_attn.query``, not ``query_proj``). Each targeted ``nn.Linear``
    is replaced by a :class:`LoRALinear`; a module with a fused ``in_proj_weight (3D, D)``
    (chapter 6's and GPT's attention) has blocks named ``<module>.query``, ``.key``,
    ``.value``, and the targeted ones get a :class:`FusedLoRA`. Every other parameter of
    ``model`` gets ``requires_grad = False``. The model is changed in place.

    Args:
        model: the ``nn.Module`` to adapt.
        targets: a list of names, e.g. ``["query", "value"]`` (the paper's ``W_Q`` and ``W_V``).
        rank: ``R``. alpha: ``alpha`` (scale ``alpha / R``). dropout: on the low-rank path's
            inputs of the ``nn.Linear`` targets (must be 0 if a fused block is targeted).
        lora_fn: what the :class:`LoRALinear` layers compute with (``None``: :func:`lora_linear`).

    Returns:
        the names of the adapted layers (or blocks), a list of str in the model's order.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(targets, str) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise TypeError(f"targets must be a non-empty list of module names such as ['query', 'value'], got {targets!r}")
    rank, alpha, dropout = _check_sizes(rank, alpha, dropout)
    linears, fused, adapted = [], [], []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and is_target(name, targets):
            linears.append(name)
            adapted.append(name)
        elif _fused_width(module) is not None:
            blocks = [block for block in FUSED_BLOCKS if is_target(f"{name}.{block}".lstrip("."), targets)]
            fused += [(name, blocks)] if blocks else []
            adapted += [f"{name}.{block}".lstrip(".") for block in blocks]
    if not linears and not fused:
        raise ValueError(f"no nn.Linear layer or fused attention block of the model matches {list(targets)}")
    if fused and dropout > 0:
        raise ValueError("dropout must be 0 when a fused in_proj_weight block is targeted")
    model.requires_grad_(False)
    for name in linears:
        parent, _, child = name.rpartition(".")
        owner = model.get_submodule(parent)
        setattr(owner, child, LoRALinear(getattr(owner, child), rank, alpha, dropout, lora_fn))
    for name, blocks in fused:
        module = model.get_submodule(name)
        weight = module.in_proj_weight
        parametrize.register_parametrization(module, "in_proj_weight",
                                             FusedLoRA(weight.shape[1], blocks, rank, alpha, weight))
    return adapted


def trainable_parameters(model: nn.Module) -> int:
    """The number of numbers that training changes, those of parameters with ``requires_grad``. Chapter 9."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every LoRA update of ``model`` into its weights, in place: after training, no extra cost. Chapter 9.

    Each :class:`LoRALinear` becomes the plain ``nn.Linear`` of :meth:`LoRALinear.merged`, and
    each :class:`FusedLoRA` parametrization is removed with its adapted weight kept,
    ``W <- W + (alpha / R) B A``. The model computes what it computed before (up to rounding)
    and holds no LoRA parameter. Takes and returns a model, no array.

    Returns:
        ``model``.
    """
    for name, module in list(model.named_modules()):
        if parametrize.is_parametrized(module, "in_proj_weight") and any(
                isinstance(p, FusedLoRA) for p in module.parametrizations["in_proj_weight"]):
            parametrize.remove_parametrizations(module, "in_proj_weight", leave_parametrized=True)
        for child_name, child in list(module.named_children()):
            if isinstance(child, LoRALinear):
                setattr(module, child_name, child.merged())
    return model
