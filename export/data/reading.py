"""Reading one wide CSV: one timestamp column and numeric columns (a channel each), every cell
validated, every problem named by line and column (`load_csv`)."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import shlex
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from export.data.errors import _MISSING_TOKENS, DataError, _raise, _where
from export.data.layout import NO_TIMES, long_hint
from export.data.options import FILL_METHODS, READ_OPTIONS, ReadOptions
from export.data.timestamps import (
    TIMESTAMP_NAMES,
    _ambiguity_problem,
    _gap_list,
    _grid,
    _grid_problem,
    _infer_frequency,
    _order_name,
    _timestamp_problem,
    candidate_formats,
    has_offsets,
    localize,
    refuses_grid,
)
from rsa_core.calendar import calendar_step
from rsa_core.steps import calendar_units
from rsa_core.written import read_written

__all__ = ["FILL_METHODS", "READ_OPTIONS", "ReadOptions", "Series", "load_csv"]


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
    timezone: str | None = (
        None  # the zone local times were read in (`timestamps` are UTC instants either way)
    )

    def __repr__(self) -> str:  # the default repr would print the arrays
        return (
            f"Series(name={self.name!r}, rows={len(self.timestamps)}, columns={self.columns!r}, "
            f"frequency={self.frequency!r})"
        )


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
    lower = [h.lower() for h in header]
    named = next((lower.index(n) for n in TIMESTAMP_NAMES if n in lower), None)  # the long reader's order
    if named is not None:
        return named
    # Fall back to the first column if its first value looks like a date. Plain numbers are excluded
    # because e.g. "2016" or "20160701" would also "parse" as dates.
    first = rows[0][0].strip() if rows[0] else ""
    if first and not _is_number(first) and candidate_formats(first, date_format):
        return 0
    cells = [c.strip() for c in rows[0]] if rows else []
    dated = [c for c in cells if c and not _is_number(c) and candidate_formats(c, date_format)]
    raise DataError(
        f"{_where(fname, lines[0], header[0])}: no timestamp column: no column is named "
        f"{'/'.join(TIMESTAMP_NAMES)} and the first column's value {first!r} is not a timestamp; "
        f"name it with --timestamp-column (config: timestamp_column); the columns are {header}"
        + ("" if dated else f"; {NO_TIMES}")
    )


# Written forms `guess_datetime_format` does not recognise but spreadsheets and statistics offices write:


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
        return f"not a number: {cell!r} (a text column can be left out with --drop {shlex.quote(column)})"
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


def _step_clock(wall: np.ndarray | None, instants: np.ndarray) -> tuple[np.ndarray, bool]:
    """The stamps a zoned series' steps are judged on (issue 46, item 8), by this reader and the panel
    reader alike: its wall-clock times where it steps whole days or months (a daily series keeps its time
    of day across a daylight-saving change, 23 or 25 hours apart as instants; a month start east of UTC is
    the last day of the month before in UTC), its instants where it steps less than a day (an hourly series
    steps elapsed hours, across the change too). `wall` None (no zone): the instants. (stamps, whether they
    are the wall clock's)"""
    if wall is None or len(wall) < 2:
        return instants, False
    alias, seconds = _infer_frequency(wall)
    if calendar_units(seconds, calendar_step(alias)):  # the rule every path steps by (rsa_core.steps)
        return wall, True
    return instants, False


@dataclass(frozen=True)
class _Loaded:
    """What `_load` made of a file: the series (None when any cell or the grid has a problem), every
    problem found, and the value columns' names (known even when cells are bad)."""

    series: Series | None
    problems: list[str]
    columns: list[str]


def load_csv(path: str | Path, options: ReadOptions | None = None, **overrides: Any) -> Series:
    """Read and validate a CSV of one timestamp column and numeric columns on a regular time grid.

    The timestamp column is ``timestamp_column`` if given, else the first column named
    ds/timestamp/date/datetime/time/month/quarter/week/year (case-insensitive, in that order), else the
    first column if its first value is a
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
    loaded = _load(path, ReadOptions.of(options, **overrides))
    _raise(loaded.problems)
    assert loaded.series is not None
    return loaded.series


def _load(path: str | Path, options: ReadOptions) -> _Loaded:
    timestamp_column, drop, keep, fill = options.timestamp_column, options.drop, options.keep, options.fill
    date_format = options.date_format
    path = Path(path)
    fname = path.name
    raw, header, rows, lines, delimiter = _read_rows(path)
    notes: list[str] = []
    if delimiter != ",":
        notes.append(f"delimiter {delimiter!r} detected")
    _check_columns(fname, header, rows, lines, options)
    ts_pos = _find_timestamp_column(fname, header, rows, lines, timestamp_column, date_format)
    if header[ts_pos] in drop:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: the timestamp column cannot be dropped")
    value_pos = [
        pos
        for pos in range(len(header))
        if pos != ts_pos and header[pos] not in drop and (not keep or header[pos] in keep)
    ]
    if not value_pos:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: no numeric column (only the timestamp column)")
    columns = [header[pos] for pos in value_pos]

    # Validate every cell, column by column (vectorised), and report every column's first bad cell (with
    # how many more it has) in file order: the earliest row, and within it the leftmost column.
    problems: list[tuple[int, int, str]] = []  # (row index, column position, message)
    found = _Findings(problems, notes)
    stamps, wall, parsed = _timestamps(rows, lines, (ts_pos, header[ts_pos]), options, found)
    values, fillable = _values(header, rows, value_pos, delimiter, fill, found)
    messages = [f"{_where(fname, lines[i], header[pos])}: {msg}" for i, pos, msg in sorted(problems)]
    timestamps_ok = not any(pos == ts_pos for _, pos, _ in problems)
    # A zoned file's daily or monthly steps on its wall clock, as the panel reader judges them.
    judged, on_wall = _step_clock(wall, stamps) if timestamps_ok else (stamps, False)
    grid = _grid(judged) if timestamps_ok else None
    if grid is not None and refuses_grid(grid, fill, len(rows)):
        messages.append(_grid_problem(fname, grid, judged, lines, fill))
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
            f"{_gap_list(grid, judged, lines, shown=2)}; the longest gap was {int(gaps.max())} step(s)"
        )
        values, stamps = full, grid.stamps(judged[0])
        if on_wall and options.timezone is not None:
            stamps = localize(stamps, options.timezone)[0]  # the wall-clock grid as instants
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
        timezone=options.timezone,
    )
    return _Loaded(series, [], columns)


def _check_columns(
    fname: str, header: list[str], rows: list[list[str]], lines: list[int], options: ReadOptions
) -> None:
    """The header and the rows' shape: a wide file (a long one is told its reader), the columns to keep
    and drop named in the header, at least 2 rows, every row as many fields as the header."""
    drop, keep = options.drop, options.keep
    _check_header(fname, header)
    if options.layout == "long":
        raise DataError(
            f"{fname}: layout long: this reader takes wide files (a column per channel); read a long file "
            "with `python -m export.panel train --data FILE` (export/data/panels.py)"
        )
    hint = long_hint(fname, header, rows)
    if hint is not None and options.layout == "auto":
        raise DataError(hint)
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


@dataclass(frozen=True)
class _Findings:
    """What the cell checks found: problems (row index, column position, message) and notes."""

    problems: list[tuple[int, int, str]]
    notes: list[str]

    def report(self, bad: np.ndarray, pos: int, message: str) -> None:
        """A column's first bad cell (row index, column position, message), with how many more it has."""
        i, more = int(np.argmax(bad)), int(bad.sum()) - 1
        self.problems.append((i, pos, message + (f" (and {more} more in this column)" if more else "")))


def _column_cells(rows: list[list[str]], pos: int) -> np.ndarray:
    return np.array([record[pos].strip() for record in rows], dtype=object)


def _timestamps(
    rows: list[list[str]], lines: list[int], ts: tuple[int, str], options: ReadOptions, found: _Findings
) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """The timestamp column (its position and name) parsed (UTC instants; with `options.timezone`, local
    times read in that zone), its problems (unparsed, skipped by the zone, ambiguous, out of order)
    appended to `problems` and what was decided to `notes` (`found`): (stamps, the wall-clock times as
    written or None, the parse)."""
    problems, notes = found.problems, found.notes
    ts_pos, ts_name = ts
    ts_cells = _column_cells(rows, ts_pos)
    parsed = read_written(ts_cells, options.date_format, options.dayfirst)
    stamps = parsed.stamps
    skipped = np.zeros(len(stamps), bool)  # local times the zone skips (daylight saving's spring gap)
    wall = None  # with a zone: the wall-clock times as written (whole days and months step on them)
    if has_offsets(ts_cells):
        notes.append("timestamps with UTC offsets were converted to UTC")
    elif options.timezone is not None:
        wall = stamps
        stamps, skipped = localize(stamps, options.timezone)
        notes.append(
            f"local times of {options.timezone} were read as UTC instants (daylight saving included)"
        )
        if skipped.any():
            i = int(np.argmax(skipped))
            found.report(
                skipped,
                ts_pos,
                f"{ts_cells[i]} does not exist in {options.timezone}: the clocks skip it (daylight saving)",
            )
    bad = np.isnat(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        problem = _timestamp_problem(str(ts_cells[i]), ts_name, parsed.fmt, bool(parsed.out_of_range[i]))
        found.report(bad, ts_pos, problem)
    elif parsed.rival is not None:
        i, message = _ambiguity_problem(ts_cells, parsed)
        problems.append((i, ts_pos, message))
    # Order: compare neighbours where both parsed (a NaT is itself reported at an earlier/equal row).
    prev, cur = stamps[:-1], stamps[1:]
    not_after = (cur <= prev) & ~np.isnat(prev) & ~np.isnat(cur)
    if not_after.any() and parsed.rival is None and not skipped.any():
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

    return stamps, wall, parsed


def _values(
    header: list[str], rows: list[list[str]], at: list[int], delimiter: str, fill: str, found: _Findings
) -> tuple[np.ndarray, np.ndarray]:
    """The value columns (`at`: their positions in the header) as float64 [rows, columns] (decimal commas
    read where the delimiter is not a comma), each column's bad cells appended to `found.problems`; with a
    fill, the missing cells it may take per column (never text)."""
    problems, notes = found.problems, found.notes
    values = np.empty((len(rows), len(at)), dtype=np.float64)
    decimal_commas = False
    fillable = np.zeros(len(at), dtype=np.int64)  # missing cells per column, when a fill is asked
    for j, pos in enumerate(at):
        column = _column_cells(rows, pos)
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
            found.report(bad, pos, _number_problem(str(original[i]), header[pos], share))
        elif missing.all():
            problems.append((0, pos, "no value at all in this column: nothing to fill from"))
        fillable[j] = int(missing.sum())
        values[:, j] = col_values
    if decimal_commas:
        notes.append("decimal commas were read as decimal points")
    return values, fillable
