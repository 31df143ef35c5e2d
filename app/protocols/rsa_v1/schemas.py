"""Wire formats: the JSON bodies the HTTP API accepts and returns, and nothing else.

Limits that depend on the model (input length, horizon, channels) or on settings (series per request,
history length) are checked by the data plane, which names the field and the limit in its error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.protocols.datetimes import IsoDatetime
from app.protocols.numbers import Count

# Strict: a string or a bool is not a number. allow_inf_nan=False: NaN, Infinity and overflowing
# literals such as 1e400 (parsed as inf) are rejected with the element's position.
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]

ROWS_TAG = "rows"
COLUMNS_TAG = "columns"
FLAT_TAG = "flat"


def _values_layout(value: Any) -> str:
    if isinstance(value, dict):
        return COLUMNS_TAG
    if isinstance(value, list) and value and not isinstance(value[0], list):
        return FLAT_TAG  # [1.0, 2.0, ...]: one channel's values
    return ROWS_TAG


# `values` is rows of channel values, an object of named columns, or (a one-channel model, e.g. a
# global model of many series) a flat list of values. The callable discriminator keeps validation
# errors to the layout the client actually sent.
# A null is a missing value: filled by the model's training rule and counted in the answer (`filled`),
# refused above RSA_MAX_MISSING_SHARE of the window (app/inference/windows.py `last_window_filled`).
SeriesValues = Annotated[
    Annotated[list[list[FiniteFloat | None]], Tag(ROWS_TAG)]
    | Annotated[dict[str, list[FiniteFloat | None]], Tag(COLUMNS_TAG)]
    | Annotated[list[FiniteFloat | None], Tag(FLAT_TAG)],
    Discriminator(_values_layout),
]

MatrixName = Literal["softmax", "rem", "mixed"]
MATRIX_NAMES: tuple[MatrixName, ...] = ("softmax", "rem", "mixed")
# L×L (query i, key j), or for a model read out at its last step the last query's row over the L keys.
Matrix = list[list[float]] | list[float]
OutputFormat = Literal["json", "png"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SeriesInput(_Strict):
    """One time series: `[[c1, ..., cC], ...]` rows in the model's channel order, or `{"OT": [...]}`."""

    id: str | None = Field(default=None, max_length=256, description="Echoed back in the response.")
    values: SeriesValues = Field(
        description="Rows of C channel values (oldest first), an object of named columns of equal "
        "length holding every model channel, or for a one-channel model a flat list of values. Only the "
        "last `input_length` points are used. A global model (`panel` in /v1/models) takes histories "
        "from its `min_history` on: the steps before a shorter series' start are masked, never filled."
    )
    start: IsoDatetime | None = Field(
        default=None,
        description="Timestamp of the first value, ISO 8601 (e.g. 2018-01-26T16:00:00Z; a naive one is read "
        "in the model's zone, `timezone` in /v1/models, UTC without one); "
        "enables forecast timestamps. Required by a model with a seasonal `cycle`, which aligns it to the "
        "window's first timestamp.",
    )
    # Covariates of a global model that has them (`panel.covariates` in /v1/models; docs/panels.md).
    future: dict[str, list[FiniteFloat]] | None = Field(
        default=None,
        description="Future-known covariates: {name: one value per step of the model's horizon H}.",
    )
    past: dict[str, list[FiniteFloat | None]] | None = Field(
        default=None,
        description="Past-only covariates: {name: one value per value of `values`} (null: not observed).",
    )
    static: dict[str, FiniteFloat | Annotated[str, Field(strict=True, max_length=256)]] | None = Field(
        default=None, description="Static covariates: {name: a number, or one of the model's categories}."
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

    @field_validator("series", mode="wrap")
    @classmethod
    def _at_most_max_series(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """The service's series limit (validation context `max_series`), checked before any series is
        validated: a request of too many series is refused without paying for its values."""
        limit = (info.context or {}).get("max_series")
        if limit is not None and isinstance(value, list) and len(value) > limit:
            raise PydanticCustomError(
                "too_long",
                "series has {actual_length} items; at most {max_length} are accepted",
                {"max_length": limit, "actual_length": len(value)},
            )
        return handler(value)


class SeriesForecast(BaseModel):
    """With `level`, also `lo-{level}` and `hi-{level}`; with `quantiles`, `q-{100·q}`: arrays shaped like
    `forecast`, on its timestamps. With missing values (null) in the window, also `filled`: how many were
    filled by the model's training rule (absent when none). From a hybrid model, for a series too short
    for its local models, also `local_models`: that it got the global read-out alone, and why."""

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


class AttentionRequest(_Strict):
    """```json
    {"series": {"values": [[1.0, 2.0, 3.0], ...]}, "matrices": ["mixed"], "channel": "OT",
     "average_heads": false, "layers": [0], "format": "json"}
    ```"""

    series: SeriesInput
    matrices: list[MatrixName] = Field(
        default_factory=lambda: list(MATRIX_NAMES),
        min_length=1,
        max_length=3,
        description="Which matrices.",
    )
    channel: Count | str = Field(
        default=0, description="Channel name or index; attention differs per channel (channel-independent)."
    )
    average_heads: bool = Field(default=False, description="Return the mean over the heads of each layer.")
    layers: list[Count] | None = Field(
        default=None, min_length=1, max_length=64, description="Distinct layer indices (default all)."
    )
    format: OutputFormat = Field(default="json", description="`png` returns an image/png heatmap figure.")


class MatrixSet(BaseModel):
    softmax: Matrix | None = None
    rem: Matrix | None = None
    mixed: Matrix | None = None


class HeadAttention(BaseModel):
    """A head's REM parameters from the manifest and, unless heads are averaged, its L×L matrices."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    head: int
    kind: str | None = Field(description="regular, cyclic_cos, cyclic_sin or softmax; null if unknown.")
    dilation: int | None = None
    lambda_: float | None = Field(default=None, alias="lambda")
    gamma: float | None = None
    theta: float | None = None
    gate: float | None = Field(default=None, description="g in (1 - g)·softmax + g·REM.")
    matrices: MatrixSet | None = None


class LayerAttention(BaseModel):
    layer: int
    gate_mode: str | None = None
    heads: list[HeadAttention]
    mean: MatrixSet | None = Field(default=None, description="Mean over heads, with `average_heads`.")


class ChannelRef(BaseModel):
    index: int
    name: str


class KernelShare(BaseModel):
    """One REM kernel of a global read-out: its parameters (the manifest's `readout` heads; null in a
    version exported without them), its share of the forecast and its part of each horizon step."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    index: int
    kind: str | None = Field(description="regular, cyclic_cos or cyclic_sin; null if unknown.")
    dilation: int | None = None
    lambda_: float | None = Field(default=None, alias="lambda")
    gamma: float | None = None
    theta: float | None = None
    share: float = Field(description="Σ_h |weight × feature| of this kernel over that of every term.")
    contribution: list[float] = Field(description="Its part of each horizon step, in the forecast's units.")


class TermShare(BaseModel):
    """A read-out term other than a kernel: its share and its part of each horizon step."""

    share: float
    contribution: list[float]


class DirectLags(TermShare):
    lags: int = Field(description="How many of the last values the read-out reads directly.")


class MissingShare(TermShare):
    value: float = Field(description="The share of the window not observed (a short series' start).")


class CovariateContribution(TermShare):
    name: str
    kind: Literal["future", "past", "static", "calendar"]


class ReadoutExplanation(BaseModel):
    """A global read-out's forecast of the series sent, term by term (app/inference/explain.py): the
    contributions of the lags, the missing share, the bias and the covariates add up to `forecast`."""

    scale: float = Field(description="The window's scale s: the forecast's units are s × normalised units.")
    values: list[float] = Field(description="The window in normalised units x / s, oldest first, 0 missing.")
    lag_weights: list[list[float]] = Field(
        description="[L][H]: each lag's effective weight per horizon step (REM kernels and direct lags "
        "combined by the read-out's weights), normalised units."
    )
    lag_contributions: list[list[float]] = Field(
        description="[L][H]: each lag's part of each horizon step, s × value × weight, forecast units."
    )
    kernels: list[KernelShare]
    direct_lags: DirectLags
    missing: MissingShare
    bias: TermShare
    covariates: list[CovariateContribution] = Field(default_factory=list)
    forecast: list[float] = Field(description="The read-out's forecast, H steps: the sum of the terms.")


class HybridMember(BaseModel):
    name: str = Field(description="readout, or the local model (ses, holt, damped, theta, dotm, sar).")
    kind: Literal["global", "local"]
    weight: float
    forecast: list[float]


class HybridExplanation(BaseModel):
    """A hybrid's members (global read-out and local models) on the series sent: forecast = Σ weight ×
    member forecast."""

    local_used: bool = Field(description="False: too few observed values; the read-out alone answers.")
    observed: int
    min_values: int
    members: list[HybridMember]
    forecast: list[float]


class SensitivityExplanation(BaseModel):
    """A global network exported without an inspection graph (before issue 48): its lag effects on the
    series sent, d forecast / d value of each lag per horizon step, by finite differences through the
    served graph."""

    method: Literal["finite_difference"] = "finite_difference"
    step: float = Field(description="The step, in the window's normalised units.")
    scale: float
    values: list[float]
    lag_weights: list[list[float]]
    forecast: list[float]


class AttentionResponse(BaseModel):
    model: str
    version: int
    provider: str
    channel: ChannelRef
    input_length: int
    query: Literal["all", "last"] = Field(
        default="all",
        description="all: each matrix is L×L (query i, key j). last: the model reads its last step only, "
        "and each matrix is that query's row, L weights over the keys (oldest first).",
    )
    layers: list[LayerAttention] = Field(
        default_factory=list, description="Empty for a global model: it answers `readout` or `sensitivity`."
    )
    readout: ReadoutExplanation | None = Field(
        default=None, description="A global read-out (and a hybrid's read-out): its forecast term by term."
    )
    hybrid: HybridExplanation | None = Field(default=None, description="A hybrid: each member, its weight.")
    sensitivity: SensitivityExplanation | None = Field(
        default=None, description="A global RSA-Transformer without inspect.onnx: each lag's effect."
    )


class FileInfo(BaseModel):
    sha256: str
    bytes: int


class HeadInfo(BaseModel):
    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    head: int
    kind: str
    dilation: int
    lambda_: float | None = Field(default=None, alias="lambda")
    gamma: float | None = None
    theta: float | None = None
    gate: float


class LayerInfo(BaseModel):
    layer: int
    gate_mode: str | None
    heads: list[HeadInfo]


class CycleInfo(BaseModel):
    """A learned seasonal cycle: phase = floor(T / step_seconds) mod period, T the window's first time."""

    period: int = Field(description="Steps per cycle, e.g. 24 for a daily cycle of hourly data.")
    step_seconds: float


class IntervalsInfo(BaseModel):
    """The version's prediction intervals: what `level` and `quantiles` may ask for."""

    method: str
    levels: list[float] = Field(description="Calibrated levels, in percent.")
    quantiles: list[float] = Field(description="The probabilities these levels answer.")
    calibration: dict[str, Any] | None = None


class CovariateInfo(BaseModel):
    """One covariate a global model reads."""

    name: str
    kind: Literal["future", "past", "static", "calendar"]
    dtype: str = Field(description="float, category, or derived (a calendar feature, from the timestamps).")
    categories: list[str] | None = None
    horizon: bool = Field(description="Whether it is needed for every horizon step (future, calendar).")


class PanelInfo(BaseModel):
    """A global model: any series of its frequency, each a flat list of at least `min_history` values
    (shorter than `input_length`: the missing start is masked)."""

    min_history: int
    period: int = Field(description="The seasonal cycle in steps the model was fitted with (1: none).")
    covariates: list[CovariateInfo] = Field(
        default_factory=list, description="What each series must send beside its values (none: empty)."
    )


VersionState = Literal["loading", "ready", "failed", "unloading"]


class BatchingStats(BaseModel):
    """Counters of a version's batcher since start (metrics come later; these prove merging)."""

    max_series_per_call: int = Field(
        description="RSA_MAX_BATCH_ROWS, or fewer where that many series would form more attention "
        "memory than RSA_CALL_ATTENTION_MIB; a request of more series is split over calls."
    )
    session_calls: int
    rows: int = Field(description="Series sent to the session.")
    failed_calls: int
    rejected_requests: int = Field(description="Refused with 503 overloaded.")
    expired_requests: int = Field(description="Deadline passed in the queue; never reached the session.")
    dropped_requests: int = Field(description="Cancelled by the caller (timeout, disconnect) while queued.")


class VersionInfo(BaseModel):
    version: int
    state: VersionState
    error: str | None = Field(default=None, description="Why the version failed to load.")
    provider: str | None = Field(default=None, description="session.get_providers()[0] once loaded.")
    created: str | None = None
    kind: str | None = Field(
        default=None,
        description="The architecture, e.g. rem_readout or rsa_transformer (the manifest's `kind`).",
    )
    description: str | None = Field(default=None, description="What the model is, in the exporter's words.")
    input_length: int | None = None
    horizon: int | None = None
    channels: list[str] | None = None
    frequency: str | None = None
    frequency_seconds: float | None = None
    timezone: str | None = Field(
        default=None,
        description="The IANA zone the model was trained in: a `start` without offset is read there, and "
        "answers carry its offsets (null: UTC).",
    )
    cycle: CycleInfo | None = Field(
        default=None, description="The model's seasonal cycle; when set, every series needs a `start`."
    )
    intervals: IntervalsInfo | None = Field(
        default=None, description="Calibrated prediction intervals; null: the version has none."
    )
    panel: PanelInfo | None = Field(default=None, description="Set for a global model of many series.")
    layers: list[LayerInfo] | None = None
    architecture: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    dataset: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    opset: int | None = None
    files: dict[str, FileInfo] | None = None
    batching: BatchingStats | None = None


class ModelInfo(BaseModel):
    name: str
    ready: bool = Field(description="Every version of the model is loaded and warmed up.")
    latest_version: int | None = Field(description="The version `/forecast` without a version serves.")
    error: str | None = None
    versions: list[VersionInfo]


class ModelList(BaseModel):
    models: list[ModelInfo]


class Liveness(BaseModel):
    status: Literal["alive"] = "alive"


class ModelReadiness(BaseModel):
    name: str
    ready: bool
    errors: list[str] = Field(default_factory=list)


class Readiness(BaseModel):
    ready: bool
    draining: bool = Field(default=False, description="The service is shutting down: not ready, on purpose.")
    models: list[ModelReadiness]


class ErrorDetail(BaseModel):
    field: str | None = Field(default=None, description="Where in the request, e.g. series[0].values[3].")
    message: str
    type: str | None = None


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. invalid_input, model_not_found.")
    message: str
    field: str | None = Field(default=None, description="The offending request field, when there is one.")
    limit: Any | None = Field(default=None, description="The limit the field broke, when there is one.")
    details: list[ErrorDetail] | None = Field(default=None, description="Every validation error found.")


class ErrorResponse(BaseModel):
    """Every error response, whatever its status: `{"error": {"code": ..., "message": ..., ...}}`."""

    error: ErrorBody


# -- a read-out fitted on request (POST /v1/models/{name}/fit_forecast) ----------------------------------


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


class PublishedVersion(BaseModel):
    model: str
    version: int


class FitInfo(BaseModel):
    series: int = Field(description="Series the read-out was fitted on (those holding a window).")
    windows: int = Field(description="Training windows in all.")
    seconds: float = Field(description="The fit's time (read-out, intervals and forecast).")
    calibration_windows: int = Field(description="Held-out windows the interval widths were calibrated on.")
    levels: list[float] = Field(description="The levels answered with intervals.")
    no_interval: dict[str, str] = Field(description="Each requested level without intervals, and why.")
    published: PublishedVersion | None = None


class FitForecastResponse(ForecastResponse):
    fit: FitInfo


# -- backtests and anomaly checks over a series' own history (app/inference/backtest.py) ---------------


def _series_within_limit(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """The service's series limit (validation context `max_series`) before any series is validated."""
    limit = (info.context or {}).get("max_series")
    if limit is not None and isinstance(value, list) and len(value) > limit:
        raise PydanticCustomError(
            "too_long",
            "series has {actual_length} items; at most {max_length} are accepted",
            {"max_length": limit, "actual_length": len(value)},
        )
    return handler(value)


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


class AnomalyResponse(BaseModel):
    model: str
    version: int
    provider: str
    channels: list[str]
    level: float
    lead: int
    series: list[SeriesAnomalies]
    anomalies: int = Field(description="Values flagged over every series.")
