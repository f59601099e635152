"""A throwaway PostgreSQL server for a gradebook, from the binaries the ``pgserver`` package ships.

nbgrader's gradebook is any SQLAlchemy database (``NBGRADER_DB_URL``); a course with
several graders or a Dask cluster (:mod:`course_tools.grading.cluster`) points it at
PostgreSQL. The test suite and the benchmark need a real server they can start and stop
without a system installation, so :func:`throwaway_postgres` runs PostgreSQL 16 from the
wheel ``pgserver`` (PostgreSQL licence; we call its ``initdb``, ``pg_ctl`` and ``createdb``
directly, not its Python wrapper):

- the data folder is fresh, owned by the user who runs the server: PostgreSQL refuses to
  run as root, so when we are root the server runs as ``nobody``;
- it listens on 127.0.0.1 only, on a free port, with a random password (scram-sha-256),
  and on a Unix socket inside its own folder;
- leaving the ``with`` block stops it (fast shutdown) and deletes its folder.

For a real course, use a PostgreSQL server you administer and set ``NBGRADER_DB_URL``
(see README.md); this module is for tests, benchmarks and trying things out.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .sandbox import NOBODY

START_ATTEMPTS = 3


def binaries() -> Path:
    """The folder of the PostgreSQL programs that ``pgserver`` ships."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.origin:
        raise RuntimeError("the pgserver package is not installed (requirements.txt pins it): "
                           "no PostgreSQL programs to start a throwaway server with")
    return Path(spec.origin).parent / "pginstall" / "bin"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as(user: int | None) -> dict:
    """subprocess.run's arguments that run a program as ``user`` (None: as we are)."""
    return {"user": user, "group": user, "extra_groups": [] if user is not None else None}


def _run(args: list, user: int | None, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **_as(user), **kwargs)
    if result.returncode != 0:
        raise RuntimeError(f"{Path(str(args[0])).name} failed ({result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-600:]}")
    return result


@contextmanager
def throwaway_postgres(database: str = "gradebook") -> Iterator[str]:
    """Start a PostgreSQL server with an empty ``database``; yield its SQLAlchemy URL; stop and delete it.

    The URL is ``postgresql+psycopg2://postgres:<password>@127.0.0.1:<port>/<database>``.
    Raises RuntimeError, with PostgreSQL's own message, when the server cannot start.
    """
    bin_dir = binaries()
    user = NOBODY if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="course-postgres-"))
    try:
        if user is not None:
            os.chown(folder, user, user)
        password = secrets.token_urlsafe(18)
        (folder / "password").write_text(password + "\n")
        if user is not None:
            os.chown(folder / "password", user, user)
        _run([bin_dir / "initdb", "-D", folder / "data", "-U", "postgres", f"--pwfile={folder / 'password'}",
              "-A", "scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync"], user)
        port = None
        for attempt in range(START_ATTEMPTS):  # another program may take the free port before we bind it
            port = free_port()
            options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off"
            try:
                _run([bin_dir / "pg_ctl", "-D", folder / "data", "-o", options, "-l", folder / "server.log",
                      "-w", "-t", "60", "start"], user)
                break
            except RuntimeError:
                if attempt == START_ATTEMPTS - 1:
                    log = (folder / "server.log").read_text(errors="replace")[-800:] \
                        if (folder / "server.log").exists() else ""
                    raise RuntimeError(f"PostgreSQL did not start:\n{log}") from None
        try:
            env = dict(os.environ, PGPASSWORD=password)
            _run([bin_dir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", database], user, env=env)
            yield f"postgresql+psycopg2://postgres:{password}@127.0.0.1:{port}/{database}"
        finally:
            subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-m", "fast", "-w", "stop"],
                           capture_output=True, **_as(user))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
