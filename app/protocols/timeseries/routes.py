"""KServe's time-series forecast API: `POST /v1/timeseries/forecast`, `GET /v1/timeseries/models`
(`app.protocols.timeseries`); errors in KServe's `{"error": {"code", "message", "param", "type"}}`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.protocols.http import body_schema, handlers, parse_body
from app.protocols.timeseries.codec import parse_request
from app.protocols.timeseries.handlers import TimeSeriesHandlers
from app.protocols.timeseries.schemas import (
    TimeSeriesErrorResponse,
    TimeSeriesForecastRequest,
    TimeSeriesForecastResponse,
)

router = APIRouter(prefix="/v1/timeseries", tags=["kserve-timeseries"])

ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": TimeSeriesErrorResponse, "description": "Invalid request; `param` names the field."},
    404: {"model": TimeSeriesErrorResponse, "description": "Unknown model."},
    503: {
        "model": TimeSeriesErrorResponse,
        "description": "Model loading or failed, or overloaded (Retry-After).",
    },
}


Handlers = Annotated[TimeSeriesHandlers, handlers(TimeSeriesHandlers)]


@router.get("/models", response_model=list[str])
async def models(ts: Handlers) -> list[str]:
    """Names of the models that can forecast now."""
    return ts.models()


@router.post(
    "/forecast",
    response_model=TimeSeriesForecastResponse,
    responses=ERRORS,
    openapi_extra=body_schema(TimeSeriesForecastRequest),
)
async def forecast(request: Request, ts: Handlers) -> Response:
    """Forecast KServe `univariate_time_series` (one-channel models) or `multivariate_time_series` inputs."""
    body = await parse_body(request, TimeSeriesForecastRequest.model_validate_json, offload=parse_request)
    return Response(await ts.forecast(body), media_type="application/json")
