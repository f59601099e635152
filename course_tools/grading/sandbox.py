"""A sandbox per submission: bubblewrap, resource limits and an unprivileged user, no Docker.

Why bubblewrap (Debian's ``bubblewrap``): it builds the sandbox's file system from
nothing, so the kernel sees only what is bound in (the Python environment, the
student edition and the job's folder, all read-only except the job's output), and it
puts the kernel in its own user, PID, network, IPC and UTS namespaces: no network
(only a loopback of its own, which nbclient and the kernel use), no view of other
processes, and every process it started dies with it (``--unshare-pid``,
``--die-with-parent``). Resource limits (``setrlimit`` before the sandbox starts,
inherited by all it runs) bound address space, processes, open files, the size of
files written and CPU time. When the grader runs as root, the sandbox runs as a
user of its own that owns no file (:func:`sandbox_uid`, by ``setpriv``), so no file of the
instructor is readable even by mistake and the process limit counts this sandbox's
processes only: sandboxes graded side by side (:mod:`course_tools.grading.cluster`) cannot use up
each other's; paths under a private folder such as
``/root`` are bound through a private mount namespace (``unshare``).

Memory is bounded as a whole: each run gets a memory cgroup of its own limited to
``Limits.memory_total`` (:mod:`course_tools.grading.memory_cgroup`), which counts what no address-space
limit sees (tmpfs pages of /tmp and /dev/shm, memfds, System V shared memory); where no cgroup
can be had, :func:`memory_unbounded` says what is left unbounded, and the sizes still add up:
/tmp and /dev/shm are tmpfs mounts of bounded size and bwrap's own tmpfs (/ and /dev) are
read-only. The Python environment is bound at its real path and, when the grader reached it
through a symbolic link, the same link is made in the sandbox (the kernel's PATH names it).

:func:`unavailable` says in plain words why a sandbox cannot be had here; grading
then refuses, unless the instructor asks for unsandboxed grading
(``tasks.py grade A --unsandboxed``), which still applies the limits and the
wall-clock timeout but not the isolation.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import memory_cgroup

NOBODY = 65534
SANDBOX_UIDS = range(1_000_000, 1_000_000 + 2 ** 23)
"""The users sandboxes run as when the grader is root; none of them has a name or owns a file."""
TMP_BYTES = 256 * 2 ** 20
"""The size of the sandbox's /tmp (a tmpfs, so it is memory)."""
COMPUTING_SHARE = 0.02
"""A part of a run that hit a wall-clock limit was computing (so a busy machine may have slowed it) when it
used at least this share of the wall clock as CPU time; one that slept or waited used next to none."""
SHM_BYTES = 256 * 2 ** 20
"""The size of the sandbox's /dev/shm (a tmpfs of its own; bwrap's ``--dev`` would make it a folder of /dev)."""


@dataclass
class Limits:
    """What one submission may use. Times in seconds, sizes in bytes."""

    cell_seconds: float = 600.0  # wall clock: a generous outer bound; a busy machine must not cost points
    notebook_seconds: float = 1800.0  # wall clock, the whole notebook
    cell_cpu_seconds: float = 120.0  # CPU time one graded cell (or experiment cell) may use
    notebook_cpu_seconds: float = 600.0  # CPU time all of a notebook's cells may use together
    memory: int = 6 * 2 ** 30  # address space per process; torch maps much more than it uses
    memory_total: int = 3 * 2 ** 30  # all a run holds (processes, /tmp, /dev/shm, memfds): its memory cgroup; 0: none
    processes: int = 64
    open_files: int = 256
    file_size: int = 200 * 2 ** 20
    cpu_seconds: int = 1200


@dataclass
class RunResult:
    """How a sandboxed run ended."""

    returncode: int | None
    seconds: float
    timed_out: bool
    stderr: str = ""
    notes: list[str] = field(default_factory=list)
    memory_peak: int | None = None  # the most memory the run's cgroup held at once (bytes), when it had one
    stdout: bytes = b""  # what the run wrote to its standard output, when captured (at most ``capture`` bytes)


def ensure_bubblewrap() -> None:
    """Install Debian's ``bubblewrap`` when it is missing and we may (root with apt-get); else do nothing."""
    if shutil.which("bwrap") or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "install", "-y", "-qq", "bubblewrap"],
                    ["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "bubblewrap"]):
        subprocess.run(command, capture_output=True, env=env)
        if shutil.which("bwrap"):
            return


def unavailable() -> str | None:
    """``None`` when sandboxed grading works here, else why not (in words an instructor can act on)."""
    ensure_bubblewrap()
    if sys.platform != "linux":
        return "the grading sandbox needs Linux (bubblewrap and namespaces)"
    for tool in ("bwrap",) + (("setpriv", "unshare") if os.geteuid() == 0 else ()):
        if not shutil.which(tool):
            package = "bubblewrap" if tool == "bwrap" else "util-linux"
            return f"`{tool}` is not installed (Debian package {package}: apt-get install {package})"
    probe = subprocess.run(_prefix(binds=[], job=None) + ["/bin/true"], capture_output=True, text=True,
                           preexec_fn=_set_limits(Limits()))
    if probe.returncode != 0:
        return ("bubblewrap cannot create a sandbox here (are unprivileged user namespaces allowed? "
                f"sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces): {probe.stderr.strip()[:300]}")
    return None


def memory_unbounded() -> str | None:
    """``None`` when each sandbox run's memory is bounded as a whole (a memory cgroup per run, limited to
    ``Limits.memory_total``: processes, tmpfs, shared memory and memfds together), else what is not bounded."""
    reason = memory_cgroup.unavailable()
    if reason is None:
        return None
    return (f"memory is not bounded as a whole ({reason}): each sandbox's /tmp ({TMP_BYTES // 2 ** 20} MiB) and "
            f"/dev/shm ({SHM_BYTES // 2 ** 20} MiB) are bounded, its / and /dev are read-only and each process's "
            f"address space is limited, but memfds and System V shared memory are bounded only per file and per "
            f"process, so one submission can take memory from a classmate graded beside it "
            f"(run the grader as root on a machine with cgroup memory accounting to bound it)")


def computing(cpu_seconds: float, wall_seconds: float) -> bool:
    """Whether a cell stopped by the wall clock after ``wall_seconds`` was computing (its CPU time a real share
    of them, :data:`COMPUTING_SHARE`): a busy machine can then be the cause, and the submission is graded
    again alone (:func:`course_tools.grading.batch.regrade_alone`). A cell that slept or waited would only wait again."""
    return cpu_seconds >= COMPUTING_SHARE * wall_seconds


def _python_roots() -> list[Path]:
    """The folders the Python environment needs: the venv and the installation it was made from."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
             Path(sysconfig.get_paths()["stdlib"]).resolve().parent.parent}
    return sorted(r for r in roots if not any(r != o and o in r.parents for o in roots))


def _python_links() -> list[tuple[str, str]]:
    """``(real path, linked path)`` of the Python environment when the grader reached it through a symbolic
    link (a linked virtual environment, a shared conda folder): the sandbox gets the same link, since the
    kernel's PATH, ``sys.prefix`` and the environment's own files name the linked path. A link, not a second
    bind: what is hidden at the real path (a library a test forbids) stays hidden through the link."""
    bound = _python_roots() + [Path("/usr"), Path("/etc")]
    links = []
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix]):
        linked, real = Path(os.path.abspath(prefix)), Path(prefix).resolve()
        if linked != real and not any(root == linked or root in linked.parents for root in bound):
            links.append((str(real), str(linked)))
    return links


def sandbox_uid() -> int:
    """The user this thread's sandbox runs as when the grader is root: one per grading thread
    (``SANDBOX_UIDS.start`` + the thread's system-wide id), so two sandboxes never share a user."""
    return SANDBOX_UIDS.start + threading.get_native_id() % len(SANDBOX_UIDS)


def _own_processes() -> int:
    """How many processes this user runs now (the process limit counts them all)."""
    uid, count = os.getuid(), 0
    for status in Path("/proc").glob("[0-9]*"):
        try:
            count += status.stat().st_uid == uid
        except OSError:
            pass
    return count


def _set_limits(limits: Limits, cgroup: memory_cgroup.MemoryCgroup | None = None):
    """A ``preexec_fn`` that applies ``limits`` to the process about to run (and all it starts), after moving
    it into ``cgroup`` (its memory cgroup, :mod:`course_tools.grading.memory_cgroup`) when there is one.

    As root the sandbox runs as a user of its own (:func:`sandbox_uid`), whose processes are only the sandbox's; as
    another user the limit counts that user's other processes too, so they are added."""
    processes = limits.processes + (0 if os.geteuid() == 0 else _own_processes())

    def apply():
        if cgroup is not None:
            cgroup.join()  # first, while still the grader's user: the sandbox is born inside it
        for name, value in (("RLIMIT_AS", limits.memory), ("RLIMIT_NPROC", processes),
                            ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_FSIZE", limits.file_size),
                            ("RLIMIT_CPU", limits.cpu_seconds), ("RLIMIT_CORE", 0)):
            resource.setrlimit(getattr(resource, name), (value, value))
    return apply


def _prefix(binds: list[tuple[Path, str, bool]], job: Path | None) -> list[str]:
    """The command that starts a program in the sandbox, given ``(source, target, writable)`` binds."""
    bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
             "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
             "--proc", "/proc", "--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
             "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--size", str(2 ** 20), "--tmpfs", "/run"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            bwrap += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            bwrap += ["--ro-bind", str(path), str(path)]
    for source, target, writable in binds:
        bwrap += ["--bind" if writable else "--ro-bind", str(source), target]
    for real, linked in _python_links():
        bwrap += ["--symlink", real, linked]
    # bwrap's root and /dev are tmpfs mounts the sandbox's user could fill without bound: read-only once
    # built (only these mounts, not those on top of them); later binds need their mount point to exist
    bwrap += ["--remount-ro", "/dev", "--remount-ro", "/"]
    env = {"PATH": f"{Path(os.path.abspath(sys.prefix)) / 'bin'}:/usr/bin:/bin", "HOME": "/tmp/home", "LANG": "C.UTF-8",
           "JUPYTER_RUNTIME_DIR": "/tmp/jupyter", "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": "/tmp/ipython",
           "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/mpl", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "TQDM_DISABLE": "1"}
    for name, value in env.items():
        bwrap += ["--setenv", name, value]
    if job is not None:
        bwrap += ["--chdir", "/grading/work"]
    drop = ["setpriv", f"--reuid={sandbox_uid()}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all"] if os.geteuid() == 0 else []
    return drop + bwrap


def _staged_binds(job: Path, edition: Path) -> list[tuple[Path, str, bool]]:
    binds = [(root, str(root), False) for root in _python_roots()]
    binds += [(edition, "/grading/edition", False), (job / "in", "/grading/in", False),
              (job / "out", "/grading/out", True), (job / "work", "/grading/work", True)]
    return binds


def run_notebook(job: Path, edition: Path, limits: Limits, sandboxed: bool = True) -> RunResult:
    """Execute ``job/in/notebook.ipynb`` (cases in ``job/in/cases``) into ``job/out/notebook.ipynb``.

    ``job/in`` is read-only in the sandbox, ``job/out`` and ``job/work`` (the kernel's
    working folder) writable; the student edition is first on the kernel's path.
    Cells are bounded by CPU time (``limits.cell_cpu_seconds`` each, ``limits.notebook_cpu_seconds`` together)
    and by wall clock (``limits.cell_seconds``); the whole run is stopped after ``limits.notebook_seconds``.
    """
    for name in ("out", "work"):
        (job / name).mkdir(exist_ok=True)
        os.chmod(job / name, 0o777)
    for path in [job, job / "in", *(job / "in").rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    times = [str(limits.cell_seconds), str(limits.cell_cpu_seconds), str(limits.notebook_cpu_seconds)]
    runner = ["python", "/grading/in/sandbox_runner.py", "/grading/in/notebook.ipynb", "/grading/out/notebook.ipynb",
              *times]
    if sandboxed:
        binds = _staged_binds(job, edition)
        command = _prefix(binds, job) + ["--setenv", "PYTHONPATH", "/grading/edition:/grading/in"] + runner
        stage = None
        if os.geteuid() == 0:  # bind private folders (/root/...) through a private mount namespace
            command, stage = _through_private_mounts(command, binds)
        try:
            return _run(command, limits, cwd=job / "work")
        finally:
            if stage is not None:  # its mounts lived only in the sandbox's private namespace
                shutil.rmtree(stage, ignore_errors=True)
    else:
        command = ["env", f"PYTHONPATH={edition}:{job / 'in'}", "MPLBACKEND=Agg", "TQDM_DISABLE=1",
                   sys.executable, str(job / "in" / "sandbox_runner.py"), str(job / "in" / "notebook.ipynb"),
                   str(job / "out" / "notebook.ipynb"), *times]
    return _run(command, limits, cwd=job / "work")


PROBE_OUTPUT_BYTES = 200_000_000
"""The most of the probe runner's report the grader reads."""


def run_probes(job: Path, edition: Path, limits: Limits, sandboxed: bool = True, masked=()) -> RunResult:
    """Run ``job/in/probe_runner.py`` on ``job/in/plan.json`` (:mod:`course_tools.in_sandbox.probe_runner`): the graded
    cells, each in a fresh process. Its report is the result's ``stdout``, read through a pipe (nothing
    the sandbox can write on disk is read). ``masked``: folders (libraries a test forbids whole) hidden
    under an empty tmpfs, so they cannot be imported in the sandbox at all."""
    for name in ("out", "work"):
        (job / name).mkdir(exist_ok=True)
        os.chmod(job / name, 0o777)
    for path in [job, job / "in", *(job / "in").rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    if not sandboxed:
        command = ["env", f"PYTHONPATH={edition}:{job / 'in'}", "MPLBACKEND=Agg", "TQDM_DISABLE=1",
                   sys.executable, str(job / "in" / "probe_runner.py"), str(job / "in" / "plan.json")]
        return _run(command, limits, cwd=job / "work", capture=PROBE_OUTPUT_BYTES)
    binds = _staged_binds(job, edition)
    hide = [part for folder in masked for part in ("--size", str(2 ** 16), "--tmpfs", str(folder))]
    command = (_prefix(binds, job) + hide + ["--setenv", "PYTHONPATH", "/grading/edition:/grading/in"]
               + ["python", "/grading/in/probe_runner.py", "/grading/in/plan.json"])
    stage = None
    if os.geteuid() == 0:  # bind private folders (/root/...) through a private mount namespace
        command, stage = _through_private_mounts(command, binds)
    try:
        return _run(command, limits, cwd=job / "work", capture=PROBE_OUTPUT_BYTES)
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


def _through_private_mounts(command: list[str], binds) -> tuple[list[str], Path]:
    """Run ``command`` in a private mount namespace where each bound folder is first bind-mounted
    at a path the sandbox's user can reach, and bwrap binds it from there."""
    stage = Path(tempfile.mkdtemp(prefix="course-sandbox-"))
    os.chmod(stage, 0o755)
    script, mapping = ["set -e"], {}
    for number, (source, _target, _writable) in enumerate(binds):
        mount_point = stage / str(number)
        mount_point.mkdir()
        script.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(mount_point))}")
        mapping[str(source)] = str(mount_point)
    rewritten = [mapping.get(part, part) if i and command[i - 1] in ("--bind", "--ro-bind") else part
                 for i, part in enumerate(command)]
    script.append("exec " + " ".join(shlex.quote(p) for p in rewritten))
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(script)], stage


def _run(command: list[str], limits: Limits, cwd: Path, capture: int = 0) -> RunResult:
    """Run ``command`` under ``limits``, stopped after ``limits.notebook_seconds`` of wall clock, in a memory
    cgroup of its own limited to ``limits.memory_total`` where one can be had (:func:`memory_unbounded`).

    With ``capture`` > 0, the first ``capture`` bytes of its standard output are kept (read by a thread
    as they come, the rest read and dropped, so a run that writes without end neither blocks nor fills memory)."""
    started = time.time()
    log = cwd.parent / "stderr.txt"  # a file, so that the size limit applies to what the sandbox writes
    kept = bytearray()
    # a memory cgroup of its own bounds all the run holds; removed (its peak and OOM kills read) on leaving
    with open(log, "wb") as err, memory_cgroup.bound(limits.memory_total) as memory:
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE if capture else subprocess.DEVNULL, stderr=err,
                                   start_new_session=True, preexec_fn=_set_limits(limits, memory.group))
        reader = None
        if capture:
            def read():
                while chunk := process.stdout.read(65536):
                    kept.extend(chunk[:max(0, capture - len(kept))])
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
        timed_out = False
        try:
            process.wait(timeout=limits.notebook_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill(process)  # the sandbox's init process: the kernel, its children and daemons go with it
        process.wait()
        if reader is not None:
            reader.join(timeout=5)  # a leftover process holding the pipe must not hold the grader
            if not reader.is_alive():
                process.stdout.close()
    with open(log, "rb") as f:
        f.seek(max(0, log.stat().st_size - 4000))
        tail = f.read().decode(errors="replace")
    return RunResult(process.returncode, time.time() - started, timed_out, tail, notes=memory.notes,
                     memory_peak=memory.peak, stdout=bytes(kept))


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
