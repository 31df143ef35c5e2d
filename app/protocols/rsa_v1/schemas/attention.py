"""POST /v1/models/{name}/versions/{v}/attention: the request, a transformer's matrices per layer and head,
and a global model's explanation (its read-out term by term, a hybrid's members, a lag sensitivity)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.protocols.numbers import Count
from app.protocols.rsa_v1.schemas.common import SeriesInput, _Strict

MatrixName = Literal["softmax", "rem", "mixed"]
MATRIX_NAMES: tuple[MatrixName, ...] = ("softmax", "rem", "mixed")
# L×L (query i, key j), or for a model read out at its last step the last query's row over the L keys.
Matrix = list[list[float]] | list[float]
OutputFormat = Literal["json", "png"]


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


class LiftTerm(TermShare):
    width: int = Field(description="The random layer's outputs (`export.panel train --lift`).")


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
    lift: LiftTerm | None = Field(
        default=None,
        description="A read-out with a random layer: that layer's part, nonlinear in the window (lag_weights "
        "and lag_contributions are the linear part's); null without one.",
    )
    covariates: list[CovariateContribution] = Field(default_factory=list)
    still: TermShare | None = Field(
        default=None,
        description="A window without change (every value the one a period before, within 1e-8 of its "
        "mean |value|) is forecast as its last cycle repeated: this term takes the others there; null "
        "for any other window.",
    )
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
    held: bool = Field(
        description="True: the window is still over the read-out's input length (every value the one a "
        "period before, within 1e-8 of its mean |value|), so every member forecasts its last cycle repeated."
    )
    observed: int = Field(
        description="Observed values in the steps the local members read: the local window, or its last "
        "`short_length` steps for a series the long period does not decompose (the manifest's `panel.local`)."
    )
    min_values: int
    season: int | None = Field(
        description="The period the local members' seasonal decomposition used on this series: the cycle, "
        "or the model's long period (a week of hours) where the window holds three of them and shows it; "
        "null where the read-out alone answers."
    )
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
