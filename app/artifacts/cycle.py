"""Phase of a window in a model's seasonal cycle (docs/artifacts.md, `cycle`), in exact integer arithmetic.

phase = floor(T / step) mod period, T the UTC unix time of the window's first row. Times and steps are
integer microseconds (a datetime's resolution), so no float rounding can move T across a step boundary.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from fractions import Fraction

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


def cycle_phase(first_row: datetime, period: int, step_seconds: float) -> int:
    """floor(T_unix / step_seconds) mod period for the window whose first row is at `first_row`."""
    return _phase(unix_microseconds(first_row), step_microseconds(step_seconds), period)


def unix_seconds_phase(first_row_s: int, period: int, step_seconds: float) -> int:
    """The phase of a window whose first row is at `first_row_s`, whole Unix seconds (OIP v2's `start`)."""
    return _phase(first_row_s * _US_PER_S, step_microseconds(step_seconds), period)


def window_phase(start: datetime, n_values: int, input_length: int, period: int, step_seconds: float) -> int:
    """Phase of the last `input_length` of `n_values` rows starting at `start`: T = start + (n − L)·step."""
    step_us = step_microseconds(step_seconds)
    first_row_us = unix_microseconds(start) + (n_values - input_length) * step_us
    return _phase(first_row_us, step_us, period)


def _phase(t_us: int, step_us: int, period: int) -> int:
    return (t_us // step_us) % period  # floor division: right for times before 1970 too
