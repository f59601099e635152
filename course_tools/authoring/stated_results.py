"""The results a problem set's page states, taken from measured runs, never typed.

Each problem set's experiment prints one line that names what it measured::

    results: {"exact_match": 99.35, "bleu": 99.8, "chrf": 99.89}

``tasks.py measure ASSIGNMENT`` (:mod:`course_tools.authoring.measure`) runs the experiment with the
reference answers over several seeds and writes ``answer_keys/<assignment>.results.json``:
the values of each seed, the interval a correct answer lands in (the range over the seeds,
widened by a stated margin), and the time of each run on the machine it names.
``tasks.py sync`` writes the page's sentence about them from that file into the Markdown cell
with metadata ``course_results: "<assignment>"`` (:func:`sync_results_cells`), and
``sync --check`` / ``tasks.py check`` fail when the two disagree. A student's (or a test's)
executed notebook is checked against the stated intervals by :func:`stated_result_problems`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_tools import ROOT
from course_tools.exercises import assignments, solution_notebooks

RESULTS_PREFIX = "results: "
"""The start of the line an experiment prints with its measured values (a JSON object after it)."""
CELL_KEY = "course_results"
"""Metadata key of the Markdown cell whose text sync writes from the results file."""
SEED_LINE = re.compile(r"^SEED = \d+\b", re.M)
"""The line of an experiment cell that sets its seed; ``measure`` runs the experiment with other values."""


@dataclass(frozen=True)
class Value:
    """One measured value of an experiment: its key in the results line, how the page names and
    prints it, and the margin by which the range over seeds is widened on each side."""

    key: str
    label: str
    margin: float
    fmt: str = ".2f"  # how the page prints it
    unit: str = ""  # printed after the number, e.g. " %"
    low: float | None = None  # the smallest value possible (an interval never goes below it)
    high: float | None = None  # the largest value possible

    def show(self, number: float) -> str:
        """``number`` as the page prints it (``"99.35 %"``)."""
        return f"{number:{self.fmt}}{self.unit}"


@dataclass(frozen=True)
class Experiment:
    """What a problem set's experiment measures; ``seeded`` is False for an experiment without
    randomness (it is then measured once: only rounding can move its values)."""

    values: tuple[Value, ...]
    seeded: bool = True
    margin_reason: str = "for the rounding of another computer or of another order of operations"
    notes: tuple[str, ...] = field(default_factory=tuple)


_PERCENT = dict(unit=" %", low=0.0, high=100.0)
_SCORE = dict(low=0.0, high=100.0)
_TRANSLATION = (Value("exact_match", "exact match", 0.5, **_PERCENT), Value("bleu", "BLEU", 0.25, **_SCORE),
                Value("chrf", "chrF", 0.25, **_SCORE))

EXPERIMENTS: dict[str, Experiment] = {
    "ps02_word2vec": Experiment((Value("spearman", "WordSim-353 Spearman", 0.02, fmt=".3f", low=-1.0, high=1.0),)),
    "ps03_rnn": Experiment((Value("perplexity", "validation perplexity", 0.1, low=1.0),)),
    "ps04_lstm": Experiment((Value("lstm_perplexity", "LSTM validation perplexity", 0.15, low=1.0),
                             Value("gru_perplexity", "GRU validation perplexity", 0.15, low=1.0))),
    "ps05_attention": Experiment(_TRANSLATION),
    "ps06_transformer": Experiment(_TRANSLATION),
    "ps07_gpt": Experiment((Value("perplexity", "validation perplexity", 0.15, low=1.0),)),
    "ps08_bert": Experiment(
        (Value("difference", "largest difference from transformers", 0.0, fmt=".1e", low=0.0, high=1e-4),
         *(Value(f"{which}_{layer}", f'mean cosine of "bank" {meaning} at the {name}', 0.02, fmt=".3f", low=-1.0, high=1.0)
           for layer, name in [("embedding", "embedding"), ("last", "last layer")]
           for which, meaning in [("same", "for the same meaning"), ("across", "across meanings")]),
         Value("minilm_accuracy", "test accuracy of the mean-pooled MiniLM vectors", 1.0, fmt=".1f", **_PERCENT),
         Value("tfidf_accuracy", "test accuracy of the bag of words", 1.0, fmt=".1f", **_PERCENT)),
        seeded=False, margin_reason="on each side for the rounding of another computer or of another order of "
                                    "operations (the largest difference: anything below 1e-4, float32's rounding)"),
    "ps09_fine_tuning": Experiment(
        (Value("lora_accuracy", "test accuracy with a LoRA on the top block", 2.0, fmt=".1f", **_PERCENT),
         Value("head_accuracy", "test accuracy of the head alone", 2.0, fmt=".1f", **_PERCENT),
         Value("lora_valid_loss", "validation loss of the epoch kept, LoRA", 0.02, fmt=".3f", low=0.0),
         Value("head_valid_loss", "validation loss of the epoch kept, head alone", 0.02, fmt=".3f", low=0.0))),
}
"""The experiments whose results a page states, by assignment. Margins are absolute, in the value's unit."""


def results_path(assignment: str, root: Path = ROOT) -> Path:
    """``answer_keys/<assignment>.results.json``."""
    return root / "answer_keys" / f"{assignment}.results.json"


def load_results(assignment: str, root: Path = ROOT) -> dict | None:
    """The measured results of ``assignment`` (see :mod:`course_tools.authoring.measure`), or ``None`` if never measured."""
    path = results_path(assignment, root)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def interval(value: Value, measured: list[float]) -> tuple[float, float]:
    """The interval a correct answer lands in: the range of ``measured`` widened by the value's margin,
    kept within what the value can be. ps08's largest difference is the exception: any value from 0 to
    its ``high`` (float32's rounding) is right."""
    if value.margin == 0.0 and value.high is not None and value.low is not None:
        return value.low, value.high
    low, high = min(measured) - value.margin, max(measured) + value.margin
    if value.low is not None:
        low = max(low, value.low)
    if value.high is not None:
        high = min(high, value.high)
    return round(low, 6), round(high, 6)


def parse_results(text: str) -> list[dict]:
    """Every results line in ``text`` (an experiment's printed output), decoded, in order; a line that
    starts like one but holds no JSON object is skipped (its values then count as missing)."""
    found = []
    for line in text.splitlines():
        if line.startswith(RESULTS_PREFIX):
            try:
                decoded = json.loads(line[len(RESULTS_PREFIX):])
            except ValueError:
                continue
            if isinstance(decoded, dict):
                found.append(decoded)
    return found


def printed_results(executed_nb) -> dict:
    """The values an executed notebook's experiment printed (the union of its results lines; a later
    line wins). A cell's standard output is joined before it is read: the kernel may send a line in pieces."""
    values = {}
    for cell in executed_nb.cells:
        if cell.cell_type != "code":
            continue
        text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                       if output.get("output_type") == "stream" and output.get("name") == "stdout")
        for found in parse_results(text):
            values.update(found)
    return values


def stated_result_problems(assignment: str, executed_nb, root: Path = ROOT) -> list[str]:
    """What in an executed notebook of ``assignment`` lies outside the results its page states.

    Empty when every value the experiment printed on its ``results:`` line lies in the interval of
    ``answer_keys/<assignment>.results.json`` (the page's text is written from that file); otherwise one
    message per value outside its interval, missing, or not a number. An assignment without a measured
    experiment has nothing to check."""
    experiment = EXPERIMENTS.get(assignment)
    if experiment is None:
        return []
    results = load_results(assignment, root)
    if results is None:
        return [f"{assignment}: no measured results (run: python3 tasks.py measure {assignment})"]
    printed = printed_results(executed_nb)
    if not printed:
        return [f"{assignment}: the experiment printed no line starting with {RESULTS_PREFIX.strip()!r} "
                f"(did it run to the end?)"]
    problems = []
    for value in experiment.values:
        low, high = results["intervals"][value.key]
        got = printed.get(value.key)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or got != got:
            problems.append(f"{assignment}: the experiment printed no number for {value.key} ({value.label}): {got!r}")
        elif not low <= got <= high:
            problems.append(f"{assignment}: {value.label} is {value.show(got)}, outside the stated interval "
                            f"{value.show(low)} to {value.show(high)} (answer_keys/{assignment}.results.json)")
    return problems


def _range_text(value: Value, measured: list[float], first_seed) -> str:
    if len(measured) == 1:
        return value.show(measured[0])
    mean = sum(measured) / len(measured)
    return (f"{value.show(min(measured))} to {value.show(max(measured))} (mean {value.show(mean)}; "
            f"seed {first_seed}: {value.show(measured[0])})")


def _margin_text(value: Value) -> str:
    return f"{value.margin:g}{value.unit}".replace(" %", " point" + ("" if value.margin == 1 else "s"))


def results_text(assignment: str, results: dict) -> str:
    """The Markdown the page states about ``assignment``'s experiment, written from its results file."""
    experiment = EXPERIMENTS[assignment]
    runs = results["runs"]
    seeds = [run["seed"] for run in runs]
    measured = {v.key: [run["values"][v.key] for run in runs] for v in experiment.values}
    if experiment.seeded:
        lead = (f"**What a correct answer reaches.** With course_lib's reference functions this experiment was run "
                f"with {len(seeds)} seed{'s' if len(seeds) > 1 else ''} ({', '.join(map(str, seeds))}; the cells above "
                f"use `SEED = {seeds[0]}`) and measured:")
    else:
        lead = ("**What a correct answer reaches.** With course_lib's reference functions this experiment "
                "(which has no randomness to seed) measured:")
    lines = [lead, ""]
    lines += [f"- {v.label}: {_range_text(v, measured[v.key], seeds[0])}" for v in experiment.values]
    lines += ["", "The values of a correct answer (on the `results:` line that the cells above print) land in "
              + ("these ranges, widened on each side " if experiment.seeded else "intervals around these values, widened ")
              + f"{experiment.margin_reason}; these are the intervals the course's tests check:", ""]
    for v in experiment.values:
        low, high = results["intervals"][v.key]
        widened = "" if v.margin == 0.0 else f" (widened by {_margin_text(v)})"
        lines.append(f"- {v.label}: between {v.show(low)} and {v.show(high)}{widened}")
    first = runs[0]
    machine = results["machine"]
    lines += ["", f"The experiment's cells{' with seed ' + str(first['seed']) if experiment.seeded else ''} took "
              f"{first['wall_seconds']:.0f} s in all ({first['cpu_seconds']:.0f} s of CPU time) on the course's build "
              f"machine ({machine}), measured on {results['measured_on']}; on your computer the cells print their own "
              f"times."]
    return "\n".join(lines)


def results_cells(nb, assignment: str) -> list:
    """The Markdown cells of ``nb`` whose text sync writes from the results of ``assignment``."""
    return [c for c in nb.cells if c.cell_type == "markdown" and c.metadata.get(CELL_KEY) == assignment]


def sync_results_cells(check: bool = False, root: Path = ROOT) -> list[str]:
    """Write each problem set's stated results (:func:`results_text`) into its ``course_results`` cell.

    Returns a line per notebook changed (or, with ``check``, out of date), and one per problem set
    whose experiment has no results file or no results cell."""
    changes = []
    for assignment in assignments(root):
        experiment = EXPERIMENTS.get(assignment)
        for path in solution_notebooks(assignment, root):
            nb = nbformat.read(path, as_version=4)
            cells = results_cells(nb, assignment)
            if experiment is None:
                continue
            if not cells:
                changes.append(f"{path.relative_to(root)}: no Markdown cell with metadata "
                               f"{CELL_KEY}: {assignment!r} to state the measured results")
                continue
            results = load_results(assignment, root)
            if results is None:
                changes.append(f"answer_keys/{assignment}.results.json is missing (python3 tasks.py measure {assignment})")
                continue
            text = results_text(assignment, results)
            if any(cell.source != text for cell in cells):
                changes.append(f"{path.relative_to(root)}: the stated results differ from "
                               f"answer_keys/{assignment}.results.json")
                if not check:
                    for cell in cells:
                        cell.source = text
                    nbformat.write(nb, path)
    return changes
