"""Liveness and readiness, and the error body every route answers with."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


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
