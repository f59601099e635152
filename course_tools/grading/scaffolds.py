"""One mistake, one function: what stands in for the other exercises a tested function calls.

A function of an assignment may call another exercise of the same assignment by its
name in the notebook (``general_attention`` calls ``masked_softmax``; ``multi_head_attention``
takes ``attention_fn=scaled_dot_product_attention`` by default). Graded with the
student's own version of that other function, one mistake would cost the points of
both. So when a function's test cells are graded, every other exercise it names is
replaced, in that test's process only, by a *scaffold*: a course_lib implementation
written independently of the exercise (:mod:`course_lib.attention.scaffolds` and :mod:`course_lib.testing`), which the student
edition ships (:mod:`course_tools.in_sandbox.probe_runner` puts it in place).

:data:`SCAFFOLDS` names the scaffold of each exercise that others call;
:func:`dependencies` finds, from the reference answers, which exercises each function
names. A test fails when a function names an exercise that has no scaffold.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from course_tools import ROOT
from course_tools.exercises import find_exercises, owners

SCAFFOLDS = {
    "attention.masking.masked_softmax": "course_lib.attention.scaffolds:plain_masked_softmax",
    "transformer.scaled_attention.scaled_dot_product_attention": "course_lib.testing:PlainScaledAttention()",
    "transfer.adamw.adamw_step": "course_lib.transfer.scaffolds:torch_adamw_step",
    "transfer.early_stopping.early_stopping": "course_lib.transfer.scaffolds:patience_counter",
}
"""Exercise key -> ``"module:attribute"`` of its scaffold (``()`` at the end: an instance of that class)."""
STAND_INS = {
    "recurrent.cells.lstm_cell": ("course_lib.recurrent.fused_lstm:lstm_layer", "course_lib.recurrent.fused_lstm:_LSTMLayer"),
    "gpt.causal_attention.causal_self_attention": ("course_lib.testing:PlainCausalAttention",
                                                   "course_lib.gpt.causal_attention:_attend_with_kv_cache",
                                                   # chapter 9's attention with as many key-value heads as heads
                                                   "course_lib.transfer.grouped_query_attention:grouped_query_attention",
                                                   "course_lib.transfer.grouped_query_attention:GroupedQueryAttention"),
    "gpt.beam.beam_search": ("course_lib.attention.decoding:beam_search",),
    "gpt.bpe.most_frequent_pair": ("course_lib.gpt.bpe:train_bpe",),  # its first merge is the answer
    "bert.self_attention.bert_self_attention": ("course_lib.transformer.scaled_attention:scaled_dot_product_attention",),
    # the adapted weight W + scale B A (a property, the merged layer, the fused parametrization) computes the layer
    "transfer.lora.lora_linear": ("course_lib.transfer.lora:lora_delta", "course_lib.transfer.lora:LoRALinear",
                                  "course_lib.transfer.lora:FusedLoRA", "course_lib.transfer.lora:merge_lora"),
}
"""Exercise key -> other course_lib code that computes it on its own: a test double, or an earlier exercise's
answer (revealed in this edition) whose name the exercise's visible test forbids."""


@functools.lru_cache(maxsize=None)
def dependencies(assignment: str, root: Path = ROOT) -> dict[str, dict[str, str]]:
    """``function name -> {name of another exercise of the assignment it uses: exercise key}``."""
    exercises = find_exercises(root / "course_lib")
    keys = [key for key, owner in owners(root).items() if owner == assignment]
    names = {key.rsplit(".", 1)[-1]: key for key in keys}
    found = {}
    for key in keys:
        own = key.rsplit(".", 1)[-1]
        used = {node.id for node in ast.walk(ast.parse(exercises[key].source())) if isinstance(node, ast.Name)}
        found[own] = {name: names[name] for name in sorted(used & set(names)) if name != own}
    return found


def for_function(assignment: str, function: str, root: Path = ROOT) -> dict[str, str]:
    """``name in the notebook -> scaffold reference`` for the exercises ``function`` calls (KeyError if one has none)."""
    return {name: SCAFFOLDS[key] for name, key in dependencies(assignment, root).get(function, {}).items()}


@functools.lru_cache(maxsize=None)
def stand_ins(assignment: str, function: str, root: Path = ROOT) -> tuple[str, ...]:
    """The course's own implementations of ``function`` (its scaffold, :data:`STAND_INS`), which the graded run
    makes unusable while ``function`` is graded (:mod:`course_tools.in_sandbox.forbid`): they grade other functions, or
    were another exercise, and are no answer to this one."""
    keys = [key for key, owner in owners(root).items() if owner == assignment and key.rsplit(".", 1)[-1] == function]
    return tuple(ref for key in keys for ref in ((SCAFFOLDS[key],) if key in SCAFFOLDS else ()) + STAND_INS.get(key, ()))
