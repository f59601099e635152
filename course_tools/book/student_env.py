"""The students' environment, made the way a student makes it: what the book's chapters execute in.

A student sets up their computer with the install lines the pages show
(:func:`course_tools.book.student_install.install_lines`): the course's student requirements, then a
student edition of course_lib, both fetched from the book's site. :func:`ensure` runs those very
lines, with the book's URL replaced by a local HTTP server that serves the public tree (which
holds ``_static/`` exactly as the built site serves it), in a fresh virtual environment
``_build/student_env/venv``, and writes a Jupyter kernel spec for it. The environment is kept
while its fingerprint (the lines, and the bytes of every file they fetch from the site) is the
same; a new wheel of course_lib is installed again into it, new requirements make it anew.

When a build reveals every answer (the self-study build), its newest edition is the complete
course_lib, and ``tasks.py book`` executes the chapters in this environment
(``JUPYTER_PATH`` names :func:`kernel_dir`): every chapter of the book has then run, top to
bottom, in what a student installs from the pages, and the student-path test
(``tests/test_student_path.py``) runs the problem sets in it. A class's build reveals fewer
editions, so its book executes with the complete course_lib of the maintainers' ``.venv``.

    python -m course_tools.book.student_env PUBLIC     make (or keep) it for the public tree PUBLIC;
                                                  prints the kernel folder, or nothing when the
                                                  build does not reveal every answer
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from course_tools import ROOT
from course_tools.exercises import assignments
from course_tools.site_config import EDITIONS, read_site

HOME = ROOT / "_build" / "student_env"
"""Where the environment (``venv/``), its kernel spec (``jupyter/``) and its fingerprint live."""


def venv_python(home: Path = HOME) -> Path:
    """The Python of the students' environment."""
    return home / "venv" / ("Scripts" if os.name == "nt" else "bin") / "python"


def kernel_dir(home: Path = HOME) -> Path:
    """The folder to put first on ``JUPYTER_PATH`` so that kernel ``python3`` is the students' environment."""
    return home / "jupyter"


def published_editions(public: Path) -> list[int]:
    """The numbers of the student editions whose wheels the public tree ``public`` holds, in order."""
    numbers = []
    for wheel in (public / EDITIONS).glob("course_lib-*+student*-py3-none-any.whl"):
        numbers.append(int(wheel.name.split("+student", 1)[1].split("-", 1)[0]))
    return sorted(numbers)


def page_lines(edition: int, root: Path = ROOT) -> list[str]:
    """The install lines the pages show for ``edition``, with the book's URL as it is published."""
    from .student_install import install_lines

    return install_lines(read_site(root), edition)


def local_lines(lines: list[str], book_url: str, served: str) -> list[str]:
    """``lines`` with the book's URL ``book_url`` replaced by the local server's ``served``."""
    return [line.replace(book_url, served) for line in lines]


def fetched_files(lines: list[str], book_url: str, public: Path) -> list[Path]:
    """The files of ``public`` that ``lines`` fetch from the site (every word that starts with ``book_url``).

    Raises:
        FileNotFoundError: a line names a file of the site that the public tree does not hold.
    """
    files = []
    for line in lines:
        for word in shlex.split(line):
            if word.startswith(book_url):
                path = public / word[len(book_url):]
                if not path.is_file():
                    raise FileNotFoundError(f"the install line {line!r} fetches {word}, which the public tree "
                                            f"does not hold ({path})")
                files.append(path)
    return files


def fingerprint(lines: list[str], files: list[Path]) -> str:
    """What defines the environment: the install lines and the bytes of the files they fetch."""
    digest = hashlib.sha256("\n".join(lines).encode())
    for path in files:
        digest.update(path.name.encode() + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def pip_command(python: Path, line: str) -> list[str]:
    """The page's ``pip install ...`` line as a command for the environment's own pip."""
    words = shlex.split(line)
    if words[:2] != ["pip", "install"]:
        raise ValueError(f"an install line must start with 'pip install': {line!r}")
    return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *words[2:]]


def write_kernel(python: Path, home: Path = HOME) -> Path:
    """A kernel spec named ``python3`` that starts ``python`` (an absolute path, so Jupyter keeps it)."""
    folder = kernel_dir(home) / "kernels" / "python3"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (the students' environment)", "language": "python",
            "metadata": {"debugger": True}}
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return kernel_dir(home)


def ensure(public: Path, edition: int, home: Path = HOME, root: Path = ROOT, base_python: str | None = None) -> Path:
    """The students' environment for ``edition``, made from the pages' install lines against ``public``.

    Each line has a fingerprint (the line and the bytes of what it fetches). When the first line's
    (the requirements) changed, ``home`` is emptied and the environment made anew with
    ``base_python -m venv`` (default: this interpreter's base, Python 3.11) and every line; when
    only a later one's changed (a new wheel of course_lib, same version), that line runs again with
    ``--force-reinstall``. The lines fetch from ``public`` served over HTTP. Returns the kernel
    folder for ``JUPYTER_PATH``.

    Raises:
        subprocess.CalledProcessError: a line failed to install (pip's output is on the console).
    """
    from .browser import serve

    site = read_site(root)
    lines = page_lines(edition, root)
    python = venv_python(home)
    stamps = [home / f"fingerprint-line{n}" for n in range(1, len(lines) + 1)]
    wanted = [fingerprint([line], fetched_files([line], site.book_url, public)) for line in lines]
    done = [stamp.exists() and stamp.read_text() == want for stamp, want in zip(stamps, wanted)]
    if all(done) and python.exists():
        return write_kernel(python, home)
    started = time.time()
    if not (done[0] and python.exists()):  # the requirements changed: a fresh environment
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        base = base_python or getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([base, "-m", "venv", str(home / "venv")], check=True, stdout=sys.stderr)
        done = [False] * len(lines)
    with serve(public) as served:
        for line, stamp, want, ok in zip(local_lines(lines, site.book_url, served), stamps, wanted, done):
            if ok:
                continue
            again = ["--force-reinstall"] if stamp.exists() else []  # a new wheel of the same version
            print("+", line, *again, file=sys.stderr, flush=True)
            subprocess.run(pip_command(python, line) + again, check=True, env=_clean_env(), stdout=sys.stderr)
            stamp.write_text(want)
    print(f"the students' environment (edition {edition}) made from the pages' install lines "
          f"in {time.time() - started:.0f} s", file=sys.stderr, flush=True)
    return write_kernel(python, home)


def _clean_env() -> dict[str, str]:
    """This process's environment without what would make pip or Python look at the maintainers' .venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    public = Path(args[0]).resolve()
    editions = published_editions(public)
    if not editions or editions[-1] != len(assignments(ROOT)):
        return 0  # a class's build: the chapters execute with the complete course_lib
    print(ensure(public, editions[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
