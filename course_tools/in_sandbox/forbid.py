"""Forbidden library functions made unusable in a grading child, whatever route the student's code takes.

Copied into each grading sandbox with :mod:`course_tools.in_sandbox.probe`; it imports nothing from
the course. A visible test may forbid library functions (``assert_own_code(lstm_cell,
{"lstm_cell", "LSTMCell", "LSTM", "lstm"}, ...)``): an exercise asks for the computation,
not for a call to a library that does it. A recorder of calls (a profiler) can be
switched off, or routed around, by code that runs in the same process. So before any
code of the submission runs, :func:`forbid` replaces what a forbidden name refers to,
at the level where the student's code cannot reach behind it.

**What a name stands for.** A forbidden name stands for a computation, which libraries
offer under more than one name: ``layer_norm`` is also ``native_layer_norm``,
``LayerNorm``, ``ConvNextLayerNorm``; ``lstm`` is also ``_thnn_fused_lstm_cell`` and the
oneDNN kernel ``mkldnn_rnn_layer``. So a name forbids every library definition and every
PyTorch operator whose name holds its words in a row (``layer_norm`` in
``native_layer_norm``; CamelCase names are read as words, ``LayerNorm`` as ``layer_norm``),
and the names of :data:`SAME_COMPUTATION`. A single word forbids only itself unless it is a
PyTorch operator (``lstm`` yes, ``step`` no).

- **PyTorch operators** of those names, in every namespace (``aten::native_layer_norm``,
  ``aten::_scaled_dot_product_attention_math``, ``quantized::quantized_lstm_cell_dynamic``),
  get a kernel of ours in PyTorch's dispatcher, for every overload and every CPU
  dispatch key the operator has a kernel for (nested, sparse, quantized and oneDNN tensors
  included). Every route ends there: ``torch.lstm_cell``, ``torch._VF``, ``torch.ops``,
  ``torch._C`` bindings, a call made from C (``map(torch.lstm_cell, ...)``), from another
  thread, from TorchScript, or from a module that is reloaded. The registration is held by
  a C object with no Python name. The few executors that run operators with kernels of
  their own, outside the dispatcher (TorchScript's static runtime and its oneDNN
  conversion, :data:`OWN_KERNELS`), lose their entry points.
- **Python functions** of the libraries (``torch.nn.functional.multi_head_attention_forward``,
  the methods of ``torch.nn.LSTM``...) have their code replaced in place (``__code__``): every
  reference to the function, wherever it was kept, now runs the sentinel. **Other bindings** of
  such a name in the libraries' loaded modules (C functions, classes whose code cannot be
  replaced) are replaced by the sentinel.
- **Library code loaded afterwards** (a module imported for the first time, such as
  ``torch.nn.attention.flex_attention`` or a model of ``transformers``, or loaded again:
  ``importlib.reload``, ``spec_from_file_location``, ``runpy``, ``exec`` of a library file's
  code, a function made of its compiled code) that defines a forbidden name is refused, by an
  audit hook. That is a guard against the plain routes only: a copy of a library's source
  text typed or pasted into the notebook, or compiled under another file name, is the
  student's text, which no run-time check can tell from their own work
  (``tests/test_probe_runner.py`` keeps that case as a known limit); so is code that first
  rewrites this module's functions in its own process.
- **The course's own stand-ins** for the tested exercise (``stand_ins``: the scaffold
  that replaces it when other exercises are graded, a test double that computes it)
  are replaced like Python functions: they exist to grade other functions, not to be
  this one's answer.
- A whole library forbidden (``"torch"`` for a numpy exercise) makes every PyTorch
  operator unusable (so no autograd: not the engine, not the graph's nodes called by
  hand, not forward-mode dual numbers), with its differentiation entry points named in
  the report (``torch.autograd``, ``torch.func``, ``Tensor.backward``).

:func:`prepare` finds all this once, in the trusted parent, and :meth:`Prepared.apply` does it in
each grading child, before any code of the submission runs. A sentinel raises
:class:`ForbiddenCall` and holds no reference to what it replaced, so
the forbidden result cannot be had from it. While a test case runs (``armed``), it also
reports the name through a pipe to the trusted parent process, which what the student's
code does afterwards cannot take back; a forbidden call made by a definition outside any
test case (a top-level line of an answer cell) only fails that line.
:func:`no_other_programs` finally forbids the child to start a process or a program
(a fresh interpreter would have none of this). The grading child is thrown away after
one test cell.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import sys
import sysconfig
import types
import warnings

try:  # in the sandbox this file runs as a script's neighbour, beside sentinels.py; in the course, as a module
    from . import sentinels
except ImportError:
    import sentinels

ForbiddenCall = sentinels.ForbiddenCall

WHOLE_LIBRARIES = ("torch", "transformers", "tokenizers", "sentence_transformers", "jax", "tensorflow", "autograd",
                   "sklearn", "gensim", "scipy")
"""Forbidden names that stand for a whole library."""
DIFFERENTIATION = ("torch.autograd", "torch.func", "torch._functorch")
"""Where ``torch`` forbidden means: no automatic differentiation."""
SAME_COMPUTATION = {
    "lstm": ("mkldnn_rnn_layer",),  # the oneDNN LSTM kernel behind nn.LSTM on CPU
    "lstm_cell": ("mkldnn_rnn_layer",),
    "layer_norm": ("rms_norm",),  # centred first, an RMS norm is a layer norm
    "scaled_dot_product_attention": ("flex_attention", "math_attention", "sdpa_dense", "eager_attention_forward",
                                     "multi_head_attention"),
    "multi_head_attention_forward": ("multi_head_attention",),  # its fused kernel: _native_multi_head_attention
    "multihead_attention": ("multi_head_attention",),
}
"""Forbidden name (in words, ``snake_case``) -> other names under which libraries compute the same."""
OWN_KERNELS = ("_jit_to_static_module", "_fuse_to_static_module", "_jit_pass_convert_frozen_ops_to_mkldnn",
               "_jit_pass_optimize_for_inference")
"""Entry points in ``torch._C`` of executors whose kernels bypass the dispatcher (static runtime, oneDNN fusion)."""
DISPATCH_KEYS = ("CPU", "NestedTensorCPU", "SparseCPU", "SparseCsrCPU", "QuantizedCPU", "MkldnnCPU",
                 "CompositeImplicitAutograd", "CompositeImplicitAutogradNestedTensor", "CompositeExplicitAutograd",
                 "CompositeExplicitAutogradNonFunctional", "FuncTorchBatched", "FuncTorchBatchedDecomposition")
"""The dispatch keys whose kernels compute on the CPU (or decompose an operator): ours replace them all."""


def _words(name: str) -> tuple[str, ...]:
    """``LSTMCell`` -> ``("lstm", "cell")``, ``_native_layer_norm`` -> ``("native", "layer", "norm")``."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return tuple(word for word in snake.lower().split("_") if word)


class Names:
    """Which definitions and PyTorch operators a set of forbidden names stands for (see the module's docstring).

    ``operators``: the base names of PyTorch's operators (``layer_norm``), which let a single word
    (``lstm``) stand for every name holding it."""

    def __init__(self, names, operators=frozenset()):
        self.exact = set(names)
        for name in names:
            self.exact |= set(SAME_COMPUTATION.get("_".join(_words(name)), ()))
        self.families = {words for words in map(_words, self.exact)
                         if len(words) > 1 or words and words[0] in operators}
        hints = sorted({family[0] for family in self.families})  # a quick test before splitting a name into words
        self.hint = re.compile("|".join(map(re.escape, hints)), re.IGNORECASE) if hints else None

    def __bool__(self) -> bool:
        return bool(self.exact)

    def __contains__(self, name) -> bool:
        """Whether a definition (function, class, method, operator) of this name is forbidden."""
        if not isinstance(name, str):
            return False
        if name in self.exact:
            return True
        if self.hint is None or not self.hint.search(name):
            return False
        words = _words(name)
        return any(words[i:i + len(f)] == f for f in self.families for i in range(len(words) - len(f) + 1))


def _library_folders() -> tuple[str, ...]:
    """Where installed libraries live (site-packages, as named and as resolved), as opposed to the course,
    the standard library and the notebook's cells."""
    folders = {sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")}
    torch = sys.modules.get("torch")
    if getattr(torch, "__file__", None):
        folders.add(os.path.dirname(os.path.dirname(torch.__file__)))
    return tuple({os.path.join(path, "") for f in folders for path in (os.path.abspath(f), os.path.realpath(f))})


def _library_modules(folders, roots) -> list:
    """The loaded modules of the installed libraries but numpy (which implements none of the forbidden
    computations, and which the probe itself relies on), and of ``roots`` wherever they live."""
    found = []
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or name.split(".")[0] == "numpy":
            continue
        where = getattr(module, "__file__", None)
        if name.split(".")[0] in roots or isinstance(where, str) and where.startswith(folders):
            found.append(module)
    return found


def _forbid_differentiation(report, hook: dict) -> None:
    """Name the differentiation entry points of torch in the report (its operators are all blocked anyway)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    engine_type = getattr(torch._C, "_ImperativeEngine", None)
    for module in _library_modules((), {"torch"}):
        if any(module.__name__ == p or module.__name__.startswith(p + ".") for p in DIFFERENTIATION):
            for attribute, value in list(vars(module).items()):
                qualified = f"{module.__name__}.{attribute}"
                if engine_type is not None and (value is engine_type or type(value) is engine_type):
                    sentinels.kill(module, attribute, value, qualified, report, hook, ())  # an engine kept under another name
                elif getattr(value, "__module__", None) == module.__name__:
                    if isinstance(value, type):
                        sentinels.kill_class(value, qualified, report, hook)
                    elif callable(value):
                        sentinels.kill_code(value, qualified, report, hook)
    sentinels.kill_code(torch.Tensor.backward, "torch.Tensor.backward", report, hook)
    engine = sentinels.raiser("torch._C._ImperativeEngine", report)
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


def forbid(names, fd: int | None = None, libraries=("torch",), stand_ins=(), armed=lambda: True) -> None:
    """Make every forbidden name in ``names`` unusable in this process (see the module's docstring):
    :func:`prepare`, then :meth:`Prepared.apply`."""
    prepare(names, libraries, stand_ins).apply(fd, armed)


class Prepared:
    """What :func:`prepare` found to make unusable; :meth:`apply` does it. Found once in the trusted parent for
    each set of names, applied in each grading child forked from it (where the objects found are the same)."""

    def __init__(self, names: set[str], roots: set[str], stand_ins: list[str]):
        self.whole = names & set(WHOLE_LIBRARIES)
        self.torch = sys.modules.get("torch")
        operators = sentinels.operators(self.torch) if self.torch is not None else {}
        self.single = Names(names - self.whole, frozenset(operators))
        self.folders = _library_folders()
        self.blocked: list[tuple[str, tuple[str, ...]]] = []  # (operator, dispatch keys)
        if self.torch is not None and "torch" in self.whole:
            self.blocked = [(full, ("CPU",)) for fulls in operators.values() for full in fulls]  # no CPU tensor computes
        elif self.torch is not None and self.single:
            for full in (full for base, fulls in operators.items() if base in self.single for full in fulls):
                keys = {k for k in DISPATCH_KEYS if sentinels.has_kernel(self.torch, full, k)} | {"CPU"}
                self.blocked.append((full, tuple(sorted(keys))))
        self.kills: list[tuple] = []  # (owner, attribute, value, qualified name, roots)
        roots = roots | self.whole
        if self.single:
            for module in _library_modules(self.folders, roots):
                for attribute, value in list(vars(module).items()):
                    if attribute in self.single:
                        self.kills.append((module, attribute, value, f"{module.__name__}.{attribute}", roots))
                    elif isinstance(value, type) and value.__module__ == module.__name__:
                        for method in [m for m in vars(value) if m in self.single]:  # TransformerEncoderLayer._sa_block
                            self.kills.append((value, method, vars(value)[method], f"{value.__qualname__}.{method}", roots))
        for reference in stand_ins:
            module_name, _, attribute = reference.partition(":")
            attribute = attribute.removesuffix("()")
            try:
                module = __import__(module_name, fromlist=["_"])
                value = getattr(module, attribute)
            except Exception:  # noqa: BLE001 - not in this edition
                continue
            self.kills.append((module, attribute, value, f"{module_name}.{attribute}", {module_name.split(".")[0]}))

    def apply(self, fd: int | None = None, armed=lambda: True) -> None:
        """Make it all unusable in this process. ``fd``: the write end of a pipe to the trusted parent, which
        receives one line per forbidden call made while ``armed()`` is true (during a test case). Afterwards,
        library code that defines a forbidden name can no longer be loaded (:func:`_guard`)."""
        report, hook, holders = sentinels.reporter(fd, armed), {}, {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.torch is not None and "torch" in self.whole:
                _forbid_differentiation(report, hook)
            for full, keys in self.blocked:
                sentinels.block_operator(self.torch, full, keys, report, holders)
            if self.blocked:
                for name in OWN_KERNELS:
                    if hasattr(self.torch._C, name):
                        setattr(self.torch._C, name, sentinels.raiser(f"torch._C.{name}", report))
            for owner, attribute, value, qualified, roots in self.kills:
                sentinels.kill(owner, attribute, value, qualified, report, hook, roots)
            sentinels.keep_alive_without_a_name(holders)
        if self.single:
            _guard(self.single, self.folders, report)


def prepare(names, libraries=("torch",), stand_ins=()) -> Prepared:
    """Find what the forbidden ``names`` stand for, changing nothing. ``libraries``: root modules whose loaded
    modules are searched for the names wherever they live (installed libraries always are). ``stand_ins``: the
    course's own implementations of the tested exercise, ``"module:attribute"`` (a trailing ``()`` is ignored)."""
    names = {n for n in names if isinstance(n, str) and n}
    stand_ins = [s for s in stand_ins if isinstance(s, str) and ":" in s]
    with warnings.catch_warnings():  # reading some modules' attributes warns (deprecated names)
        warnings.simplefilter("ignore")
        return Prepared(names, set(libraries), stand_ins)


def _defines(code, names: Names, folders) -> str | None:
    """The forbidden name that library code ``code`` defines, else None: ``code`` itself (a function, a method)
    or, for a module's code, one of its functions and classes, or a method of those classes (function bodies
    are not searched: what they nest is no library's entry point). Cheap for the many modules that define
    none of the names (one regular-expression search of their names), since every import pays for it."""
    if not isinstance(code, types.CodeType) or not code.co_filename.startswith(folders):
        return None
    for part in getattr(code, "co_qualname", code.co_name).split("."):
        if part in names:
            return part
    bodies, defined = [code], []
    while bodies:  # the module's code and its class bodies (code that is no function: no CO_OPTIMIZED flag)
        body = bodies.pop()
        for const in body.co_consts:
            if isinstance(const, types.CodeType):
                defined.append(const.co_name)
                if not const.co_flags & 0x1:
                    bodies.append(const)
    if names.exact.isdisjoint(defined) and (names.hint is None or not names.hint.search(" ".join(defined))):
        return None
    return next((name for name in defined if name in names), None)


def _guard(names: Names, folders, report) -> None:
    """An audit hook (which no Python code can remove) that refuses library code defining a forbidden name:
    a module imported or loaded again, a function made of such code, such code assigned to a function."""
    def audit(event: str, args: tuple) -> None:
        if event == "exec" or event == "function.__new__":
            found = _defines(args[0], names, folders)
        elif event == "object.__setattr__" and len(args) == 3 and args[1] == "__code__":
            found = _defines(args[2], names, folders)
        else:
            return
        if found:
            report(f"loading_library_code_that_defines.{found}")
            raise ForbiddenCall(f"{found} may not be used in this exercise: write the computation yourself")
    sys.addaudithook(audit)


def no_other_programs() -> bool:
    """Forbid this process, for the rest of its life, to start a program or another process (threads are fine):
    a seccomp filter (Linux, x86-64) on which no process can go back. Another interpreter would have none of
    the sentinels above. Returns whether the filter is in place."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        return False
    allow, deny, no_such_call = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_*: ALLOW, ERRNO(EPERM/ENOSYS)
    load, jump_if_equal, jump_if_at_least, jump_if_set, give = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF instruction codes
    execve, execveat, fork, vfork, clone, clone3 = 59, 322, 57, 58, 56, 435  # x86-64 system call numbers
    program = [  # (code, jump if true, jump if false, value); jumps count the instructions skipped
        (load, 0, 0, 4),  # 0: the architecture
        (jump_if_equal, 1, 0, 0xC000003E),  # 1: x86-64, else (i386 or x32 calls) denied
        (give, 0, 0, deny),  # 2
        (load, 0, 0, 0),  # 3: the system call's number
        (jump_if_at_least, 9, 0, 0x40000000),  # 4: x32 numbering: denied
        (jump_if_equal, 8, 0, execve),  # 5
        (jump_if_equal, 7, 0, execveat),  # 6
        (jump_if_equal, 6, 0, fork),  # 7
        (jump_if_equal, 5, 0, vfork),  # 8
        (jump_if_equal, 6, 0, clone3),  # 9: "no such call", so that threads are made by clone, whose flags we see
        (jump_if_equal, 1, 0, clone),  # 10
        (give, 0, 0, allow),  # 11
        (load, 0, 0, 16),  # 12: clone's flags
        (jump_if_set, 1, 0, 0x00010000),  # 13: CLONE_THREAD: a thread
        (give, 0, 0, deny),  # 14: a new process
        (give, 0, 0, allow),  # 15
        (give, 0, 0, no_such_call),  # 16
    ]

    class Instruction(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]

    instructions = (Instruction * len(program))(*[Instruction(*i) for i in program])
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        zero = ctypes.c_ulong(0)
        if prctl(38, ctypes.c_ulong(1), zero, zero, zero) != 0:  # PR_SET_NO_NEW_PRIVS: an unprivileged filter needs it
            return False
        fprog = Program(len(program), instructions)
        return prctl(22, ctypes.c_ulong(2), ctypes.byref(fprog), zero, zero) == 0  # PR_SET_SECCOMP, MODE_FILTER
    except (OSError, AttributeError):
        return False
