"""Request series -> model input arrays (by the rules of app/inference/windows.py), the channel, timestamps.

Every error is an `InvalidInput` naming the field (e.g. `series[2].values[5]`) and the limit broken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import numpy as np

from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput, check_names
from app.inference.windows import in_model_zone, last_window_filled, window_phase_of
from app.protocols.rsa_v1.schemas import SeriesInput
from app.protocols.rsa_v1.wire import SeriesArrays
from rsa_core.steps import forecast_timestamps as forecast_timestamps  # the one stepping rule


@dataclass(frozen=True)
class DecodedSeries:
    """A request series as the model sees it: its last L points, plus what encoding needs."""

    id: str | None
    window: np.ndarray  # [L, C] float32
    n_values: int  # full history length sent
    start: datetime | None
    phase: int | None = None  # the window's phase in the model's cycle; None when the model has none
    filled: int = 0  # missing values (null) of the window filled by the model's training rule


def decode_series(
    series: SeriesInput | SeriesArrays,
    manifest: Manifest,
    field: str,
    max_history: int,
    max_missing_share: float = 0.0,
) -> DecodedSeries:
    """Rows, named columns or a flat list (lists from the model, or arrays from the fast lane) -> the
    last L points as [L, C] float32 (a global model's shorter history: its missing start NaN, which the
    graph masks), with the field path in every error."""
    array, path_of = series_history(series, manifest, field)
    n = len(array)
    # Finite as float64 (the schema checked that; a null is NaN, missing, filled here) but maybe too large
    # for the model's float32 arithmetic.
    window, filled = last_window_filled(
        array, manifest, max_history, max_missing_share, f"{field}.values", path_of, series.id
    )
    # A naive start is in the model's zone (UTC without one: the documented rule), made explicit: forecast
    # timestamps then carry an offset and are the RFC 3339 date-times the schema promises.
    start = series_start(series, manifest, f"{field}.start")
    phase = window_phase_of(manifest, start, n, f"{field}.start")
    return DecodedSeries(id=series.id, window=window, n_values=n, start=start, phase=phase, filled=filled)


def series_start(
    series: SeriesInput | SeriesArrays, manifest: Manifest, field: str = "start"
) -> datetime | None:
    """The series' `start` as the model reads it (`in_model_zone`; `field` names it in an error), or None."""
    return None if series.start is None else in_model_zone(series.start, manifest, field)


def series_history(
    series: SeriesInput | SeriesArrays, manifest: Manifest, field: str
) -> tuple[np.ndarray, Callable[[int, int], str]]:
    """A request series' whole history as float64 [n, C] in the model's channel order (NaN: missing),
    and the path that names value (row, channel) in an error; the layout's errors name `field`."""
    channels = manifest.channels
    C = len(channels)
    values = series.values
    if isinstance(values, dict):
        check_names(
            values,
            channels,
            f"{field}.values",
            lambda name: (
                f"{field}.values: unknown channel {name!r}; the model's channels are {list(channels)}"
            ),
            lambda name: (
                f"{field}.values: missing channel {name!r}; every model channel is required: {list(channels)}"
            ),
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
        array = np.empty((n, C), np.float64)
        for c, name in enumerate(channels):
            array[:, c] = values[name]

        def path_of(row: int, c: int) -> str:
            return f"{field}.values.{channels[c]}[{row}]"

    elif _is_flat(values):
        if C != 1:
            raise InvalidInput(
                f"{field}.values is a flat list of values, which is one channel; the model has {C} channels "
                f"{list(channels)}: send rows of {C} values or named columns",
                field=f"{field}.values",
                limit=C,
            )
        n = len(values)
        array = np.asarray(values, dtype=np.float64).reshape(n, 1)

        def path_of(row: int, c: int) -> str:
            return f"{field}.values[{row}]"

    else:
        n = len(values)
        rows = cast("list[list[float]]", values)  # not flat: rows (an empty list has none)
        widths = [values.shape[1]] if isinstance(values, np.ndarray) else [len(row) for row in rows]
        for i, width in enumerate(widths):  # an array's rows are all as wide as its first
            if width != C:
                raise InvalidInput(
                    f"{field}.values[{i}] has {width} values; the model has {C} channels {list(channels)}",
                    field=f"{field}.values[{i}]",
                    limit=C,
                )
        array = np.asarray(values, dtype=np.float64)

        def path_of(row: int, c: int) -> str:
            return f"{field}.values[{row}][{c}]"

    return array, path_of


def _is_flat(values: object) -> bool:
    """A flat list of one channel's values (or the fast lane's 1-D array), rather than rows."""
    if isinstance(values, np.ndarray):
        return values.ndim == 1
    return isinstance(values, list) and bool(values) and not isinstance(values[0], list)


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
