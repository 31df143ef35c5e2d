"""The Open Inference Protocol v2 REST messages (KServe's and Triton's `v2`), as pydantic models.

Tensor `data` stays a plain list here: the codec turns it into a numpy array of the declared datatype and
shape in one step, which is both faster and gives errors that name the tensor.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.protocols.numbers import Count

# A parameter value: the protocol allows bool, int, float and string.
Parameters = dict[str, bool | int | float | str]


class RequestInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    shape: list[Count] = Field(description="Dimensions, each >= 0.")
    datatype: str = Field(description="e.g. FP32, INT64.")
    parameters: Parameters | None = Field(
        default=None, description="`binary_data_size`: the tensor is in the body's binary part (bytes)."
    )
    data: list[Any] | None = Field(default=None, description="Row-major, nested or flat.")


class RequestOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    parameters: Parameters | None = Field(default=None, description="`binary_data`: answer it in binary.")


class InferenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    parameters: Parameters | None = Field(
        default=None, description="`binary_data_output`: every output in binary unless it says otherwise."
    )
    inputs: list[RequestInput] = Field(min_length=1)
    outputs: list[RequestOutput] | None = None


class ResponseOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    parameters: Parameters | None = None
    data: list[float] | None = None


class InferenceResponse(BaseModel):
    model_name: str
    model_version: str
    id: str | None = None
    outputs: list[ResponseOutput]


class TensorMetadata(BaseModel):
    name: str
    datatype: str
    shape: list[int] = Field(description="-1 for the batch axis.")


class ModelMetadata(BaseModel):
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorMetadata]
    outputs: list[TensorMetadata]
    parameters: dict[str, int] | None = Field(
        default=None,
        description="This service's request limits: `max_series_per_request` (windows per request), "
        "`max_body_bytes` (a request body's bytes) and `max_evaluations_in_flight` (a model's backtests and "
        "anomaly checks waiting or running at once); clients size and pace their requests by them.",
    )


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class ServerLive(BaseModel):
    live: bool


class ServerReady(BaseModel):
    ready: bool


class ModelReady(BaseModel):
    name: str
    ready: bool


class RepositoryIndexRequest(BaseModel):
    """`POST /v2/repository/index`: `ready` true lists only the versions that are ready."""

    ready: bool = False


class RepositoryModel(BaseModel):
    """One row of the repository index, as Triton writes it (state READY, LOADING, UNLOADING, UNAVAILABLE)."""

    name: str
    version: str | None = None
    state: str
    reason: str = ""


class RepositoryRequest(BaseModel):
    """`POST /v2/repository/models/{name}/load` or `/unload`: an empty body, or `{"parameters": {...}}`.
    Of Triton's parameters only `unload_dependents` is taken (nothing depends on a forecaster); its
    `config` and file overrides are refused: a version comes from the repository only."""

    model_config = {"extra": "forbid"}

    parameters: dict[str, Any] = Field(default_factory=dict)


class InferenceErrorResponse(BaseModel):
    """Every v2 error: `{"error": "<message>"}`, as the protocol specifies."""

    error: str
