"""Forecast endpoints: the latest version, or an explicit one."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.body import body_schema, parse_body
from app.api.deps import ModelName, ModelVersionNumber, V1HandlersDep
from app.api.routes.responses import INFERENCE_ERRORS
from app.protocols.rsa_v1.schemas import ForecastRequest, ForecastResponse
from app.protocols.rsa_v1.wire import ForecastArgs, encode_forecast, fast_forecast, parse_forecast

router = APIRouter(prefix="/v1/models", tags=["forecast"])


async def _body(request: Request, v1: V1HandlersDep) -> ForecastArgs | ForecastRequest:
    limit = v1.settings.max_series_per_request
    return await parse_body(
        request, lambda raw: parse_forecast(raw, limit), offload=partial(fast_forecast, max_series=limit)
    )


def _answer(body: bytes) -> Response:
    # `response_model` documents the answer; this bytes response passes through FastAPI untouched.
    return Response(body, media_type="application/json")


@router.post(
    "/{name}/forecast",
    response_model=ForecastResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(ForecastRequest),
)
async def forecast(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
    """Forecast one or many series with the model's latest loaded version."""
    return _answer(encode_forecast(await v1.forecast(name, None, await _body(request, v1))))


@router.post(
    "/{name}/versions/{version}/forecast",
    response_model=ForecastResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(ForecastRequest),
)
async def forecast_version(
    name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
) -> Response:
    """Forecast one or many series with a given model version."""
    return _answer(encode_forecast(await v1.forecast(name, version, await _body(request, v1))))
