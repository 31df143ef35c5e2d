"""GET /v1/models and /v1/models/{name}: each model, its versions and what each version reads and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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
