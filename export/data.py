"""Loading, validating, splitting and scaling time-series CSVs for the RSA forecasters.

A CSV has one timestamp column and numeric columns (comma-separated, UTF-8, header on line 1).
:func:`load_csv` validates every cell and raises :class:`DataError` naming the first offending
line and column; :func:`load_dataset` splits the rows with the standard long-term-forecasting
protocols (Informer / Time-Series-Library), fits a per-channel :class:`StandardScaler` on the
training rows and exposes each split as sliding windows (stride 1) via :meth:`Split.windows`.

This module only reads files; it never writes any.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from pandas.tseries.api import guess_datetime_format

__all__ = [
    "ETT_DIR",
    "PROTOCOLS",
    "DataError",
    "Dataset",
    "Series",
    "Split",
    "StandardScaler",
    "load_csv",
    "load_dataset",
]

ETT_DIR: Path = Path(__file__).resolve().parents[1] / "data" / "ETT"

#: Column names (case-insensitive) recognised as the timestamp column when none is given.
TIMESTAMP_NAMES = ("date", "timestamp", "time", "datetime")

#: Accepted ``protocol`` values of :func:`load_dataset` (besides "auto").
PROTOCOLS = ("ett-hour", "ett-minute", "ratio-70-10-20")

# Cells read as "missing" rather than "not a number" (compared lower-case, stripped).
_MISSING_TOKENS = frozenset({"", "nan", "-nan", "+nan", "na", "n/a", "null", "none", "nat"})

# Units for the frequency alias, coarsest first; the alias always carries its multiplier ("1h").
_FREQ_UNITS = (
    ("D", 86_400 * 10**9),
    ("h", 3_600 * 10**9),
    ("min", 60 * 10**9),
    ("s", 10**9),
    ("ms", 10**6),
    ("us", 10**3),
    ("ns", 1),
)

# datetime64[ns] covers only these years; checked in seconds so the comparison itself cannot overflow.
_NS_MIN = np.datetime64("1677-09-22", "s")
_NS_MAX = np.datetime64("2262-04-11", "s")

_ETT_HOUR_NAMES = frozenset({"ETTh1", "ETTh2"})
_ETT_MINUTE_NAMES = frozenset({"ETTm1", "ETTm2"})
# 12/4/4 months of 30 days, in hours; the minute variant has 4 rows per hour.
_ETT_HOUR_ENDS = (12 * 30 * 24, 16 * 30 * 24, 20 * 30 * 24)


class DataError(ValueError):
    """A problem with a user's CSV or with the requested split of it; the message says where.

    ``problems`` holds each problem's own message when a file has several (the message lists them all,
    one per line), else just the message."""

    def __init__(self, message: str, problems: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) if problems else (message,)


# --------------------------------------------------------------------------------------------------
# Series / load_csv
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Series:
    """A validated CSV: strictly increasing timestamps and finite float64 values.

    ``frequency`` is a pandas offset alias that always includes its multiplier ("1h", "15min",
    "1D", "30s"), derived from the most common step between rows (ties: the smaller step).
    ``frequency_seconds`` is that step in seconds (fractional for sub-second data).
    """

    name: str
    path: Path
    sha256: str
    timestamps: np.ndarray
    columns: list[str]
    values: np.ndarray
    frequency: str
    frequency_seconds: float
    # What the loader did for the user that they should know of: the delimiter and decimal comma it
    # detected, values it filled, time zones it converted (printed by the CLI, kept in the report).
    notes: tuple[str, ...] = ()
    date_format: str | None = None  # the format the timestamps were read in (ISO 8601 forms: "%Y-%m-%d...")
    inserted_steps: int = 0  # missing steps of the grid inserted as rows and filled (`fill`)

    def __repr__(self) -> str:  # the default repr would print the arrays
        return (
            f"Series(name={self.name!r}, rows={len(self.timestamps)}, columns={self.columns!r}, "
            f"frequency={self.frequency!r})"
        )


def _where(fname: str, line: int, column: str | None = None) -> str:
    """Message prefix: ``data.csv line 57, column 'OT'``."""
    return f"{fname} line {line}" + (f", column {column!r}" if column is not None else "")


# Delimiters tried when the header is not comma-separated (spreadsheet exports in many locales use ';').
_DELIMITERS = (",", ";", "\t", "|")


def _delimiter(text: str) -> str:
    """The delimiter that splits the header line into the most fields (a comma when none splits it)."""
    header = text.lstrip().split("\n", 1)[0]
    counts = {d: header.count(d) for d in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] > 0 else ","


def _read_rows(path: Path) -> tuple[bytes, list[str], list[list[str]], list[int], str]:
    """Read the file once: raw bytes (for the hash), header, data rows, their 1-based lines, and the
    delimiter (detected from the header line)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a CSV file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    fname = path.name
    try:
        text = raw.decode("utf-8-sig")  # -sig: tolerate the BOM that spreadsheet programs write
    except UnicodeDecodeError as exc:
        raise DataError(f"{fname}: not UTF-8 text (byte offset {exc.start})") from None
    if not text.strip():
        raise DataError(f"{fname}: the file is empty")

    delimiter = _delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        while True:
            start = reader.line_num + 1  # a quoted field may span lines; report where the row starts
            try:
                record = next(reader)
            except StopIteration:
                break
            if not record:  # blank line
                continue
            if header is None:
                header = [name.strip() for name in record]
            else:
                rows.append(record)
                lines.append(start)
    except csv.Error as exc:
        raise DataError(f"{_where(fname, reader.line_num)}: malformed CSV: {exc}") from None
    assert header is not None  # the text is not blank, so there is at least one record
    return raw, header, rows, lines, delimiter


def _check_header(fname: str, header: list[str], header_line: int = 1) -> None:
    seen: dict[str, int] = {}
    for pos, name in enumerate(header, start=1):
        if not name:
            raise DataError(f"{_where(fname, header_line)}: column {pos} has an empty name")
        if name in seen:
            raise DataError(
                f"{_where(fname, header_line, name)}: duplicate column name (columns {seen[name]} and {pos})"
            )
        seen[name] = pos


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _find_timestamp_column(
    fname: str,
    header: list[str],
    rows: list[list[str]],
    lines: list[int],
    requested: str | None,
    date_format: str | None = None,
) -> int:
    """Position of the timestamp column: as requested, else by name, else the first column."""
    if requested is not None:
        if requested in header:
            return header.index(requested)
        raise DataError(f"{_where(fname, 1, requested)}: no such timestamp column; the columns are {header}")
    for pos, name in enumerate(header):
        if name.lower() in TIMESTAMP_NAMES:
            return pos
    # Fall back to the first column if its first value looks like a date. Plain numbers are excluded
    # because e.g. "2016" or "20160701" would also "parse" as dates.
    first = rows[0][0].strip() if rows[0] else ""
    if first and not _is_number(first) and candidate_formats(first, date_format):
        return 0
    raise DataError(
        f"{_where(fname, lines[0], header[0])}: no timestamp column: no column is named "
        f"{'/'.join(TIMESTAMP_NAMES)} and the first column's value {first!r} is not a timestamp; "
        f"name it with --timestamp-column (config: timestamp_column); the columns are {header}"
    )


# Written forms `guess_datetime_format` does not recognise but spreadsheets and statistics offices write:
# months ("Jan 2015", "01/2015", "2015/01"), two-digit years ("01/02/15") and bare years. Tried after
# pandas' own guesses, in this order; each must read the column's first value exactly.
_EXTRA_FORMATS = (
    "%b %Y",
    "%B %Y",
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
    guess (`_EXTRA_FORMATS`, quarters). Year-day-month orders are never offered (nobody writes them, and
    they would make every ISO date ambiguous); `dayfirst` True or False keeps only that order where the
    order is in question."""
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
    stamps[out_of_range] = np.datetime64("NaT")  # would overflow datetime64[ns]
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


# A number written with thousands separators: "1,577.92", "1.577,92", "1 577", "1'577.92".
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?P<sep>[,.' \u00a0\u202f])\d{3}(?:(?P=sep)\d{3})*(?:[.,]\d+)?$")


def _number_problem(cell: str, column: str, numeric_share: float) -> str:
    """Why `cell` is not a value, and the fix: a fill for a missing value, the separators to remove, the
    cell to correct in a column of numbers, or --drop for a column of text (never for one of numbers: it
    may be the target)."""
    missing = "missing value; fill gaps with --fill linear or --fill ffill (config: fill)"
    if cell.lower() in _MISSING_TOKENS:
        return missing
    try:
        value = float(cell)
    except ValueError:
        match = _THOUSANDS.match(cell)
        if match:
            plain = cell.replace(match["sep"], "").replace(",", ".")
            return (
                f"not a number: {cell!r}: thousands separators ({match['sep']!r}) are not read; "
                f"write the column's numbers without them ({plain})"
            )
        if numeric_share >= 0.5:
            return (
                f"not a number: {cell!r} ({100 * numeric_share:.0f}% of the column's cells are numbers: "
                "correct this one)"
            )
        return f"not a number: {cell!r} (a text column can be left out with --drop {column})"
    if np.isnan(value):
        return missing
    return f"not a finite number: {cell!r}"


def _fill(values: np.ndarray, method: str) -> np.ndarray:
    """NaNs filled in time order: "linear" interpolation between neighbours (the ends take the nearest
    value), "ffill" the last value (leading gaps take the first one), or "zero" (a shop's closed days:
    no sales is the truth there)."""
    column = pd.Series(values)
    if method == "zero":
        column = column.fillna(0.0)
    elif method == "linear":
        column = column.interpolate(method="linear", limit_direction="both")
    else:
        column = column.ffill().bfill()
    return column.to_numpy(dtype=np.float64)


# A calendar month's mean length in seconds (the Gregorian year / 12): the nominal frequency_seconds of
# a calendar frequency, which steps by months, not seconds.
_MEAN_MONTH_S = 365.2425 * 86_400 / 12
_CALENDAR = re.compile(r"^(?P<months>\d+)M(?P<anchor>[SE])$")


def _calendar_frequency(stamps: np.ndarray) -> tuple[str, float] | None:
    """Every stamp on the first day of a month (or every one on the last), at one time of day: steps of
    whole months, the alias of the most common one (`3MS`: quarterly, on the 1st; `12MS`: yearly), and
    its nominal seconds. None for data that is not so."""
    if len(stamps) < 2:
        return None
    days = stamps.astype("datetime64[D]")
    if len(np.unique((stamps - days).astype("int64"))) != 1:  # not one time of day
        return None
    month = days.astype("datetime64[M]")
    month_start = bool(np.all(days == month))
    month_end = bool(np.all(days == (month + 1).astype("datetime64[D]") - 1))
    if month_start == month_end:  # neither (or one-day months: impossible)
        return None
    steps = np.diff(month.astype("int64"))
    values, counts = np.unique(steps[steps > 0], return_counts=True)
    if not len(values):
        return None
    months = int(values[np.argmax(counts)])
    return f"{months}M{'S' if month_start else 'E'}", months * _MEAN_MONTH_S


def _most_common_step(stamps: np.ndarray) -> int:
    """The most common positive step between consecutive stamps, in ns (ties: the smaller)."""
    steps = np.diff(stamps.astype("int64"))
    positive = steps[steps > 0]
    values, counts = np.unique(positive if len(positive) else np.abs(steps), return_counts=True)
    return int(values[np.argmax(counts)])


def _infer_frequency(stamps: np.ndarray) -> tuple[str, float]:
    """Most common step between consecutive timestamps, as alias and seconds; month-anchored data steps
    whole months (`_calendar_frequency`), all else a fixed step."""
    calendar_step = _calendar_frequency(stamps)
    if calendar_step is not None:
        return calendar_step
    step = _most_common_step(stamps)
    for alias, unit in _FREQ_UNITS:
        if step and step % unit == 0:
            return f"{step // unit}{alias}", step / 10**9
    return "0s", 0.0  # every stamp equal: reported as duplicates before any grid is asked for


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
        match = _CALENDAR.match(self.alias)
        if match is None:
            return first + steps * np.timedelta64(round(self.seconds * 1e9), "ns")
        day = first.astype("datetime64[D]")
        months = day.astype("datetime64[M]") + steps * int(match["months"])
        anchor = months.astype("datetime64[D]")
        if match["anchor"] == "E":
            anchor = (months + 1).astype("datetime64[D]") - 1
        return (anchor + (first - day)).astype("datetime64[ns]")


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


# How a file is read beyond its path (load_dataset's keywords): what a training run records, so that
# evaluation and export read the same file the same way.
READ_OPTIONS = ("timestamp_column", "drop", "keep", "fill", "date_format", "dayfirst")

# How missing values and steps may be filled (off by default: a gap is an error naming its lines).
FILL_METHODS = ("none", "linear", "ffill", "zero")
_OFFSET = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def _raise(problems: list[str]) -> None:
    """One DataError for all of a file's problems: the first on the first line, each other on its own."""
    if problems:
        raise DataError("\n".join([problems[0], *(f"also: {p}" for p in problems[1:])]), problems)


@dataclass(frozen=True)
class _Loaded:
    """What `_load` made of a file: the series (None when any cell or the grid has a problem), every
    problem found, and the value columns' names (known even when cells are bad)."""

    series: Series | None
    problems: list[str]
    columns: list[str]


def load_csv(
    path: str | Path,
    timestamp_column: str | None = None,
    drop: Sequence[str] = (),
    fill: str = "none",
    keep: Sequence[str] = (),
    date_format: str | None = None,
    dayfirst: bool | None = None,
) -> Series:
    """Read and validate a CSV of one timestamp column and numeric columns on a regular time grid.

    The timestamp column is ``timestamp_column`` if given, else the first column named
    date/timestamp/time/datetime (case-insensitive), else the first column if its first value is a
    date. Every other column must hold finite numbers in every row. Timestamps must be strictly
    increasing and lie on one grid of the series' step (its most common one; months for data stamped on
    the first or last day of a month). Timestamps are read in one format, the one that reads the most of
    them among those that read the first value (``candidate_formats``; ISO 8601 forms may mix; numeric
    epochs are not recognised), or ``date_format`` when given; UTC offsets are converted to naive UTC.
    Dates whose day and month order the column leaves open (every date reads both ways) are refused
    unless ``dayfirst`` (True: day first, False: month first) or ``date_format`` says which. Every
    problem found, including a missing or unreadable file, raises one :class:`DataError` naming each
    offending line (1-based, header = line 1) and column where there is one.

    The delimiter is the one that splits the header line into the most fields (`,` `;` tab `|`); with
    another than `,`, decimal commas in the values are read as points. ``drop`` names columns to leave
    out (text columns, say); ``keep``, when given, names the only ones to use. ``fill`` "linear", "ffill"
    or "zero" inserts the grid's missing steps as rows and fills missing values (empty, NA, NaN cells and
    inserted rows) by linear interpolation in time order, by the last value (the first rows from the
    next value) or with 0; "none" refuses both. What was detected, filled or converted is in
    ``Series.notes``.
    """
    loaded = _load(path, timestamp_column, drop, fill, keep, date_format, dayfirst)
    _raise(loaded.problems)
    assert loaded.series is not None
    return loaded.series


def _load(
    path: str | Path,
    timestamp_column: str | None,
    drop: Sequence[str],
    fill: str,
    keep: Sequence[str],
    date_format: str | None,
    dayfirst: bool | None,
) -> _Loaded:
    if fill not in FILL_METHODS:
        raise DataError(f"fill must be one of {list(FILL_METHODS)}, got {fill!r}")
    if dayfirst is not None and not isinstance(dayfirst, bool):
        raise DataError(f"dayfirst must be true, false or null, got {dayfirst!r}")
    path = Path(path)
    fname = path.name
    raw, header, rows, lines, delimiter = _read_rows(path)
    notes: list[str] = []
    if delimiter != ",":
        notes.append(f"delimiter {delimiter!r} detected")
    _check_header(fname, header)
    unknown = [name for name in keep if name not in header]
    if unknown:
        raise DataError(
            f"{_where(fname, 1)}: cannot keep {unknown}: no such column; the columns are {header}"
        )
    unknown = [name for name in drop if name not in header]
    if unknown:
        raise DataError(
            f"{_where(fname, 1)}: cannot drop {unknown}: no such column; the columns are {header}"
        )
    if len(rows) < 2:
        raise DataError(
            f"{_where(fname, 1)}: the file has {len(rows)} data row(s); at least 2 are needed "
            "(to infer the time step)"
        )

    width = len(header)
    for record, line in zip(rows, lines, strict=True):
        if len(record) < width:
            raise DataError(
                f"{_where(fname, line, header[len(record)])}: missing value "
                f"(the row has {len(record)} fields, the header {width})"
            )
        if len(record) > width:
            raise DataError(f"{_where(fname, line)}: the row has {len(record)} fields, the header {width}")

    ts_pos = _find_timestamp_column(fname, header, rows, lines, timestamp_column, date_format)
    if header[ts_pos] in drop:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: the timestamp column cannot be dropped")
    value_pos = [
        pos
        for pos in range(width)
        if pos != ts_pos and header[pos] not in drop and (not keep or header[pos] in keep)
    ]
    if not value_pos:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: no numeric column (only the timestamp column)")
    columns = [header[pos] for pos in value_pos]

    # Validate every cell, column by column (vectorised), and report every column's first bad cell (with
    # how many more it has) in file order: the earliest row, and within it the leftmost column.
    def column_cells(pos: int) -> np.ndarray:
        return np.array([record[pos].strip() for record in rows], dtype=object)

    problems: list[tuple[int, int, str]] = []  # (row index, column position, message)

    def report(bad: np.ndarray, pos: int, message: str) -> None:
        i, more = int(np.argmax(bad)), int(bad.sum()) - 1
        problems.append((i, pos, message + (f" (and {more} more in this column)" if more else "")))

    ts_cells = column_cells(ts_pos)
    parsed = _parse_timestamps(ts_cells, date_format, dayfirst)
    stamps = parsed.stamps
    if any(_OFFSET.search(str(cell)) for cell in ts_cells[:: max(1, len(ts_cells) // 64)]):
        notes.append("timestamps with UTC offsets were converted to UTC")
    bad = np.isnat(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        report(bad, ts_pos, _timestamp_problem(str(ts_cells[i]), parsed.fmt, bool(parsed.out_of_range[i])))
    elif parsed.rival is not None:
        i, message = _ambiguity_problem(ts_cells, parsed)
        problems.append((i, ts_pos, message))
    # Order: compare neighbours where both parsed (a NaT is itself reported at an earlier/equal row).
    prev, cur = stamps[:-1], stamps[1:]
    not_after = (cur <= prev) & ~np.isnat(prev) & ~np.isnat(cur)
    if not_after.any() and parsed.rival is None:
        i = int(np.argmax(not_after)) + 1
        here, before = pd.Timestamp(stamps[i]), pd.Timestamp(stamps[i - 1])
        if here == before:
            msg = f"duplicate timestamp {here} (same as line {lines[i - 1]})"
        else:
            msg = (
                f"timestamp {here} is not after the previous row's {before} "
                "(timestamps must be strictly increasing)"
            )
        more = int(not_after.sum()) - 1
        problems.append((i, ts_pos, msg + (f" (and {more} more rows out of order)" if more else "")))
    if parsed.decided is not None and parsed.fmt is not None:
        other, i = parsed.decided
        notes.append(
            f"dates read {_order_name(parsed.fmt)} ({parsed.fmt}): {ts_cells[i]!r} (line {lines[i]}) "
            f"cannot be {_order_name(other)}"
        )

    values = np.empty((len(rows), len(value_pos)), dtype=np.float64)
    decimal_commas = False
    fillable = np.zeros(len(value_pos), dtype=np.int64)  # missing cells per column, when a fill is asked
    for j, pos in enumerate(value_pos):
        column = column_cells(pos)
        original = column
        if delimiter != "," and any("," in str(c) for c in column):
            column = np.array([str(c).replace(",", ".") for c in column], dtype=object)
            decimal_commas = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            numbers = pd.to_numeric(pd.Series(column, dtype=object), errors="coerce")
        col_values = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(col_values)
        missing = np.zeros_like(bad)  # cells a fill may take: missing tokens, never text
        if fill != "none" and bad.any():
            where = np.flatnonzero(bad)
            missing[where] = [str(column[i]).lower() in _MISSING_TOKENS for i in where]
            bad &= ~missing
        if bad.any():
            i = int(np.argmax(bad))
            share = float(np.isfinite(col_values).mean())
            report(bad, pos, _number_problem(str(original[i]), header[pos], share))
        elif missing.all():
            problems.append((0, pos, "no value at all in this column: nothing to fill from"))
        fillable[j] = int(missing.sum())
        values[:, j] = col_values
    if decimal_commas:
        notes.append("decimal commas were read as decimal points")

    messages = [f"{_where(fname, lines[i], header[pos])}: {msg}" for i, pos, msg in sorted(problems)]
    timestamps_ok = not any(pos == ts_pos for _, pos, _ in problems)
    grid = _grid(stamps) if timestamps_ok else None
    # Without a fill, missing steps are an error; with one, too, when they outnumber the rows (a fill
    # would invent most of the series: the dates are more likely misread).
    if grid is not None and (
        grid.off.size or (grid.missing and (fill == "none" or grid.missing > len(rows)))
    ):
        messages.append(_grid_problem(fname, grid, stamps, lines, fill))
        grid = None
    if messages or grid is None:
        return _Loaded(None, messages, columns)

    if grid.missing:  # with a fill: the grid's missing steps become rows of missing values
        assert grid.position is not None
        full = np.full((int(grid.position[-1]) + 1, values.shape[1]), np.nan)
        full[grid.position] = values
        gaps = np.diff(grid.position) - 1
        notes.append(
            f"{grid.missing} missing step(s) of {grid.alias} inserted as rows and filled ({fill}): "
            f"{_gap_list(grid, stamps, lines, shown=2)}; the longest gap was {int(gaps.max())} step(s)"
        )
        values, stamps = full, grid.stamps(stamps[0])
    if fillable.any():
        notes.append(f"{int(fillable.sum())} missing value(s) filled ({fill})")
    for j in range(values.shape[1]):
        if np.isnan(values[:, j]).any():
            values[:, j] = _fill(values[:, j], fill)

    series = Series(
        name=path.stem,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        timestamps=stamps,
        columns=columns,
        values=values,
        frequency=grid.alias,
        frequency_seconds=grid.seconds,
        notes=tuple(notes),
        date_format=parsed.fmt,
        inserted_steps=grid.missing,
    )
    return _Loaded(series, [], columns)


# --------------------------------------------------------------------------------------------------
# Scaling
# --------------------------------------------------------------------------------------------------


class StandardScaler:
    """Per-channel standardisation ``(x - mean) / std`` over the last axis (numpy, float64 stats).

    ``std`` is the population std (ddof=0, as sklearn and Time-Series-Library); a constant channel
    gets std 1.0 so it maps to 0 instead of dividing by zero. ``transform``/``inverse_transform``
    return the input's float dtype (float64 for non-float input).
    """

    def __init__(self, mean: np.ndarray | None = None, std: np.ndarray | None = None) -> None:
        self.mean: np.ndarray | None = None if mean is None else np.asarray(mean, dtype=np.float64)
        self.std: np.ndarray | None = None if std is None else np.asarray(std, dtype=np.float64)
        if (self.mean is None) != (self.std is None):
            raise ValueError("give both mean and std, or neither")
        if self.mean is not None and self.std is not None:
            if self.mean.ndim != 1 or self.mean.shape != self.std.shape:
                raise ValueError(f"mean {self.mean.shape} and std {self.std.shape} must be equal 1-D shapes")
            if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all() and (self.std > 0).all()):
                raise ValueError("mean must be finite and std finite and > 0")

    def fit(self, x: Any) -> StandardScaler:
        """Compute per-channel mean and std of ``x`` [rows, C] (or [..., C])."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] == 0:
            raise ValueError(f"cannot fit a scaler on shape {x.shape}")
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[0] == 0:
            raise ValueError("cannot fit a scaler on zero rows")
        mean = flat.mean(axis=0)
        std = flat.std(axis=0)
        # Exactly constant channels: the computed std can be a rounding residue (~1e-17), so test the
        # range instead of std == 0, and use the value itself as the mean so it maps to exactly 0.
        constant = np.ptp(flat, axis=0) == 0
        self.mean = np.where(constant, flat[0], mean)
        self.std = np.where(constant, 1.0, std)
        return self

    def _stats(self, x: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.dtype]:
        if self.mean is None or self.std is None:
            raise RuntimeError("StandardScaler is not fitted")
        arr = np.asarray(x)
        dtype = arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.dtype(np.float64)
        if arr.ndim < 1 or arr.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"expected last dimension {self.mean.shape[0]}, got shape {arr.shape}")
        return arr, self.mean, self.std, dtype

    def transform(self, x: Any) -> np.ndarray:
        """Scale ``x`` [..., C]."""
        arr, mean, std, dtype = self._stats(x)
        return ((arr - mean) / std).astype(dtype, copy=False)

    def inverse_transform(self, x: Any) -> np.ndarray:
        """Undo :meth:`transform` on ``x`` [..., C]."""
        arr, mean, std, dtype = self._stats(x)
        return (arr * std + mean).astype(dtype, copy=False)

    def to_dict(self) -> dict[str, list[float]]:
        """JSON-serialisable ``{"mean": [...], "std": [...]}``."""
        if self.mean is None or self.std is None:
            raise RuntimeError("StandardScaler is not fitted")
        return {"mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StandardScaler:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(mean=d["mean"], std=d["std"])
        except KeyError as exc:
            raise ValueError(f"scaler dict lacks {exc.args[0]!r}") from None

    def __repr__(self) -> str:
        channels = None if self.mean is None else self.mean.shape[0]
        return f"StandardScaler(channels={channels})"


# --------------------------------------------------------------------------------------------------
# Splits and datasets
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Split:
    """One split's (scaled) rows; window ``i`` is input rows ``[i, i+L)`` and target rows ``[i+L, i+L+H)``."""

    name: str
    data: np.ndarray
    timestamps: np.ndarray
    input_length: int
    horizon: int
    step_seconds: float = 0.0  # the series' sampling step; needed only for cycle phases
    # Tensor view of ``data`` (shared memory, created once) and the window offsets.
    _tensor: torch.Tensor = field(init=False, repr=False, compare=False)
    _x_offsets: torch.Tensor = field(init=False, repr=False, compare=False)
    _y_offsets: torch.Tensor = field(init=False, repr=False, compare=False)
    # floor(t / step) of every row (t in ns since the epoch), computed once; None without a step.
    _step_index: torch.Tensor | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        data = np.ascontiguousarray(self.data, dtype=np.float32)
        if data.ndim != 2:
            raise ValueError(f"split data must be [rows, channels], got shape {data.shape}")
        if len(self.timestamps) != data.shape[0]:
            raise ValueError(f"{len(self.timestamps)} timestamps for {data.shape[0]} rows")
        object.__setattr__(self, "data", data)  # frozen dataclass: set once here
        object.__setattr__(self, "_tensor", torch.from_numpy(data))
        object.__setattr__(self, "_x_offsets", torch.arange(self.input_length))
        object.__setattr__(self, "_y_offsets", torch.arange(self.horizon) + self.input_length)
        step_index = None
        if self.step_seconds > 0:
            ns = self.timestamps.astype("datetime64[ns]").astype(np.int64)
            step_index = torch.from_numpy(np.floor_divide(ns, round(self.step_seconds * 1e9)))
        object.__setattr__(self, "_step_index", step_index)

    @property
    def num_windows(self) -> int:
        """Windows of stride 1 that fit entirely (none dropped)."""
        return max(0, self.data.shape[0] - self.input_length - self.horizon + 1)

    def windows(self, idx: np.ndarray | torch.Tensor | Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs ``x`` [n, L, C] and targets ``y`` [n, H, C] (float32) for window starts ``idx`` [n]."""
        starts = idx if isinstance(idx, torch.Tensor) else torch.from_numpy(np.asarray(idx, dtype=np.int64))
        starts = starts.reshape(-1).to(torch.long)
        if starts.numel() and (int(starts.min()) < 0 or int(starts.max()) >= self.num_windows):
            raise IndexError(
                f"{self.name}: window starts must lie in [0, {self.num_windows}), "
                f"got min {int(starts.min())}, max {int(starts.max())}"
            )
        starts = starts[:, None]
        return self._tensor[starts + self._x_offsets], self._tensor[starts + self._y_offsets]

    def phases(self, idx: np.ndarray | torch.Tensor | Any, period: int) -> torch.Tensor:
        """Cycle phase [n] (int64) of windows starting at ``idx``: floor(t / step) mod period for the
        UTC time t (seconds since the epoch) of each window's first row, as the service computes it."""
        if self._step_index is None:
            raise ValueError(f"{self.name}: split has no step_seconds; cannot place windows in a cycle")
        starts = idx if isinstance(idx, torch.Tensor) else torch.from_numpy(np.asarray(idx, dtype=np.int64))
        return self._step_index[starts.reshape(-1).to(torch.long)] % period

    def __repr__(self) -> str:
        return (
            f"Split(name={self.name!r}, rows={self.data.shape[0]}, channels={self.data.shape[1]}, "
            f"input_length={self.input_length}, horizon={self.horizon}, num_windows={self.num_windows})"
        )


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded CSV split into scaled train/val/test windows for one (L, H, mode, target)."""

    series: Series
    mode: str
    target: str
    channels: list[str]
    scaler: StandardScaler
    protocol: str
    borders: dict[str, tuple[int, int]]
    train: Split
    val: Split
    test: Split

    def __repr__(self) -> str:
        return (
            f"Dataset(series={self.series.name!r}, mode={self.mode!r}, target={self.target!r}, "
            f"channels={self.channels!r}, protocol={self.protocol!r}, borders={self.borders!r})"
        )


def _protocol_for(name: str, protocol: str) -> str:
    if protocol == "auto":
        if name in _ETT_HOUR_NAMES:
            return "ett-hour"
        if name in _ETT_MINUTE_NAMES:
            return "ett-minute"
        return "ratio-70-10-20"
    if protocol not in PROTOCOLS:
        raise DataError(f"unknown protocol {protocol!r}; use 'auto' or one of {list(PROTOCOLS)}")
    return protocol


def _borders(protocol: str, n: int, input_length: int, fname: str) -> dict[str, tuple[int, int]]:
    """Row ranges ``[start, end)`` per split (val/test start L rows early so their first window's
    input may reach back into the previous split, as in Informer / Time-Series-Library)."""
    L = input_length
    if protocol == "ratio-70-10-20":
        num_train = int(n * 0.7)
        num_test = int(n * 0.2)
        num_val = n - num_train - num_test
        return {
            "train": (0, num_train),
            "val": (num_train - L, num_train + num_val),
            "test": (n - num_test - L, n),
        }
    per_hour = 4 if protocol == "ett-minute" else 1
    train_end, val_end, test_end = (end * per_hour for end in _ETT_HOUR_ENDS)
    if n < test_end:
        raise DataError(
            f"{fname}: protocol {protocol!r} needs at least {test_end} rows (lines 2-{test_end + 1}), "
            f"the file has {n}; use protocol='ratio-70-10-20'"
        )
    return {"train": (0, train_end), "val": (train_end - L, val_end), "test": (val_end - L, test_end)}


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _target_problem(fname: str, columns: list[str], target: str, mode: str) -> tuple[str, str | None]:
    """The target (for "auto": OT, the ETT files' convention, else the one numeric column, else in mode M
    the first column: every column is forecast there, and the target only picks the channel plots show),
    and the problem with it, if any."""
    if target == "auto":
        if "OT" in columns:
            return "OT", None
        if len(columns) == 1 or mode == "M":
            return columns[0], None
        return target, (
            f"{_where(fname, 1)}: which column is the target? The numeric columns are {columns}: name one "
            "with --target (config: target), or forecast them all with --mode M; leave text or other "
            "unwanted columns out with --drop"
        )
    if target not in columns:
        return target, (
            f"{_where(fname, 1, target)}: unknown target column; the numeric columns are {columns} "
            "(choose one with --target, config: target)"
        )
    return target, None


def load_dataset(
    path: str | Path,
    input_length: int,
    horizon: int,
    mode: str = "M",
    target: str = "auto",
    timestamp_column: str | None = None,
    protocol: str = "auto",
    drop: Sequence[str] = (),
    fill: str = "none",
    keep: Sequence[str] = (),
    date_format: str | None = None,
    dayfirst: bool | None = None,
) -> Dataset:
    """Load ``path`` with :func:`load_csv`, split it by ``protocol`` and scale it (`split_series`).

    ``mode`` "M": all numeric columns in and out; "S": only ``target``. ``target`` "auto": OT when the
    file has it (the ETT files), else its one numeric column, else in mode M its first (the channel
    plots show), else an error asking for one. ``timestamp_column``, ``drop``, ``keep``, ``fill``,
    ``date_format`` and ``dayfirst`` go to :func:`load_csv`; the file's problems and the target's are
    reported together. ``protocol`` "auto" picks "ett-hour" for ETTh1/ETTh2, "ett-minute" for
    ETTm1/ETTm2 and "ratio-70-10-20" otherwise. The scaler is fit on the training rows of the model's
    channels only. Every split must hold at least one window of ``input_length + horizon`` rows, else
    :class:`DataError`.
    """
    L = _positive_int("input_length", input_length)
    H = _positive_int("horizon", horizon)
    if mode not in ("M", "S"):
        raise DataError(f"mode must be 'M' (multivariate) or 'S' (univariate target only), got {mode!r}")
    loaded = _load(path, timestamp_column, drop, fill, keep, date_format, dayfirst)
    target, problem = _target_problem(Path(path).name, loaded.columns, target, mode)
    _raise(loaded.problems + ([problem] if problem else []))
    assert loaded.series is not None
    return split_series(loaded.series, L, H, mode, target, protocol)


def split_series(
    series: Series, input_length: int, horizon: int, mode: str, target: str, protocol: str = "auto"
) -> Dataset:
    """A loaded series split by ``protocol`` for one window shape and scaled (`load_dataset`'s second
    half: several shapes of one file need it read once)."""
    L = _positive_int("input_length", input_length)
    H = _positive_int("horizon", horizon)
    fname = series.path.name
    target, problem = _target_problem(fname, series.columns, target, mode)
    _raise([problem] if problem else [])
    channels = list(series.columns) if mode == "M" else [target]
    values = series.values[:, [series.columns.index(c) for c in channels]]

    chosen = _protocol_for(series.name, protocol)
    borders = _borders(chosen, len(values), L, fname)
    # Check in split order: a train split shorter than L also makes the val start negative, and is
    # reported first.
    for name, (start, end) in borders.items():
        rows = end - start
        if rows < L + H:
            lines = f"lines {start + 2}-{end + 1}" if rows > 0 else "no lines"
            if rows > 0 and series.inserted_steps:  # rows of the filled grid are not the file's lines
                lines = f"rows {start + 1}-{end} of the grid"
            raise DataError(
                f"{fname}: too few rows for split {name!r}: it has {rows} rows ({lines}) but "
                f"input_length + horizon = {L} + {H} needs at least {L + H}; use a shorter window or "
                "horizon (--input-length, --horizon) or a longer file"
            )

    train_start, train_end = borders["train"]
    scaler = StandardScaler().fit(values[train_start:train_end])
    scaled = scaler.transform(values).astype(np.float32)
    splits = {
        name: Split(
            name=name,
            data=scaled[start:end].copy(),  # own memory: splits overlap by L rows
            timestamps=series.timestamps[start:end].copy(),
            input_length=L,
            horizon=H,
            step_seconds=series.frequency_seconds,
        )
        for name, (start, end) in borders.items()
    }
    return Dataset(
        series=series,
        mode=mode,
        target=target,
        channels=channels,
        scaler=scaler,
        protocol=chosen,
        borders=borders,
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
    )
