"""Execute one chapter on its own, without building the book: ``python3 tasks.py chapter chapters/ch03_rnn.md``.

For working on a chapter: runs every cell in a fresh kernel (cwd = the chapter's
folder, as the book build does), reports the time, any cell that wrote to stderr
(the book build fails on those) and any error, and writes what a reader would see
into ``_build/chapter/<name>/``: the executed notebook and every figure as a PNG or SVG file.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import nbformat
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_tools import ROOT


def run_chapter(path: Path, timeout: int = 600) -> int:
    """Execute the MyST chapter at ``path``; return 0 if it ran cleanly, 1 otherwise."""
    path = Path(path).resolve()
    nb = read_myst_markdown_notebook(path.read_text(encoding="utf-8"), path=path)
    out = ROOT / "_build" / "chapter" / path.stem
    out.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    started, status = time.time(), 0
    try:
        client.execute()
    except CellExecutionError as error:
        print(str(error)[-3000:])
        status = 1
    print(f"{path.name}: executed in {time.time() - started:.1f} s")
    figures = 0
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                print(f"cell {index} wrote to stderr (the book build fails on this): {output['text'][:300]!r}")
                status = 1
            for mime, suffix in (("image/png", "png"), ("image/svg+xml", "svg")):
                data = output.get("data", {}).get(mime)
                if data:
                    figures += 1
                    target = out / f"cell{index:03d}_{figures}.{suffix}"
                    target.write_bytes(base64.b64decode(data) if suffix == "png" else data.encode("utf-8"))
    nbformat.write(nb, out / f"{path.stem}.ipynb")
    print(f"{figures} figure(s) and the executed notebook written to {out.relative_to(ROOT)}")
    return status
