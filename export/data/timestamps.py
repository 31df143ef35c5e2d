"""A file's timestamps: the column's name, what the reader says of a date that does not read or reads two
ways (the formats themselves: rsa_core.written, the rule the client and the batch scorer share), the
series' step (fixed or calendar months), and the regular grid its rows must lie on, with the messages
that say where a row leaves it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from export.data.errors import _MISSING_TOKENS, _where
from export.data.layout import TIMESTAMP_NAMES as TIMESTAMP_NAMES
from rsa_core.calendar import calendar_step
from rsa_core.frequency import infer_step as _infer_frequency  # the one frequency rule (exported name)
from rsa_core.steps import shifted
from rsa_core.wallclock import localize as localize  # the one rule of naive local times (readers use it)
from rsa_core.written import WrittenDates, day_order, number_hint
from rsa_core.written import candidate_formats as candidate_formats  # the one rule of written dates
from rsa_core.written import has_offsets as has_offsets


def _timestamp_problem(cell: str, column: str, fmt: str | None, out_of_range: bool) -> str:
    if cell.lower() in _MISSING_TOKENS:
        return "missing timestamp"
    if out_of_range:
        return f"timestamp {cell!r} is outside the supported years 1678-2261"
    hint = "give the column's format with --date-format (config: date_format), e.g. --date-format '%d/%m/%Y'"
    hint = number_hint(cell, column) or hint
    if fmt is None:
        return f"not a timestamp: {cell!r}; {hint}"
    return f"not a timestamp (or not in the format {fmt!r} of the column's first value): {cell!r}; {hint}"


def _order_name(fmt: str) -> str:
    return "day-first" if day_order(fmt) else "month-first"


def _ambiguity_problem(cells: np.ndarray, parsed: WrittenDates) -> tuple[int, str]:
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
    ours_first = bool(day_order(parsed.fmt))
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


def refuses_grid(grid: _Grid, fill: str, rows: int) -> bool:
    """Whether a series of `rows` rows on `grid` is refused (both readers' rule): rows off the grid; steps
    missing without a fill; or more missing than there are rows, filled by interpolation or the last
    value (which would invent most of the series: the dates are more likely misread). `--fill zero` fills
    any number: an absent row is a count of zero (a business closed at night, fpp3's `bank_calls`)."""
    if grid.off.size:
        return True
    return bool(grid.missing) and (fill == "none" or (grid.missing > rows and fill != "zero"))


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
            "; where an absent row means zero (counts while closed), --fill zero inserts them as zeros"
        )
    return (
        f"{fname}: {grid.missing} step(s) of {grid.alias} have no row (the series steps {grid.alias}, its "
        f"most common step): {_gap_list(grid, stamps, lines)}. Every later row would be taken for an earlier "
        "step; add rows for them, or pass --fill linear, ffill or zero (config: fill) to insert them and "
        "fill their values"
    )
