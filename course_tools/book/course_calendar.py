"""The release calendar: which problem sets a build publishes, and whose answers.

A problem set is **released** when students may see its exercise, and **revealed** when
its answers are public. Edition N of course_lib holds the answers of the first N problem
sets (:mod:`course_tools.authoring.edition`), so a build publishes editions 0 to R, R being the
number of problem sets revealed, and the exercises of the released problem sets only
(:mod:`course_tools.book.public`). Problem set N runs on edition N-1, which holds the answers
of every problem set before it; so the revealed problem sets are the first R, in order,
and the released ones are those and at most the next one.

The calendar is ``course.calendar`` in ``_config.yml``, one of three forms:

.. code-block:: yaml

    course:
      calendar: self-study      # the open book: every problem set released and revealed

    course:
      calendar:                 # a class, by hand: edit and rebuild as the term goes on
        released: [ps01, ps02, ps03, ps04, ps05]   # or "all"; full names (ps05_attention) work too
        revealed: [ps01, ps02, ps03, ps04]

    course:
      calendar:                 # a class, by dates: a build publishes what is due by its date
        ps01: {release: 2026-09-07, deadline: 2026-09-20}
        ps02: {release: 2026-09-21, deadline: 2026-10-04}

With dates, a problem set is released from its ``release`` day on and revealed from the
day after its ``deadline`` (the build's date is today's, or ``--date``); a problem set
without an entry, or without a deadline, is not released, or not revealed.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

from course_tools import ROOT
from course_tools.exercises import assignments
from course_tools.site_config import PublicTreeError, read_config

SELF_STUDY = "self-study"
WHERE = "course.calendar in _config.yml"


class CalendarError(PublicTreeError):
    """The calendar cannot be published: the message says why and what to write instead."""


@dataclass(frozen=True)
class Calendar:
    """What one build publishes: the released and the revealed problem sets, in course order."""

    released: tuple[str, ...]
    revealed: tuple[str, ...]
    upcoming: dict = field(default_factory=dict, compare=False)  # {problem set: release date} where dates are known

    @property
    def newest_edition(self) -> int:
        """The newest edition published: the one that reveals every revealed problem set."""
        return len(self.revealed)

    @property
    def editions(self) -> list[int]:
        """The editions published, 0 to :attr:`newest_edition`."""
        return list(range(self.newest_edition + 1))

    def describe(self, root: Path = ROOT) -> str:
        """The calendar in words: ``"ps01-ps04 revealed, ps05 released (editions 0 to 4 published)"``."""
        names = assignments(root)
        if list(self.revealed) == names:
            what = f"all {len(names)} problem sets released and revealed"
        else:
            what = f"{_span(self.revealed) or 'none'} revealed"
            extra = [name for name in self.released if name not in self.revealed]
            what += f", {_span(extra)} released" if extra else ""
        editions = f"editions 0 to {self.newest_edition}" if self.newest_edition else "edition 0"
        return f"{what} ({editions} published)"


def _short(name: str) -> str:
    return name.split("_", 1)[0]


def _span(names) -> str:
    names = [_short(n) for n in names]
    return "" if not names else names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"


def self_study(root: Path = ROOT) -> Calendar:
    """The open book's calendar: every problem set released and revealed."""
    names = tuple(assignments(root))
    return Calendar(names, names)


def _name(value, names: list[str]) -> str:
    """The problem set ``value`` names (its full name or its ``psNN`` prefix)."""
    for name in names:
        if value in (name, _short(name)):
            return name
    known = ", ".join(f"{name} ({_short(name)})" for name in names)
    raise CalendarError(f"{WHERE}: {value!r} is not a problem set; the problem sets are {known}")


def _names(value, names: list[str], what: str) -> list[str]:
    if value == "all":
        return list(names)
    if not isinstance(value, list):
        raise CalendarError(f"{WHERE}: `{what}` must be a list of problem sets ([ps01, ps02]) or \"all\", "
                            f"got {value!r}")
    return [_name(item, names) for item in value]


def calendar_of(released, revealed, root: Path = ROOT, upcoming: dict | None = None) -> Calendar:
    """The calendar with these released and revealed problem sets (names or ``psNN``), checked.

    Raises :class:`CalendarError` for an unknown name, a problem set revealed but not released,
    revealed problem sets that are not the first ones, or a released one whose edition would
    reveal an answer that is not revealed.
    """
    names = assignments(root)
    released, revealed = (_names(v if isinstance(v, (str, list)) else list(v), names, what)
                          for v, what in ((released, "released"), (revealed, "revealed")))
    for name in revealed:
        if name not in released:
            raise CalendarError(f"{WHERE}: {name} is revealed but not released: a problem set's answers "
                                "cannot be public before its exercise; add it to `released`")
    for name in revealed:
        earlier = [n for n in names[:names.index(name)] if n not in revealed]
        if earlier:
            raise CalendarError(f"{WHERE}: {name} is revealed but {earlier[0]} is not: edition N reveals the "
                                "first N problem sets together, so the revealed ones must be the first, in order")
    for name in released:
        if names.index(name) > len(revealed):
            raise CalendarError(
                f"{WHERE}: {name} cannot be released while {names[len(revealed)]} is not revealed: "
                f"{name} runs on edition {names.index(name)}, which holds the answers of every problem set "
                "before it; release it once they are all revealed")
    return Calendar(tuple(n for n in names if n in released), tuple(n for n in names if n in revealed),
                    dict(upcoming or {}))


def _day(value, name: str, what: str) -> dt.date | None:
    if value is None and what == "deadline":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    raise CalendarError(f"{WHERE}: the {what} of {name} must be a date (YYYY-MM-DD), got {value!r}")


def _by_dates(entries: dict, names: list[str], on: dt.date, root: Path) -> Calendar:
    days = {}
    for key, entry in entries.items():
        name = _name(key, names)
        if not isinstance(entry, dict) or "release" not in entry or set(entry) - {"release", "deadline"}:
            raise CalendarError(f"{WHERE}: {key}: write {{release: YYYY-MM-DD, deadline: YYYY-MM-DD}}, got {entry!r}")
        release, deadline = _day(entry["release"], name, "release"), _day(entry.get("deadline"), name, "deadline")
        if deadline is not None and deadline < release:
            raise CalendarError(f"{WHERE}: the deadline of {name} ({deadline}) is before its release ({release})")
        days[name] = (release, deadline)
    listed = [n for n in names if n in days]
    if listed != names[:len(listed)]:
        missing = next(n for n in names if n not in days)
        raise CalendarError(f"{WHERE}: {missing} has no dates but a later problem set has: "
                            "give dates to the first problem sets, in order")
    for earlier, later in zip(listed, listed[1:]):
        deadline = days[earlier][1]
        if deadline is None or days[later][0] <= deadline:
            raise CalendarError(
                f"{WHERE}: {later} is released on {days[later][0]}, before the answers of {earlier} are revealed "
                f"(the day after its deadline, {deadline}): {later} runs on an edition that holds them; "
                f"release it after {deadline}")
    released = [n for n in listed if days[n][0] <= on]
    revealed = [n for n in listed if days[n][1] is not None and days[n][1] < on]
    upcoming = {n: days[n][0] for n in listed if n not in released}
    return calendar_of(released, revealed, root, upcoming)


def parse_calendar(value, root: Path = ROOT, on: dt.date | None = None) -> Calendar:
    """The calendar that ``value`` (the YAML of ``course.calendar``) describes, on date ``on``.

    ``on`` (default: today) matters only for a calendar of dates; passing it for another
    calendar is an error, so that ``--date`` never goes silently unused.
    """
    names = assignments(root)
    if isinstance(value, dict) and value and not set(value) & {"released", "revealed"}:
        return _by_dates(value, names, on or dt.date.today(), root)
    if on is not None:
        raise CalendarError(f"a date applies only to a calendar of dates; {WHERE} is {value!r}")
    if value == SELF_STUDY:
        return self_study(root)
    if isinstance(value, dict) and set(value) == {"released", "revealed"}:
        return calendar_of(_names(value["released"], names, "released"),
                           _names(value["revealed"], names, "revealed"), root)
    raise CalendarError(f"{WHERE} must be {SELF_STUDY!r}, lists `released:` and `revealed:` (both), or "
                        f"{{release: ..., deadline: ...}} dates per problem set; got {value!r}")


def read_calendar(root: Path = ROOT, on: dt.date | None = None) -> Calendar:
    """The calendar of ``_config.yml`` (``course.calendar``), on date ``on`` (default: today).

    There is no default: a build that publishes every answer must say so (``self-study``).
    """
    course = read_config(root).get("course")
    if not isinstance(course, dict) or "calendar" not in course:
        raise CalendarError(f"_config.yml must set course.calendar: {SELF_STUDY!r} for the open book (every "
                            "problem set and answer published), or a class's calendar "
                            "(see course_tools/book/course_calendar.py)")
    return parse_calendar(course["calendar"], root, on)


def parse_date(text: str) -> dt.date:
    """``"2026-10-20"`` -> a date (for ``--date``)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise CalendarError(f"--date must be YYYY-MM-DD, got {text!r}")
    return dt.date.fromisoformat(text)
