"""The instants a number of steps after (or before) a timestamp: the one rule by which the service, the
exporter, the batch scorer and the client step a forecast's timestamps, a grid's missing rows and a short
window's start.

A fixed step (`frequency_seconds`) is added to the instant, so a step of an hour is an hour of elapsed
time across a daylight-saving change, whatever zone the result is shown in. A calendar step
(`rsa_core.calendar.CalendarStep`) moves the wall clock whole months, on the same anchor (the 1st or the
last day) and time of day, in `zone` (None: in UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, tzinfo

import numpy as np

from rsa_core.calendar import CalendarStep

__all__ = ["forecast_timestamps", "shifted", "steps_after"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


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
    `zone` (the model's), a fixed step is added to the instant and each time shown in the zone, with the
    offset of its own date (Python's aware arithmetic would add wall-clock time across a DST change)."""
    if months is not None:
        return [months.advance(start, n_values + k) for k in range(horizon)]
    step = timedelta(seconds=step_s)
    if zone is not None:
        instant = start.astimezone(UTC)
        return [(instant + step * (n_values + k)).astimezone(zone) for k in range(horizon)]
    return [start + step * (n_values + k) for k in range(horizon)]


def shifted(
    stamps: np.ndarray,
    offsets: Sequence[int] | np.ndarray,
    frequency_seconds: float,
    months: CalendarStep | None = None,
    zone: tzinfo | None = None,
) -> np.ndarray:
    """[S, K]: each of `stamps` (S UTC instants, datetime64 of any unit) moved `offsets[k]` steps (negative:
    back), in the unit of `stamps`. A fixed step of `frequency_seconds` is added to the instant; a
    calendar step moves whole months on the same anchor and time of day, on the wall clock of `zone`
    (None: UTC). OverflowError where a calendar step leaves years 1 to 9999."""
    stamps = np.asarray(stamps)
    unit, _ = np.datetime_data(stamps.dtype)
    k = np.asarray(offsets, np.int64)
    if months is None:
        per_second = int(np.array(1, "m8[s]").astype(f"m8[{unit}]").astype(np.int64))
        step = np.array(round(frequency_seconds * per_second)).astype(f"m8[{unit}]")
        return stamps[:, None] + step * k[None, :]
    if zone is None:
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
    micros = stamps.astype("datetime64[us]").astype(np.int64)
    out = np.empty((len(micros), len(k)), np.int64)
    for i, t in enumerate(micros.tolist()):
        local = (_EPOCH + timedelta(microseconds=t)).astimezone(zone)
        for j, n in enumerate(k.tolist()):
            out[i, j] = (months.advance(local, n) - _EPOCH) // _MICROSECOND
    return out.astype("datetime64[us]").astype(stamps.dtype)


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
