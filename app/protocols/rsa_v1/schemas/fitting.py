"""POST /v1/models/{name}/fit_forecast: a read-out fitted on request, its forecast and fit summary."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.protocols.numbers import Count
from app.protocols.rsa_v1.schemas.common import FiniteFloat, SeriesInput, _Strict, unique_ids
from app.protocols.rsa_v1.schemas.forecast import ForecastResponse


class PublishTarget(_Strict):
    model: str = Field(
        min_length=1,
        max_length=128,
        description="The model (a folder of the repository) to publish the refit into, as its next version.",
    )


class FitForecastRequest(_Strict):
    """```json
    {"series": [{"id": "store_21", "start": "2019-01-01", "values": [1520.5, 1611.0, ...]}],
     "horizon": 12, "level": [80, 95]}
    ```
    The model's global read-out is fitted again on these histories (every window of every series), its
    interval widths on their last values where they hold enough windows, and the refit forecasts them.
    Nothing is published unless `publish` names a model (API key and RSA_MODEL_CONTROL=explicit)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [
                        {
                            "id": "store_21",
                            "start": "2019-01-01",
                            "values": [100.0 + 10 * (i % 12) + i for i in range(72)],
                        }
                    ],
                    "horizon": 12,
                    "level": [80, 95],
                }
            ]
        },
    )

    series: list[SeriesInput] = Field(min_length=1, description="At most `RSA_MAX_FIT_SERIES` histories.")
    horizon: Count | None = Field(
        default=None,
        ge=1,
        description="Steps to return (default: the model horizon). Above it, the read-out is fitted at "
        "that horizon (its windows that many steps long; the longest series must hold train_history + "
        "horizon values) and cannot be published.",
    )
    level: list[FiniteFloat] | None = Field(
        default=None,
        description="Prediction intervals, in percent, calibrated on the histories' own last values: a "
        "level they hold too few windows for has no `lo-`/`hi-` arrays, and `fit.no_interval` says why.",
    )
    publish: PublishTarget | None = Field(
        default=None,
        description="Publish the refit as the next version of this model (needs an API key and "
        "RSA_MODEL_CONTROL=explicit; load it with POST /v2/repository/models/{model}/load).",
    )

    _unique = field_validator("series")(unique_ids)


class PublishedVersion(BaseModel):
    model: str
    version: int


class FitInfo(BaseModel):
    series: int = Field(description="Series the read-out was fitted on (those holding a window).")
    windows: int = Field(description="Training windows in all.")
    seconds: float = Field(description="The fit's time (read-out, intervals and forecast).")
    calibration_windows: int = Field(description="Held-out windows the interval widths were calibrated on.")
    calibrated_on: Literal["held_out", "local_half"] | None = Field(
        default=None,
        description="What the widths were calibrated on: `held_out`, the model's forecasts of each series' "
        "held-out last values; `local_half`, a hybrid's local models fitted on each window alone, where "
        "too few values precede the held-out ones for 80% (app/artifacts/readout/calibration.py); null "
        "without intervals.",
    )
    levels: list[float] = Field(description="The levels answered with intervals.")
    no_interval: dict[str, str] = Field(description="Each requested level without intervals, and why.")
    published: PublishedVersion | None = None


class FitForecastResponse(ForecastResponse):
    fit: FitInfo
