"""Runs one notebook inside the grading sandbox: ``python sandbox_runner.py IN OUT CELL_TIMEOUT``.

Copied into each job's folder and started by :mod:`course_tools.sandbox`; it imports
nothing from the course. It executes ``IN`` cell by cell with nbclient in a fresh
kernel, keeps going past errors, and after every cell writes what ran so far to
``OUT`` (at most :data:`MAX_OUTPUTS` outputs per cell, their text cut to
:data:`MAX_CELL_TEXT` characters, rich data to :data:`MAX_CELL_DATA` per cell, and
everything to :data:`MAX_NOTEBOOK` for the whole notebook; text that cannot be written
as UTF-8 is replaced), so a notebook that is stopped from outside still leaves its
earlier cells. A cell that outlives
``CELL_TIMEOUT`` seconds is interrupted; a kernel that dies ends the run, and
``OUT``'s metadata ``grading_run`` says where and why. Nothing here decides a score.
"""

from __future__ import annotations

import json
import os
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

MAX_CELL_TEXT = 20_000
MAX_OUTPUTS = 20
MAX_CELL_DATA = 2_000_000
MAX_NOTEBOOK = 4_000_000
"""Characters of output the whole notebook keeps (text and rich data); later outputs are cut."""
CUT = "\n... [output cut by the grader]"


def _trim(cell, budget: list[int]) -> None:
    """Cut ``cell``'s outputs to the limits; ``budget[0]`` is what the notebook may still keep (decreased)."""
    kept, text_size, data_size = [], 0, 0
    for output in cell.get("outputs", [])[:MAX_OUTPUTS]:
        for field in ("ename", "evalue", "text", "traceback"):
            if field in output:
                value = output[field]
                text = "\n".join(map(str, value)) if isinstance(value, list) else str(value)
                room = max(0, min(MAX_CELL_TEXT - text_size, budget[0], 200 if field == "ename" else MAX_CELL_TEXT))
                if len(text) > room:
                    text = text[:room] + CUT
                text_size += len(text)
                budget[0] -= len(text)
                output[field] = [text] if field == "traceback" else text
        data = output.get("data")
        if isinstance(data, dict):
            for mime in list(data):
                size = len(json.dumps(data[mime]))
                if size > min(MAX_CELL_DATA - data_size, budget[0]):
                    if mime == "text/plain":
                        data[mime] = "[output too large: removed by the grader]"
                    else:
                        del data[mime]
                else:
                    data_size += size
                    budget[0] -= size
        kept.append(output)
    cell["outputs"] = kept


def _save(nb, path, status):
    nb.metadata["grading_run"] = status
    tmp = f"{path}.part"
    with open(tmp, "wb") as f:
        f.write(nbformat.writes(nb).encode("utf-8", "replace"))  # a lone surrogate becomes "?"
    os.replace(tmp, path)


def main(source: str, target: str, cell_timeout: float) -> int:
    nb = nbformat.read(source, as_version=4)
    status = {"ran": 0, "stopped": None, "timeouts": []}
    budget = [MAX_NOTEBOOK]
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False, resources={"metadata": {"path": os.getcwd()}})
    _save(nb, target, status)
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            started = time.time()
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                status["timeouts"].append(index)
            except DeadKernelError:
                status["stopped"] = {"cell": index, "why": "the kernel died (it exited or was killed)"}
            except Exception as error:  # noqa: BLE001 - anything else from the client ends the run plainly
                status["stopped"] = {"cell": index, "why": f"{type(error).__name__}: {str(error)[:200]}"}
            if time.time() - started > cell_timeout and index not in status["timeouts"]:
                status["timeouts"].append(index)
            _trim(cell, budget)
            status["ran"] = index + 1
            _save(nb, target, status)
            if status["stopped"]:
                break
    _save(nb, target, status)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
