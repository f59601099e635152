"""The class report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

:func:`render` lays out what :mod:`course_tools.report.class_data` read: the scores, the points
lost per function, the hidden cases failed most (by their input shapes, never an expected value),
the hints shown, the submissions with notes, the written answers still to grade, and the
earlier assignments beside this one. Every text from the gradebook (student names, notes,
messages a submission caused) is escaped. Tables scroll sideways on a phone; each figure comes
in the layout that fits the screen (:mod:`course_tools.report.figures`).
"""

from __future__ import annotations

import html
from collections import defaultdict

from . import figures
from .class_data import ClassData

TOP_CASES = 20
"""How many of the most failed hidden cases the page lists (the CSV has them all)."""

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;line-height:1.45}
main{max-width:960px;margin:0 auto;padding:1rem 1.2rem 3rem}
h1{font-size:1.6rem;margin:.6rem 0}h2{font-size:1.25rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
p.lead{color:#555}
dl.numbers{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:.5rem;margin:1rem 0}
dl.numbers div{background:#f3f5f9;border-radius:6px;padding:.5rem .7rem}
dl.numbers dt{font-size:.8rem;color:#555}dl.numbers dd{margin:0;font-size:1.3rem;font-weight:600}
.scroll{overflow-x:auto;margin:.6rem 0}
table{border-collapse:collapse;font-size:.9rem;width:100%}
th,td{border-bottom:1px solid #e3e3e3;padding:.3rem .5rem;text-align:left;vertical-align:top;white-space:nowrap}
th{background:#f3f5f9}td.num,th.num{text-align:right}
td.long{white-space:normal;min-width:14rem;overflow-wrap:break-word}code{font-size:.85rem}
figure{margin:1rem 0}figure svg{width:100%;height:auto;display:block}
figcaption{font-size:.85rem;color:#555}
.narrow{display:none}
@media (max-width:640px){.wide{display:none}.narrow{display:block}main{padding:.6rem .7rem 2rem}
 h1{font-size:1.3rem}table{font-size:.82rem;width:max-content}td.long{max-width:20rem}}
.warn{background:#fff4e5;border-left:4px solid #e69500;padding:.5rem .8rem}
details{margin:.5rem 0}summary{cursor:pointer}
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def table(headers: list[str], rows: list[list], numeric: set[int] = frozenset(), long: set[int] = frozenset(),
          code: set[int] = frozenset(), ident: str = "") -> str:
    """An HTML table in a sideways-scrolling box; every cell escaped."""
    def cell(index, value, tag="td"):
        classes = " ".join(c for c, on in (("num", index in numeric), ("long", index in long)) if on)
        text = f"<code>{esc(value)}</code>" if index in code and tag == "td" else esc(value)
        return f"<{tag}{f' class={chr(34)}{classes}{chr(34)}' if classes else ''}>{text}</{tag}>"
    head = "".join(cell(i, h, "th") for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell(i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table{f" id={chr(34)}{ident}{chr(34)}" if ident else ""}>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def figure(ident: str, draw, subject, caption: str) -> str:
    """Both layouts of one figure, with its caption."""
    return (f'<figure id="{ident}"><div class="wide">{draw(subject, "wide")}</div>'
            f'<div class="narrow">{draw(subject, "narrow")}</div><figcaption>{esc(caption)}</figcaption></figure>')


def _points(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def render(data: ClassData, earlier: list[ClassData], source: str, made: str) -> str:
    """The page for ``data`` (its assignment), with ``earlier`` assignments (in order) beside it."""
    summary = data.summary()
    with_notes = [s for s in data.submissions if s.notes]
    pending_points = sum(s.pending for s in data.submissions)
    parts = [f"<h1>Class report: {esc(data.assignment)}</h1>",
             f'<p class="lead">From the gradebook {esc(source)}, {esc(made)}. Scores are nbgrader\'s, less late '
             f"penalties; points still to be graded by hand count as 0 until they are.</p>",
             '<dl class="numbers">' + "".join(
                 f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in (
                     ("submissions", summary["submissions"]),
                     ("mean score", f"{summary['mean']:.1f} %" if data.submissions else "none yet"),
                     ("median score", f"{summary['median']:.1f} %" if data.submissions else "none yet"),
                     ("with notes", len(with_notes)), ("points to grade by hand", _points(pending_points)))) + "</dl>"]
    if data.missing_verdicts:
        parts.append(f'<p class="warn">{data.missing_verdicts} submission(s) were graded before verdicts were kept '
                     f"in the gradebook: their scores count, but not their cases or hints. Grade them again "
                     f"(<code>tasks.py grade {esc(data.assignment)} --regrade</code>) to see them.</p>")
    if not data.submissions:  # mid-term: the assignment is in the gradebook, nobody's work is graded yet
        parts += [f'<p class="warn">No submission of {esc(data.assignment)} has been graded in this gradebook yet: '
                  f"grade them (<code>tasks.py grade {esc(data.assignment)}</code>) and run the report again.</p>",
                  '<h2 id="history">The earlier assignments</h2>', _history(data, earlier)]
        return _document(data, parts)
    parts += [
        '<h2 id="scores">Scores</h2>',
        figure("figure-scores", figures.scores, data, f"Scores of the {len(data.submissions)} submissions, in per "
               f"cent of the points (bins of 10; the last includes 100 %)."),
        '<h2 id="functions">Points lost per function</h2>',
        "<p>What each function is worth and the points the class lost on it, on average over all submissions; "
        "then how many submissions lost any of them, failed its visible or its hidden test cell, or left it as "
        "the stub.</p>",
        figure("figure-losses", figures.losses, data, "Points lost on average (red) against the points each "
               "function is worth (light), the largest loss first; written answers are counted once graded."),
        _functions(data, "table-functions"),
        '<h2 id="cases">Hidden cases failed most</h2>',
        f"<p>Among the submissions that implemented the function (a stub fails every case and is counted above), "
        f"the share that failed each hidden case; the call shows the inputs' shapes, never a value. "
        f"The {min(TOP_CASES, len(data.cases))} most failed of {len(data.cases)} failed cases; cases.csv has them all.</p>",
        table(["function", "case", "call (input shapes)", "failed", "of", "most frequent problem"],
              [[c.function, c.number, c.call, c.failed, c.tried, c.problem] for c in data.cases[:TOP_CASES]],
              numeric={1, 3, 4}, long={2, 5}, code={0, 2}, ident="table-cases")
        if data.cases else "<p>No hidden case failed in a submission that implemented its function.</p>",
        '<h2 id="hints">Hints shown</h2>',
        "<p>The hint of a test cell is shown with its first failed case (not for a stub).</p>",
        table(["function", "cells", "hint", "submissions"],
              [[h.function, h.cell.replace(", ", " "), h.hint, h.count] for h in data.hints], numeric={3}, long={1, 2},
              code={0, 1},
              ident="table-hints") if data.hints else "<p>No hint was shown.</p>",
        '<h2 id="notes">Submissions with notes</h2>',
        "<p>Time and memory limits, refused files, cells that raised, runs that ended early: what the grader noted.</p>",
        table(["student", "score", "notes"], [[s.student, _points(s.score), "; ".join(s.notes)] for s in with_notes],
              numeric={1}, long={2}, ident="table-notes") if with_notes else "<p>No submission has a note.</p>",
        '<h2 id="pending">Written answers still to grade</h2>', _pending(data),
        '<h2 id="history">This assignment beside the earlier ones</h2>', _history(data, earlier),
        '<h2 id="students">Every submission</h2>',
        "<details><summary>Score of each student (scores.csv)</summary>" + table(
            ["student", "name", "score", "of", "to grade by hand"],
            [[s.student, s.name, _points(s.score), _points(s.max_score), _points(s.pending)] for s in data.submissions],
            numeric={2, 3, 4}, ident="table-students") + "</details>"]
    return _document(data, parts)


def _document(data: ClassData, parts: list[str]) -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Class report: {esc(data.assignment)}</title><link rel=\"icon\" href=\"data:,\"><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>")


def _pending(data: ClassData) -> str:
    if not data.pending:
        return "<p>Nothing is waiting to be graded by hand.</p>"
    by_cell: dict[str, list] = defaultdict(list)
    for p in data.pending:
        by_cell[p.cell].append(p)
    rows = [[cell, len(items), _points(items[0].points), ", ".join(p.student for p in items)]
            for cell, items in sorted(by_cell.items())]
    return ("<p>Grade them in nbgrader's formgrader (Manual grading); they count 0 until then.</p>"
            + table(["cell", "submissions", "points each", "students"], rows, numeric={1, 2}, long={3}, code={0},
                    ident="table-pending"))


def _history(data: ClassData, earlier: list[ClassData]) -> str:
    classes = [c for c in (*earlier, data) if c.submissions]
    if not earlier:
        return "<p>No earlier assignment has been graded in this gradebook.</p>"
    rows = [[s["assignment"], s["submissions"], f"{s['mean']:.1f}", f"{s['q1']:.1f}", f"{s['median']:.1f}",
             f"{s['q3']:.1f}", s["most_lost"]] for s in (c.summary() for c in classes)]
    return (figure("figure-history", figures.history, classes, "Scores of each graded assignment, in per cent: "
                   "the box spans the middle half, the line is the median, each dot a submission.")
            + table(["assignment", "submissions", "mean %", "lower quartile %", "median %", "upper quartile %",
                     "most points lost (on average)"], rows, numeric={1, 2, 3, 4, 5}, code={0}, ident="table-history")
            + "".join(f"<details><summary>Points lost per function in {esc(c.assignment)}</summary>"
                      + _functions(c, f"table-functions-{c.assignment}") + "</details>" for c in earlier))


def _functions(data: ClassData, ident: str) -> str:
    return table(["function", "points", "lost (mean)", "lost any", "visible failed", "hidden failed", "stub"],
                 [[f.function, _points(f.points), f"{f.mean_lost:.2f}", f.lost_by, f.visible_failed, f.hidden_failed,
                   f.not_implemented] for f in data.functions], numeric={1, 2, 3, 4, 5, 6}, code={0}, ident=ident)
