"""Forbidden library functions made unusable in a grading child, whatever route the student's code takes.

Copied into each grading sandbox with :mod:`course_tools.probe`; it imports nothing from
the course. A visible test may forbid library functions (``assert_own_code(lstm_cell,
{"lstm_cell", "LSTMCell", "LSTM", "lstm"}, ...)``): an exercise asks for the computation,
not for a call to a library that does it. A recorder of calls (a profiler) can be
switched off, or routed around, by code that runs in the same process. So before any
code of the submission runs, :func:`forbid` replaces what a forbidden name refers to,
at the level where the student's code cannot reach behind it:

- **PyTorch operators** (``aten::lstm_cell``, ``aten::scaled_dot_product_attention``,
  ``aten::layer_norm``...) get a kernel of ours in PyTorch's dispatcher, for every
  overload, under ``CompositeImplicitAutograd`` and ``CPU``. Every route ends there:
  ``torch.lstm_cell``, ``torch._VF``, ``torch.ops.aten``, ``torch._C`` bindings, a call
  made from C (``map(torch.lstm_cell, ...)``), from another thread or from a module that
  is reloaded. The registration is held by a C object with no Python name.
- **Python functions** of the libraries (``torch.nn.functional.multi_head_attention_forward``,
  the methods of ``torch.nn.LSTM``...) have their code replaced in place (``__code__``): every
  reference to the function, wherever it was kept, now runs the sentinel.
- **Other bindings** of that name in the libraries' loaded modules (C functions, classes
  whose code cannot be replaced) are replaced by the sentinel.
- A whole library forbidden (``"torch"`` for a numpy exercise) has its differentiation
  entry points replaced as above (``torch.autograd``, ``torch.func``, ``Tensor.backward``,
  the autograd engine), since that is the shortcut such an exercise forbids; every other
  call into it is still recorded by the profiler of :mod:`course_tools.probe`.

A sentinel reports the name through a pipe to the trusted parent process (what the
student's code does afterwards cannot take a report back) and raises
:class:`ForbiddenCall`: it holds no reference to what it replaced, so the forbidden
result cannot be had from it. The grading child is thrown away after one test cell.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings

WHOLE_LIBRARIES = ("torch", "transformers", "tokenizers", "sentence_transformers", "jax", "tensorflow", "autograd",
                   "sklearn", "gensim", "scipy")
"""Forbidden names that stand for a whole library."""
DIFFERENTIATION = ("torch.autograd", "torch.func", "torch._functorch")
"""Where ``torch`` forbidden means: no automatic differentiation."""


class ForbiddenCall(RuntimeError):
    """A forbidden library function was called while grading."""


def _reporter(fd: int | None):
    def report(name: str) -> None:
        if fd is not None:
            try:
                os.write(fd, (name[:200] + "\n").encode("utf-8", "replace"))
            except OSError:
                pass
    return report


def _raiser(name: str, report):
    def forbidden(*args, **kwargs):
        report(name)
        raise ForbiddenCall(f"{name} may not be used in this exercise: write the computation yourself")
    forbidden.__name__ = name.rsplit(".", 1)[-1]
    return forbidden


def _modules(roots: set[str]) -> list:
    return [m for n, m in list(sys.modules.items())
            if m is not None and n.split(".")[0] in roots and isinstance(m, type(sys))]


def _kill_code(fn, name: str, report, hook: dict) -> bool:
    """Replace ``fn``'s code by a call of the module's sentinel hook; False when it cannot be done."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_freevars or not isinstance(getattr(fn, "__globals__", None), dict):
        return False
    if name not in hook:
        hook[name] = (f"__course_forbidden_{len(hook)}__", _raiser(name, report))
    variable, sentinel = hook[name]
    fn.__globals__[variable] = sentinel
    fn.__code__ = compile(f"def _(*args, **kwargs):\n    return {variable}()\n", "<forbidden>", "exec").co_consts[0]
    return True


def _kill_class(cls, name: str, report, hook: dict) -> None:
    for attribute, value in list(vars(cls).items()):
        target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if callable(target):
            _kill_code(target, f"{name}.{attribute}", report, hook)
    try:
        cls.__init__ = _raiser(name, report)
        cls.__call__ = _raiser(name, report)
    except (TypeError, AttributeError):
        pass


def _dispatcher(name: str, report, holder: list) -> None:
    """Our kernel for every overload of ``aten::<name>`` (when torch is loaded and has that operator)."""
    torch = sys.modules.get("torch")
    if torch is None or name.startswith("_") and not name.startswith("_transformer"):
        return
    try:
        packet = getattr(torch.ops.aten, name)
        overloads = packet.overloads()
    except Exception:  # noqa: BLE001 - not an operator
        return
    if not holder:
        frame = sys._getframe()
        holder.append(torch._C._dispatch_library("IMPL", "aten", "", frame.f_code.co_filename, frame.f_lineno))
    kernel = _raiser(f"torch.ops.aten.{name}", report)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for overload in overloads:
            op = name if overload == "default" else f"{name}.{overload}"
            for key in ("CompositeImplicitAutograd", "CPU"):
                try:
                    holder[0].impl(op, key, kernel, False)
                except Exception:  # noqa: BLE001 - an operator without that key
                    pass


def _keep_alive_without_a_name(holder: list) -> None:
    """Keep the dispatcher registrations for the life of the process, with no Python reference left to them
    (the registration object is not tracked by the garbage collector either, so it cannot be found and reset)."""
    if holder:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(holder[0]))
        holder.clear()


def _forbid_differentiation(report, hook: dict) -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for module in _modules({"torch"}):
        if any(module.__name__ == p or module.__name__.startswith(p + ".") for p in DIFFERENTIATION):
            for attribute, value in list(vars(module).items()):
                if getattr(value, "__module__", None) == module.__name__:
                    if isinstance(value, type):
                        _kill_class(value, f"{module.__name__}.{attribute}", report, hook)
                    elif callable(value):
                        _kill_code(value, f"{module.__name__}.{attribute}", report, hook)
    _kill_code(torch.Tensor.backward, "torch.Tensor.backward", report, hook)
    engine = _raiser("torch autograd engine", report)
    for owner, attribute in ((getattr(torch.autograd, "variable", None), "Variable"), (torch._C, None)):
        if owner is None:
            continue
        try:
            if attribute:
                getattr(owner, attribute)._execution_engine = engine
            else:
                owner._ImperativeEngine = engine
        except (TypeError, AttributeError):
            pass


def forbid(names, fd: int | None = None, libraries=("torch",)) -> None:
    """Make every forbidden name in ``names`` unusable in this process (see the module's docstring).

    ``fd``: the write end of a pipe to the trusted parent, which receives one line per forbidden call.
    ``libraries``: the root modules whose loaded modules are searched for the names (with the whole
    libraries named in ``names``)."""
    names = {n for n in names if isinstance(n, str) and n}
    if names:
        with warnings.catch_warnings():  # reading some modules' attributes warns (deprecated names)
            warnings.simplefilter("ignore")
            _forbid(names, fd, libraries)


def _forbid(names: set[str], fd: int | None, libraries) -> None:
    report = _reporter(fd)
    hook: dict = {}
    holder: list = []
    whole = names & set(WHOLE_LIBRARIES)
    if "torch" in whole:
        _forbid_differentiation(report, hook)
    roots = set(libraries) | whole
    single = names - whole
    for name in sorted(single):
        _dispatcher(name, report, holder)
    if single:
        for module in _modules(roots):
            for name in single & set(vars(module)):
                value = vars(module)[name]
                qualified = f"{module.__name__}.{name}"
                if isinstance(value, type) and value.__module__.split(".")[0] in roots:
                    _kill_class(value, qualified, report, hook)
                elif not (callable(value) and _kill_code(value, qualified, report, hook)):
                    try:
                        setattr(module, name, _raiser(qualified, report))
                    except (TypeError, AttributeError):
                        pass
            for value in list(vars(module).values()):  # methods of that name (TransformerEncoderLayer._sa_block)
                if isinstance(value, type) and value.__module__ == module.__name__:
                    for name in single & set(vars(value)):
                        method = vars(value)[name]
                        if not (callable(method) and _kill_code(method, f"{value.__qualname__}.{name}", report, hook)):
                            try:
                                setattr(value, name, _raiser(f"{value.__qualname__}.{name}", report))
                            except (TypeError, AttributeError):
                                pass
    _keep_alive_without_a_name(holder)
