"""Randomized inputs for the hidden tests: one module per problem set (``ps01_counts.py`` ...), merged here.

``python3 tasks.py sync`` calls each generator with a seeded ``numpy.random.Generator``, runs
the reference function of course_lib on the inputs, and writes inputs and outcomes into the
answer key (:mod:`course_tools.authoring.answer_keys`). The generators only make inputs; they
contain no answers. Keys are ``"module.function"`` below course_lib.

Each problem set's module may define these tables, for its own exercises only:

- ``GENERATORS``: exercise key -> generator ``rng -> iterable of (args, kwargs)``;
- ``TORCH``: exercises that take torch tensors (cases are stored as numpy arrays and converted
  for the call);
- ``GRADIENTS``: differentiable torch exercises -> the arguments whose gradients the hidden cases
  check (a function that computes the right values through numpy passes no gradient back);
- ``HINTS``: one sentence per exercise naming its most common mistake, shown when a test fails
  (never an expected value);
- ``PROPERTIES``: exercises judged by a property of their result instead of the reference's exact
  values (``(case, value) -> problem or None``);
- ``VARIES``: random exercises whose result must change with the generator's seed in the cases
  where the function says so (the probe calls them once more with every generator replaced by
  one of another seed).

A new problem set adds its own ``psNN_name.py``; no other problem set's file changes. Helpers that
several problem sets draw alike live in :mod:`.common`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

TABLES = ("GENERATORS", "GRADIENTS", "HINTS", "PROPERTIES", "VARIES")


def problem_set_modules() -> dict[str, object]:
    """``psNN_name -> module`` for every problem set's module of this package, in order."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__) if re.fullmatch(r"ps\d\d_\w+", info.name))
    return {name: importlib.import_module(f"{__name__}.{name}") for name in names}


def _merged() -> tuple[dict[str, dict], set[str]]:
    tables: dict[str, dict] = {name: {} for name in TABLES}
    torch: set[str] = set()
    for name, module in problem_set_modules().items():
        for table in TABLES:
            own = getattr(module, table, {})
            clash = sorted(tables[table].keys() & own.keys())
            if clash:
                raise ValueError(f"{__name__}.{name}.{table} repeats {clash}, already given by another problem set")
            tables[table].update(own)
        torch |= set(getattr(module, "TORCH", ()))
    return tables, torch


_TABLES, TORCH = _merged()
GENERATORS = _TABLES["GENERATORS"]
GRADIENTS = _TABLES["GRADIENTS"]
HINTS: dict[str, str] = _TABLES["HINTS"]
PROPERTIES = _TABLES["PROPERTIES"]
VARIES = _TABLES["VARIES"]
