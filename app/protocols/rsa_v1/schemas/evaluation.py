"""Backtests and anomaly checks over a series' own history (POST .../cross_validation, .../detect_anomalies;
app/inference/backtest.py)."""

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

_HISTORY_SERIES = Field(
    min_length=1,
    description="At most `RSA_MAX_SERIES_PER_REQUEST` series, each its whole history (as `/forecast`'s "
    "`series`, of which a forecast reads only the last `input_length`): every window is cut from it. A "
    "covariate model's covariates span the history too: `past` and `future` one value per value, "
    "`static` (docs/backtest.md). The last windows' H future steps run past the history, where the answer "
    "reads none of them: `future` may send up to H − `horizon` (H − `lead`) values after the history; "
    "those not sent are read as the training mean (counted in `future_unsent`).",
)


class CrossValidationRequest(_Strict):
    """A backtest: `n_windows` forecasts of `horizon` steps per series, from cutoffs `step_size` apart,
    the last `horizon` steps before the history's end, each beside the actual values that followed."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [
                        {"id": "a", "start": "2018-01-01T00:00:00Z", "values": [[1.0, 2.0], [1.5, 2.5]]}
                    ],
                    "horizon": 24,
                    "n_windows": 5,
                    "step_size": 24,
                    "level": [80, 95],
                }
            ]
        },
    )

    series: list[SeriesInput] = _HISTORY_SERIES
    horizon: Count | None = Field(
        default=None, ge=1, description="Steps per forecast, 1..model horizon (default: the model horizon)."
    )
    n_windows: Count = Field(
        default=1,
        ge=1,
        description="Cutoffs per series. Series × n_windows forecasts run per request, at most "
        "`RSA_MAX_SERIES_PER_REQUEST`; the first cutoff needs `input_length` values before it (a global "
        "model's `min_history`).",
    )
    step_size: Count | None = Field(
        default=None, ge=1, description="Steps between consecutive cutoffs (default: `horizon`)."
    )
    level: list[FiniteFloat] | None = Field(
        default=None,
        description="Prediction intervals to answer beside each forecast (`lo-80`, `hi-80`) and to score "
        "(coverage per level): calibrated levels only, as `/forecast`'s `level`.",
    )
    refit: bool | None = Field(
        default=None,
        description="Refit the model's closed-form read-out on the values before each cutoff (every "
        "series' values before its window `j`, for window `j`), as `fit_forecast` fits, and forecast from "
        "it, as statsforecast and NeuralForecast backtest; false: the served weights at every cutoff, "
        "in-sample where a cutoff falls inside the model's training range (`in_sample`). Default: true "
        "for a global read-out that can be refitted (covariates or not), false otherwise; it costs "
        "`n_windows` fits, in a fit slot (RSA_MAX_FITS_IN_FLIGHT) within RSA_MAX_FIT_SECONDS "
        "(docs/backtest.md).",
    )

    _limit = field_validator("series", mode="wrap")(_series_within_limit)
    _unique = field_validator("series")(unique_ids)


class BacktestMetrics(BaseModel):
    """Accuracy over the known actual values: MAE and MSE in the data's units, MASE in units of the
    seasonal naive forecast's in-sample MAE (period: the model's cycle, else 1; in-sample: the values
    before the first cutoff), sMAPE in percent (0–200), coverage per level as the share inside [lo, hi]."""

    mae: float | None
    mse: float | None
    mase: float | None
    smape: float | None
    coverage: dict[str, float | None] = Field(description='Per level asked for, e.g. {"80": 0.83}.')
    points: int = Field(description="Actual values compared (missing ones are left out).")
    seasonal_naive: BacktestMetrics | None = Field(
        default=None,
        description="The same metrics of the seasonal naive forecast on the same points (each step the "
        "value a season before it, from the values before the cutoff; season: MASE's), the baseline a "
        "model must beat.",
    )


class BacktestWindow(BaseModel):
    """One cutoff's forecast beside the actuals; with `level`, also `lo-{level}` and `hi-{level}`."""

    model_config = ConfigDict(extra="allow")

    cutoff: int = Field(description="Values before the forecast (its first step is values[cutoff]).")
    timestamps: list[datetime] | None = Field(description="Each forecast step's time, with a `start`.")
    forecast: list[list[float]] = Field(description="horizon rows of C values.")
    actual: list[list[float | None]] = Field(description="The values that followed (null: missing).")
    in_sample: bool | None = Field(
        default=None,
        description="Whether the values compared may have been fitted on: false with `refit`; without it, "
        "true where the window's first value is at or before the end of the model's training data (the "
        "series' own end where its id was trained on, else the last of all), null where unknown (no "
        "`start`, or a version that does not record its training range).",
    )
    future_unsent: int | None = Field(
        default=None,
        description="A covariate model's future steps past the values sent that this window's forecast "
        "read as the training mean (steps after `horizon`, which the answer does not show; absent: none).",
    )


class SeriesBacktest(BaseModel):
    id: str | None
    windows: list[BacktestWindow]
    metrics: BacktestMetrics
    channel_metrics: dict[str, BacktestMetrics] | None = Field(
        default=None, description="Per channel, for a model of several channels."
    )


class CrossValidationResponse(BaseModel):
    model: str
    version: int
    provider: str
    channels: list[str]
    horizon: int
    n_windows: int
    step_size: int
    level: list[float] | None
    refit: bool = Field(description="Whether each window was forecast by a read-out refitted before it.")
    training_end: datetime | None = Field(
        default=None,
        description="The last timestamp of the model's training data (null: not recorded, before issue 45).",
    )
    series: list[SeriesBacktest]
    metrics: BacktestMetrics = Field(description="Pooled over every point of every series and channel.")


class AnomalyRequest(_Strict):
    """Flag the points of each series outside the model's calibrated interval at `level`, each forecast
    from the window that ends `lead` steps before it (1: rolling one-step forecasts). With `last`, only
    the last `last` points (the online form: cheap enough to call on every new point)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"series": [{"id": "a", "values": [[1.0, 2.0], [1.5, 2.5]]}], "level": 99, "last": 24},
            ]
        },
    )

    series: list[SeriesInput] = _HISTORY_SERIES
    level: FiniteFloat | None = Field(
        default=None,
        description="The interval's level in percent, one the model calibrated (`intervals.levels`; "
        "default: the highest, 99 for the shipped model). Each "
        "point outside it is flagged; a normal point falls outside with probability about 1 − level/100, "
        "so over many points false flags are expected (docs/backtest.md).",
    )
    lead: Count = Field(
        default=1, ge=1, description="Forecast steps ahead of each checked point, 1..model horizon."
    )
    last: Count | None = Field(
        default=None,
        ge=1,
        description="Check only the last `last` points of each series (default: every point with a full "
        "window before it). Series × points forecasts run per request, at most RSA_MAX_SERIES_PER_REQUEST.",
    )
    repair: bool = Field(
        default=True,
        description="Judge the points in time order, each forecast from a window with the spikes flagged "
        "before it replaced by their forecasts (a window that would end with replaced values: from the "
        "window before them, that many steps further ahead), so that a spike does not flag the points "
        "after it; a flag followed `lead` steps later by another on the same side is a level shift's "
        "onset, read as sent. Only checked points are repaired (with `last`, older anomalies stay in the "
        "windows); docs/backtest.md.",
    )

    _limit = field_validator("series", mode="wrap")(_series_within_limit)
    _unique = field_validator("series")(unique_ids)


class SeriesAnomalies(BaseModel):
    """Per checked point (oldest first) and channel: the value, its forecast, the interval, the flag and
    the score, |value − forecast| in interval half-widths (above 1: outside the interval)."""

    id: str | None
    index: list[int] = Field(description="Each checked point's position in the history sent.")
    timestamps: list[datetime] | None = Field(description="Each checked point's time, with a `start`.")
    actual: list[list[float | None]]
    forecast: list[list[float]]
    lo: list[list[float]]
    hi: list[list[float]]
    anomaly: list[list[bool]]
    score: list[list[float | None]] = Field(description="null where the value is missing.")
    anomalies: int = Field(description="Values flagged.")
    future_unsent: list[int] | None = Field(
        default=None,
        description="A covariate model's future steps past the values sent that each checked point's "
        "forecast read as the training mean (steps after `lead`; absent when none did).",
    )
    replaced: list[list[bool]] | None = Field(
        default=None,
        description="With `repair`: whether the windows after each value read it as its forecast (a spike "
        "replaced), not as sent (a normal value, a level shift's onset and the flags that absorb it); "
        "absent where the repair replaced none. The values of a later check of the same series, sent "
        "with these replaced by their `forecast`, are read as this check's windows read them.",
    )


class AnomalyResponse(BaseModel):
    model: str
    version: int
    provider: str
    channels: list[str]
    level: float
    lead: int
    series: list[SeriesAnomalies]
    anomalies: int = Field(description="Values flagged over every series.")
