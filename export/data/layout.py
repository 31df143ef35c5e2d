"""Telling a long file (`unique_id, ds, y`: one row per series and time step) from a wide one (one
timestamp column, a column per channel), so that each reader can name the option that reads the other."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ID_NAMES", "PANEL_TIMESTAMP_NAMES", "TARGET_NAMES", "long_hint"]

# Column names (case-insensitive) detected as a long file's id, timestamp and target, first match wins.
ID_NAMES = ("unique_id", "item_id", "series_id", "series", "id")
PANEL_TIMESTAMP_NAMES = ("ds", "timestamp", "date", "datetime", "time")
TARGET_NAMES = ("y", "target", "value")


def _find(header: Sequence[str], names: Sequence[str]) -> int | None:
    lower = [h.lower() for h in header]
    return next((lower.index(n) for n in names if n in lower), None)


def long_hint(fname: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """For the wide reader: when the file looks long (an id-like column holding several ids beside a
    timestamp column whose values repeat: a wide file never repeats a timestamp), a message naming the
    option that reads it; else None."""
    id_pos, ts_pos = _find(header, ID_NAMES), _find(header, PANEL_TIMESTAMP_NAMES)
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
