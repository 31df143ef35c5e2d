"""Phase of a window in a model's seasonal cycle (docs/artifacts.md, `cycle`), in exact integer arithmetic.

phase = floor(T / step) mod period, T the UTC unix time of the window's first row. Times and steps are
integer microseconds (a datetime's resolution), so no float rounding can move T across a step boundary.
A model trained on local times (manifest `timezone`) places windows by local wall-clock time instead: T is
the first row's local time read as if it were UTC, so a shop that opens at 9 local is at one phase all
year. The graph advances one phase per row, so the rows of a window after a daylight-saving change are
one shift away from their wall-clock phase: as in training, where the same rule placed every window.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

_EPOCH = datetime(1970, 1, 1)
_US_PER_S = 1_000_000


def step_microseconds(step_seconds: float) -> int:
    """A step in whole microseconds: the float's exact value (Fraction) times 10^6, rounded once."""
    return round(Fraction(step_seconds) * _US_PER_S)


def unix_microseconds(t: datetime) -> int:
    """Microseconds since 1970-01-01T00:00:00 UTC. Naive datetimes are UTC; aware ones are converted.

    Works on timedeltas rather than `astimezone`, which overflows near year 1 and year 9999.
    """
    offset = t.utcoffset() or timedelta(0)
    delta = t.replace(tzinfo=None) - _EPOCH - offset
    return (delta.days * 86_400 + delta.seconds) * _US_PER_S + delta.microseconds


def local_microseconds(t_us: int, zone: str | None) -> int:
    """The instant `t_us` (Unix microseconds) as the wall-clock time of `zone`, read as if UTC (the
    instant itself for None: UTC models)."""
    if zone is None:
        return t_us
    when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=t_us)
    offset = when.astimezone(ZoneInfo(zone)).utcoffset() or timedelta(0)
    return t_us + (offset.days * 86_400 + offset.seconds) * _US_PER_S + offset.microseconds


def cycle_phase(first_row: datetime, period: int, step_seconds: float, zone: str | None = None) -> int:
    """floor(T_unix / step_seconds) mod period for the window whose first row is at `first_row`."""
    return _phase(
        local_microseconds(unix_microseconds(first_row), zone), step_microseconds(step_seconds), period
    )


def unix_seconds_phase(first_row_s: int, period: int, step_seconds: float, zone: str | None = None) -> int:
    """The phase of a window whose first row is at `first_row_s`, whole Unix seconds (OIP v2's `start`)."""
    return _phase(local_microseconds(first_row_s * _US_PER_S, zone), step_microseconds(step_seconds), period)


def window_phase(
    start: datetime,
    n_values: int,
    input_length: int,
    period: int,
    step_seconds: float,
    zone: str | None = None,
) -> int:
    """Phase of the last `input_length` of `n_values` rows starting at `start`: T = start + (n − L)·step
    (an instant; for a model with a `zone`, its local wall-clock time)."""
    step_us = step_microseconds(step_seconds)
    first_row_us = unix_microseconds(start) + (n_values - input_length) * step_us
    return _phase(local_microseconds(first_row_us, zone), step_us, period)


def _phase(t_us: int, step_us: int, period: int) -> int:
    return (t_us // step_us) % period  # floor division: right for times before 1970 too
