"""The error an exercise raises in a student edition that does not reveal its answer.

Shared by all chapters and every assignment. A student edition of course_lib leaves the body
of each exercise whose answer it does not reveal empty, and that body raises
:class:`NotRevealed`: it names the function, the problem set where students write it, the
edition installed, and what to do. In the reference library no function raises it.
"""

from __future__ import annotations

import re


class NotRevealed(NotImplementedError):
    """The answer of this exercise is not in the installed student edition. Every assignment.

    ``function`` is the function's name (``"wordpiece_word"``), ``module`` the module that
    holds it (``"course_lib.bert.wordpiece"``), ``problem_set`` the problem set where students
    write it (``"ps08_bert"``), ``edition`` the number of the student edition installed (7),
    ``revealed_in`` the first edition that reveals the answer (8; by default the problem set's
    number) and ``wheel`` that edition's URL (``None`` when the edition was written without the
    book's URL). A ``NotImplementedError``, as nbgrader's own stub raises,
    so whatever expects that error still catches it.
    """

    def __init__(self, function: str, problem_set: str, edition: int, module: str | None = None,
                 revealed_in: int | None = None, wheel: str | None = None):
        self.function, self.problem_set, self.edition = function, problem_set, int(edition)
        self.module, self.wheel = module, wheel
        self.revealed_in = _set_number(problem_set) if revealed_in is None else int(revealed_in)
        super().__init__(_message(self))

    def __reduce__(self):  # pickled with its fields (a worker process may send it back)
        return type(self), (self.function, self.problem_set, self.edition, self.module, self.revealed_in,
                            self.wheel)


def _set_number(problem_set: str) -> int | None:
    """``"ps08_bert"`` -> 8."""
    match = re.match(r"ps0*(\d+)", problem_set)
    return int(match.group(1)) if match else None


def _message(error: NotRevealed) -> str:
    """What the student reads: which function, whose problem set, which edition, and what to do."""
    number = _set_number(error.problem_set)
    named = f"problem set {number} ({error.problem_set})" if number is not None else error.problem_set
    where = f" (in {error.module})" if error.module else ""
    revealing = (f"student edition {error.revealed_in} or later" if error.revealed_in is not None
                 else "a later student edition")
    text = (f"{error.function}{where} is an exercise of {named}, and student edition {error.edition} of "
            f"course_lib, the one installed, does not reveal its answer. Write it in {error.problem_set}.ipynb, "
            f"or install {revealing}, which reveals its answer")
    return text + (f", then restart the kernel:\n    pip install --no-deps {error.wheel}" if error.wheel else ".")
