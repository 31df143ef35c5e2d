"""Timestamps: the formats a column is read in, the series' step (fixed or calendar months), and the
regular grid its rows must lie on, with the messages that say where a row leaves it."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import date

import numpy as np
import pandas as pd
from pandas.tseries.api import guess_datetime_format

from export.data.errors import _MISSING_TOKENS, _where
from rsa_core.calendar import calendar_step
from rsa_core.frequency import infer_step as _infer_frequency  # the one frequency rule (exported name)
from rsa_core.steps import shifted
from rsa_core.wallclock import localize as localize  # the one rule of naive local times (readers use it)

#: Column names (case-insensitive) recognised as the timestamp column when none is given.
TIMESTAMP_NAMES = ("date", "timestamp", "time", "datetime")


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


def _day_order(fmt: str) -> bool | None:
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
    guess (`_EXTRA_FORMATS`, quarters, ISO weeks). Year-day-month orders are never offered (nobody writes
    them, and they would make every ISO date ambiguous); `dayfirst` True or False keeps only that order
    where the order is in question."""
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
    found = list(dict.fromkeys(found))
    if dayfirst is not None:
        found = [fmt for fmt in found if _day_order(fmt) in (None, dayfirst)]
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = pd.to_datetime(column, format=use, errors="coerce", utc=True)
        except (ValueError, OverflowError):  # should not happen with errors="coerce"; be defensive
            return np.full(len(cells), np.datetime64("NaT", "ns"))
    return parsed.dt.tz_localize(None).to_numpy().astype("datetime64[us]")


@dataclass(frozen=True)
class _Timestamps:
    stamps: np.ndarray  # datetime64[ns], NaT where a cell did not read
    fmt: str | None  # the format used (None: no format reads the first value)
    out_of_range: np.ndarray  # cells that read as dates outside datetime64[ns]
    # Another format that read every cell too, to other dates (a day/month order the file cannot decide).
    rival: tuple[str, np.ndarray] | None = None
    # A day/month order decided by the data: the format not taken and the first cell only ours reads.
    decided: tuple[str, int] | None = None


def _parse_timestamps(
    cells: np.ndarray, date_format: str | None = None, dayfirst: bool | None = None
) -> _Timestamps:
    """Parse stripped strings in the format that reads the most of them (`candidate_formats` of the first
    non-empty cell). A column uses one format (ISO 8601 variants may mix); time-zone offsets are converted
    to UTC. When two formats read every cell to different dates (`01/02/2015`: 1 February or 2 January),
    the result names the rival, for the caller to refuse."""
    filled = cells[cells != ""]
    formats = candidate_formats(str(filled[0]), date_format, dayfirst) if len(filled) else []
    if not formats:
        return _Timestamps(np.full(len(cells), np.datetime64("NaT", "ns")), None, np.zeros(len(cells), bool))
    readings = [(fmt, _parse_with(cells, fmt)) for fmt in formats]
    counts = [int((~np.isnat(stamps)).sum()) for _, stamps in readings]
    best = int(np.argmax(counts))  # the first of the best: pandas' own guess wins ties
    fmt, stamps = readings[best]
    rival = decided = None
    complete = [(f, s) for (f, s), n in zip(readings, counts, strict=True) if n == len(filled)]
    for other, theirs in complete:
        if other != fmt and _day_order(other) is not None and not _same_stamps(theirs, stamps):
            rival = (other, theirs)
            break
    if rival is None and counts[best] == len(filled) and _day_order(fmt) is not None:
        for other, theirs in readings:
            if _day_order(other) == (not _day_order(fmt)):
                lost = np.isnat(theirs) & (cells != "")
                if lost.any():
                    decided = (other, int(np.argmax(lost)))
                break
    seconds = stamps.astype("datetime64[s]")
    out_of_range = ~np.isnat(seconds) & ((seconds < _NS_MIN) | (seconds > _NS_MAX))
    stamps = stamps.copy()
    stamps[out_of_range] = np.datetime64("NaT", "s")  # would overflow datetime64[ns]
    return _Timestamps(stamps.astype("datetime64[ns]"), fmt, out_of_range, rival, decided)


def _timestamp_problem(cell: str, fmt: str | None, out_of_range: bool) -> str:
    if cell.lower() in _MISSING_TOKENS:
        return "missing timestamp"
    if out_of_range:
        return f"timestamp {cell!r} is outside the supported years 1678-2261"
    hint = "give the column's format with --date-format (config: date_format), e.g. --date-format '%d/%m/%Y'"
    if fmt is None:
        return f"not a timestamp: {cell!r}; {hint}"
    return f"not a timestamp (or not in the format {fmt!r} of the column's first value): {cell!r}; {hint}"


def _order_name(fmt: str) -> str:
    return "day-first" if _day_order(fmt) else "month-first"


def _ambiguity_problem(cells: np.ndarray, parsed: _Timestamps) -> tuple[int, str]:
    """Where and why a column's dates read two ways; the message names both readings and the flags."""
    assert parsed.rival is not None and parsed.fmt is not None
    other, theirs = parsed.rival
    i = int(np.argmax(parsed.stamps != theirs))
    ours = pd.Timestamp(parsed.stamps[i]).date()
    alt = pd.Timestamp(theirs[i]).date()
    grids = []
    for fmt, stamps in ((parsed.fmt, parsed.stamps), (other, theirs)):
        grid = _grid(stamps)
        regular = grid.missing == 0 and not grid.off.size
        irregular = "" if regular else " with irregular steps"
        grids.append(f"{_order_name(fmt)}, they step {grid.alias}{irregular}")
    ours_first = bool(_day_order(parsed.fmt))
    day_first, month_first = (ours, alt) if ours_first else (alt, ours)
    return i, (
        f"ambiguous date {cells[i]!r}: day-first it is {day_first}, month-first {month_first}, and every "
        f"date in the column reads both ways ({'; '.join(grids)}); say which with --dayfirst or "
        "--monthfirst (config: dayfirst: true or false), or give the format, e.g. --date-format "
        f"'{parsed.fmt if ours_first else other}'"
    )


# A calendar step's alias ("3MS"), as the one frequency rule (rsa_core.frequency) writes it.
_CALENDAR = re.compile(r"^(?P<months>\d+)M(?P<anchor>[SE])$")


@dataclass(frozen=True)
class _Grid:
    """Where the rows sit on the grid of the series' step (the most common one): `position[i]` is row i's
    step number counted from the first row, None when some row is not a whole number of steps after the
    row before it (those rows are `off`)."""

    alias: str
    seconds: float
    position: np.ndarray | None
    off: np.ndarray

    @property
    def missing(self) -> int:
        """Steps of the grid with no row."""
        if self.position is None:
            return 0
        return int(self.position[-1]) + 1 - len(self.position)

    def stamps(self, first: np.datetime64) -> np.ndarray:
        """Every step of the grid from `first` (the first row's stamp) to the last row's."""
        assert self.position is not None
        steps = np.arange(int(self.position[-1]) + 1)
        # the one stepping rule (rsa_core.steps), months in UTC where the grid was read
        first_ns = np.asarray([first], "datetime64[ns]")
        return shifted(first_ns, steps, self.seconds, calendar_step(self.alias))[0]


def _grid(stamps: np.ndarray) -> _Grid:
    alias, seconds = _infer_frequency(stamps)
    match = _CALENDAR.match(alias)
    if match is not None:
        units = stamps.astype("datetime64[D]").astype("datetime64[M]").astype("int64")
        step = int(match["months"])
    else:
        units, step = stamps.astype("int64"), max(1, round(seconds * 1e9))
    diffs = np.diff(units)
    off = np.flatnonzero((diffs <= 0) | (diffs % step != 0)) + 1
    position = None if off.size else np.concatenate([[0], np.cumsum(diffs // step)])
    return _Grid(alias, seconds, position, off)


def _stamp_text(stamp: np.datetime64) -> str:
    t = pd.Timestamp(stamp)
    return str(t.date()) if t == t.normalize() else str(t)


def _gap_list(grid: _Grid, stamps: np.ndarray, lines: list[int], shown: int = 3) -> str:
    """The first missing steps, with the lines they fall between: "2019-12-25 (between lines 360 and
    361), ... and 4 more"."""
    assert grid.position is not None
    full = grid.stamps(stamps[0])
    after = np.flatnonzero(np.diff(grid.position) > 1)  # row i is followed by a gap
    parts = []
    for i in after[:shown]:
        first, last = int(grid.position[i]) + 1, int(grid.position[i + 1]) - 1
        span = _stamp_text(full[first]) + (f" to {_stamp_text(full[last])}" if last > first else "")
        parts.append(f"{span} (between lines {lines[i]} and {lines[i + 1]})")
    more = len(after) - shown
    return ", ".join(parts) + (f" and {more} more gap{'s' if more > 1 else ''}" if more > 0 else "")


def _grid_problem(fname: str, grid: _Grid, stamps: np.ndarray, lines: list[int], fill: str) -> str:
    """Rows off the grid of the series' step, or steps missing from it: without a fill, or more than the
    file has rows (then a fill would invent most of the series: the dates are more likely misread)."""
    if grid.off.size:
        i = int(grid.off[0])
        more = len(grid.off) - 1
        monthly = " (monthly data on the first, or the last, day of each month)"
        return (
            f"{_where(fname, lines[i])}: timestamp {_stamp_text(stamps[i])} is not a whole number of "
            f"steps of {grid.alias} (the most common step between rows) after the previous row's "
            f"{_stamp_text(stamps[i - 1])}"
            + (f", nor are {more} other rows" if more else "")
            + "; the rows must lie on one regular grid: resample the file to one step"
            + (monthly if grid.seconds > 27 * 86_400 else "")
        )
    if grid.missing > len(stamps):
        return (
            f"{fname}: {grid.missing} step(s) of {grid.alias} have no row, more than the file has rows "
            f"({len(stamps)}): {_gap_list(grid, stamps, lines)}. A fill would invent most of the series; "
            "check how the dates were read (--date-format, --dayfirst or --monthfirst) or resample the file"
        )
    return (
        f"{fname}: {grid.missing} step(s) of {grid.alias} have no row (the series steps {grid.alias}, its "
        f"most common step): {_gap_list(grid, stamps, lines)}. Every later row would be taken for an earlier "
        "step; add rows for them, or pass --fill linear, ffill or zero (config: fill) to insert them and "
        "fill their values"
    )


_OFFSET = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def has_offsets(cells: np.ndarray) -> bool:
    """Whether the column's timestamps carry UTC offsets (a sample of its cells, as the notes check)."""
    return any(_OFFSET.search(str(cell)) for cell in cells[:: max(1, len(cells) // 64)])
