"""KServe's time-series forecast API (`/v1/timeseries/...`), request and response as KServe defines them
(kserve/protocol/rest/timeseries/types.py): the same fields, names and frequency codes; extra fields are
allowed, as there."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from app.protocols.datetimes import IsoDatetime
from app.protocols.numbers import Count
from rsa_core.frequency import parse_alias

# KServe's frequency codes: a fixed step, or a number of calendar months (codec.SECONDS, codec.MONTHS).
KSERVE_FREQUENCIES = (
    "second",
    "S",
    "minute",
    "T",
    "hour",
    "H",
    "day",
    "D",
    "week",
    "W",
    "month",
    "M",
    "quarter",
    "Q",
    "year",
    "Y",
)


def _frequency(value: str) -> str:
    # Beside KServe's codes, any pandas/TimeGPT alias (`1MS`, `MS`, `QS-MAR`, `W-SAT`, `15min`: what
    # `pd.infer_freq` gives a pandas user), read by the one rule every path reads an alias by
    # (rsa_core.frequency.parse_alias); the codec checks its step against the model's.
    if value in KSERVE_FREQUENCIES or parse_alias(value) is not None:
        return value
    raise PydanticCustomError(
        "frequency",
        "expected one of KServe's codes ({codes}) or a pandas alias of the model's step (its own frequency "
        "as GET /v1/models/<name> shows it, e.g. 1h, 1D, 1MS; or MS, QS-MAR, W-SUN), got {value}",
        {"codes": ", ".join(KSERVE_FREQUENCIES), "value": repr(value[:32])},
    )


Frequency = Annotated[
    str,
    AfterValidator(_frequency),
    Field(
        description="KServe's code (H, hour, D, day, M, month, ...) or a pandas alias (1h, 1D, 1MS, MS, "
        "QS-MAR, W-SUN, ...); it must be the model's step.",
        examples=["H", "1h"],
    ),
]
SeriesType = Literal["univariate_time_series", "multivariate_time_series"]
# Strict, as /v1's values: a string or a bool is not a number (`true` was read as 1.0).
Value = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class TimeSeriesInput(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: SeriesType
    name: str
    series: list[Value] | list[list[Value]] = Field(
        description="Univariate: a list of values; multivariate: rows of one value per model channel."
    )
    frequency: Frequency
    start_timestamp: IsoDatetime | None = Field(
        default=None, description="ISO 8601 time of the first value (required by this service)."
    )


class ForecastOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    horizon: Count = Field(ge=1, description="Steps to forecast, at most the model's horizon.")
    quantiles: list[Annotated[float, Field(strict=True, gt=0, lt=1)]] | None = Field(
        default=None,
        description="Quantile levels, e.g. [0.1, 0.5, 0.9], each answered from the model's calibrated "
        "intervals (GET /v1/models/{name} lists them under intervals.quantiles); q < 0.5 is the lower bound "
        "of level 100(1 - 2q), q > 0.5 the upper bound of level 100(2q - 1), 0.5 the mean forecast.",
    )


class TimeSeriesForecastRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    inputs: list[TimeSeriesInput] = Field(min_length=1)
    options: ForecastOptions
    metadata: dict[str, Any] | None = None


class TimeSeriesForecast(BaseModel):
    type: SeriesType
    name: str
    mean_forecast: list[float] | list[list[float]]
    frequency: Frequency
    start_timestamp: str = Field(description="ISO 8601 time of the first forecast step.")
    quantiles: dict[str, list[float] | list[list[float]]] | None = Field(
        default=None,
        description='Per requested quantile, keyed as sent ("0.1"): values shaped like mean_forecast.',
    )


class TimeSeriesError(BaseModel):
    code: str | None = Field(description="This service's machine-readable code, e.g. invalid_input.")
    message: str
    param: str | None = Field(description="The request field at fault, e.g. inputs[0].series.")
    type: str = Field(description="KServe's error class, e.g. BadRequestError.")


class TimeSeriesErrorResponse(BaseModel):
    error: TimeSeriesError


class ForecastOutput(BaseModel):
    type: Literal["time_series_forecast"]
    id: str
    status: Literal["completed"]
    content: list[TimeSeriesForecast]
    error: TimeSeriesError | None = None


class TimeSeriesForecastResponse(BaseModel):
    id: str
    created_at: int = Field(description="Unix time of the answer.")
    status: Literal["completed"]
    error: TimeSeriesError | None = None
    model: str
    outputs: list[ForecastOutput]
    usage: None = None
