"""Every public course_lib function documents itself: what it returns, its shapes, where it is taught.

The rules, checked over every module of course_lib and its subpackages:

- every public function and class (name without a leading underscore, defined in
  that module) has a docstring of more than 40 characters whose first line is a
  sentence ending with a period, and names its chapter ("Chapter 3", "Chapters 3
  and 4", "All chapters", "Every assignment"); its public methods have a docstring
  whose first line ends with a period;
- every public function and method gives the shape of its arrays in letters,
  ````(B, T, H)````, or says its arrays may have "any shape", or is listed in
  :data:`NO_ARRAYS` (it takes and returns no array: text, models, contexts);
- every module docstring links its chapter with ``:doc:`/chapters/...``` (to a file
  that exists) or says it is shared by all chapters;
- the shape-letter table in the docstring of :mod:`course_lib` lists each letter
  once, and no docstring writes a shape with a letter that is not in the table
  (a lower-case name that is an argument of the function is allowed: ``(N, k)``).
"""

from __future__ import annotations

import collections
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import course_lib

BOOK = Path(__file__).resolve().parents[1]

MODULES = [course_lib] + [importlib.import_module(m.name)
                          for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")]


def _is_function(obj) -> bool:
    """A function, also behind functools wrappers such as ``lru_cache``."""
    return not inspect.isclass(obj) and callable(obj) and inspect.isfunction(inspect.unwrap(obj))


def _defined_here(module, name, obj) -> bool:
    return (_is_function(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == module.__name__


PUBLIC = [(module, name, obj) for module in MODULES for name, obj in vars(module).items()
          if not name.startswith("_") and _defined_here(module, name, obj)]


def _methods(cls, public_only: bool = True):
    """``(name, function)`` of the methods written in ``cls`` itself (not inherited, not assigned)."""
    for name, attr in vars(cls).items():
        if public_only and name.startswith("_"):
            continue
        func = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        if inspect.isfunction(func) and func.__qualname__.startswith(cls.__qualname__ + "."):
            yield name, func


METHODS = [(module, f"{name}.{method}", func) for module, name, obj in PUBLIC if inspect.isclass(obj)
           for method, func in _methods(obj)]
FUNCTIONS = [(module, name, obj) for module, name, obj in PUBLIC if _is_function(obj)] + METHODS

# Public functions and methods that take and return no array (so have no shape to give).
NO_ARRAYS = {"course_lib.bert.pretraining.bert_adamw", "course_lib.notebook.glue", "course_lib.notebook.stop_at_unrevealed", 
    "course_lib.attention.decoding.check_search_args",  # a function and ints
    "course_lib.attention.number_phrases.english_tokens",  # words of a number
    "course_lib.attention.number_phrases.german_tokens",
    "course_lib.attention.number_phrases.load_number_translation",  # a corpus object
    "course_lib.attention.number_phrases.load_length_split",
    "course_lib.seeds.separated",  # two Spreads -> a bool
    "course_lib.seeds.compare",  # two Spreads -> a word
    "course_lib.seeds.Spread.text",  # a str
    "course_lib.seeds.Spread.mean",  # a float
    "course_lib.seeds.Spread.n",  # an int
    "course_lib.seeds.proportion",  # two ints -> a Spread
    "course_lib.seeds.over_seeds",  # an experiment -> Spreads
    "course_lib.plotting.seed_spread",  # Spreads -> Axes
    "course_lib.diagrams.canvas",  # drawing primitives: coordinates and text, no arrays
    "course_lib.diagrams.box",
    "course_lib.diagrams.arrow",
    "course_lib.diagrams.note",
    "course_lib.transformer.multi_head.parameter_count",  # ints
    "course_lib.transformer.embedding.rotary_for",  # a kind -> a function
    "course_lib.gpt.generation.distinct_n",  # token sequences -> a float
    "course_lib.gpt.training.warmup_cosine",  # ints -> a function
    "course_lib.gpt.model.GPTConfig.gpt2_config_kwargs",  # a dict of sizes
    "course_lib.gpt.model.GPT.reset_parameters",  # in place
    "course_lib.gpt.model.GPT.num_parameters",  # an int
    "course_lib.gpt.model.GPT.uses_reference_layers",  # a model -> a bool
    "course_lib.checks.positive_int",  # an int
    "course_lib.checks.nonnegative_int",  # an int
    "course_lib.checks.even_int",  # an int
    "course_lib.checks.generator",  # a numpy Generator
    "course_lib.progress.progress_bar",  # a tqdm bar
    "course_lib.testing.quiet",  # a context
    "course_lib.testing.assert_own_code",  # reads a function's code
    "course_lib.text.corpus.lee_documents",  # strings
    "course_lib.text.corpus.wikipedia_articles",  # strings
    "course_lib.text.corpus.english_documents",  # lists of tokens
    "course_lib.text.tokenizers.tokenize",  # str -> list of str
    "course_lib.text.vocabulary.Vocabulary.build",  # token lists -> Vocabulary
    "course_lib.text.vocabulary.with_specials",  # Vocabulary -> Vocabulary
    "course_lib.vectors.evaluation.word_similarity",  # KeyedVectors -> floats
    "course_lib.vectors.evaluation.analogy_accuracy",  # KeyedVectors -> float, int
    "course_lib.vectors.evaluation.evaluate",  # KeyedVectors -> dict of numbers
    "course_lib.recurrent.cells.Cell.reset_parameters",  # draws the weights in place
    "course_lib.recurrent.cells.Cell.extra_repr",  # a str
    "course_lib.recurrent.layers.RecurrentNetwork.load_torch",  # module -> module
    "course_lib.recurrent.layers.RecurrentNetwork.from_torch",  # module -> module
    "course_lib.recurrent.language_model.generate",  # model, tokens -> str
    "course_lib.training.TrainingHistory.keys",  # record names
    "course_lib.training.torch_seed",  # a context
    "course_lib.training.torch_threads",  # a context
    "course_lib.training.blas_threads",  # a context
    "course_lib.training.eval_mode",  # a context
    "course_lib.training.optimizer_step",  # a scalar loss -> a float
    "course_lib.checks.transformer_config",  # a dataclass of sizes
    "course_lib.bert.inputs.truncate_pair",  # token lists
    "course_lib.bert.inputs.encode",  # text -> lists of ids
    "course_lib.bert.pretrained.minilm_directory",  # a folder
    "course_lib.bert.pretrained.load_pretrained",  # a folder -> a model and a tokenizer
    "course_lib.gpt.bpe.byte_alphabet",  # text, symbols and ids as lists
    "course_lib.gpt.bpe.to_byte_symbols",
    "course_lib.gpt.bpe.from_byte_symbols",
    "course_lib.gpt.bpe.byte_level_words",
    "course_lib.gpt.bpe.train_bpe",
    "course_lib.gpt.bpe.train_bpe_plain",
    "course_lib.gpt.bpe.most_frequent_pair",
    "course_lib.gpt.bpe.apply_merges",
    "course_lib.gpt.bpe.check_word_ids",
    "course_lib.gpt.bpe.BPETokenizer.split_word",
    "course_lib.gpt.bpe.BPETokenizer.words",
    "course_lib.gpt.bpe.BPETokenizer.tokenize",
    "course_lib.gpt.bpe.BPETokenizer.encode",
    "course_lib.gpt.bpe.BPETokenizer.decode",
    "course_lib.text.memo.BoundedMemo.remember",  # a word -> a list
    "course_lib.bert.wordpiece.strip_accents",  # text
    "course_lib.bert.wordpiece.basic_tokenize",
    "course_lib.bert.wordpiece.wordpiece_word",
    "course_lib.bert.wordpiece.read_vocab",
    "course_lib.bert.wordpiece.WordPieceTokenizer.from_file",
    "course_lib.bert.wordpiece.WordPieceTokenizer.special_ids",
    "course_lib.bert.wordpiece.WordPieceTokenizer.tokenize",
    "course_lib.bert.wordpiece.WordPieceTokenizer.convert_tokens_to_ids",
    "course_lib.bert.wordpiece.WordPieceTokenizer.decode",
    "course_lib.bert.model.BertConfig.from_json",  # sizes
    "course_lib.bert.model.BertConfig.hf_config_kwargs",
    "course_lib.bert.model.BertModel.reset_parameters",  # acts on the model
    "course_lib.bert.model.BertModel.num_parameters",  # an int
    "course_lib.bert.pretraining_data.split_sentences",  # text -> sentences
    "course_lib.bert.pretraining_data.pretraining_corpus",  # texts -> a tokenizer and lists of ids
    "course_lib.bert.pretraining_data.nsp_pairs",  # lists of ids -> pairs of lists
    "course_lib.bert.pretraining_data.CompactTokenizer.from_corpus",  # token lists -> a tokenizer
    "course_lib.bert.pretraining_data.CompactTokenizer.tokenize",  # text -> tokens
    "course_lib.bert.pretraining.linear_warmup_decay",  # ints -> a function
    "course_lib.bert.pretraining.fill_mask",  # text -> tokens and probabilities
    "course_lib.bert.encoding.encode_ids",  # texts -> lists of ids
    "course_lib.bert.classifier.BertClassifier.trained_parameters",  # a list of parameters
    "course_lib.bert.analysis.word_positions",  # text -> positions
    "course_lib.transfer.span_corruption.span_counts",  # ints -> ints
    "course_lib.transfer.grouped_query_attention.kv_cache_bytes",  # ints -> an int
    "course_lib.transfer.lora.is_target",  # a name and names -> a bool
    "course_lib.transfer.lora.trainable_parameters",  # a model -> an int
    "course_lib.transfer.lora.merge_lora",  # a model -> the model
}

CHAPTER_WORDS = ("Chapter", "chapter", "assignment", "All chapters")
SHARED_WORDS = ("all chapters", "every assignment", "shared")

# A shape is a parenthesized, comma-separated group inside ``double backticks`` whose
# axes are sums, differences, products or floor divisions of numbers, names ("2H" is
# 2 * H), "..." and "?", and which names at least one axis with a table entry or a
# capitalized name. Call signatures and tuples of values, ``(loss, grads)``, are not shapes.
_SPAN = re.compile(r"``(.+?)``", re.S)
_GROUP = re.compile(r"\(([^()]*)\)")
_TERM = r"(?:\d*[A-Za-z_][A-Za-z0-9_]*|\d+|\.\.\.|\?)"
_AXIS = re.compile(rf"\s*{_TERM}(?:\s*(?:\+|-|\*|//)\s*{_TERM})*\s*")
_NAME = re.compile(r"(?<![A-Za-z0-9_])\d*([A-Za-z_][A-Za-z0-9_]*)")


def letter_table() -> list[tuple[str, str]]:
    """The ``(letter, meaning)`` rows of the shape-letter table in course_lib's docstring."""
    lines = (course_lib.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ +=+", line.strip())]
    assert len(rules) == 3, "course_lib's docstring needs one simple table (three ==== rules) of shape letters"
    rows = []
    for line in lines[rules[1] + 1:rules[2]]:
        match = re.fullmatch(r"``([^`]+)``\s{2,}(\S.*)", line.strip())
        assert match, f"a row of the shape-letter table must be ``letter``  meaning, got {line!r}"
        rows.append((match.group(1), match.group(2)))
    return rows


LETTERS = {letter for letter, _meaning in letter_table()}


def shapes(doc: str) -> list[tuple[str, list[str]]]:
    """The shapes written in ``doc``: ``(text, names of its axes)``."""
    found = []
    for span in _SPAN.findall(doc or ""):
        for group in _GROUP.findall(span):
            axes = group.split(",")
            if len(axes) < 2:
                continue  # no comma: (1/B), (x), not a shape
            if axes[-1].strip() == "":
                axes = axes[:-1]  # (V,)
            if not axes or not all(_AXIS.fullmatch(axis) for axis in axes):
                continue
            names = _NAME.findall(group)
            if any(name in LETTERS or name[0].isupper() for name in names):
                found.append((f"({group})", names))
    return found


def _id(entries):
    return [f"{module.__name__}.{name}" for module, name, _obj in entries]


def test_modules_are_found():
    names = {m.__name__ for m in MODULES}
    assert {"course_lib", "course_lib.vectors.counts", "course_lib.text.corpus",
            "course_lib.recurrent.elmo", "course_lib.recurrent.layers"} <= names
    assert len(FUNCTIONS) > 80 and METHODS


@pytest.mark.parametrize("module,name,obj", PUBLIC, ids=_id(PUBLIC))
def test_public_function_has_a_docstring_naming_its_chapter(module, name, obj):
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 40, f"{module.__name__}.{name} needs a docstring"
    assert doc.splitlines()[0].rstrip().endswith("."), \
        f"{module.__name__}.{name}: the first line says what it returns (or is, or does), a sentence with a period"
    assert any(word in doc for word in CHAPTER_WORDS), \
        f"{module.__name__}.{name}: say which chapter (or assignment) it belongs to"


@pytest.mark.parametrize("module,name,obj", METHODS, ids=_id(METHODS))
def test_public_method_has_a_docstring(module, name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc, f"{module.__name__}.{name} needs a docstring"
    assert doc.splitlines()[0].rstrip().endswith("."), \
        f"{module.__name__}.{name}: the first line says what it returns (or does), a sentence with a period"


@pytest.mark.parametrize("module,name,obj", FUNCTIONS, ids=_id(FUNCTIONS))
def test_function_gives_the_shapes_of_its_arrays(module, name, obj):
    doc = inspect.getdoc(obj) or ""
    key = f"{module.__name__}.{name}"
    if key in NO_ARRAYS:
        return
    assert shapes(doc) or "any shape" in doc, \
        (f"{key}: give the shapes of the arrays it takes and returns in letters, ``(B, T, H)``, "
         f"or add it to NO_ARRAYS in this file if it takes and returns no array")


def test_functions_listed_as_taking_no_arrays_exist():
    assert NO_ARRAYS <= {f"{module.__name__}.{name}" for module, name, _obj in FUNCTIONS}


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_module_docstring_links_its_chapter(module):
    doc = module.__doc__ or ""
    targets = re.findall(r":doc:`(/chapters/[^`<>]+)`", doc)
    assert targets or any(word in doc.lower() for word in SHARED_WORDS), \
        f"{module.__name__}: link the chapter, e.g. See :doc:`/chapters/ch03_rnn`, or say it is shared by all chapters"
    for target in targets:
        assert (BOOK / (target.lstrip("/") + ".md")).is_file(), f"{module.__name__}: {target} is not a page of the book"


def test_shape_letter_table_lists_each_letter_once():
    letters = [letter for letter, _meaning in letter_table()]
    repeated = [letter for letter, count in collections.Counter(letters).items() if count > 1]
    assert not repeated, f"letters listed more than once: {repeated}"
    assert {"B", "T", "Tq", "Tk", "V", "E", "H", "D", "nh", "hs", "L", "I", "N", "K", "S", "C", "G",
            "n_docs", "n_eval"} <= set(letters)


def _all_docstrings():
    """``(where, docstring, argument names)`` of every module, function, class and method."""
    for module in MODULES:
        yield module.__name__, module.__doc__, set()
        for name, obj in vars(module).items():
            if not _defined_here(module, name, obj):
                continue
            where = f"{module.__name__}.{name}"
            if _is_function(obj):
                yield where, obj.__doc__, set(inspect.signature(obj).parameters)
                continue
            yield where, obj.__doc__, set(inspect.signature(obj).parameters) if callable(obj) else set()
            for method, func in _methods(obj, public_only=False):
                yield f"{where}.{method}", func.__doc__, set(inspect.signature(func).parameters)


def test_shape_parser_reads_the_library_notation():
    assert shapes("``(B, T, 2H)`` and ``(G*H,)`` and ``(L + 1, ..., I)``") == [
        ("(B, T, 2H)", ["B", "T", "H"]), ("(G*H,)", ["G", "H"]), ("(L + 1, ..., I)", ["L", "I"])]
    assert shapes("``(loss, grads)`` ``step(token_id, h)`` ``tanh(W x + b)`` ``(1/B)``") == []


def test_shapes_use_only_the_letters_of_the_table():
    wrong = []
    for where, doc, arguments in _all_docstrings():
        for text, names in shapes(doc):
            unknown = [name for name in names if name not in LETTERS | arguments | {"None"}]
            if unknown:
                wrong.append(f"{where}: {text} uses {unknown}")
    assert not wrong, "shapes with letters that are not in course_lib's table:\n" + "\n".join(wrong)
