"""Every public course_lib function documents itself: what it returns and where it is taught."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import course_lib

MODULES = [importlib.import_module(f"course_lib.{m.name}") for m in pkgutil.iter_modules(course_lib.__path__)]
PUBLIC = [(module, name, obj) for module in MODULES for name, obj in vars(module).items()
          if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
          and obj.__module__ == module.__name__]


def test_modules_are_found():
    assert {"course_lib.vectors.counts", "course_lib.text.corpus"} <= {m.__name__ for m in MODULES}


@pytest.mark.parametrize("module,name,obj", PUBLIC, ids=[f"{m.__name__}.{n}" for m, n, _ in PUBLIC])
def test_public_function_has_a_docstring_naming_its_chapter(module, name, obj):
    doc = inspect.getdoc(obj) or ""
    assert len(doc) > 40, f"{module.__name__}.{name} needs a docstring"
    assert any(word in doc for word in ("Chapter", "chapter", "assignment", "All chapters")), \
        f"{module.__name__}.{name}: say which chapter (or assignment) it belongs to"
    if module.__name__ == "course_lib.vectors.counts":
        assert "Returns" in doc and "``(" in doc, f"{name}: give the shapes of what it takes and returns"
