"""Request series -> model input arrays, and the small request-level rules (horizon, channel, timestamps).

Every error is an `InvalidInput` naming the field (e.g. `series[2].values[5]`) and the limit broken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

import numpy as np

from app.artifacts.calendar import CalendarStep
from app.artifacts.cycle import window_phase
from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput
from app.protocols.rsa_v1.schemas import SeriesInput
from app.protocols.rsa_v1.wire import SeriesArrays

FLOAT32_MAX = float(np.finfo(np.float32).max)


@cache
def input_bound(input_length: int) -> float:
    """The largest |value| a window may hold: the graph normalises each window by its variance in
    float32, whose sum of L squared deviations (each at most (2·max|x|)²) must stay below float32's max.
    Rounded down to a power of ten so that clients read a plain number: 1e17 for L = 96 (measured on
    the shipped models: the first non-finite forecast comes at 1e19)."""
    exact = math.sqrt(FLOAT32_MAX / input_length) / 2
    return float(10 ** math.floor(math.log10(exact)))


@dataclass(frozen=True)
class DecodedSeries:
    """A request series as the model sees it: its last L points, plus what encoding needs."""

    id: str | None
    window: np.ndarray  # [L, C] float32
    n_values: int  # full history length sent
    start: datetime | None
    phase: int | None = None  # the window's phase in the model's cycle; None when the model has none


def decode_series(
    series: SeriesInput | SeriesArrays, manifest: Manifest, field: str, max_history: int
) -> DecodedSeries:
    """Rows or named columns (lists from the model, or arrays from the fast lane) -> the last L points
    as [L, C] float32, with the field path in every error."""
    channels = manifest.channels
    C, L = len(channels), manifest.input_length
    values = series.values
    if isinstance(values, dict):
        unknown = [name for name in values if name not in channels]
        if unknown:
            raise InvalidInput(
                f"{field}.values: unknown channel {unknown[0]!r}; the model's channels are {list(channels)}",
                field=f"{field}.values.{unknown[0]}",
                limit=list(channels),
            )
        missing = [name for name in channels if name not in values]
        if missing:
            raise InvalidInput(
                f"{field}.values: missing channel {missing[0]!r}; every model channel is required: "
                f"{list(channels)}",
                field=f"{field}.values.{missing[0]}",
                limit=list(channels),
            )
        lengths = {name: len(values[name]) for name in channels}
        n = lengths[channels[0]]
        for name, length in lengths.items():
            if length != n:
                raise InvalidInput(
                    f"{field}.values.{name} has {length} values but {field}.values.{channels[0]} has {n}; "
                    "all columns must have the same length",
                    field=f"{field}.values.{name}",
                    limit=n,
                )
        _check_length(n, L, max_history, f"{field}.values")
        array = np.empty((n, C), np.float64)
        for c, name in enumerate(channels):
            array[:, c] = values[name]
        layout_path = "{field}.values.{channel}[{index}]"
    else:
        n = len(values)
        widths = [values.shape[1]] if isinstance(values, np.ndarray) else [len(row) for row in values]
        for i, width in enumerate(widths):  # an array's rows are all as wide as its first
            if width != C:
                raise InvalidInput(
                    f"{field}.values[{i}] has {width} values; the model has {C} channels {list(channels)}",
                    field=f"{field}.values[{i}]",
                    limit=C,
                )
        _check_length(n, L, max_history, f"{field}.values")
        array = np.asarray(values, dtype=np.float64)
        layout_path = "{field}.values[{index}][{c}]"
    # Finite as float64 (the schema checked that) but maybe too large for the model's float32
    # arithmetic (or for float32 at all, e.g. 1e39). Only the window counts, checked as sent (float64),
    # so the float32 cast after it cannot overflow.
    bound = input_bound(L)
    window = array[n - L :]
    if not np.abs(window).max() <= bound:
        index, c = (int(i) for i in np.argwhere(~(np.abs(window) <= bound))[0])
        path = layout_path.format(field=field, channel=channels[c], index=n - L + index, c=c)
        raise InvalidInput(
            f"{path} is too large for the model: its float32 arithmetic needs |x| <= {bound:g}",
            field=path,
            limit=bound,
        )
    # A naive start is UTC (the documented rule), made explicit: forecast timestamps then carry an offset
    # and are the RFC 3339 date-times the schema promises.
    start = series.start
    if start is not None and start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    phase = _phase(start, n, manifest, field)
    return DecodedSeries(id=series.id, window=window.astype(np.float32), n_values=n, start=start, phase=phase)


def _phase(start: datetime | None, n_values: int, manifest: Manifest, field: str) -> int | None:
    """The window's phase when the model has a cycle; such a model cannot run without `start`."""
    cycle = manifest.cycle
    if cycle is None:
        return None
    if start is None:
        raise InvalidInput(
            f"{field}.start is required by this model: it aligns a seasonal cycle of period "
            f"{cycle.period} steps of {cycle.step_seconds:g} s to the timestamp of the window's first value",
            field=f"{field}.start",
        )
    return window_phase(start, n_values, manifest.input_length, cycle.period, cycle.step_seconds)


def _check_length(n: int, input_length: int, max_history: int, field: str) -> None:
    if n < input_length:
        raise InvalidInput(
            f"{field} has {n} points; the model needs at least {input_length} (its input length)",
            field=field,
            limit=input_length,
        )
    if n > max_history:
        raise InvalidInput(
            f"{field} has {n} points; at most {max_history} are accepted per series",
            field=field,
            limit=max_history,
        )


def forecast_timestamps(
    start: datetime, n_values: int, horizon: int, step_s: float, months: CalendarStep | None = None
) -> list[datetime]:
    """start + (n_values + k)·step for k in 0..horizon-1: the times right after the last value sent.
    With a calendar step, `step` is that many months on the same anchor (`start` must be on it)."""
    if months is not None:
        return [months.advance(start, n_values + k) for k in range(horizon)]
    step = timedelta(seconds=step_s)
    return [start + step * (n_values + k) for k in range(horizon)]


def resolve_horizon(requested: int | None, manifest: Manifest) -> int:
    if requested is None:
        return manifest.horizon
    if not 1 <= requested <= manifest.horizon:
        raise InvalidInput(
            f"horizon must be between 1 and the model horizon {manifest.horizon}, got {requested}",
            field="horizon",
            limit=manifest.horizon,
        )
    return requested


def resolve_channel(channel: int | str, manifest: Manifest) -> int:
    channels = manifest.channels
    if isinstance(channel, str):
        if channel not in channels:
            raise InvalidInput(
                f"channel {channel!r} is not one of the model's channels {list(channels)}",
                field="channel",
                limit=list(channels),
            )
        return channels.index(channel)
    if not 0 <= channel < len(channels):
        raise InvalidInput(
            f"channel index {channel} is out of range 0..{len(channels) - 1}",
            field="channel",
            limit=len(channels) - 1,
        )
    return channel
