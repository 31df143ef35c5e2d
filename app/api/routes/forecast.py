"""Forecast endpoints: the latest version, or an explicit one."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import ModelName, ModelVersionNumber, V1HandlersDep
from app.api.routes.responses import INFERENCE_ERRORS
from app.protocols.rsa_v1.schemas import ForecastRequest, ForecastResponse

router = APIRouter(prefix="/v1/models", tags=["forecast"])


@router.post("/{name}/forecast", response_model=ForecastResponse, responses=INFERENCE_ERRORS)
async def forecast(name: ModelName, body: ForecastRequest, v1: V1HandlersDep) -> ForecastResponse:
    """Forecast one or many series with the model's latest loaded version."""
    return await v1.forecast(name, None, body)


@router.post(
    "/{name}/versions/{version}/forecast", response_model=ForecastResponse, responses=INFERENCE_ERRORS
)
async def forecast_version(
    name: ModelName, version: ModelVersionNumber, body: ForecastRequest, v1: V1HandlersDep
) -> ForecastResponse:
    """Forecast one or many series with a given model version."""
    return await v1.forecast(name, version, body)
