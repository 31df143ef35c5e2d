"""The forecast's JSON bytes straight to arrays and back: the `/v1` request path's fast lane.

Reading: orjson parses the body and numpy turns each series' values into one float64 array, with the
structure, types and limits checked on the parsed objects and arrays rather than per float. That lane
takes only bodies it can prove valid; anything unusual (a bool or null where a number belongs, ragged
rows, a string, an unknown field, NaN or an overflowing literal, too many series) goes to the pydantic
model (`ForecastRequest`), whose errors name the field and the limit exactly as before. So the fast lane
accepts a subset of what the model accepts and yields the same values (a property test checks both), and
the OpenAPI document still comes from the model. Measured on 256 series of 96x7: 39 ms through pydantic
plus 7 ms of list-to-array decoding, against about 26 ms here.

Writing: the answer is encoded by orjson straight from the float32 outputs, each number in the shortest
form that reads back as the same float32 (what the model computed, exactly: tested), datetimes as
pydantic wrote them (`Z` for UTC), and otherwise `ForecastResponse`'s JSON. Widening to float64 first
wrote 17 digits where 9 carry the value: 44% more bytes, and 1.5x the encoding time (7 against 10 ms
for 256 series of 96x7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from app.protocols.parsing import Refusal, validate_json
from app.protocols.rsa_v1.schemas import ForecastRequest, SeriesInput

# The request's fields, and the longest id the model allows (SeriesInput.id's max_length).
_REQUEST_KEYS = frozenset(ForecastRequest.model_fields)
_SERIES_KEYS = frozenset(SeriesInput.model_fields)
_MAX_ID_LENGTH = 256
_DATETIME = TypeAdapter(datetime)
_COVARIATE_KEYS = frozenset({"future", "past", "static"})


@dataclass(frozen=True)
class SeriesArrays:
    """One request series with its values as float64 arrays: rows [n, C], a flat [n] (one channel), or
    named columns of [n]."""

    id: str | None
    values: np.ndarray | dict[str, np.ndarray]
    start: datetime | None
    # A global model's covariates (SeriesInput's `future`, `past`, `static`), when sent.
    future: dict[str, np.ndarray] | None = None
    past: dict[str, np.ndarray] | None = None
    static: dict[str, float | str] | None = None


@dataclass(frozen=True)
class ForecastArgs:
    """A forecast request as the handlers read it (the same attributes as `ForecastRequest`)."""

    series: Sequence[SeriesArrays | SeriesInput]
    horizon: int | None
    level: list[float] | None = None
    quantiles: list[float] | None = None


def parse_forecast(raw: bytes, max_series: int) -> ForecastArgs | ForecastRequest:
    """The forecast body, validated: through the fast lane when it can, else through the model
    (raising pydantic's ValidationError, with the series limit checked before any series)."""
    fast = fast_forecast(raw, max_series)
    if fast is not None:
        return fast
    return ForecastRequest.model_validate_json(raw, context={"max_series": max_series})


def offloaded_forecast(raw: bytes, max_series: int) -> ForecastArgs | ForecastRequest | Refusal:
    """`parse_forecast` in the parse process (`app.protocols.http.parse_body`'s offload): the fast lane,
    else the model (`offloaded_request`), whose refusal comes back as its errors, so that the event loop
    parses no big body again, valid or not."""
    fast = fast_forecast(raw, max_series)
    if fast is not None:
        return fast
    return offloaded_request(ForecastRequest, raw, {"max_series": max_series})


M = TypeVar("M", bound=BaseModel)


def offloaded_request(model: type[M], raw: bytes, context: dict[str, Any] | None = None) -> M | Refusal:
    """A `/v1` request with series (`series`: a list, or attention's one), validated by its model in the
    parse process, each series' `values` then made float64 arrays (a null: NaN, missing, as the codec
    reads it): what comes back to the event loop is unpickled there, and millions of Python floats took
    it longer than the parse saved (0.74 s for 22 MB measured, against 1.1 s to parse it), arrays a copy.
    The codec reads arrays as it reads the fast lane's (`SeriesArrays`); rows that are not all as wide
    stay lists, for the codec to name the row."""
    parsed = validate_json(model, raw, context)
    if isinstance(parsed, Refusal):
        return parsed
    items = getattr(parsed, "series", None)
    if isinstance(items, SeriesInput):
        return parsed.model_copy(update={"series": _compact(items)})
    if isinstance(items, list):
        return parsed.model_copy(update={"series": [_compact(s) for s in items]})
    return parsed


def _compact(series: SeriesInput) -> SeriesInput:
    """The series with its values as arrays ([n, C] rows, [n] flat, {name: [n]} columns), bypassing the
    model's types on purpose (validated already; the codec takes either)."""
    values: Any = series.values
    if isinstance(values, dict):
        arrays: Any = {name: np.asarray(column, np.float64) for name, column in values.items()}
    elif not values:
        return series  # an empty list: the codec's own error, as sent
    else:
        try:
            arrays = np.asarray(values, np.float64)
        except ValueError:  # ragged rows
            return series
    return series.model_copy(update={"values": arrays})


def fast_forecast(raw: bytes, max_series: int) -> ForecastArgs | None:
    """The parsed request, or None when the body needs the model's validation (or its errors)."""
    if _may_hold_bool(raw, max_series):
        return None
    try:
        body = orjson.loads(raw)  # refuses NaN, Infinity and literals that overflow a double
    except orjson.JSONDecodeError:
        return None
    if type(body) is not dict or not body.keys() <= _REQUEST_KEYS:
        return None
    horizon = body.get("horizon")
    if horizon is not None and not (type(horizon) is int and horizon >= 1):
        return None
    level, quantiles = _fast_floats(body.get("level")), _fast_floats(body.get("quantiles"))
    if level is _REFUSED or quantiles is _REFUSED:
        return None
    items = body.get("series")
    if type(items) is not list or not 1 <= len(items) <= max_series:
        return None
    series = []
    for item in items:
        parsed = _fast_series(item)
        if parsed is None:
            return None
        series.append(parsed)
    ids = [s.id for s in series if s.id is not None]
    if len(set(ids)) < len(ids):  # a repeated id: the model's refusal names it (`unique_ids`)
        return None
    return ForecastArgs(series=series, horizon=horizon, level=level, quantiles=quantiles)


_REFUSED: Any = object()  # `_fast_floats`' answer for a value the model must judge


def _fast_floats(value: Any) -> list[float] | None:
    """`level` or `quantiles`: absent or null, a list of JSON numbers as floats, or `_REFUSED` for anything
    else (left to the model's errors). Their ranges and the artifact's levels are checked by
    `app.inference.intervals`, for both lanes alike."""
    if value is None:
        return None
    if type(value) is not list:
        return _REFUSED
    out = []
    for item in value:
        kind = type(item)
        if kind is float:
            out.append(item)
        elif kind is int and abs(item) < 2**63:  # far beyond any valid value, and exactly a float's
            out.append(float(item))
        else:
            return _REFUSED
    return out


def _fast_series(item: Any) -> SeriesArrays | None:
    if type(item) is not dict or "values" not in item or not item.keys() <= _SERIES_KEYS:
        return None
    covariates = _fast_covariates(item) if item.keys() & _COVARIATE_KEYS else {}
    if covariates is None:
        return None
    id_ = item.get("id")
    if id_ is not None and not (type(id_) is str and len(id_) <= _MAX_ID_LENGTH):
        return None
    start = item.get("start")
    if start is not None:
        if type(start) is not str:
            return None  # a number is a Unix time to pydantic: rare, left to it
        try:
            start = _DATETIME.validate_python(start)  # the same parser the model uses on a JSON string
        except ValidationError:
            return None
    values = item["values"]
    if type(values) is list:
        flat = bool(values) and type(values[0]) is not list  # one channel's values, as the model reads
        rows = _numbers(values, ndim=1 if flat else 2)
        return None if rows is None else SeriesArrays(id=id_, values=rows, start=start, **covariates)
    if type(values) is dict:
        columns = _columns(values)
        return SeriesArrays(id=id_, values=columns, start=start, **covariates) if columns else None
    return None


def _columns(given: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """{name: float64 [n]} from {name: a JSON list of numbers}, or None when a column needs the model's
    validation."""
    columns = {}
    for name, column in given.items():
        array = _numbers(column, ndim=1)
        if array is None:
            return None
        columns[name] = array
    return columns


def _fast_covariates(item: dict[str, Any]) -> dict[str, Any] | None:
    """`future` and `past` as {name: float64 [n]} and `static` as {name: number or text}, or None when
    anything needs the model's validation (a null, a string where a number belongs, a long text)."""
    out: dict[str, Any] = {}
    for key in ("future", "past"):
        given = item.get(key)
        if given is None:
            continue
        columns = _columns(given) if type(given) is dict else None
        if columns is None:
            return None
        out[key] = columns
    static = item.get("static")
    if static is not None:
        if type(static) is not dict:
            return None
        for value in static.values():
            kind = type(value)
            if not (
                kind is float or (kind is int and abs(value) < 2**63) or (kind is str and len(value) <= 256)
            ):
                return None
        out["static"] = {k: float(v) if type(v) is int else v for k, v in static.items()}
    return out


def _numbers(value: Any, ndim: int) -> np.ndarray | None:
    """A non-empty rectangular array of JSON numbers as float64, else None (ragged, strings, nulls,
    nesting other than `ndim`). Bools never reach here (`_may_hold_bool`): numpy would read them as
    numbers, the model refuses them."""
    if type(value) is not list or not value:
        return None
    try:
        array = np.array(value)
    except (ValueError, OverflowError):  # ragged rows; an integer beyond 64 bits
        return None
    if array.ndim != ndim or array.size == 0 or array.dtype.kind not in "fi":
        return None
    return array.astype(np.float64, copy=False)  # ints as the model reads them: float(int)


def _may_hold_bool(raw: bytes, max_series: int) -> bool:
    """Whether the body may hold `true` or `false` outside a string: numpy would read such a value as
    a number where the model refuses it, so those bodies go to the model. Found by searching for one
    letter of each word at a time, which is memchr-fast (0.1 ms for 3.6 MB, against 3 ms for
    `b"true" in raw`): a valid body's only `u` are that of each "values" key and whatever ids hold, and
    it has no `f` outside ids. Past one hit per allowed series (plus a few), it gives up and says yes,
    so that a body of nothing but `u` costs no more here than its parse will."""
    budget = max_series + 64
    for letter, word, offset in ((b"f", b"false", 0), (b"u", b"true", 2)):
        position = raw.find(letter)
        while position >= 0:
            budget -= 1
            if budget < 0 or raw[position - offset : position - offset + len(word)] == word:
                return True
            position = raw.find(letter, position + 1)
    return False


# -- answers ---------------------------------------------------------------------------------------
_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_UTC_Z


@dataclass(frozen=True)
class ForecastResult:
    """A forecast answer as arrays: outputs [S, horizon, C] and, per series, its id and timestamps."""

    model: str
    version: int
    provider: str
    channels: list[str]
    ids: list[str | None]
    outputs: np.ndarray
    timestamps: list[list[datetime] | None]
    # Interval bounds or quantiles by answer key (`lo-80`, `q-95`), each [S, horizon, C] like `outputs`.
    bands: dict[str, np.ndarray] = field(default_factory=dict)
    # Per series, the window's missing values filled (`filled` in the answer, written only when > 0, so
    # answers to complete windows are as they always were); empty: none.
    filled: list[int] = field(default_factory=list)
    # Per series of a hybrid, why it got the global read-out alone (`local_models` in the answer, written
    # only for those series; app/artifacts/hybrid.py `LocalSpec.skipped`); empty: none.
    local_models: list[str | None] = field(default_factory=list)


# Beside a forecast's null `timestamps`: why, and what to send.
NO_START = "no start was sent for this series: send start (its first value's time) to get timestamps"


def encode_forecast(result: ForecastResult) -> bytes:
    """`ForecastResponse`'s JSON from the arrays, each forecast value as its float32's shortest form."""
    outputs = np.ascontiguousarray(result.outputs, dtype=np.float32)  # orjson writes C-ordered arrays
    if result.bands:
        bands = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in result.bands.items()}
        forecasts = [
            {
                "id": id_,
                "forecast": outputs[i],
                **{k: v[i] for k, v in bands.items()},
                "channels": result.channels,
                "timestamps": result.timestamps[i],
            }
            for i, id_ in enumerate(result.ids)
        ]
    else:  # no bands: the same dicts without the per-series unpacking (1,000 series: 0.7 ms less to encode)
        forecasts = [
            {
                "id": id_,
                "forecast": outputs[i],
                "channels": result.channels,
                "timestamps": result.timestamps[i],
            }
            for i, id_ in enumerate(result.ids)
        ]
    for i, n in enumerate(result.filled):
        if n:
            forecasts[i]["filled"] = n
    for i, note in enumerate(result.local_models):
        if note is not None:
            forecasts[i]["local_models"] = note
    for i, stamps in enumerate(result.timestamps):
        if stamps is None:  # issue 45, item 12: a null says why, where it is read
            forecasts[i]["timestamps_note"] = NO_START
    return orjson.dumps(
        {
            "model": result.model,
            "version": result.version,
            "provider": result.provider,
            "forecasts": forecasts,
        },
        option=_DUMP_OPTIONS,
    )


def encode_attention(document: dict[str, Any]) -> bytes:
    """`AttentionResponse`'s JSON from its fields with the matrices as float32 arrays (the handlers
    build it), each weight in its float32's shortest form, as forecasts are: the same numbers that
    pydantic-core wrote widened to 17 digits from lists. For the default model's 36 heads × 3 rows of
    512, 686 kB in 0.9 ms against 1,129 kB in 3.5 ms (`python -m bench.attention_encoding`)."""
    return orjson.dumps(document, option=_DUMP_OPTIONS)
