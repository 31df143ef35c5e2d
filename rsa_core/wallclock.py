"""Naive wall-clock times of a zone read as UTC instants across daylight saving: the one rule by which
the exporter reads a training file, the batch scorer its tables and the client its frames (the /ui page's
script is tested against it, tests/app/ui/test_files_and_zones.py).

pandas' zone database reads a whole column at once; the service, whose image has no pandas, never imports
this module (it reads one naive `start` with zoneinfo, app/inference/windows.py `in_model_zone`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["localize"]


def localize(
    stamps: np.ndarray, zone: str, starts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Wall-clock times of `zone` (naive datetime64, in file order) -> (UTC instants, naive datetime64[ns];
    the rows whose wall-clock time the zone skips, the spring gap of daylight saving). `starts` (bool,
    a long file's series laid end to end) marks the rows that begin a series: the order rule below never
    looks back across them.

    The autumn repeat is read by order: a repeated wall-clock time is in summer time the first time and
    in standard time once the clock has gone back (a row not after the previous one, both in the repeat),
    so a 15-minute file reads 02:00 … 02:45, 02:00 … 02:45 as eight distinct quarters. Skipped times
    come back NaT in neither output: they are shifted forward, and flagged for the caller to refuse."""
    index = pd.DatetimeIndex(stamps.astype("datetime64[ns]"))
    summer = np.ones(len(index), bool)
    ambiguous = np.asarray(index.tz_localize(zone, ambiguous="NaT", nonexistent="shift_forward").isna())
    ambiguous &= ~np.isnat(stamps)
    wall = index.asi8
    first = np.zeros(len(index), bool) if starts is None else np.asarray(starts, bool)
    for i in np.flatnonzero(ambiguous):
        if i > 0 and not first[i] and ambiguous[i - 1] and (wall[i] <= wall[i - 1] or not summer[i - 1]):
            summer[i] = False
    skipped = np.asarray(index.tz_localize(zone, ambiguous=summer, nonexistent="NaT").isna()) & ~np.isnat(
        stamps
    )
    local = index.tz_localize(zone, ambiguous=summer, nonexistent="shift_forward")
    return local.tz_convert("UTC").tz_localize(None).to_numpy().astype("datetime64[ns]"), skipped
