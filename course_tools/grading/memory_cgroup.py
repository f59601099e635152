"""One memory cgroup per sandbox run, so that everything a submission holds counts against one limit.

``RLIMIT_AS`` bounds each process's address space, but the pages of a tmpfs (the sandbox's
``/tmp``, ``/dev/shm``), of a memfd or of System V shared memory stay in memory once no
process maps them, and count against nobody's address space. The kernel charges every page,
those included, to the memory cgroup of the process that first touched it; so a cgroup of its
own per sandbox run, with a limit, bounds the lot. Past the limit the kernel's OOM killer
stops a process of that cgroup only: the grader, outside it, goes on, and so does a
classmate graded beside it.

:func:`bound` makes the cgroup under the grader's own (cgroup v1's ``memory`` hierarchy at
``/sys/fs/cgroup/memory``, or cgroup v2 with its memory controller), hands it to the code that
starts the sandbox (whose ``preexec_fn`` calls :meth:`MemoryCgroup.join`), and removes it
afterwards, keeping its peak use and how many processes the OOM killer stopped.
:func:`unavailable` says why no cgroup can be had here (not root, no memory controller, a
cgroup folder that cannot be written); the sandbox then only bounds the sizes of its tmpfs
mounts (:mod:`course_tools.grading.sandbox`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NAME_PREFIX = "course-sandbox-"
"""Our cgroups are named ``course-sandbox-<grader pid>-<random>``: a crashed grader's leftovers are found by it."""


@dataclass
class MemoryCgroup:
    """A memory cgroup made for one sandbox run (``version`` 1 or 2)."""

    path: Path
    version: int

    def __post_init__(self):
        self._procs = os.fsencode(self.path / "cgroup.procs")  # ready for the preexec function

    def join(self) -> None:
        """Move the calling process into this cgroup (everything it starts afterwards is born there).
        Safe in a ``preexec_fn``: two system calls, no allocation of note."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"%d" % os.getpid())
        finally:
            os.close(fd)

    def peak(self) -> int | None:
        """The most memory (bytes) the cgroup held at once, when the kernel says."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """How many processes of this cgroup the kernel's OOM killer stopped."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, wait: float = 5.0) -> None:
        """Delete the cgroup once its processes are gone (those still there after a moment are killed:
        they can only be the sandbox's)."""
        deadline = time.monotonic() + wait
        killed = False
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left for the next run's sweep (_sweep)
            if not killed and time.monotonic() > deadline - wait / 2:
                for pid in _pids(self.path):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                killed = True
            time.sleep(0.05)


@dataclass
class MemoryUse:
    """What a run in :func:`bound` used: its cgroup while it runs, then the cgroup's peak and OOM kills."""

    limit: int
    group: MemoryCgroup | None = None
    peak: int | None = None
    oom_kills: int = 0
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def bound(limit: int):
    """Context of one sandbox run: yields a :class:`MemoryUse` whose ``group`` (``None`` when no cgroup
    can be had, or ``limit`` is 0) the run's ``preexec_fn`` joins; on exit the cgroup is read and removed,
    and ``notes`` say when the OOM killer stopped a process."""
    use = MemoryUse(limit, create(limit) if limit else None)
    try:
        yield use
    finally:
        if use.group is not None:
            use.peak, use.oom_kills = use.group.peak(), use.group.oom_kills()
            use.group.remove()
            if use.oom_kills:
                use.notes.append(
                    f"the submission went past its memory limit of {limit / 2 ** 30:.1f} GiB (its processes, "
                    f"/tmp, /dev/shm and memfds together): the kernel stopped {use.oom_kills} of its "
                    f"process(es), so what ran there was cut short")


def _own_cgroups() -> dict[str, str]:
    """``controller -> path`` of this process's cgroups (``""`` for the v2 hierarchy)."""
    own = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                own[controller] = parts[2]
    return own


def _parents() -> list[tuple[int, Path]]:
    """Where a cgroup of ours may be made, most specific first: under the grader's own cgroup, then
    under the hierarchy's root. v2 when ``/sys/fs/cgroup`` is the unified hierarchy, else v1's ``memory``."""
    own = _own_cgroups()
    if (CGROUP_ROOT / "cgroup.controllers").is_file():
        version, mount, mine = 2, CGROUP_ROOT, own.get("")
    elif (CGROUP_ROOT / "memory" / "cgroup.procs").is_file():
        version, mount, mine = 1, CGROUP_ROOT / "memory", own.get("memory")
    else:
        return []
    candidates = [mount / mine.lstrip("/")] if mine and mine.startswith("/") else []
    return [(version, path) for path in dict.fromkeys(candidates + [mount]) if path.is_dir()]


def _memory_controller(parent: Path) -> bool:
    """(v2) Whether children of ``parent`` get the memory controller; enable it when we may (a cgroup with
    processes of its own, other than the root, may not: the kernel answers EBUSY)."""
    try:
        if "memory" in (parent / "cgroup.subtree_control").read_text().split():
            return True
        if "memory" not in (parent / "cgroup.controllers").read_text().split():
            return False
        (parent / "cgroup.subtree_control").write_text("+memory")
        return True
    except OSError:
        return False


def _make(version: int, parent: Path, limit: int) -> MemoryCgroup | None:
    if version == 2 and not _memory_controller(parent):
        return None
    _sweep(parent)
    path = parent / f"{NAME_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir()
    except OSError:
        return None
    settings = ([("memory.limit_in_bytes", limit, True), ("memory.memsw.limit_in_bytes", limit, False)]
                if version == 1 else [("memory.max", limit, True), ("memory.swap.max", 0, False)])
    try:
        for name, value, needed in settings:
            try:
                (path / name).write_text(str(value))
            except OSError:
                if needed:
                    raise
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return MemoryCgroup(path, version)


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups that graders no longer running left under ``parent`` (a killed worker's)."""
    for path in parent.glob(f"{NAME_PREFIX}*"):
        try:
            pid = int(path.name[len(NAME_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                path.rmdir()


def _pids(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def create(limit: int) -> MemoryCgroup | None:
    """A fresh memory cgroup limited to ``limit`` bytes, or ``None`` when none can be had here."""
    if _checked() is not None:
        return None
    for version, parent in _parents():
        group = _make(version, parent, limit)
        if group is not None:
            return group
    return None


@functools.lru_cache(maxsize=None)
def _checked() -> str | None:
    """Once per process: make a cgroup, run a program in it, remove it. ``None`` when that worked, else why not."""
    if os.geteuid() != 0 and not any(os.access(p, os.W_OK) for _v, p in _parents()):
        return "the grader is not root and no memory cgroup is delegated to it"
    parents = _parents()
    if not parents:
        return f"no memory controller is mounted at {CGROUP_ROOT} (neither cgroup v2 with memory nor v1's memory)"
    for version, parent in parents:
        group = _make(version, parent, 2 ** 30)
        if group is None:
            continue
        try:
            probe = subprocess.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True,
                                   preexec_fn=group.join, timeout=30)
            joined = probe.returncode == 0 and group.path.name in probe.stdout
        except (OSError, subprocess.SubprocessError):
            joined = False
        finally:
            group.remove()
        if joined:
            return None
    return f"no memory cgroup could be made and joined under {', '.join(str(p) for _v, p in parents)}"


def unavailable() -> str | None:
    """``None`` when each sandbox run gets a memory cgroup of its own here, else why not (plain words)."""
    return _checked()
