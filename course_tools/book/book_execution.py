"""Execute the book's chapters two at a time, into the execution cache, before ``jupyter-book build``.

myst-nb executes the chapters one after another while Sphinx reads the pages; each chapter's
kernel uses one core (the chapters set one torch thread), so on a 2-core machine half of it
idles. ``tasks.py book`` therefore runs this module on the public tree first:

    python -m course_tools.book.book_execution SOURCE    (in the folder jupyter-book will run in)

Every chapter whose code is not in the execution cache (``execute.cache`` in ``_config.yml``)
is executed as myst-nb would execute it: read by myst-nb's own reader with the book's
configuration (so its code cells and metadata, hence its cache key, are the ones myst-nb
computes), in the chapter's folder, with its kernel, the book's timeout and ``allow_errors``,
by the same jupyter-cache function. ``COURSE_BOOK_JOBS`` chapters run at once (default: the
number of cores, at most 2), each in its own process and kernel, with the threads the chapter
sets (a library it leaves unlimited gets cores / jobs threads); the executed notebooks are
stored in the cache by this process alone. The longest chapters start first (:func:`longest_first`). myst-nb then serves every chapter from the cache
("Using cached notebook") and executes nothing, and still renders the outputs, so output on
stderr still fails the ``-W`` build. A cell error fails here, naming the chapter, the cell and
its line; the chapters that succeeded stay cached.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import nullcontext
from multiprocessing import get_context
from pathlib import Path, PurePosixPath
from tempfile import TemporaryDirectory

KERNEL_START_ATTEMPTS = 3
"""How many times a chapter's kernel is started before its failure to start fails the build."""


def default_jobs() -> int:
    """How many chapters run at once: ``COURSE_BOOK_JOBS``, else the number of cores, at most 2."""
    return max(1, int(os.environ.get("COURSE_BOOK_JOBS") or min(2, os.cpu_count() or 1)))


def book_config(source: Path):
    """The Markdown and notebook configuration myst-nb builds from ``source/_config.yml``,
    as ``(MdParserConfig, NbParserConfig)``."""
    from jupyter_book.config import get_final_config
    from myst_nb.core.config import NbParserConfig
    from myst_parser.config.main import MdParserConfig

    sphinx, _ = get_final_config(user_yaml=source / "_config.yml", sourcedir=source,
                                 cli_config={"latex_individualpages": False})
    md = {name: sphinx[f"myst_{name}"] for name, _, _ in MdParserConfig().as_triple() if f"myst_{name}" in sphinx}
    nb = {name: sphinx[f"nb_{name}"] for name, _, field in NbParserConfig().as_triple()
          if f"nb_{name}" in sphinx and not field.metadata.get("sphinx_exclude")}
    return MdParserConfig(**md), NbParserConfig(**nb)


def read_chapter(path: Path, md_config, nb_config):
    """The page at ``path`` as myst-nb reads it (``myst_nb.sphinx_.Parser.parse``), with the notebook
    configuration its metadata gives it, as ``(notebook, nb_config)``; ``None`` if it is no notebook."""
    import re

    from myst_nb.core.nb_to_tokens import nb_node_to_dict
    from myst_nb.core.read import create_nb_reader

    text = path.read_text(encoding="utf-8-sig")  # as Sphinx reads sources
    reader = create_nb_reader(str(path), md_config, nb_config, text)
    if reader is None:
        return None
    notebook = reader.read(text)
    kernelspec = notebook.metadata.get("kernelspec", {})
    for pattern, alias in (nb_config.kernel_rgx_aliases or {}).items():
        if kernelspec.get("name") is not None and re.fullmatch(pattern, kernelspec["name"]):
            kernelspec["name"] = alias
            break
    if nb_config.metadata_key in notebook.metadata:
        overrides = nb_node_to_dict(notebook.metadata[nb_config.metadata_key])
        overrides.pop("output_folder", None)
        try:
            nb_config = nb_config.copy(**overrides)
        except Exception:  # myst-nb warns about it, and keeps the book's configuration
            pass
    return notebook, nb_config


def _execute(path: str, notebook, timeout: int, allow_errors: bool, in_temp: bool, threads: int) -> dict:
    """Execute ``notebook`` (in a worker process) as ``NotebookClientCache.start_client`` does.

    A kernel that dies before it answers (it lost a race for a TCP port with a kernel of another
    chapter starting at the same moment: jupyter_client picks free ports per process) is started
    again, up to ``KERNEL_START_ATTEMPTS`` times; no cell has run then, so nothing runs twice.

    The kernel's OpenMP and BLAS libraries default to ``threads`` threads (unless the environment
    sets them): two kernels that each spin a thread per core slow each other down. What a chapter
    sets itself (``torch.set_num_threads``, ``threadpoolctl``) still rules."""
    from jupyter_cache.executors.utils import single_nb_execution

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))

    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        try:
            with TemporaryDirectory() if in_temp else nullcontext(str(Path(path).parent)) as cwd:
                result = single_nb_execution(copy.deepcopy(notebook), cwd=os.path.abspath(cwd), timeout=timeout,
                                             allow_errors=allow_errors, meta_override=True)
            break
        except RuntimeError as error:  # no cell ran: the kernel never answered
            if "before replying to kernel_info" not in str(error) or attempt == KERNEL_START_ATTEMPTS:
                raise
            print(f"book execution: {path}: the kernel did not start ({error}); starting another", flush=True)
            time.sleep(attempt)
    return {"notebook": result.nb, "seconds": result.time,
            "error": None if result.err is None else f"{type(result.err).__name__}: {result.err}"}


def _where(notebook) -> str:
    """The first cell of an executed notebook that shows an error, as 'cell N (line L)', counted
    from 1 as myst-nb counts cells (Markdown ones too); L is the line of its ``{code-cell}``."""
    lines = notebook.metadata.get("source_map") or []
    for index, cell in enumerate(notebook.cells):
        if any(output.get("output_type") == "error" for output in cell.get("outputs", [])):
            line = f" (line {lines[index]})" if index < len(lines) else ""
            return f"cell {index + 1}{line}"
    return "a cell"


def longest_first(pending: list, cache) -> list:
    """``pending`` ((rel, path, ...) in the table of contents' order) reordered to start the longest chapters first.

    A chapter's length is the time its last cached run took (any earlier version of the same file);
    chapters never run before go first, later chapters of the book (which do more) before earlier ones.
    With two workers, starting a long chapter last can leave one worker idle for its whole run.
    """
    seconds = {}
    for record in sorted(cache.list_cache_records(), key=lambda r: r.created):
        if (record.data or {}).get("execution_seconds") is not None:
            seconds[str(Path(record.uri).resolve())] = float(record.data["execution_seconds"])
    order = {id(item): index for index, item in enumerate(pending)}
    return sorted(pending, key=lambda item: (-seconds.get(str(Path(item[1]).resolve()), float("inf")),
                                             -order[id(item)]))


def execute_book(source: Path, cwd: Path | None = None, jobs: int | None = None) -> list[str]:
    """Execute into the cache every page of ``source``'s table of contents that myst-nb would execute
    and that the cache lacks, ``jobs`` at a time; return the failures, one message per chapter.

    ``cwd`` is the folder jupyter-book runs in (a relative ``execute.cache`` is relative to it)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    from .public import toc_files

    source, cwd = Path(source).resolve(), Path(cwd or Path.cwd()).resolve()
    md_config, nb_config = book_config(source)
    if nb_config.execution_mode != "cache" or not nb_config.execution_cache_path:
        return []
    cache = get_cache(str(cwd / nb_config.execution_cache_path))
    pending = []
    for rel in toc_files(source):
        path = source / rel
        read = read_chapter(path, md_config, nb_config)
        if read is None or read[1].execution_mode != "cache" or any(
                PurePosixPath(path.as_posix()).match(p) for p in read[1].execution_excludepatterns):
            continue
        try:
            cache.match_cache_notebook(read[0])
        except KeyError:
            pending.append((rel, path, *read))
    if not pending:
        print(f"book execution: every chapter is in the cache ({cache.path})", flush=True)
        return []
    pending = longest_first(pending, cache)
    jobs = min(jobs or default_jobs(), len(pending))
    print(f"book execution: {len(pending)} chapter(s) to run, {jobs} at a time: "
          + ", ".join(str(rel) for rel, *_ in pending), flush=True)
    started, failures = time.time(), []
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_execute, str(path), notebook, config.execution_timeout,
                               config.execution_allow_errors, config.execution_in_temp, threads): (rel, path)
                   for rel, path, notebook, config in pending}
        for future in as_completed(futures):
            rel, path = futures[future]
            try:
                result = future.result()
            except Exception as error:  # the kernel died, or the worker did
                failures.append(f"{rel}: {type(error).__name__}: {error}")
                continue
            if result["error"]:
                failures.append(f"{rel}: {_where(result['notebook'])} failed after {result['seconds']:.0f} s\n"
                                f"{result['error'][-3000:]}")
                print(f"book execution: {rel} FAILED in {result['seconds']:.1f} s", flush=True)
                continue
            cache.cache_notebook_bundle(CacheBundleIn(result["notebook"], str(path),
                                                      data={"execution_seconds": result["seconds"]}),
                                        check_validity=False, overwrite=True)
            print(f"book execution: {rel} ran in {result['seconds']:.1f} s", flush=True)
    print(f"book execution: {len(pending)} chapter(s) in {time.time() - started:.0f} s wall time", flush=True)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.book.book_execution", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the book's folder (with _config.yml and _toc.yml)")
    parser.add_argument("--jobs", type=int, help="chapters at once (default: COURSE_BOOK_JOBS, else cores, at most 2)")
    args = parser.parse_args(argv)
    failures = execute_book(args.source, jobs=args.jobs)
    for failure in failures:
        print(f"\nA chapter failed to execute: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
