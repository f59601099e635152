"""What takes the place of a forbidden library function in a grading child (:mod:`forbid` decides what).

Copied into each grading sandbox beside :mod:`forbid`; it imports nothing from the course.
A *sentinel* raises :class:`ForbiddenCall` and reports the name through the pipe to the trusted
parent; :func:`kill_code` puts a call of one in place of a Python function's code (so every
reference to the function runs it), :func:`kill_class` in place of a class's methods, and
:func:`block_operator` registers one as the kernel of a PyTorch operator under each CPU dispatch key.
"""

from __future__ import annotations

import ctypes
import os
import sys
import types


class ForbiddenCall(RuntimeError):
    """A forbidden library function was called while grading."""


def reporter(fd: int | None, armed):
    def report(name: str) -> None:
        if fd is not None and armed():
            try:
                os.write(fd, (name[:200].replace(" ", "_") + "\n").encode("utf-8", "replace"))
            except OSError:
                pass
    return report


def raiser(name: str, report):
    def forbidden(*args, **kwargs):
        report(name)
        raise ForbiddenCall(f"{name} may not be used in this exercise: write the computation yourself")
    forbidden.__name__ = name.rsplit(".", 1)[-1]
    return forbidden


_TEMPLATES: dict[int, types.CodeType] = {}


def sentinel_code(variable: str, freevars: tuple[str, ...]) -> types.CodeType:
    """The code of ``def _(*args, **kwargs): return <variable>()`` with as many free variables as ``freevars``
    (a function's code can only be replaced by code with as many: a closure, a method calling ``super()``)."""
    if len(freevars) not in _TEMPLATES:
        free = [f"v{i}" for i in range(len(freevars))]
        lines = ["def _outer():", *(f"    {v} = None" for v in free), "    def _(*args, **kwargs):",
                 *([f"        ({', '.join(free)},)"] if free else []), "        return __course_forbidden__()",
                 "    return _"]
        outer = compile("\n".join(lines) + "\n", "<forbidden>", "exec").co_consts[0]
        _TEMPLATES[len(freevars)] = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    template = _TEMPLATES[len(freevars)]
    return template.replace(co_names=tuple(variable if n == "__course_forbidden__" else n for n in template.co_names))


def kill_code(fn, name: str, report, hook: dict) -> bool:
    """Replace ``fn``'s code by a call of the module's sentinel hook; False when it cannot be done."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType) or not isinstance(getattr(fn, "__globals__", None), dict):
        return False
    if name not in hook:
        hook[name] = (f"__course_forbidden_{len(hook)}__", raiser(name, report))
    variable, sentinel = hook[name]
    try:
        fn.__globals__[variable] = sentinel
        fn.__code__ = sentinel_code(variable, code.co_freevars)
    except (TypeError, AttributeError, ValueError, SyntaxError):
        return False
    return True


def kill_class(cls, name: str, report, hook: dict) -> None:
    """Its methods (what computes: ``forward``, ``_sa_block``...), its construction and its call; the protocols
    that copy, pickle or show an instance (``__setstate__``, ``__repr__``...) keep working, since a test case may
    hold an instance (``TorchEncoderParts`` holds a ``TransformerEncoderLayer`` whose parts the student uses)."""
    for attribute, value in list(vars(cls).items()):
        if attribute.startswith("__") and attribute.endswith("__") and attribute not in ("__init__", "__call__"):
            continue
        target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if callable(target):
            kill_code(target, f"{name}.{attribute}", report, hook)
    try:
        cls.__init__ = raiser(name, report)
        cls.__call__ = raiser(name, report)
    except (TypeError, AttributeError):
        pass


def kill(owner, attribute: str, value, qualified: str, report, hook: dict, roots) -> None:
    """Make ``value`` (``owner.attribute``) unusable: its code replaced in place, or else the binding
    (modules and data are left alone: they compute nothing)."""
    if isinstance(value, types.ModuleType) or not callable(value):
        return
    if isinstance(value, type):
        if value.__module__.split(".")[0] in roots or value.__module__ == getattr(owner, "__name__", None):
            kill_class(value, qualified, report, hook)
            return
    elif kill_code(value, qualified, report, hook):
        return
    try:
        setattr(owner, attribute, raiser(qualified, report))
    except (TypeError, AttributeError):
        pass


def operators(torch) -> dict[str, list[str]]:
    """``base name -> full names`` of every operator PyTorch's dispatcher knows (``layer_norm -> [aten::layer_norm]``)."""
    found: dict[str, list[str]] = {}
    for full in torch._C._dispatch_get_all_op_names():
        found.setdefault(full.partition("::")[2].partition(".")[0], []).append(full)
    return found


def block_operator(torch, full: str, keys, report, holders: dict) -> None:
    """Our kernel for the operator ``full`` (``aten::lstm_cell.default``...) under each dispatch key of ``keys``."""
    namespace, _, op = full.partition("::")
    if namespace not in holders:
        try:
            frame = sys._getframe()
            holders[namespace] = torch._C._dispatch_library("IMPL", namespace, "", frame.f_code.co_filename,
                                                            frame.f_lineno)
        except Exception:  # noqa: BLE001 - a namespace that cannot take kernels
            holders[namespace] = None
    if holders[namespace] is None:
        return
    kernel = raiser(f"torch.ops.{namespace}.{op.partition('.')[0]}", report)
    for key in keys:
        try:
            holders[namespace].impl(op, key, kernel, False)
        except Exception:  # noqa: BLE001 - a key this operator cannot take
            pass


def has_kernel(torch, full: str, key: str) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(full, key)
    except Exception:  # noqa: BLE001 - a key this build does not know
        return False


def keep_alive_without_a_name(holders: dict) -> None:
    """Keep the dispatcher registrations for the life of the process, with no Python reference left to them
    (the registration objects are not tracked by the garbage collector either, so they cannot be found and reset)."""
    for holder in holders.values():
        if holder is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(holder))
    holders.clear()
