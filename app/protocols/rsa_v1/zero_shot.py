"""`POST /v1/forecast`: a forecast without naming a model (issue 47), as TimeGPT and Chronos users send
one. The body is the named forecast's (`ForecastRequest`) plus an optional `freq`; the answer is the
named forecast's, whose `model` and `version` say which pretrained model answered.

The model is the pretrained one of the request's frequency: a loaded model whose latest version's
manifest has `dataset.pretrained.frequency` (export/pretrained.py builds them). The frequency is

- `freq`, a pandas/TimeGPT alias: `MS`/`M`/`ME` monthly, `QS`/`Q`/`QE` quarterly, `YS`/`Y`/`A`/`AS`
  yearly, `H`/`h` hourly, `D` daily, `W` weekly (an anchor such as `QS-OCT` or `W-SUN` is read by its
  base, a multiple `1MS` or `3MS` as the step it names);
- else each series' `start`: a time of day other than midnight reads hourly, midnight on the first of a
  month monthly (send `freq` for quarterly or yearly series, which start there too); any other start,
  or none, is refused naming `freq`. Series of different frequencies in one request are refused (send
  them apart), naming the first that differs.

A frequency with no pretrained model is a 422 naming the frequencies that have one. The handler goes
through `V1Handlers` and the service's catalog (its `models()`), as the named routes do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from pydantic import Field

from app.core.errors import InvalidInput
from app.protocols.parsing import Refusal
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.schemas import ForecastRequest
from app.protocols.rsa_v1.wire import ForecastArgs, encode_forecast, offloaded_forecast, parse_forecast

# A pandas/TimeGPT alias (its base, upper case, without an anchor) -> the frequency it names.
ALIASES: dict[str, str] = {
    **dict.fromkeys(("MS", "M", "ME", "1MS", "1M", "1ME", "BMS", "BM", "BME", "SMS"), "monthly"),
    **dict.fromkeys(("QS", "Q", "QE", "3MS", "3M", "3ME", "BQS", "BQ", "BQE"), "quarterly"),
    **dict.fromkeys(("YS", "Y", "YE", "A", "AS", "12MS", "12M", "12ME", "BYS", "BY", "BA"), "yearly"),
    **dict.fromkeys(("H", "1H"), "hourly"),
    **dict.fromkeys(("D", "1D"), "daily"),
    **dict.fromkeys(("W", "1W", "7D"), "weekly"),
}
# pandas' aliases of steps under an hour, case as pandas writes them: no model forecasts them.
SUB_HOURLY = frozenset(("min", "T", "s", "S", "ms", "L", "us", "U", "ns", "N"))
MAX_FREQ_LENGTH = 32


class ZeroShotRequest(ForecastRequest):
    """```json
    {"series": [{"id": "sales", "start": "2021-01-01", "values": [1520.5, 1611.0, "..."]}],
     "horizon": 12, "level": [80], "freq": "MS"}
    ```"""

    freq: str | None = Field(
        default=None,
        max_length=MAX_FREQ_LENGTH,
        description="The series' frequency as pandas/TimeGPT write it (MS, QS, YS, H, D, W, ...); absent: "
        "read from each series' `start` (midnight on the 1st of a month: monthly; another time of day: "
        "hourly).",
    )


def frequency_of_alias(freq: str) -> str | None:
    """The frequency a pandas/TimeGPT alias names (monthly, quarterly, ...), None for one it does not."""
    base = freq.strip().split("-", 1)[0]
    if base.lstrip("0123456789") in SUB_HOURLY:  # "ms" is milliseconds, never month starts
        return None
    return ALIASES.get(base.upper())


def frequency_of_start(start: datetime | None) -> str | None:
    """The frequency a series' `start` implies: hourly off midnight, monthly on the 1st, else None."""
    if start is None:
        return None
    if (start.hour, start.minute, start.second, start.microsecond) != (0, 0, 0, 0):
        return "hourly"
    return "monthly" if start.day == 1 else None


def request_frequency(freq: str | None, series: Any) -> str:
    """The one frequency of the request: `freq`'s, else every series' start's (InvalidInput naming the
    field when there is none or when two series differ)."""
    if freq is not None:
        found = frequency_of_alias(freq)
        if found is None:
            raise InvalidInput(
                f"freq {freq!r} is not a frequency alias this service reads; give one of "
                f"{sorted(set(ALIASES))}",
                field="freq",
                limit="MS, QS, YS, H, D, W (pandas aliases)",
            )
        return found
    first: str | None = None
    for i, s in enumerate(series):
        found = frequency_of_start(s.start)
        if found is None:
            why = "has no start" if s.start is None else f"starts at {s.start.isoformat()}"
            raise InvalidInput(
                f"series[{i}] {why}: its frequency cannot be told from it; give `freq` (e.g. MS, QS, YS, "
                "H, D, W) or a start on the 1st of a month (monthly) or off midnight (hourly)",
                field="freq",
            )
        if first is not None and found != first:
            raise InvalidInput(
                f"series[{i}].start reads {found} but series[0].start {first}: one request holds series of "
                "one frequency (send them apart, or give `freq`)",
                field=f"series[{i}].start",
            )
        first = found
    assert first is not None  # the request has at least one series
    return first


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


def parse_zero_shot(raw: bytes, max_series: int) -> tuple[ForecastArgs | ForecastRequest, str | None]:
    """(the forecast body, its `freq`): a string `freq` is taken off and the rest read by the named
    forecast's lanes (wire.py); anything else is judged by `ZeroShotRequest` (its errors name the field)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if type(body) is dict and "freq" in body:
        freq = body.pop("freq")
        if freq is None or (type(freq) is str and len(freq) <= MAX_FREQ_LENGTH):
            return parse_forecast(orjson.dumps(body), max_series), freq
    elif type(body) is dict:
        return parse_forecast(raw, max_series), None
    parsed = ZeroShotRequest.model_validate_json(raw, context={"max_series": max_series})
    return parsed, parsed.freq


async def zero_shot_forecast(v1: V1Handlers, body: ForecastArgs | ForecastRequest, freq: str | None) -> bytes:
    """The forecast of the pretrained model of the request's frequency, encoded."""
    frequency = request_frequency(freq, body.series)
    models = pretrained_models(v1)
    if frequency not in models:
        have = sorted(models)
        raise InvalidInput(
            f"no pretrained model forecasts {frequency} series; the frequencies with one: "
            f"{', '.join(have) if have else 'none (none is loaded)'}",
            field="freq",
            limit=", ".join(have),
        )
    return encode_forecast(await v1.forecast(models[frequency], None, body))


def offloaded_zero_shot(raw: bytes, max_series: int) -> Any:
    """`parse_zero_shot` in the parse process for a big body: the named forecast's lane when the body
    has no `freq` (the tuple `parse_zero_shot` gives, or the lane's refusal); None (parsed in the event
    loop) when it may have one."""
    if b'"freq"' in raw:
        return None
    parsed = offloaded_forecast(raw, max_series)
    return parsed if isinstance(parsed, Refusal) else (parsed, None)
