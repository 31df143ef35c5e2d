"""Long files: one row per series and time step (`unique_id, ds, y`), CSV or Parquet (`load_panel`).

Each series keeps its own calendar and length: the panel shares one step (its frequency), every series
lies on a grid of that step from its own first timestamp. Problems name the series id and the row (the
CSV line, header = line 1; the Parquet row, first = 1). Unsorted rows are refused unless
`ReadOptions.sort` asks for them sorted by (id, timestamp). Missing values and steps follow
`ReadOptions.fill`, series by series.

A file without an id, timestamp or target column is told what its cells suggest: a file of one series
the option that reads it as wide, else the options naming the columns (export/data/layout.py, which
tells the wide reader the reverse).
"""

from __future__ import annotations

import hashlib
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from export.data.errors import _MISSING_TOKENS, DataError, _raise
from export.data.layout import (
    ID_NAMES,
    TARGET_NAMES,
    TIMESTAMP_NAMES,
    column_hint,
    joined_ids,
    one_series,
    row_number_hint,
    row_numbers,
    text_columns,
)
from export.data.options import ReadOptions
from export.data.reading import _fill, _number_problem, _step_clock
from export.data.timestamps import (
    _grid,
    _grid_problem,
    _infer_frequency,
    _stamp_text,
    _timestamp_problem,
    has_offsets,
    localize,
    refuses_grid,
)
from rsa_core.written import read_written

__all__ = ["Panel", "PanelSeries", "load_panel", "one_series_file"]

# Problems reported per file before the rest are summarised (a 100,000-series file can have many).
_SHOWN = 5


@dataclass(frozen=True, eq=False)
class PanelSeries:
    """One series of a long file: its id, timestamps [n] (datetime64[ns], on the panel's grid), values
    [n] (float64, finite) and the file row of its first value."""

    id: str
    timestamps: np.ndarray
    values: np.ndarray
    first_row: int

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        start = _stamp_text(self.timestamps[0]) if len(self.timestamps) else None
        return f"PanelSeries(id={self.id!r}, length={len(self)}, start={start})"


@dataclass(frozen=True, eq=False)
class Panel:
    """A validated long file: its series in file order, one frequency (as `Series.frequency`)."""

    name: str
    path: Path
    sha256: str
    series: list[PanelSeries]
    frequency: str
    frequency_seconds: float
    id_column: str
    timestamp_column: str
    target_column: str
    notes: tuple[str, ...] = ()
    timezone: str | None = None  # the zone its local times were read in (--timezone); None: UTC

    def __len__(self) -> int:
        return len(self.series)

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.series]

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.series], dtype=np.int64)

    def __repr__(self) -> str:
        return f"Panel(name={self.name!r}, series={len(self)}, frequency={self.frequency!r})"


def _pick(
    header: Sequence[str], given: str | None, names: Sequence[str], what: str, fname: str
) -> str | None:
    if given is not None:
        if given not in header:
            raise DataError(
                f"{fname} line 1, column {given!r}: no such {what} column; the columns are {list(header)}"
            )
        return given
    lower = {h.lower(): h for h in header}
    return next((lower[n] for n in names if n in lower), None)


_SAMPLE_ROWS = 200  # the rows `one_series_file` reads (`layout._kinds` reads as many)


def key_columns(header: Sequence[str], options: ReadOptions) -> tuple[str, str]:
    """The id and timestamp columns of a file's `header` as the readers pick them (given, or the first
    among ID_NAMES and TIMESTAMP_NAMES; a wide file has no id: `unique_id`), so that a forecast is written
    back under the file's own names, as the client and the batch command write theirs."""
    wide = options.layout == "wide"
    id_col = None if wide else _pick(header, options.id_column, ID_NAMES, "id", "")
    ts_col = _pick(header, options.timestamp_column, TIMESTAMP_NAMES, "timestamp", "")
    return id_col or "unique_id", ts_col or ("ds" if not wide or not header else header[0])


def one_series_file(path: str | Path, options: ReadOptions) -> bool:
    """Whether a file the long reader would refuse for want of an id column holds one series
    (`layout.one_series`: a timestamp column and a value column, by their names or first cells), read
    from its first rows; False where an id column is named (--id-column) or the file does not read (its
    reader says why)."""
    path = Path(path)
    if options.id_column is not None:
        return False
    try:
        if path.suffix.lower() in (".parquet", ".pq"):  # its first rows, never the whole file
            import pyarrow.parquet as pq

            file = pq.ParquetFile(path)
            first = next(file.iter_batches(batch_size=_SAMPLE_ROWS), None)
            if first is None:
                return False
            index = (file.schema_arrow.pandas_metadata or {}).get("index_columns", [])  # pandas' own index
            frame = first.to_pandas().drop(columns=[c for c in index if isinstance(c, str)], errors="ignore")
        else:
            frame = pd.read_csv(
                path, dtype=str, keep_default_na=False, nrows=_SAMPLE_ROWS, encoding="utf-8-sig"
            )
    except Exception:  # the reader proper refuses it, saying why
        return False
    frame.columns = [str(c).strip() for c in frame.columns]
    frame = frame.drop(columns=[c for c in options.drop if c in frame.columns])
    header = list(frame.columns)
    if any(h.lower() in ID_NAMES for h in header):
        return False
    lower = {h.lower(): h for h in header}
    ts_col = options.timestamp_column or next((lower[n] for n in TIMESTAMP_NAMES if n in lower), None)
    if any(c is not None and c not in header for c in (ts_col, options.target_column)):
        return False
    return one_series(frame, ts_col, options.target_column)


def _read_table(path: Path) -> tuple[bytes, pd.DataFrame, int]:
    """The file's bytes and its cells as text (CSV) or as stored (Parquet), and the row number of the
    first data row (CSV: line 2; Parquet: row 1)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(path)
        except ImportError:
            raise DataError(f"{path.name}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        except Exception as exc:
            raise DataError(f"{path.name}: not a readable Parquet file: {exc}") from None
        return raw, frame, 1
    try:
        frame = pd.read_csv(
            path, dtype=str, keep_default_na=False, skip_blank_lines=False, encoding="utf-8-sig"
        )
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{path.name}: not a readable CSV file: {exc}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return raw, frame, 2


def load_panel(
    path: str | Path,
    options: ReadOptions | None = None,
    began: Mapping[str, np.datetime64] | None = None,
    **overrides: object,
) -> Panel:
    """Read and validate a long file (CSV, or Parquet by its suffix) into its series.

    A series' missing values before its first one are before it began: left out (`_before_first_value`).
    `began` (a covariate column's reading): each series' first timestamp, read from the target; the rows
    before it are left out whatever they hold, and the column's own gaps after it are missing values.

    The id, timestamp and target columns are `options.id_column`, `timestamp_column` and
    `target_column` when given, else the first header names among `ID_NAMES`, `TIMESTAMP_NAMES`
    and `TARGET_NAMES` (case-insensitive); other columns must be named in `options.drop`. A file
    without one of them is refused with what its cells suggest (`column_hint`). Every problem raises one
    `DataError` naming the series and the row."""
    options = ReadOptions.of(options, **overrides)
    path = Path(path)
    fname = path.name
    raw, frame, first = _read_table(path)
    id_col, ts_col, y_col = _columns(frame, options, fname)
    if len(frame) == 0:
        raise DataError(f"{fname}: the file has no data row")

    unit = "line" if first == 2 else "row"
    rows = np.arange(len(frame)) + first  # the file row of each frame row
    ids = frame[id_col].astype(str).str.strip().to_numpy(dtype=object)
    problems: list[str] = []

    def row_of(i: int) -> str:
        return f"{fname} {unit} {rows[i]}"

    def where(i: int) -> str:
        return f"{row_of(i)} (series {ids[i]!r})"

    stamps, wall, zoned, values, before, notes = _cells(
        frame, ids, (id_col, ts_col, y_col), options, row_of, began
    )
    if before.any():  # rows before a series began: not missing values, not filled (_before_first_value)
        keep = ~before
        if began is None:
            late = len(pd.unique(ids[before]))
            notes.append(
                f"{late} series begin after the file's first timestamp: their {int(before.sum())} empty "
                "row(s) before their first value are left out (before the series began)"
            )
        ids, stamps, values, rows = ids[keep], stamps[keep], values[keep], rows[keep]
        wall = None if wall is None else wall[keep]

    order = np.lexsort((stamps.astype(np.int64), pd.factorize(ids)[0]))  # by id (first seen), then time
    if not np.array_equal(order, np.arange(len(order))):
        if not options.sort:
            _raise([_order_problem(ids, stamps, where)])
        notes.append("rows sorted by series and timestamp (--sort)")
        ids, stamps, values, rows = ids[order], stamps[order], values[order], rows[order]
        wall = None if wall is None else wall[order]

    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    if pd.Series(ids[starts]).duplicated().any():  # only when sorted by time, then id: cannot happen
        raise DataError(f"{fname}: a series' rows are split into several runs; pass --sort")
    dup = np.flatnonzero((ids[1:] == ids[:-1]) & (stamps[1:] == stamps[:-1]))
    if dup.size:
        i = int(dup[0]) + 1
        _raise([f"{where(i)}: duplicate timestamp {_stamp_text(stamps[i])} (same as {unit} {rows[i - 1]})"])

    # One frequency for the panel: the most common of its series' own steps.
    def clock(a: int | np.integer, b: int | np.integer) -> tuple[np.ndarray, bool]:  # starts' and ends' items
        return _step_clock(None if wall is None else wall[a:b], stamps[a:b])

    freqs = [_infer_frequency(clock(a, b)[0]) for a, b in zip(starts, ends, strict=True) if b - a >= 2]
    if not freqs:
        raise DataError(f"{fname}: every series has one row; at least one needs 2 (to infer the time step)")
    aliases = pd.Series([f[0] for f in freqs])
    alias = str(aliases.mode().iloc[0])
    seconds = next(s for a, s in freqs if a == alias)

    series, inserted, filled = _series_of(
        (ids, stamps, values, rows), starts, ends, clock, alias, options, f"{fname} {unit}", problems
    )
    if problems:
        more = len(problems) - _SHOWN
        _raise(problems[:_SHOWN] + ([f"{more} more series with problems"] if more > 0 else []))
    if inserted:
        notes.append(f"{inserted} missing step(s) of {alias} inserted and filled ({options.fill})")
    if filled:
        notes.append(f"{filled} missing value(s) filled ({options.fill})")
    return Panel(
        name=path.stem,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        series=series,
        frequency=alias,
        frequency_seconds=float(seconds),
        id_column=id_col,
        timestamp_column=ts_col,
        target_column=y_col,
        notes=tuple(notes),
        timezone=None if zoned else options.timezone,
    )


def _columns(frame: pd.DataFrame, options: ReadOptions, fname: str) -> tuple[str, str, str]:
    """The id, timestamp and target columns (given, or the first header names among ID_NAMES,
    TIMESTAMP_NAMES and TARGET_NAMES); a file with none, or with columns neither of them nor
    dropped, is refused with what its cells suggest (`column_hint`: a file of one series with the
    option that reads it as wide, else the options naming the columns)."""
    header = [str(c) for c in frame.columns]
    kept = frame.drop(columns=[c for c in options.drop if c in header])  # what a hint reads
    id_col = _pick(header, options.id_column, ID_NAMES, "id", fname)
    ts_col = _pick(header, options.timestamp_column, TIMESTAMP_NAMES, "timestamp", fname)
    y_col = _pick(header, options.target_column, TARGET_NAMES, "target", fname)
    if id_col is None:
        raise DataError(
            f"{fname} line 1: no series id column (none is named {'/'.join(ID_NAMES)}; name it with "
            f"--id-column); the columns are {header}" + column_hint(kept, id_col, ts_col, y_col)
        )
    missing = [w for w, c in (("timestamp", ts_col), ("target", y_col)) if c is None]
    if missing:
        raise DataError(
            f"{fname} line 1: no {' or '.join(missing)} column (name it with "
            + " and ".join(f"--{w if w == 'target' else 'timestamp'}-column" for w in missing)
            + f"); the columns are {header}"
            + column_hint(kept, id_col, ts_col, y_col)
        )
    assert ts_col is not None and y_col is not None
    extra = [c for c in header if c not in (id_col, ts_col, y_col) and c not in options.drop]
    if extra and row_numbers(frame, extra):
        raise DataError(f"{fname} line 1: " + row_number_hint(row_numbers(frame, extra)))
    if extra:
        texts = text_columns(frame, extra)
        # A text column with one value per series (fpp3's us_employment: `Title` beside `Series_ID`) is
        # its label, which tells no series apart that the id does not.
        labels = [c for c in texts if frame.groupby(id_col, sort=False)[c].nunique(dropna=False).max() <= 1]
        keys = [c for c in texts if c not in labels]
        # Joining is offered where the id repeats a timestamp and the join does not (fpp2's prisonLF), never
        # where the id alone tells the series apart (fpp3's boston_marathon: `Champion` differs every year).
        if not frame.duplicated([id_col, ts_col]).any() or frame.duplicated([id_col, *keys, ts_col]).any():
            keys = []
        raise DataError(
            f"{fname} line 1: columns {extra} are neither the id ({id_col!r}), the timestamp ({ts_col!r}) "
            f"nor the target ({y_col!r}); read them as covariates (--future, --past or --static) or leave "
            f"them out with --drop {shlex.quote(','.join(extra))}"
            + (
                f"; {', '.join(map(repr, labels))} hold{'s' if len(labels) == 1 else ''} one value per "
                f"series of {id_col!r} (a label): leaving {'it' if len(labels) == 1 else 'them'} out "
                "loses nothing"
                if labels
                else ""
            )
            + (f"; or, {joined_ids([id_col, *keys])}" if keys else "")
        )
    return id_col, ts_col, y_col


def _cells(
    frame: pd.DataFrame,
    ids: np.ndarray,
    columns: tuple[str, str, str],
    options: ReadOptions,
    row_of: Callable[[int], str],
    began: Mapping[str, np.datetime64] | None = None,
) -> tuple[np.ndarray, np.ndarray | None, bool, np.ndarray, np.ndarray, list[str]]:
    """Each row's instant (UTC; with `options.timezone`, naive local times read in that zone, series by
    series) and value: (stamps, the wall-clock times as written or None, whether the file held instants,
    values, the rows before their series began (`_before_first_value`, or before `began`), notes). Every
    bad cell is a
    DataError naming the row (`row_of`: the file, the line or row) and the column."""
    id_col, ts_col, y_col = columns

    def where(i: int) -> str:
        return f"{row_of(i)} (series {ids[i]!r})"

    ts_raw = frame[ts_col]
    zoned = False  # instants already: typed with a zone, or written with UTC offsets
    wall: np.ndarray | None = None  # with --timezone: the naive wall-clock times, as written
    if pd.api.types.is_datetime64_any_dtype(ts_raw):  # Parquet keeps timestamps typed
        zoned = getattr(ts_raw.dt, "tz", None) is not None
        ts = ts_raw.dt.tz_convert("UTC").dt.tz_localize(None) if zoned else ts_raw
        stamps = ts.to_numpy().astype("datetime64[ns]")
        ts_cells = ts_raw.astype(str).to_numpy(dtype=object)
        fmt = None
    else:
        ts_cells = ts_raw.astype(str).str.strip().to_numpy(dtype=object)
        parsed = read_written(ts_cells, options.date_format, options.dayfirst)
        stamps, fmt = parsed.stamps, parsed.fmt
        zoned = has_offsets(ts_cells)
    problems: list[str] = []
    notes: list[str] = []
    empty_id = ids == ""
    if empty_id.any():
        i = int(np.argmax(empty_id))
        problems.append(f"{row_of(i)}, column {id_col!r}: missing series id")
    if zoned:
        notes.append("timestamps with a UTC offset or zone were converted to UTC")
    elif options.timezone is not None:
        # Each series' local times in its own file order (the autumn repeat is read by order, so never
        # across two series), laid end to end, then put back in file order.
        by_series = np.argsort(pd.factorize(ids)[0], kind="stable")
        grouped = ids[by_series]
        starts = np.r_[True, grouped[1:] != grouped[:-1]]
        local, skipped_sorted = localize(stamps[by_series], options.timezone, starts)
        wall = stamps.astype("datetime64[ns]")
        stamps, skipped = np.empty_like(local), np.empty(len(local), bool)
        stamps[by_series], skipped[by_series] = local, skipped_sorted
        notes.append(
            f"local times of {options.timezone} were read as UTC instants (daylight saving included)"
        )
        if skipped.any():
            i = int(np.argmax(skipped))
            more = int(skipped.sum()) - 1
            problems.append(
                f"{where(i)}, column {ts_col!r}: {ts_cells[i]} does not exist in {options.timezone}: the "
                "clocks skip it (daylight saving)" + (f" (and {more} more rows)" if more else "")
            )
    bad = np.isnat(stamps)
    if bad.any():
        i = int(np.argmax(bad))
        more = int(bad.sum()) - 1
        problems.append(
            f"{where(i)}, column {ts_col!r}: {_timestamp_problem(str(ts_cells[i]), ts_col, fmt, False)}"
            + (f" (and {more} more rows)" if more else "")
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = pd.to_numeric(frame[y_col], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    nonfinite = ~np.isfinite(values)
    missing = np.zeros_like(nonfinite)
    if nonfinite.any():
        cells = frame[y_col].astype(str).str.strip().str.lower().to_numpy(dtype=object)
        missing = nonfinite & np.isin(cells, list(_MISSING_TOKENS))
    before = (
        _before_first_value(ids, stamps, values, missing)
        if began is None
        else stamps < np.array([began.get(k, np.datetime64("NaT")) for k in ids], dtype="datetime64[ns]")
    )
    fillable = missing & ~before if options.fill != "none" else np.zeros_like(missing)
    bad = nonfinite & ~fillable & ~before
    if bad.any():
        i = int(np.argmax(bad))
        more = int(bad.sum()) - 1
        share = float(np.isfinite(values).mean())
        why = _number_problem(str(frame[y_col].iloc[i]).strip(), y_col, share)
        if missing[i] and _after_last_value(ids, stamps, values, i):
            why = (
                "missing value after the series' last one (it ends early, as a discontinued series "
                "does): leave its empty rows out to forecast it from its own end, or fill them with "
                "--fill ffill or --fill linear (config: fill), which carry its last value on"
            )
        problems.append(f"{where(i)}, column {y_col!r}: {why}" + (f" (and {more} more rows)" if more else ""))
    _raise(problems)
    return stamps, wall, zoned, values, before, notes


def _after_last_value(ids: np.ndarray, stamps: np.ndarray, values: np.ndarray, i: int) -> bool:
    """Whether row `i` lies after the last value of its series (a value before it, none after)."""
    same = ids == ids[i]
    known = np.isfinite(values)
    return bool(
        (known & same & (stamps < stamps[i])).any() and not (known & same & (stamps > stamps[i])).any()
    )


def _before_first_value(
    ids: np.ndarray, stamps: np.ndarray, values: np.ndarray, missing: np.ndarray
) -> np.ndarray:
    """The rows whose value is missing (an empty cell, NA...) at a timestamp before their series' first
    value: before the series began, as the service reads a global model's leading nulls
    (app/inference/windows.py `not_started`). A panel turned long from a wide table holds such rows for
    every series that begins after the first. A series with no value at all has none (it is refused)."""
    if not missing.any():
        return np.zeros(len(ids), dtype=bool)
    known = np.isfinite(values)
    first = (
        pd.Series(np.where(known, stamps, np.datetime64("NaT")).astype("datetime64[ns]"))
        .groupby(ids)
        .transform("min")
    )
    began = first.to_numpy(dtype="datetime64[ns]")
    return missing & ~np.isnat(began) & (stamps < began)


def _series_of(
    table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    starts: np.ndarray,
    ends: np.ndarray,
    clock: Callable[[int, int], tuple[np.ndarray, bool]],
    alias: str,
    options: ReadOptions,
    at: str,
    problems: list[str],
) -> tuple[list[PanelSeries], int, int]:
    """Each series (rows `starts[k]:ends[k]` of the sorted `table`: ids, stamps, values, file rows) on the
    panel's grid of step `alias`, missing steps inserted and values filled as `options.fill` says; a
    series of another step, off the grid or with nothing to fill from is a problem (appended to
    `problems`, `at` the file and its row unit). Returns the series, the steps inserted, the values
    filled."""
    ids, stamps, values, rows = table
    fname, unit = at.rsplit(" ", 1)
    series: list[PanelSeries] = []
    inserted = filled = 0
    for a, b in zip(starts, ends, strict=True):
        sid = str(ids[a])
        s_stamps, s_values, s_rows = stamps[a:b], values[a:b].copy(), [int(r) for r in rows[a:b]]
        label = f"{fname} (series {sid!r})"
        if b - a >= 2:
            judged, on_wall = clock(a, b)  # wall-clock times (zoned days and months) or instants
            grid = _grid(judged)
            if grid.alias != alias:
                problems.append(
                    f"{fname} {unit} {s_rows[0]} (series {sid!r}): the series steps {grid.alias}, the panel "
                    f"{alias} (its most common step); resample it or leave it out"
                )
                continue
            if refuses_grid(grid, options.fill, len(s_stamps)):
                problems.append(
                    _grid_problem(label, grid, judged, s_rows, options.fill).replace(" lines ", f" {unit}s ")
                )
                continue
            if grid.missing:
                assert grid.position is not None
                full = np.full(int(grid.position[-1]) + 1, np.nan)
                full[grid.position] = s_values
                inserted += grid.missing
                s_values, s_stamps = full, grid.stamps(judged[0])
                if on_wall and options.timezone is not None:
                    s_stamps = localize(s_stamps, options.timezone)[0]  # the wall-clock grid as instants
        if np.isnan(s_values).any():
            if np.isnan(s_values).all():
                problems.append(
                    f"{fname} {unit} {s_rows[0]} (series {sid!r}): no value at all: nothing to fill from"
                )
                continue
            filled += int(np.isnan(s_values).sum())
            s_values = _fill(s_values, options.fill)
        series.append(PanelSeries(sid, s_stamps.astype("datetime64[ns]"), s_values, s_rows[0]))
    return series, inserted, filled


def _order_problem(ids: np.ndarray, stamps: np.ndarray, where: object) -> str:
    """The first row out of order: a series' timestamp not after its previous row's, or a series whose
    rows do not follow each other."""
    assert callable(where)
    seen: dict[str, int] = {}
    last: dict[str, np.datetime64] = {}
    for i, (sid, t) in enumerate(zip(ids, stamps, strict=True)):
        if sid in last and t <= last[sid]:
            return (
                f"{where(i)}: timestamp {_stamp_text(t)} is not after the series' previous "
                f"{_stamp_text(last[sid])}; pass --sort (config: sort: true) to sort the rows by series "
                "and time"
            )
        if sid in seen and seen[sid] != i - 1 and ids[i - 1] != sid:
            return (
                f"{where(i)}: the series' rows do not follow each other (it appeared before, up to the row "
                "before another series); pass --sort (config: sort: true) to sort the rows by series and time"
            )
        seen[sid] = i
        last[sid] = t
    return "rows out of order; pass --sort"
