"""The instants a number of steps after (or before) a timestamp: the one rule by which the service, the
exporter, the batch scorer and the client step a forecast's timestamps, a grid's missing rows and a short
window's start.

The rule (`on_wall_clock` decides it, `step` applies it to one time, `shifted` to arrays):
- **No zone** (a model without `timezone`: UTC): a fixed step (`frequency_seconds`) is added to the
  instant; a calendar step (`rsa_core.calendar.CalendarStep`) moves whole months on the same anchor (the
  1st or the last day) and time of day, in UTC (`forecast_timestamps`: in the offset `start` carries).
- **A zone** (the model's): a step of whole calendar units moves the **wall clock** of the zone: calendar
  months, and fixed steps of whole days (daily 86,400 s, weekly 604,800 s: any positive multiple of a
  day), keep their time of day on the date that many days (months) on, so local midnight stays local
  midnight across a daylight-saving change (23 or 25 hours of elapsed time that day). A stepped wall-clock
  time is read as Python reads it with fold=0: in the autumn repeat its first (summer-time) reading; a
  time the spring change skips (a daily series at 02:30 on the day the clocks jump from 02:00 to 03:00) is
  read with the offset before the change, the same elapsed time on (03:30). Steps shorter than a day, or
  not a whole number of days (12 h, 36 h), are elapsed time on the instant: an hourly series steps real
  hours across a change, shown with each date's own offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo

import numpy as np

from rsa_core.calendar import CalendarStep

__all__ = [
    "DAY_S",
    "calendar_units",
    "forecast_timestamps",
    "on_wall_clock",
    "shifted",
    "step",
    "steps_after",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
DAY_S = 86_400  # a fixed step of a whole number of these is calendar days on a zoned model's wall clock


def calendar_units(frequency_seconds: float, months: CalendarStep | None) -> bool:
    """Whether a step is whole calendar units: months, or whole days (daily, weekly), which a zoned
    series steps on its wall clock (the trainer judges such a series' rows there, export/data/panels.py)."""
    return months is not None or (frequency_seconds >= DAY_S and frequency_seconds % DAY_S == 0)


def on_wall_clock(frequency_seconds: float, months: CalendarStep | None, zone: tzinfo | None) -> bool:
    """Whether a step moves the wall clock of `zone` (calendar months, or whole days, in a zone) rather
    than elapsed time on the instant (no zone, or less than a day, or not whole days): the rule above."""
    return zone is not None and calendar_units(frequency_seconds, months)


def step(
    when: datetime,
    n: int,
    frequency_seconds: float,
    months: CalendarStep | None = None,
    zone: tzinfo | None = None,
) -> datetime:
    """`when` moved `n` steps (negative: back) by the rule above, shown in `zone` (without one: in the
    offset `when` carries; a naive `when` stays naive). A `when` without tzinfo and a zone is that zone's
    wall-clock time. OverflowError where the result leaves years 1 to 9999."""
    if not on_wall_clock(frequency_seconds, months, zone):
        if months is not None:
            return months.advance(when, n)
        if zone is not None:
            return (when.astimezone(UTC) + timedelta(seconds=frequency_seconds) * n).astimezone(zone)
        return when + timedelta(seconds=frequency_seconds) * n
    assert zone is not None
    local = when.replace(tzinfo=zone) if when.tzinfo is None else when.astimezone(zone)
    if months is not None:
        wall = months.advance(local, n)
    else:
        wall = local + timedelta(days=round(frequency_seconds) // DAY_S * n)
    # fold=0: the autumn repeat's first reading, a skipped time with the offset before the change; shown
    # as the instant it names (a skipped 02:30+01:00 is 03:30+02:00)
    return wall.replace(fold=0).astimezone(UTC).astimezone(zone)


def forecast_timestamps(
    start: datetime,
    n_values: int,
    horizon: int,
    step_s: float,
    months: CalendarStep | None = None,
    zone: tzinfo | None = None,
) -> list[datetime]:
    """start + (n_values + k)·step for k in 0..horizon-1: the times right after the last value sent.
    With a calendar step, `step` is that many months on the same anchor (`start` must be on it). With a
    `zone` (the model's), each time is shown in the zone with the offset of its own date; months and whole
    days move its wall clock, shorter steps are added to the instant (`step`, the rule above)."""
    if months is None and not on_wall_clock(step_s, months, zone):
        delta = timedelta(seconds=step_s)  # elapsed time (aware arithmetic would add wall-clock time)
        if zone is not None:
            instant = start.astimezone(UTC)
            return [(instant + delta * (n_values + k)).astimezone(zone) for k in range(horizon)]
        return [start + delta * (n_values + k) for k in range(horizon)]
    return [step(start, n_values + k, step_s, months, zone) for k in range(horizon)]


def shifted(
    stamps: np.ndarray,
    offsets: Sequence[int] | np.ndarray,
    frequency_seconds: float,
    months: CalendarStep | None = None,
    zone: tzinfo | None = None,
) -> np.ndarray:
    """[S, K]: each of `stamps` (S UTC instants, datetime64 of any unit) moved `offsets[k]` steps (negative:
    back), in the unit of `stamps`, by the rule above: a fixed step of `frequency_seconds` is added to the
    instant, except whole days in a `zone`, which move its wall clock as calendar months do (None: UTC);
    `step` to the microsecond, once per distinct stamp. NaT stays NaT. OverflowError where a wall-clock
    step leaves years 1 to 9999."""
    stamps = np.asarray(stamps)
    unit, _ = np.datetime_data(stamps.dtype)
    k = np.asarray(offsets, np.int64)
    if months is None and not on_wall_clock(frequency_seconds, months, zone):
        per_second = int(np.array(1, "m8[s]").astype(f"m8[{unit}]").astype(np.int64))
        delta = np.array(round(frequency_seconds * per_second)).astype(f"m8[{unit}]")
        return stamps[:, None] + delta * k[None, :]
    if zone is None:
        assert months is not None  # no zone: only months step on a (UTC) wall clock
        # UTC: the month arithmetic of datetime64, vectorised (CalendarStep.advance, to the same digit).
        day = stamps.astype("datetime64[D]")
        month = day.astype("datetime64[M]")[:, None] + k[None, :] * months.months
        years = month.astype(np.int64) // 12 + 1970
        outside = years[(years < 1) | (years > 9999)]
        if len(outside):
            raise OverflowError(f"year {int(outside[0])} is out of range")
        first_day = month.astype("datetime64[D]")
        anchor = (month + 1).astype("datetime64[D]") - 1 if months.month_end else first_day
        return (anchor + (stamps - day)[:, None]).astype(stamps.dtype)
    # the wall clock of `zone`: `step` on each distinct stamp (a panel's series mostly end together)
    micros = stamps.astype("datetime64[us]")
    known = ~np.isnat(micros)
    distinct, inverse = np.unique(micros[known].astype(np.int64), return_inverse=True)
    moved = np.empty((len(distinct), len(k)), np.int64)
    for i, t in enumerate(distinct.tolist()):
        when = _EPOCH + timedelta(microseconds=t)
        for j, n in enumerate(k.tolist()):
            moved[i, j] = (step(when, n, frequency_seconds, months, zone) - _EPOCH) // _MICROSECOND
    out = np.full((len(micros), len(k)), np.datetime64("NaT", "us"), "datetime64[us]")
    out[known] = moved.astype("datetime64[us]")[inverse.reshape(-1)]
    return out.astype(stamps.dtype)


def steps_after(
    last: np.ndarray,
    steps: int,
    frequency_seconds: float,
    months: CalendarStep | None = None,
    zone: tzinfo | None = None,
) -> np.ndarray:
    """[S, steps]: the `steps` instants after each of `last` (a forecast's horizon, a future table's rows),
    in the unit of `last` (`shifted` by 1 .. steps)."""
    return shifted(last, np.arange(1, steps + 1), frequency_seconds, months, zone)
