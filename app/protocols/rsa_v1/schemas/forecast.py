"""POST /v1/models/{name}/forecast (and /v1/forecast, the pretrained models): the request and the answer."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.protocols.numbers import Count
from app.protocols.rsa_v1.schemas.common import (
    FiniteFloat,
    SeriesInput,
    _series_within_limit,
    _Strict,
    unique_ids,
)


class ForecastRequest(_Strict):
    """```json
    {"series": [{"id": "a", "values": [[1.0, 2.0, 3.0], ...], "start": "2018-06-01T00:00:00"}],
     "horizon": 24}
    ```
    A global model (one channel, any series): `{"series": [{"id": "store_21", "start": "2023-01-01",
    "values": [1520.5, 1611.0, ...]}], "horizon": 12}`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [
                        {"id": "store_21", "start": "2023-01-01", "values": [1520.5, 1611.0, 1580.25]},
                        {"id": "store_22", "start": "2022-07-01", "values": [980.0, 1002.5, 990.0, 1010.0]},
                    ],
                    "horizon": 12,
                },
                {
                    "series": [
                        {"id": "a", "values": [[1.0, 2.0], [1.5, 2.5]], "start": "2018-06-01T00:00:00Z"}
                    ]
                },
            ]
        },
    )

    series: list[SeriesInput] = Field(min_length=1, description="At most `RSA_MAX_SERIES_PER_REQUEST`.")
    horizon: Count | None = Field(
        default=None, ge=1, description="Steps to return, 1..model horizon (default: the model horizon)."
    )
    level: list[FiniteFloat] | None = Field(
        default=None,
        description="Prediction intervals to add, as percentages (TimeGPT's `level`), e.g. [80, 95]: each "
        "series then has `lo-80`, `hi-80`, ... shaped like `forecast`. Only the levels the model version "
        "calibrated (`intervals.levels` in /v1/models; 50, 80, 90, 95, 99 by default); not with `quantiles`.",
    )
    quantiles: list[FiniteFloat] | None = Field(
        default=None,
        description="Quantiles to add, as probabilities, e.g. [0.05, 0.5, 0.95]: each series then has `q-5`, "
        "`q-50`, `q-95` shaped like `forecast`. q < 0.5 is the lower bound of level 100(1 - 2q), q > 0.5 the "
        "upper bound of level 100(2q - 1), 0.5 the forecast; not with `level`.",
    )

    _limit = field_validator("series", mode="wrap")(_series_within_limit)
    _unique = field_validator("series")(unique_ids)


class SeriesForecast(BaseModel):
    """With `level`, also `lo-{level}` and `hi-{level}`; with `quantiles`, `q-{100·q}`: arrays shaped like
    `forecast`, on its timestamps. With missing values (null) in the window, also `filled`: how many were
    filled by the model's training rule (absent when none). From a hybrid model, for a series too short
    for its local models, also `local_models`: that it got the global read-out alone, and why. Without a
    `start`, `timestamps` is null and `timestamps_note` says to send one."""

    model_config = ConfigDict(extra="allow")

    id: str | None
    forecast: list[list[float]] = Field(description="horizon rows of C values, channels as in `channels`.")
    channels: list[str]
    timestamps: list[datetime] | None = Field(
        description="ISO 8601 time of each forecast row when the series had a `start`, else null (the "
        "model knows its step, not where the series begins: send `start`, the first value's time)."
    )


class ForecastResponse(BaseModel):
    model: str
    version: int
    provider: str = Field(description="The ONNX Runtime execution provider that ran the model.")
    forecasts: list[SeriesForecast]
