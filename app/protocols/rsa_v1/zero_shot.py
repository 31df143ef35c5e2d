"""`POST /v1/forecast`: a forecast without naming a model (issue 47), as TimeGPT and Chronos users send
one. The body is the named forecast's (`ForecastRequest`) plus an optional `freq` and, per series,
optional `timestamps`; the answer is the named forecast's, whose `model` and `version` say which
pretrained model answered, plus `frequency`: the frequency read, its pandas alias, where it was read
from and, when it was only assumed, a note saying so.

The model is the pretrained one of the request's frequency: a loaded model whose latest version's
manifest has `dataset.pretrained.frequency` (export/pretrained.py builds them). The frequency is read by
the one rule every path shares (`rsa_core.frequency`), from, in order:

- `freq`, a pandas/TimeGPT alias: `MS`/`M`/`ME` monthly, `QS`/`Q`/`QE` quarterly, `YS`/`Y`/`A` yearly,
  `h` hourly, `D` daily, `W` weekly (an anchor such as `QS-OCT` or `W-SUN` is read by its base, a multiple
  `3MS` or `24h` as the step it names); a series' `timestamps` that step otherwise are refused;
- each series' `timestamps` (one per value, the first its `start`): **the gaps decide** (every stamp on
  the 1st of its month three months apart: quarterly; twelve: yearly; a zoned series' days and months on
  its wall clock across daylight saving), and every row must be one step after the one before (send
  null for a missing value);
- else each series' `start`, which cannot tell and is only **assumed**: midnight on the first of a month
  reads monthly (quarterly and yearly series start there too), a time of day other than midnight hourly;
  the answer's `frequency.note` says so and to send `freq` or `timestamps`; any other start, or none,
  is refused naming `freq`.

Month-end series (monthly, quarterly or yearly, every `start` midnight on the last day of its month:
pandas' `ME`, `QE`, `YE`, or `M`, `Q`, `Y` on such starts) are answered by the same models, which step
month starts: each start is sent one day later (the 1st of the next month) and the answer's timestamps
are moved back a day, so that they step month ends (`_month_ends`). A `freq` of month ends on a start
on neither end of its month is refused naming the start.

Series of different frequencies in one request are refused (send them apart), naming the first that
differs. A frequency with no pretrained model is a 422 naming the frequencies that have one. The handler
goes through `V1Handlers` and the service's catalog (its `models()`), as the named routes do.
"""

from __future__ import annotations

import calendar
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from app.core.errors import InvalidInput, ModelNotReady
from app.protocols.datetimes import IsoDatetime
from app.protocols.parsing import Refusal
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.schemas import ForecastRequest, ForecastResponse, SeriesInput
from app.protocols.rsa_v1.wire import (
    ForecastArgs,
    SeriesArrays,
    encode_forecast,
    offloaded_forecast,
    parse_forecast,
)
from rsa_core.frequency import FREQUENCIES, Frequency, infer_frequency, off_grid, parse_alias, read_start
from rsa_core.frequency import frequency_name as frequency_name

MAX_FREQ_LENGTH = 32
_DAY = timedelta(days=1)
_CALENDAR = ("monthly", "quarterly", "yearly")
_TIMESTAMPS = TypeAdapter(list[IsoDatetime])
Source = Literal["freq", "timestamps", "start"]


class ZeroShotSeries(SeriesInput):
    """A series of a forecast without a model: the named forecast's, plus its `timestamps` if known."""

    timestamps: list[IsoDatetime] | None = Field(
        default=None,
        description="The time of each value (as many as `values`, oldest first, one step apart: null "
        "for a missing value); the frequency is read from their gaps, and `start` is the first of them.",
    )


class ZeroShotRequest(ForecastRequest):
    """```json
    {"series": [{"id": "sales", "start": "2021-01-01", "values": [1520.5, 1611.0, "..."]}],
     "horizon": 12, "level": [80], "freq": "MS"}
    ```"""

    series: list[ZeroShotSeries] = Field(  # type: ignore[assignment]
        min_length=1, description="At most `RSA_MAX_SERIES_PER_REQUEST`."
    )
    freq: str | None = Field(
        default=None,
        max_length=MAX_FREQ_LENGTH,
        description="The series' frequency as pandas/TimeGPT write it (MS, QS, YS, h, D, W, ...); absent: "
        "read from each series' `timestamps`, else assumed from its `start` (midnight on the 1st of a "
        "month: monthly; another time of day: hourly), which the answer's `frequency.note` says.",
    )


class FrequencyUsed(BaseModel):
    name: str = Field(description="The frequency the pretrained model was picked by (monthly, ...).")
    freq: str = Field(description="Its pandas alias (MS, QS, YS, h, D, W; ME, QE, YE on month ends).")
    source: Source = Field(
        description="Read from `freq`, from the series' `timestamps`, or assumed from their `start`."
    )
    note: str | None = Field(
        default=None,
        description="When only assumed (from `start`): what else the start fits, and to send `freq` or "
        "`timestamps` if the series are not of the assumed frequency.",
    )


class ZeroShotResponse(ForecastResponse):
    frequency: FrequencyUsed


@dataclass(frozen=True)
class ZeroShotBody:
    """A parsed zero-shot body: the named forecast's arguments, `freq`, and each series' timestamps."""

    forecast: ForecastArgs | ForecastRequest
    freq: str | None = None
    timestamps: tuple[list[datetime] | None, ...] | None = None


# Business-day aliases (pandas' B, C): such a series is a daily one with no value on some days.
_BUSINESS_DAYS = ("B", "C")


def _refuse_freq(freq: str) -> InvalidInput:
    hint = (
        "; a business-day series is a daily one with days missing: send freq D with null for the days "
        "without a value"
        if freq.strip().upper() in _BUSINESS_DAYS
        else ""
    )
    return InvalidInput(
        f"freq {freq!r} is not a pandas frequency alias this service reads; give one of "
        f"{', '.join(FREQUENCIES.values())} (ME, QE, YE for month ends; an anchor such as QS-OCT or a "
        f"multiple such as 3MS is read too){hint}",
        field="freq",
        limit="MS, QS, YS, h, D, W (pandas aliases)",
    )


def _values_length(series: Any) -> int:
    values = series.values
    if isinstance(values, dict):
        return len(next(iter(values.values()), []))
    return len(values)


def _from_timestamps(i: int, series: Any, stamps: list[datetime]) -> Frequency | None:
    """The frequency series i's timestamps step by (None for a single one), every row checked: as many
    as its values, the first its start, each one step after the one before (InvalidInput naming
    `series[i].timestamps`)."""
    field = f"series[{i}].timestamps"
    n = _values_length(series)
    if len(stamps) != n:
        raise InvalidInput(
            f"{field} has {len(stamps)} timestamps for {n} values: one per value (null for a missing one)",
            field=field,
        )
    if series.start is not None and stamps and series.start != stamps[0]:  # no values: refused later
        raise InvalidInput(
            f"series[{i}].start {series.start.isoformat()} is not its first timestamp "
            f"{stamps[0].isoformat()}: send the one, or the same time in both",
            field=f"series[{i}].start",
        )
    found = infer_frequency(stamps)
    if found is None:
        return None
    off = off_grid(stamps, found)
    if off is not None:
        raise InvalidInput(
            f"{field}[{off}] {stamps[off].isoformat()} is not one step ({found.freq}) after "
            f"{field}[{off - 1}] {stamps[off - 1].isoformat()}: send one row per step, null for a missing "
            "value",
            field=field,
        )
    return found


def request_frequency(
    freq: str | None, series: Any, timestamps: tuple[list[datetime] | None, ...] | None = None
) -> FrequencyUsed:
    """The one frequency of the request (module docstring): `freq`'s, else the series' timestamps',
    else assumed from every series' start (InvalidInput naming the field when there is none, when two
    series differ, or when timestamps contradict `freq`)."""
    stamps = timestamps or (None,) * len(series)
    pairs = enumerate(zip(series, stamps, strict=True))
    stepped = [(i, _from_timestamps(i, s, t)) for i, (s, t) in pairs if t is not None]
    read = [(i, f) for i, f in stepped if f is not None]
    if freq is not None:
        if parse_alias(freq) is None:
            raise _refuse_freq(freq)
        name = frequency_name(freq)
        for i, found in read:
            if parse_alias(found.alias) != parse_alias(freq) and (name is None or found.name != name):
                raise InvalidInput(
                    f"series[{i}].timestamps step {found.freq} ({found.name or found.alias}) but freq is "
                    f"{freq!r}: send the series' own frequency, or leave freq out to read it from them",
                    field=f"series[{i}].timestamps",
                )
        return FrequencyUsed(name=name or freq, freq=freq, source="freq")
    if read:
        first_i, first = read[0]
        for i, found in read[1:]:
            if found.name != first.name or (found.name is None and found.alias != first.alias):
                raise InvalidInput(
                    f"series[{i}].timestamps step {found.freq} but series[{first_i}].timestamps "
                    f"{first.freq}: one request holds series of one frequency (send them apart)",
                    field=f"series[{i}].timestamps",
                )
        name = first.name or first.alias
        for i, s in enumerate(series):
            if stamps[i] is None and s.start is not None and name not in read_start(s.start).fits:
                raise InvalidInput(
                    f"series[{i}].start {s.start.isoformat()} cannot begin a {name} series (the timestamps "
                    f"of series[{first_i}] step {first.freq}): send its timestamps or send it apart",
                    field=f"series[{i}].start",
                )
        return FrequencyUsed(name=name, freq=first.freq, source="timestamps")
    return _assumed_from_starts(series)


def _assumed_from_starts(series: Any) -> FrequencyUsed:
    """Every series' start read alone: one assumed frequency, said in the note."""
    first: str | None = None
    for i, s in enumerate(series):
        reading = None if s.start is None else read_start(s.start)
        if reading is None or reading.assumed is None:
            why = "has no start" if s.start is None else f"starts at {s.start.isoformat()}"
            fits = "" if reading is None else f" ({' or '.join(reading.fits)}: cannot tell which)"
            raise InvalidInput(
                f"series[{i}] {why}{fits}: its frequency cannot be told from it; give `freq` (e.g. MS, QS, "
                "YS, h, D, W), each series' `timestamps`, or a start on the 1st of a month (monthly "
                "assumed) or off midnight (hourly assumed)",
                field="freq",
            )
        if first is not None and reading.assumed != first:
            raise InvalidInput(
                f"series[{i}].start reads {reading.assumed} but series[0].start {first}: one request holds "
                "series of one frequency (send them apart, or give `freq`)",
                field=f"series[{i}].start",
            )
        first = reading.assumed
    assert first is not None  # the request has at least one series
    reading = read_start(series[0].start)
    others = [f for f in reading.fits if f != first]
    note = (
        f"assumed {first} from the series' start (series[0]: {reading.why}), where {', '.join(others)} "
        f"series start too; if they are not {first}, send `freq` (e.g. "
        f"{', '.join(FREQUENCIES[f] for f in others[:2])}) or each series' `timestamps`"
    )
    return FrequencyUsed(name=first, freq=FREQUENCIES[first], source="start", note=note)


def pretrained_models(v1: V1Handlers) -> dict[str, str]:
    """{frequency: model name} of the loaded pretrained models (each model's latest ready version's
    manifest `dataset.pretrained.frequency`), the first name in order where two claim one frequency."""
    found: dict[str, str] = {}
    for served in sorted(v1.service.models(), key=lambda m: m.name):
        latest = served.latest
        dataset = latest.manifest.dataset if latest is not None and latest.manifest is not None else None
        pretrained = (dataset or {}).get("pretrained")
        if isinstance(pretrained, dict) and isinstance(pretrained.get("frequency"), str):
            found.setdefault(pretrained["frequency"], served.name)
    return found


def _take_timestamps(body: dict[str, Any]) -> tuple[list[datetime] | None, ...] | None:
    """Each series' `timestamps` taken off the body (its `start` set to the first where it has none),
    parsed as `start` is; None when one is not a list of ISO 8601 times (the model then names it)."""
    series = body.get("series")
    if type(series) is not list or not any(type(s) is dict and "timestamps" in s for s in series):
        return (None,) * len(series) if type(series) is list else ()
    found: list[list[datetime] | None] = []
    for item in series:
        raw = item.pop("timestamps", None) if type(item) is dict else None
        if raw is None:
            found.append(None)
            continue
        try:
            stamps = _TIMESTAMPS.validate_python(raw)
        except ValidationError:
            return None
        if stamps and item.get("start") is None:
            item["start"] = raw[0]
        found.append(stamps)
    return tuple(found)


def parse_zero_shot(raw: bytes, max_series: int) -> tuple[ZeroShotBody, str | None]:
    """(the forecast body with each series' timestamps, its `freq`): a string `freq` and the timestamps
    are taken off and the rest read by the named forecast's lanes (wire.py); anything else is judged by
    `ZeroShotRequest` (its errors name the field)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if type(body) is dict:
        changed = "freq" in body or b'"timestamps"' in raw  # else the body is the named forecast's as sent
        freq = body.pop("freq", None)
        timestamps = _take_timestamps(body)
        if timestamps is not None and (freq is None or (type(freq) is str and len(freq) <= MAX_FREQ_LENGTH)):
            forecast = parse_forecast(orjson.dumps(body) if changed else raw, max_series)
            return ZeroShotBody(forecast, freq, timestamps or None), freq
    parsed = ZeroShotRequest.model_validate_json(raw, context={"max_series": max_series})
    stamps = tuple(s.timestamps for s in parsed.series)
    return ZeroShotBody(parsed, parsed.freq, stamps), parsed.freq


async def zero_shot_forecast(v1: V1Handlers, body: ZeroShotBody, freq: str | None) -> bytes:
    """The forecast of the pretrained model of the request's frequency, encoded, with `frequency`."""
    used = request_frequency(freq, body.forecast.series, body.timestamps)
    models = pretrained_models(v1)
    if used.name not in models:
        loading = sorted(m.name for m in v1.service.models() if m.latest is None and m.loading)
        if loading:  # its model may be among them (their manifests are read as they load): not the client's
            raise ModelNotReady(
                f"no pretrained model forecasts {used.name} series yet: {', '.join(loading)} still "
                "loading; try again",
                retry_after_s=v1.settings.retry_after_s,
            )
        have = sorted(models)
        where = {"freq": "freq", "timestamps": "the series' timestamps", "start": "the series' start"}
        named = sorted(m.name for m in v1.service.models())
        raise InvalidInput(
            f"no pretrained model forecasts {used.name} series (read from {where[used.source]}); the "
            f"frequencies with one: {', '.join(have) if have else 'none (none is loaded)'}; or name a "
            f"served model: POST /v1/models/{{name}}/forecast (the client's model=), served: "
            f"{', '.join(named) if named else 'none'}",
            field="freq",
            limit=have,  # the frequencies with a model, a list as every refusal's choices are ([] for none)
        )
    forecast = body.forecast
    month_ends = _month_ends(used, forecast.series)
    if month_ends:
        forecast = _starts_moved(forecast, _DAY)
    result = await v1.forecast(models[used.name], None, forecast)
    if month_ends:
        moved = [None if ts is None else [t - _DAY for t in ts] for ts in result.timestamps]
        result = dataclasses.replace(result, timestamps=moved)
    encoded = encode_forecast(result)
    # the named forecast's JSON object with `frequency` added (no second encoding of the values)
    return encoded[:-1] + b',"frequency":' + orjson.dumps(used.model_dump()) + b"}"


def _is_month_end(start: datetime) -> bool:
    """Midnight on the last day of its month, on its own wall clock."""
    return start.time() == time(0) and start.day == calendar.monthrange(start.year, start.month)[1]


def _month_ends(used: FrequencyUsed, series: Sequence[Any]) -> bool:
    """Whether the request's series step month ends (module docstring): a monthly, quarterly or yearly
    request whose every `start` is midnight on the last day of its month, unless `freq` names month starts
    (then the model refuses the start, naming its anchor). InvalidInput naming `series[i].start` where
    `freq` names month ends and a start is on neither end of its month (month starts are answered as
    such, whatever `freq` says of the anchor)."""
    if used.name not in _CALENDAR:
        return False
    unit = used.freq.lstrip("0123456789").split("-")[0]
    for i, s in enumerate(series):
        start = s.start
        if unit in ("ME", "QE", "YE") and start is not None and start.day != 1 and not _is_month_end(start):
            raise InvalidInput(
                f"series[{i}].start {start.isoformat()} is not midnight on the last (or first) day of a "
                f"month, which freq {used.freq} steps: send its month-end start, or the freq it steps",
                field=f"series[{i}].start",
            )
    starts = [s.start for s in series if s.start is not None]
    return unit not in ("MS", "QS", "YS", "AS") and bool(starts) and all(map(_is_month_end, starts))


def _starts_moved(forecast: ForecastArgs | ForecastRequest, by: timedelta) -> Any:
    """The forecast with every series' start moved `by` (InvalidInput naming the start past year 9999)."""
    moved: list[Any] = []
    for i, s in enumerate(forecast.series):
        start = s.start
        try:
            start = None if start is None else start + by
        except OverflowError:
            raise InvalidInput(
                f"series[{i}].start {s.start}: its forecast would step past year 9999",
                field=f"series[{i}].start",
            ) from None
        moved.append(
            dataclasses.replace(s, start=start)
            if isinstance(s, SeriesArrays)
            else s.model_copy(update={"start": start})
        )
    if isinstance(forecast, ForecastArgs):
        return dataclasses.replace(forecast, series=moved)
    return forecast.model_copy(update={"series": moved})


def offloaded_zero_shot(raw: bytes, max_series: int) -> Any:
    """`parse_zero_shot` in the parse process for a big body: the named forecast's lane when the body
    has no `freq` and no `timestamps` (the tuple `parse_zero_shot` gives, or the lane's refusal); None
    (parsed in the event loop) when it may have one."""
    if b'"freq"' in raw or b'"timestamps"' in raw:
        return None
    parsed = offloaded_forecast(raw, max_series)
    return parsed if isinstance(parsed, Refusal) else (ZeroShotBody(parsed), None)
