"""The course's environment as ``tasks.py setup`` leaves it (what is not a pin of requirements.txt)."""

from __future__ import annotations

import subprocess
import sys

import nbformat


def test_nbformat_validates_without_building_the_iri_grammars(root):
    """``tasks.py setup`` removes rfc3987-syntax (jsonschema's IRI format check, 1.4 s of CPU at every import of
    nbformat): a fresh interpreter imports nbformat without it, and notebooks are still validated."""
    probe = ("import sys, nbformat\n"
             "nbformat.validate(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')]))\n"
             "print('rfc3987_syntax' in sys.modules)\n")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root)
    assert loaded.stdout.strip() == "False"
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    broken.cells[0]["outputs"] = "not a list"
    try:
        nbformat.validate(broken)
    except nbformat.ValidationError:
        pass
    else:
        raise AssertionError("nbformat no longer validates notebooks")
