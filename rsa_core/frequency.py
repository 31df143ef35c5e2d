"""Frequency inference: the step a series takes, read from its timestamps, from a pandas/TimeGPT alias, or
assumed from its first timestamp alone. The one rule by which the exporter's file reader
(export/data), the client's `forecast(df)` without a model and the service's `POST /v1/forecast` read a
frequency (issue 44, item 1; issue 47). Numpy and the standard library; a pandas `DatetimeIndex` is read
by its attributes, so the service (no pandas) imports this module too.

**From timestamps, the gaps decide** (`infer_step`, `infer_frequency`):
- every stamp on the first day of its month (or every one on the last day), at one time of day: whole
  calendar months, the most common number of months between consecutive stamps: `1MS` monthly, `3MS`
  quarterly, `12MS` yearly (`ME` for month ends; pandas' `MS`/`QS`/`YS`, `ME`/`QE`/`YE`);
- anything else: the most common positive gap between consecutive stamps, written in the largest unit
  that divides it (`1D` daily, `7D` weekly, `1h` hourly, `15min`; pandas' `D`, `W`, `h`).
- Zoned stamps are judged on their zone's wall clock where that gives whole days or months (a daily series
  is 23 or 25 hours apart across a daylight-saving change; a month start east of UTC is the previous
  month's last day in UTC), on their instants where the step is shorter (an hourly series steps elapsed
  hours across the change): the rule `rsa_core.steps.calendar_units` states for stepping.

**From an alias** (`parse_alias`, `frequency_name`): pandas' and TimeGPT's (`MS`, `QS-OCT`, `3MS`, `YE`,
`A`, `h`, `D`, `W-SUN`, `15min`), read by base and multiple, an anchor ignored.

**From a start alone** (`read_start`) a frequency cannot be told, only assumed: every monthly, quarterly
and yearly series (and many daily and weekly ones) starts at midnight on the first of a month. The reader
names what it assumes and what else the start fits, so that an answer can say so and tell the user to send
the frequency (`freq`) or the timestamps, as TimeGPT asks for `freq` when it cannot infer one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from rsa_core.calendar import calendar_step
from rsa_core.steps import calendar_units

__all__ = [
    "FREQUENCIES",
    "MEAN_MONTH_S",
    "Frequency",
    "StartReading",
    "frequency_name",
    "infer_frequency",
    "infer_step",
    "off_grid",
    "parse_alias",
    "read_start",
    "steps_ok",
]

# The frequencies that have a name, shortest step first, with pandas' alias of each (month-start
# anchors; `ME`, `QE`, `YE` for month ends).
FREQUENCIES: dict[str, str] = {
    "hourly": "h",
    "daily": "D",
    "weekly": "W",
    "monthly": "MS",
    "quarterly": "QS",
    "yearly": "YS",
}
_MONTH_END_ALIAS = {"monthly": "ME", "quarterly": "QE", "yearly": "YE"}
_NAMED_MONTHS = {1: "monthly", 3: "quarterly", 12: "yearly"}
_NAMED_SECONDS = {3_600: "hourly", 86_400: "daily", 604_800: "weekly"}

# A calendar month's mean length in seconds (the Gregorian year / 12): the nominal seconds of a step of
# calendar months, which steps by months, not seconds.
MEAN_MONTH_S = 365.2425 * 86_400 / 12

# Units of a fixed step, coarsest first, in ns; the alias always carries its multiplier ("1h").
_FIXED_UNITS = (
    ("D", 86_400 * 10**9),
    ("h", 3_600 * 10**9),
    ("min", 60 * 10**9),
    ("s", 10**9),
    ("ms", 10**6),
    ("us", 10**3),
    ("ns", 1),
)

# pandas' aliases by unit: steps under a day (case as pandas writes them: `ms` is milliseconds, `MS` month
# starts), then the calendar units in months (read in upper case: `m`, `q`, `y` too).
_SECONDS_OF_UNIT: dict[str, float] = {
    "min": 60.0,
    "T": 60.0,
    "s": 1.0,
    "S": 1.0,
    "ms": 1e-3,
    "L": 1e-3,
    "us": 1e-6,
    "U": 1e-6,
    "ns": 1e-9,
    "N": 1e-9,
}
_UPPER_SECONDS = {"H": 3_600.0, "D": 86_400.0, "W": 604_800.0}
_MONTHS_OF_UNIT: dict[str, int] = {
    **dict.fromkeys(("MS", "M", "ME", "BMS", "BM", "BME"), 1),
    **dict.fromkeys(("QS", "Q", "QE", "BQS", "BQ", "BQE"), 3),
    **dict.fromkeys(("YS", "Y", "YE", "A", "AS", "BYS", "BY", "BYE", "BA", "BAS"), 12),
}
_ALIAS = re.compile(r"(?P<n>[0-9]*)(?P<unit>[A-Za-z]+)")


@dataclass(frozen=True)
class Frequency:
    """A series' step: `alias` as the exporter's manifests write it (`1MS`, `3ME`, `12MS`, `1D`, `7D`,
    `1h`, `15min`) and its nominal seconds (whole months: `MEAN_MONTH_S` each)."""

    alias: str
    seconds: float

    @property
    def name(self) -> str | None:
        """hourly, daily, weekly, monthly, quarterly or yearly; None for any other step."""
        return frequency_name(self.alias)

    @property
    def freq(self) -> str:
        """pandas' alias of the step: h, D, W, MS, QS, YS (ME, QE, YE on month ends), else `alias`."""
        name = self.name
        if name is None:
            return self.alias
        months = calendar_step(self.alias)
        return _MONTH_END_ALIAS[name] if months is not None and months.month_end else FREQUENCIES[name]


@dataclass(frozen=True)
class StartReading:
    """What a series' first timestamp alone says of its frequency: the one it is assumed to have (None:
    no assumption is safe) and every named frequency it fits, the assumed one first."""

    assumed: str | None
    fits: tuple[str, ...]
    why: str  # "midnight on the 1st of a month", ...

    @property
    def ambiguous(self) -> bool:
        return len(self.fits) > 1


def parse_alias(freq: str) -> tuple[int, float] | None:
    """A pandas/TimeGPT alias as (months, seconds): calendar months (seconds 0) or a fixed step (months
    0); an anchor (`QS-OCT`, `W-SUN`) is ignored, a multiple (`3MS`, `15min`) applied. None: not an alias."""
    match = _ALIAS.fullmatch(freq.strip().split("-", 1)[0])
    if match is None:
        return None
    n = int(match["n"]) if match["n"] else 1
    unit = match["unit"]
    if n <= 0:
        return None
    if unit in _SECONDS_OF_UNIT:  # case-sensitive first: `ms` and `S` are never months
        return 0, n * _SECONDS_OF_UNIT[unit]
    upper = unit.upper()
    if upper in _MONTHS_OF_UNIT:
        return n * _MONTHS_OF_UNIT[upper], 0.0
    if upper in _UPPER_SECONDS:
        return 0, n * _UPPER_SECONDS[upper]
    return None


def frequency_name(freq: str) -> str | None:
    """The named frequency an alias steps by (`3MS`, `QS-OCT`, `Q` -> quarterly; `24h`, `D` -> daily;
    `60min` -> hourly); None for another step or no alias."""
    parsed = parse_alias(freq)
    if parsed is None:
        return None
    months, seconds = parsed
    if months:
        return _NAMED_MONTHS.get(months)
    return _NAMED_SECONDS.get(round(seconds)) if float(seconds).is_integer() else None


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
    return f"{months}M{'S' if month_start else 'E'}", months * MEAN_MONTH_S


def _most_common_step(stamps: np.ndarray) -> int:
    """The most common positive step between consecutive stamps, in ns (ties: the smaller)."""
    steps = np.diff(stamps).astype("timedelta64[ns]").astype("int64")  # gaps, in ns whatever the unit
    positive = steps[steps > 0]
    values, counts = np.unique(positive if len(positive) else np.abs(steps), return_counts=True)
    return int(values[np.argmax(counts)])


def infer_step(stamps: np.ndarray) -> tuple[str, float]:
    """The step of datetime64 `stamps` (at least two, one clock: naive wall-clock times or UTC
    instants) as (alias, nominal seconds): month-anchored stamps step whole months, all else the most
    common gap. `("0s", 0.0)` when every stamp is equal (the exporter reports those as duplicates)."""
    if len(stamps) < 2:
        raise ValueError(f"a step needs at least two timestamps, got {len(stamps)}")
    calendar = _calendar_frequency(stamps)
    if calendar is not None:
        return calendar
    step = _most_common_step(stamps)
    for alias, unit in _FIXED_UNITS:
        if step and step % unit == 0:
            return f"{step // unit}{alias}", step / 10**9
    return "0s", 0.0


def _clocks(times: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(wall-clock stamps, UTC instants or None) of `times`: datetime64 (naive: one clock, no instants),
    a pandas DatetimeIndex (zoned: its wall clock and its instants), or datetimes (all with an offset:
    both; else the times as written)."""
    if isinstance(times, np.ndarray) and np.issubdtype(times.dtype, np.datetime64):
        return times, None
    if hasattr(times, "dt"):  # a pandas Series of datetimes: its DatetimeIndex's attributes are `.dt`'s
        if times.dt.tz is None:
            return np.asarray(times.to_numpy(), "datetime64[ns]"), None
        wall = times.dt.tz_localize(None).to_numpy()
        return wall, times.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()
    if getattr(times, "tz", None) is not None:  # a zoned pandas DatetimeIndex
        wall = times.tz_localize(None).to_numpy()
        return wall, times.tz_convert("UTC").tz_localize(None).to_numpy()
    if hasattr(times, "to_numpy") and not isinstance(times, Sequence):  # a naive DatetimeIndex
        return np.asarray(times.to_numpy(), "datetime64[ns]"), None
    items: list[datetime] = list(times)
    wall = np.array([t.replace(tzinfo=None) for t in items], "datetime64[us]")
    if items and all(t.utcoffset() is not None for t in items):
        try:
            instants = [t.astimezone(UTC).replace(tzinfo=None) for t in items]
        except OverflowError:  # an offset past year 1 or 9999: the wall clock alone
            return wall, None
        return wall, np.array(instants, "datetime64[us]")
    return wall, None


def infer_frequency(times: Any) -> Frequency | None:
    """The frequency of one series' timestamps (in order; the most common gap decides, so a missing row
    or two does not change it): datetime64 stamps, a pandas DatetimeIndex or datetimes. Zoned times are
    judged on the wall clock where it steps whole days or months, else on the instants (module
    docstring). None for fewer than two timestamps."""
    wall, instants = _clocks(times)
    if len(wall) < 2:
        return None
    alias, seconds = infer_step(wall)
    if instants is not None and not calendar_units(seconds, calendar_step(alias)):
        alias, seconds = infer_step(instants)
    return Frequency(alias, seconds)


def steps_ok(times: Any, frequency: Frequency) -> np.ndarray:
    """Per consecutive pair of `times` (bool [n − 1]), whether the second is one step of `frequency` after
    the first: whole months on the anchor and the time of day of the one before, on the wall clock; whole
    days on the wall clock; shorter steps on the instants where known (the clocks `infer_frequency` judges
    by). Pairs only, so several series' times end to end are judged at once (their boundary pairs left to
    the caller)."""
    wall, instants = _clocks(times)
    if len(wall) < 2:
        return np.zeros(0, dtype=bool)
    months = calendar_step(frequency.alias)
    if months is not None:
        days = wall.astype("datetime64[D]")
        month = days.astype("datetime64[M]")
        first_day = month.astype("datetime64[D]")
        anchor = (month + 1).astype("datetime64[D]") - 1 if months.month_end else first_day
        time_of_day = wall - days
        ok: np.ndarray = (
            (np.diff(month.astype("int64")) == months.months)
            & (days[1:] == anchor[1:])
            & (time_of_day[1:] == time_of_day[:-1])
        )
        return ok
    clock = wall if instants is None or calendar_units(frequency.seconds, None) else instants
    gaps = np.diff(clock).astype("timedelta64[ns]").astype("int64")
    fixed: np.ndarray = gaps == round(frequency.seconds * 1e9)
    return fixed


def off_grid(times: Any, frequency: Frequency) -> int | None:
    """The index of the first timestamp that is not one step of `frequency` after the one before (a gap,
    a repeat, a step back: `steps_ok`), None when every one is."""
    bad = np.flatnonzero(~steps_ok(times, frequency))
    return int(bad[0]) + 1 if bad.size else None


def read_start(start: datetime) -> StartReading:
    """What `start` alone says: off midnight, hourly assumed (a daily series at a fixed hour, or one
    stepping minutes, starts there too); midnight on the 1st of a month, monthly assumed (quarterly,
    yearly, weekly and daily series start there too); midnight on another day, daily or weekly, neither
    assumed."""
    if (start.hour, start.minute, start.second, start.microsecond) != (0, 0, 0, 0):
        return StartReading("hourly", ("hourly", "daily"), f"a time of day ({start.time().isoformat()})")
    if start.day == 1:
        fits = ("monthly", "quarterly", "yearly", "weekly", "daily")
        return StartReading("monthly", fits, "midnight on the 1st of a month")
    return StartReading(None, ("daily", "weekly"), "midnight on a day other than the 1st of a month")
