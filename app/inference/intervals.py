"""Prediction intervals from the artifact's calibrated widths: protocol-neutral numpy, no inference.

A version's manifest may hold split-conformal widths per level, horizon step and channel
(`IntervalsSpec`, docs/intervals.md); the interval at level a is forecast ± width[a], in float32 as the
forecast is, or forecast ± width[a]·s when the widths scale with each series' own spread s (`scale`
"window": s per series and channel from the window the model read, `WindowScaleSpec.scale`).
Levels are percentages (TimeGPT's `level`); quantiles are probabilities mapped onto them
the TimeGPT way: q < 0.5 is the lower bound of level 100·(1 − 2q), q > 0.5 the upper bound of level
100·(2q − 1), q = 0.5 the forecast itself. Only calibrated levels are served (no interpolation: the
coverage guarantee holds at the levels calibrated, and more levels cost nothing to calibrate at export).

Every protocol (`/v1`'s `level`/`quantiles`, KServe time series' `options.quantiles`, OIP v2's interval
outputs) asks here, so one place decides what is served and how it is refused; `field` names the request
field in the errors (`level`, `options.quantiles[1]`, `outputs[0]`), which are `InvalidInput` subclasses
with their own codes: `no_calibrated_intervals` for a version exported without intervals,
`interval_not_calibrated` for a level or quantile it has no widths for (the message lists those it has).

Channels the manifest marks non-negative (`intervals.nonnegative`: sales, counts, spend, declared or
detected at training) have their bounds clipped at 0 (`clip_nonnegative`): forecast − width may reach
below zero where the series cannot. The point forecast (and the quantile 0.5, which is the forecast) is
the model's output, the same on every protocol, and is never changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.artifacts.manifest import IntervalsSpec
from app.core.errors import InvalidInput

__all__ = [
    "MAX_REQUESTED",
    "IntervalNotCalibrated",
    "NoCalibratedIntervals",
    "available_quantiles",
    "check_levels",
    "check_quantiles",
    "clip_nonnegative",
    "level_bounds",
    "level_widths",
    "quantile_bounds",
    "require_intervals",
]

# Most levels or quantiles one request may ask for: more than any artifact calibrates, and a bound on
# the work (and the answer) a request can cause.
MAX_REQUESTED = 32


class NoCalibratedIntervals(InvalidInput):
    """Intervals asked of a version exported without them: no request can make them appear."""

    code = "no_calibrated_intervals"


class IntervalNotCalibrated(InvalidInput):
    """A level or quantile the version has no widths for; the message lists the ones it has."""

    code = "interval_not_calibrated"


def require_intervals(intervals: IntervalsSpec | None, field: str) -> IntervalsSpec:
    """The version's intervals, or NoCalibratedIntervals naming `field`."""
    if intervals is None:
        raise NoCalibratedIntervals(
            f"{field}: this model version has no prediction intervals (it was exported without calibration); "
            f"ask for the point forecast only (leave {field} out), or re-export it with "
            "`python -m export.conformal <version folder>`",
            field=field,
        )
    return intervals


def _check_values(values: Sequence[float], field: str, low: float, high: float) -> None:
    if not values:
        raise InvalidInput(
            f"{field} is empty; ask for at least one value or leave it out", field=field, limit=1
        )
    if len(values) > MAX_REQUESTED:
        raise InvalidInput(
            f"{field} has {len(values)} items; at most {MAX_REQUESTED} are accepted",
            field=field,
            limit=MAX_REQUESTED,
        )
    for i, value in enumerate(values):
        if not (math.isfinite(value) and low < value < high):
            raise InvalidInput(
                f"{field}[{i}] = {value} is out of range: it must lie strictly between {low:g} and {high:g}",
                field=f"{field}[{i}]",
                limit=[low, high],
            )


def _check_distinct(values: Sequence[float], resolved: Sequence[object], field: str) -> None:
    """No two entries that resolve to the same bound: `_index` takes values within float noise of a
    calibrated level, so 0.1 and 0.1 + 1e-12 are one quantile, and two of them would leave one answer
    under one name (the bounds are keyed by what they resolve to), the other silently gone."""
    first: dict[object, int] = {}
    for i, key in enumerate(resolved):
        if key in first:
            j = first[key]
            raise InvalidInput(
                f"{field}[{i}] = {values[i]} repeats {field}[{j}] = {values[j]} (the same calibrated bound)",
                field=f"{field}[{i}]",
            )
        first[key] = i


def _index(intervals: IntervalsSpec, level: float) -> int | None:
    """The calibrated level's position; float noise of the quantile mapping (100·(1 − 2·0.05)) ignored."""
    for k, calibrated in enumerate(intervals.levels):
        if math.isclose(level, calibrated, rel_tol=1e-9, abs_tol=1e-9):
            return k
    return None


def _not_calibrated(what: str, field: str, available: list[float]) -> IntervalNotCalibrated:
    return IntervalNotCalibrated(
        f"{field}: {what} is not calibrated for this model version; available: "
        + ", ".join(f"{v:g}" for v in available),
        field=field,
        limit=available,
    )


def _check_level(intervals: IntervalsSpec, level: float, field: str) -> int:
    """The calibrated position of one `level` (percent), or IntervalNotCalibrated naming `field`."""
    k = _index(intervals, level)
    if k is None:
        raise _not_calibrated(f"level {level:g}", field, list(intervals.levels))
    return k


def check_levels(intervals: IntervalsSpec | None, levels: Sequence[float], field: str = "level") -> list[int]:
    """The calibrated positions of `levels` (percent), or InvalidInput naming `field[i]`."""
    spec = require_intervals(intervals, field)
    _check_values(levels, field, 0.0, 100.0)
    positions = [_check_level(spec, level, f"{field}[{i}]") for i, level in enumerate(levels)]
    _check_distinct(levels, positions, field)
    return positions


def available_quantiles(intervals: IntervalsSpec) -> list[float]:
    """Every probability the artifact can answer, ascending: both bounds of each level, and 0.5."""
    lower = [(100 - level) / 200 for level in intervals.levels]
    return sorted([*lower, 0.5, *(1 - q for q in lower)])


def check_quantiles(
    intervals: IntervalsSpec | None, probabilities: Sequence[float], field: str = "quantiles"
) -> list[tuple[int, int]]:
    """Per probability, (calibrated level position, side): side -1 lower bound, +1 upper, 0 the forecast
    (position -1 then); or InvalidInput naming `field[i]`."""
    spec = require_intervals(intervals, field)
    _check_values(probabilities, field, 0.0, 1.0)
    out = []
    for i, q in enumerate(probabilities):
        if q == 0.5:
            out.append((-1, 0))
            continue
        k = _index(spec, 100 * abs(1 - 2 * q))
        if k is None:
            available = [round(v, 6) for v in available_quantiles(spec)]
            raise _not_calibrated(f"quantile {q:g}", f"{field}[{i}]", available)
        out.append((k, -1 if q < 0.5 else 1))
    _check_distinct(probabilities, out, field)
    return out


def _widths(intervals: IntervalsSpec, forecast: np.ndarray, window: np.ndarray | None) -> np.ndarray:
    """The widths for a forecast [S, h, C] of a horizon h up to the model's: step k's width is step k's,
    whatever horizon was asked. [K, h, C], or [K, S, h, C] float32 scaled by each series' spread when
    the intervals scale with it (`window` [S, L, C]: the raw windows the forecast came from)."""
    if intervals.window_scale is not None and (window is None or len(window) != len(forecast)):
        # A caller's mistake, not the client's: every protocol passes the windows it forecast from.
        raise ValueError("these intervals scale with each series' window: pass the windows forecast from")
    return intervals.widths_for(forecast.shape[1], window)


def clip_nonnegative(intervals: IntervalsSpec, bounds: np.ndarray) -> np.ndarray:
    """`bounds` [..., C] with the non-negative channels' values below 0 raised to 0, in place."""
    flags = intervals.nonnegative
    if flags is not None and any(flags):
        np.maximum(bounds, 0, out=bounds, where=np.asarray(flags, dtype=bool))
    return bounds


def level_bounds(
    intervals: IntervalsSpec | None,
    forecast: np.ndarray,
    levels: Sequence[float],
    field: str = "level",
    *,
    window: np.ndarray | None = None,
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Per requested level (percent), the lower and upper bounds [S, h, C] float32 of `forecast`
    [S, h, C] float32: forecast − width and forecast + width (`window` [S, L, C], the raw windows, for
    intervals that scale with them)."""
    widths = level_widths(intervals, forecast, levels, field, window=window)
    assert intervals is not None
    return {
        level: (clip_nonnegative(intervals, forecast - w), clip_nonnegative(intervals, forecast + w))
        for level, w in widths.items()
    }


def level_widths(
    intervals: IntervalsSpec | None,
    forecast: np.ndarray,
    levels: Sequence[float],
    field: str = "level",
    *,
    window: np.ndarray | None = None,
) -> dict[float, np.ndarray]:
    """Per requested level (percent), the interval's half-width [S, h, C] float32 around `forecast`
    [S, h, C] (before any clipping at 0): the unit anomaly scores are counted in."""
    positions = check_levels(intervals, levels, field)
    assert intervals is not None
    widths = _widths(intervals, forecast, window)
    shape = forecast.shape
    return {level: np.broadcast_to(widths[k], shape) for level, k in zip(levels, positions, strict=True)}


def quantile_bounds(
    intervals: IntervalsSpec | None,
    forecast: np.ndarray,
    probabilities: Sequence[float],
    field: str = "quantiles",
    *,
    window: np.ndarray | None = None,
) -> np.ndarray:
    """The requested quantiles [P, S, h, C] float32 of `forecast` [S, h, C] float32, in request order
    (`window` [S, L, C], the raw windows, for intervals that scale with them)."""
    sides = check_quantiles(intervals, probabilities, field)
    assert intervals is not None
    widths = _widths(intervals, forecast, window)
    out = np.empty((len(sides), *forecast.shape), dtype=np.float32)
    for p, (k, side) in enumerate(sides):
        if side == 0:
            out[p] = forecast
        elif side < 0:
            clip_nonnegative(intervals, np.subtract(forecast, widths[k], out=out[p]))
        else:
            clip_nonnegative(intervals, np.add(forecast, widths[k], out=out[p]))
    return out
