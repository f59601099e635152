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
processes only: sandboxes graded side by side (:mod:`course_tools.cluster`) cannot use up
each other's; paths under a private folder such as
``/root`` are bound through a private mount namespace (``unshare``).

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

NOBODY = 65534
SANDBOX_UIDS = range(1_000_000, 1_000_000 + 2 ** 23)
"""The users sandboxes run as when the grader is root; none of them has a name or owns a file."""
TMP_BYTES = 256 * 2 ** 20
"""The size of the sandbox's /tmp (a tmpfs, so it is memory)."""


@dataclass
class Limits:
    """What one submission may use. Times in seconds, sizes in bytes."""

    cell_seconds: float = 120.0
    notebook_seconds: float = 300.0
    memory: int = 6 * 2 ** 30  # address space; torch maps much more than it uses
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


def _python_roots() -> list[Path]:
    """The folders the Python environment needs: the venv and the installation it was made from."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
             Path(sysconfig.get_paths()["stdlib"]).resolve().parent.parent}
    return sorted(r for r in roots if not any(r != o and o in r.parents for o in roots))


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


def _set_limits(limits: Limits):
    """A ``preexec_fn`` that applies ``limits`` to the process about to run (and all it starts).

    As root the sandbox runs as a user of its own (:func:`sandbox_uid`), whose processes are only the sandbox's; as
    another user the limit counts that user's other processes too, so they are added."""
    processes = limits.processes + (0 if os.geteuid() == 0 else _own_processes())

    def apply():
        for name, value in (("RLIMIT_AS", limits.memory), ("RLIMIT_NPROC", processes),
                            ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_FSIZE", limits.file_size),
                            ("RLIMIT_CPU", limits.cpu_seconds), ("RLIMIT_CORE", 0)):
            resource.setrlimit(getattr(resource, name), (value, value))
    return apply


def _prefix(binds: list[tuple[Path, str, bool]], job: Path | None) -> list[str]:
    """The command that starts a program in the sandbox, given ``(source, target, writable)`` binds."""
    bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
             "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
             "--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
             "--size", str(2 ** 20), "--tmpfs", "/run"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            bwrap += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            bwrap += ["--ro-bind", str(path), str(path)]
    for source, target, writable in binds:
        bwrap += ["--bind" if writable else "--ro-bind", str(source), target]
    env = {"PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin", "HOME": "/tmp/home", "LANG": "C.UTF-8",
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
    The whole run is stopped after ``limits.notebook_seconds``.
    """
    for name in ("out", "work"):
        (job / name).mkdir(exist_ok=True)
        os.chmod(job / name, 0o777)
    for path in [job, job / "in", *(job / "in").rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    runner = ["python", "/grading/in/sandbox_runner.py", "/grading/in/notebook.ipynb", "/grading/out/notebook.ipynb",
              str(limits.cell_seconds)]
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
                   str(job / "out" / "notebook.ipynb"), str(limits.cell_seconds)]
    return _run(command, limits, cwd=job / "work")


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


def _run(command: list[str], limits: Limits, cwd: Path) -> RunResult:
    started = time.time()
    log = cwd.parent / "stderr.txt"  # a file, so that the size limit applies to what the sandbox writes
    with open(log, "wb") as err:
        process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, start_new_session=True, preexec_fn=_set_limits(limits))
        timed_out = False
        try:
            process.wait(timeout=limits.notebook_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill(process)  # the sandbox's init process: the kernel, its children and daemons go with it
        process.wait()
    with open(log, "rb") as f:
        f.seek(max(0, log.stat().st_size - 4000))
        tail = f.read().decode(errors="replace")
    return RunResult(process.returncode, time.time() - started, timed_out, tail)


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
