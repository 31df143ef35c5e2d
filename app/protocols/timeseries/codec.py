"""KServe time series <-> the model's arrays: frequencies checked against the model's step, series to
[L, C] windows (the last L points) with their phase, forecasts to KServe's content entries."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from app.artifacts.manifest import Manifest
from app.core.errors import InvalidInput
from app.inference.windows import check_calendar_anchor, in_model_zone, last_window, window_phase_of
from app.protocols.parsing import Refusal, validate_json
from app.protocols.timeseries.schemas import TimeSeriesForecastRequest, TimeSeriesInput
from rsa_core.frequency import parse_alias
from rsa_core.steps import forecast_timestamps

# KServe's frequency codes: a fixed step in seconds, or a number of calendar months.
SECONDS = {"second": 1, "S": 1, "minute": 60, "T": 60, "hour": 3600, "H": 3600, "day": 86_400, "D": 86_400}
SECONDS |= {"week": 604_800, "W": 604_800}
MONTHS = {"month": 1, "M": 1, "quarter": 3, "Q": 3, "year": 12, "Y": 12}


def parse_request(raw: bytes) -> TimeSeriesForecastRequest | Refusal:
    """The request, for the parse process (`app.protocols.http.parse_body`'s offload: large bodies are parsed
    there, off the event loop), or its refusal's errors, rendered as any other body's (a ValidationError
    does not survive pickling whole; parsing it again on the loop for them would hold the loop)."""
    parsed = validate_json(TimeSeriesForecastRequest, raw)
    if isinstance(parsed, TimeSeriesForecastRequest):
        parsed.inputs = [_compact(item) for item in parsed.inputs]
    return parsed


def _compact(item: TimeSeriesInput) -> TimeSeriesInput:
    """The item with its series as one float64 array when it is rectangular (numbers, or rows of equal
    length), as `decode_input` would make it: the parse process hands arrays back, which unpickle at
    once, where millions of floats in lists held the GIL (and the event loop) for 100-200 ms (a 50 MB
    body, bench.big_bodies). A ragged series stays as it is, for `decode_input` to name its fault."""
    if not item.series:
        return item
    try:
        array = np.asarray(item.series, np.float64)
    except ValueError:  # ragged rows, or numbers mixed with rows
        return item
    return item.model_copy(update={"series": array})


@dataclass(frozen=True)
class DecodedInput:
    window: np.ndarray  # [L, C] float32
    n_values: int
    start: datetime
    phase: int | None


def _step_of(code: str) -> tuple[int, float] | None:
    """A frequency as (months, seconds): KServe's code, else a pandas alias by the shared rule."""
    if code in MONTHS:
        return MONTHS[code], 0.0
    if code in SECONDS:
        return 0, float(SECONDS[code])
    return parse_alias(code)


def check_frequency(item: TimeSeriesInput, manifest: Manifest, field: str) -> None:
    """The series' frequency must be the model's step: a model forecasts the steps it was trained on. It
    may be written as KServe's code or as any pandas alias of that step (the model's own `1D`, or `D`,
    `MS`, `QS-MAR`, `W-SAT`: an anchor is the start timestamp's business, checked with it)."""
    months = manifest.calendar
    step = _step_of(item.frequency)
    if months is not None:
        fits = step is not None and step == (months.months, 0.0)
        codes = [code for code, m in MONTHS.items() if m == months.months]
    else:
        fits = step is not None and step[0] == 0 and math.isclose(step[1], manifest.frequency_seconds)
        codes = [code for code, s in SECONDS.items() if s == manifest.frequency_seconds]
    if manifest.frequency:
        codes.append(manifest.frequency)
        if manifest.frequency[:1] == "1" and manifest.frequency[1:].isalpha():
            codes.append(manifest.frequency[1:])  # pandas' alias of one step
    if not fits:
        wanted = (
            f"one of {codes} (or another pandas alias of that step)"
            if codes
            else "a frequency this API cannot name"
        )
        raise InvalidInput(
            f"{field} is {item.frequency!r}, but model {manifest.name} steps {manifest.frequency}: "
            f"the frequency must be {wanted}",
            field=field,
            limit=codes,
        )


def decode_input(item: TimeSeriesInput, manifest: Manifest, field: str, max_history: int) -> DecodedInput:
    channels = manifest.channels
    C = len(channels)
    series: object = item.series
    if isinstance(series, np.ndarray):  # compacted by the parse process (`parse_request`)
        if item.type == "univariate_time_series":
            fits = series.ndim == 1 and C == 1
        else:
            fits = series.ndim == 2 and series.shape[1] == C
        if fits:
            return _decoded(series.reshape(-1, C), item, manifest, field, max_history)
        item = item.model_copy(update={"series": series.tolist()})  # the lists' checks name the fault
    if item.type == "univariate_time_series":
        if C != 1:
            raise InvalidInput(
                f"{field}.type: model {manifest.name} forecasts {C} channels {list(channels)} together; "
                "send a multivariate_time_series whose rows hold one value per channel",
                field=f"{field}.type",
                limit="multivariate_time_series",
            )
        if any(isinstance(v, list) for v in item.series):
            raise InvalidInput(
                f"{field}.series: a univariate series is a list of numbers", field=f"{field}.series"
            )
        array = np.asarray(item.series, np.float64).reshape(-1, 1)
    else:
        for t, row in enumerate(item.series):
            if not isinstance(row, list) or len(row) != C:
                width = len(row) if isinstance(row, list) else 1
                raise InvalidInput(
                    f"{field}.series[{t}] has {width} values; model {manifest.name} has {C} channels "
                    f"{list(channels)}",
                    field=f"{field}.series[{t}]",
                    limit=C,
                )
        array = np.asarray(item.series, np.float64).reshape(-1, C)
    return _decoded(array, item, manifest, field, max_history)


def _decoded(
    array: np.ndarray, item: TimeSeriesInput, manifest: Manifest, field: str, max_history: int
) -> DecodedInput:
    """`decode_input`'s answer from the series' values [n, C] float64."""
    n = len(array)
    multivariate = item.type == "multivariate_time_series"

    def path_of(row: int, c: int) -> str:
        return f"{field}.series[{row}]" + (f"[{c}]" if multivariate else "")

    window = last_window(array, manifest, max_history, f"{field}.series", path_of, item.name)
    start = item.start_timestamp
    if start is None:
        raise InvalidInput(
            f"{field}.start_timestamp is required: it dates the forecast (and aligns a seasonal cycle)",
            field=f"{field}.start_timestamp",
        )
    # naive is in the model's zone (UTC without one), as in /v1
    start = in_model_zone(start, manifest, f"{field}.start_timestamp")
    check_calendar_anchor(manifest, start, f"{field}.start_timestamp")
    phase = window_phase_of(manifest, start, n, f"{field}.start_timestamp")
    return DecodedInput(window, n, start, phase)


def forecast_start(decoded: DecodedInput, manifest: Manifest, field: str) -> str:
    """ISO 8601 time of the first forecast step: the step after the last value sent."""
    try:
        first = forecast_timestamps(
            decoded.start, decoded.n_values, 1, manifest.frequency_seconds, manifest.calendar, manifest.zone
        )
    except OverflowError:
        raise InvalidInput(
            f"{field}.start_timestamp: the forecast would run past year 9999",
            field=f"{field}.start_timestamp",
        ) from None
    return first[0].isoformat().replace("+00:00", "Z")
