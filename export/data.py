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
    """A problem with a user's CSV or with the requested split of it; the message says where."""


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
    fname: str, header: list[str], rows: list[list[str]], lines: list[int], requested: str | None
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
    if first and not _is_number(first) and guess_datetime_format(first) is not None:
        return 0
    raise DataError(
        f"{_where(fname, lines[0], header[0])}: no timestamp column: no column is named "
        f"{'/'.join(TIMESTAMP_NAMES)} and the first column's value {first!r} is not a timestamp; "
        f"name it with --timestamp-column (config: timestamp_column); the columns are {header}"
    )


def _parse_timestamps(cells: np.ndarray) -> tuple[np.ndarray, str | None, np.ndarray]:
    """Parse stripped strings to datetime64[ns] (NaT where invalid).

    Returns the stamps, the guessed format and a mask of dates that parsed but lie outside the
    datetime64[ns] range (years 1677-2262; they are NaT in the stamps).

    The format is guessed from the first non-empty cell and applied to all rows, so a column must
    use one format (ISO 8601 variants may be mixed). Time-zone offsets are converted to UTC.
    """
    all_nat = np.full(len(cells), np.datetime64("NaT", "ns"))
    no_range_error = np.zeros(len(cells), dtype=bool)
    filled = cells[cells != ""]
    fmt = guess_datetime_format(filled[0]) if len(filled) else None
    if fmt is None:
        return all_nat, None, no_range_error
    # ISO 8601 covers "2016-07-01" and "2016-07-01 00:00:00" alike, so allow those to mix.
    use = "ISO8601" if fmt.startswith("%Y-%m-%d") else fmt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = pd.to_datetime(pd.Series(cells, dtype=object), format=use, errors="coerce", utc=True)
        except (ValueError, OverflowError):  # should not happen with errors="coerce"; be defensive
            return all_nat, fmt, no_range_error
    stamps = parsed.dt.tz_localize(None).to_numpy().copy()
    seconds = stamps.astype("datetime64[s]")
    out_of_range = (seconds < _NS_MIN) | (seconds > _NS_MAX)
    stamps[out_of_range] = np.datetime64("NaT")  # would overflow datetime64[ns]
    return stamps.astype("datetime64[ns]"), fmt, out_of_range


def _timestamp_problem(cell: str, fmt: str | None, out_of_range: bool) -> str:
    if cell.lower() in _MISSING_TOKENS:
        return "missing timestamp"
    if out_of_range:
        return f"timestamp {cell!r} is outside the supported years 1678-2261"
    if fmt is None:
        return f"not a timestamp: {cell!r}"
    return f"not a timestamp (or not in the format {fmt!r} of the column's first value): {cell!r}"


def _number_problem(cell: str, column: str) -> str:
    missing = "missing value; fill gaps with --fill linear or --fill ffill (config: fill)"
    if cell.lower() in _MISSING_TOKENS:
        return missing
    try:
        value = float(cell)
    except ValueError:
        return f"not a number: {cell!r} (a text column can be left out with --drop {column})"
    if np.isnan(value):
        return missing
    return f"not a finite number: {cell!r}"


def _fill(values: np.ndarray, method: str) -> np.ndarray:
    """NaNs filled in time order: "linear" interpolation between neighbours (the ends take the nearest
    value), or "ffill" the last value (leading gaps take the first one)."""
    column = pd.Series(values)
    if method == "linear":
        column = column.interpolate(method="linear", limit_direction="both")
    else:
        column = column.ffill().bfill()
    return column.to_numpy(dtype=np.float64)


# A calendar month's mean length in seconds (the Gregorian year / 12): the nominal frequency_seconds of
# a calendar frequency, which steps by months, not seconds.
_MEAN_MONTH_S = 365.2425 * 86_400 / 12


def _calendar_frequency(stamps: np.ndarray) -> tuple[str, float] | None:
    """Every stamp on the first day of a month (or every one on the last), at one time of day, steps of
    whole months that vary in days: the alias of the most common step (`3MS`: quarterly, on the 1st;
    `12MS`: yearly), and its nominal seconds. None for data that is not so."""
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
    if len(np.unique(np.diff(days.astype("int64")))) == 1:  # a fixed number of days: a fixed step
        return None
    index = month.astype("int64")
    values, counts = np.unique(np.diff(index), return_counts=True)
    months = int(values[np.argmax(counts)])
    return f"{months}M{'S' if month_start else 'E'}", months * _MEAN_MONTH_S


def _infer_frequency(stamps: np.ndarray) -> tuple[str, float]:
    """Most common step between consecutive (strictly increasing) timestamps, as alias and seconds;
    month-anchored data steps whole months (`_calendar_frequency`), all else a fixed step."""
    calendar_step = _calendar_frequency(stamps)
    if calendar_step is not None:
        return calendar_step
    steps = np.diff(stamps.astype("int64"))
    values, counts = np.unique(steps, return_counts=True)
    step = int(values[np.argmax(counts)])  # np.unique sorts, so a tie picks the smaller step
    for alias, unit in _FREQ_UNITS:
        if step % unit == 0:
            return f"{step // unit}{alias}", step / 10**9
    raise AssertionError("unreachable: every step is a whole number of nanoseconds")


# How a file is read beyond its path (load_dataset's keywords): what a training run records, so that
# evaluation and export read the same file the same way.
READ_OPTIONS = ("timestamp_column", "drop", "keep", "fill")

# How missing values may be filled (off by default: a gap is an error naming its line).
FILL_METHODS = ("none", "linear", "ffill")
_OFFSET = re.compile(r"(Z|[+-]\d{2}:?\d{2})$")


def load_csv(
    path: str | Path,
    timestamp_column: str | None = None,
    drop: Sequence[str] = (),
    fill: str = "none",
    keep: Sequence[str] = (),
) -> Series:
    """Read and validate a CSV of one timestamp column and numeric columns.

    The timestamp column is ``timestamp_column`` if given, else the first column named
    date/timestamp/time/datetime (case-insensitive), else the first column if its first value is a
    date. Every other column must hold finite numbers in every row. Timestamps must be strictly
    increasing. Timestamps are parsed in the format of the column's first value (ISO 8601 forms may
    mix; numeric epochs are not recognised) and UTC offsets are converted to naive UTC. Any problem,
    including a missing or unreadable file, raises :class:`DataError` naming the first offending
    line (1-based, header = line 1) and column where there is one.

    The delimiter is the one that splits the header line into the most fields (`,` `;` tab `|`); with
    another than `,`, decimal commas in the values are read as points. ``drop`` names columns to leave
    out (text columns, say); ``keep``, when given, names the only ones to use. ``fill`` "linear" or
    "ffill" fills missing values (empty, NA, NaN cells) by linear interpolation in time order or by the
    last value (the first rows from the next value); "none" refuses them. What was detected, filled or
    converted is in ``Series.notes``.
    """
    if fill not in FILL_METHODS:
        raise DataError(f"fill must be one of {list(FILL_METHODS)}, got {fill!r}")
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

    ts_pos = _find_timestamp_column(fname, header, rows, lines, timestamp_column)
    if header[ts_pos] in drop:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: the timestamp column cannot be dropped")
    value_pos = [
        pos
        for pos in range(width)
        if pos != ts_pos and header[pos] not in drop and (not keep or header[pos] in keep)
    ]
    if not value_pos:
        raise DataError(f"{_where(fname, 1, header[ts_pos])}: no numeric column (only the timestamp column)")

    # Validate every cell, column by column (vectorised), then report the first bad cell in file
    # order: the earliest row, and within it the leftmost column.
    def column_cells(pos: int) -> np.ndarray:
        return np.array([record[pos].strip() for record in rows], dtype=object)

    problems: list[tuple[int, int, str]] = []  # (row index, column position, message)

    ts_cells = column_cells(ts_pos)
    stamps, fmt, out_of_range = _parse_timestamps(ts_cells)
    if any(_OFFSET.search(str(cell)) for cell in ts_cells[:: max(1, len(ts_cells) // 64)]):
        notes.append("timestamps with UTC offsets were converted to UTC")
    bad = np.isnat(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        problems.append((i, ts_pos, _timestamp_problem(str(ts_cells[i]), fmt, bool(out_of_range[i]))))
    # Order: compare neighbours where both parsed (a NaT is itself reported at an earlier/equal row).
    prev, cur = stamps[:-1], stamps[1:]
    not_after = (cur <= prev) & ~np.isnat(prev) & ~np.isnat(cur)
    if not_after.any():
        i = int(np.argmax(not_after)) + 1
        here, before = pd.Timestamp(stamps[i]), pd.Timestamp(stamps[i - 1])
        if here == before:
            msg = f"duplicate timestamp {here} (same as line {lines[i - 1]})"
        else:
            msg = (
                f"timestamp {here} is not after the previous row's {before} "
                "(timestamps must be strictly increasing)"
            )
        problems.append((i, ts_pos, msg))

    values = np.empty((len(rows), len(value_pos)), dtype=np.float64)
    decimal_commas = False
    filled = 0
    for j, pos in enumerate(value_pos):
        column = column_cells(pos)
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
            problems.append((i, pos, _number_problem(str(column[i]), header[pos])))
        elif missing.any():
            if missing.all():
                problems.append((0, pos, "no value at all in this column: nothing to fill from"))
            else:
                col_values = _fill(col_values, fill)
                filled += int(missing.sum())
        values[:, j] = col_values
    if decimal_commas:
        notes.append("decimal commas were read as decimal points")
    if filled:
        notes.append(f"{filled} missing value(s) filled ({fill})")

    if problems:
        i, pos, msg = min(problems, key=lambda p: (p[0], p[1]))
        raise DataError(f"{_where(fname, lines[i], header[pos])}: {msg}")

    frequency, frequency_seconds = _infer_frequency(stamps)
    return Series(
        name=path.stem,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        timestamps=stamps,
        columns=[header[pos] for pos in value_pos],
        values=values,
        frequency=frequency,
        frequency_seconds=frequency_seconds,
        notes=tuple(notes),
    )


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


def _auto_target(fname: str, columns: list[str]) -> str:
    """The target when none is given: OT (the ETT files' convention), else the one numeric column."""
    if "OT" in columns:
        return "OT"
    if len(columns) == 1:
        return columns[0]
    raise DataError(
        f"{_where(fname, 1)}: which column is the target? The numeric columns are {columns}: name one "
        "with --target (config: target), and leave text or other unwanted columns out with --drop"
    )


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
) -> Dataset:
    """Load ``path`` with :func:`load_csv`, split it by ``protocol`` and scale it.

    ``mode`` "M": all numeric columns in and out; "S": only ``target``. ``target`` "auto": OT when the
    file has it (the ETT files), else its one numeric column, else an error asking for one.
    ``timestamp_column``, ``drop``, ``keep`` and ``fill`` go to :func:`load_csv`. ``protocol`` "auto" picks
    "ett-hour" for ETTh1/ETTh2, "ett-minute" for ETTm1/ETTm2 and "ratio-70-10-20" otherwise. The
    scaler is fit on the training rows of the model's channels only. Every split must hold at least
    one window of ``input_length + horizon`` rows, else :class:`DataError`.
    """
    L = _positive_int("input_length", input_length)
    H = _positive_int("horizon", horizon)
    if mode not in ("M", "S"):
        raise DataError(f"mode must be 'M' (multivariate) or 'S' (univariate target only), got {mode!r}")

    series = load_csv(path, timestamp_column=timestamp_column, drop=drop, fill=fill, keep=keep)
    fname = series.path.name
    if target == "auto":
        target = _auto_target(fname, series.columns)
    if target not in series.columns:
        raise DataError(
            f"{_where(fname, 1, target)}: unknown target column; the numeric columns are {series.columns} "
            "(choose one with --target, config: target)"
        )
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
