"""The `/v1` API's routes: model metadata, forecasts and attention inspection, each for the model's
latest loaded version or an explicit one. The operations are `V1Handlers`' (handlers.py); errors in
`{"error": {"code", "message", "field", "limit", "details"}}` (errors.py)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response

from app.protocols.http import body_schema, handlers, parse_body
from app.protocols.rsa_v1.evaluation import cross_validation, detect_anomalies
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.schemas import (
    AnomalyRequest,
    AnomalyResponse,
    AttentionRequest,
    AttentionResponse,
    CrossValidationRequest,
    CrossValidationResponse,
    ErrorResponse,
    FitForecastRequest,
    FitForecastResponse,
    ForecastRequest,
    ForecastResponse,
    ModelInfo,
    ModelList,
    OutputFormat,
)
from app.protocols.rsa_v1.wire import (
    ForecastArgs,
    encode_forecast,
    offloaded_forecast,
    offloaded_request,
    parse_forecast,
)
from app.protocols.rsa_v1.zero_shot import (
    ZeroShotRequest,
    offloaded_zero_shot,
    parse_zero_shot,
    zero_shot_forecast,
)

V1HandlersDep = Annotated[V1Handlers, handlers(V1Handlers)]
ModelName = Annotated[str, Path(description="Model name, a folder of the model repository.")]
ModelVersionNumber = Annotated[int, Path(ge=1, description="Model version (positive integer).")]

# OpenAPI descriptions of the error responses (the body is always `ErrorResponse`).
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown model or version."},
    422: {"model": ErrorResponse, "description": "Invalid input; `field` and `limit` say what and why."},
    503: {"model": ErrorResponse, "description": "Model loading/failed, or overloaded (Retry-After)."},
}
INFERENCE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": ErrorResponse, "description": "Malformed JSON body."},
    413: {"model": ErrorResponse, "description": "Request body above RSA_MAX_BODY_BYTES."},
    415: {"model": ErrorResponse, "description": "A Content-Type other than JSON."},
    500: {"model": ErrorResponse, "description": "The model failed (a server fault)."},
    504: {"model": ErrorResponse, "description": "No result within RSA_REQUEST_TIMEOUT_S."},
}

# -- model metadata -------------------------------------------------------------------------------------

models_router = APIRouter(prefix="/v1/models", tags=["models"])


@models_router.get("", response_model=ModelList)
async def list_models(v1: V1HandlersDep) -> ModelList:
    return await v1.models()


@models_router.get("/{name}", response_model=ModelInfo, responses=ERRORS)
async def get_model(name: ModelName, v1: V1HandlersDep) -> ModelInfo:
    return await v1.model(name)


# -- forecasts ------------------------------------------------------------------------------------------

forecast_router = APIRouter(prefix="/v1/models", tags=["forecast"])
# Admitted before their body is read (app/api/middleware.py), by the body's size.
FORECAST_ROUTES = ("/v1/models/{name}/forecast", "/v1/models/{name}/versions/{version}/forecast")


async def _forecast(name: str, version: int | None, request: Request, v1: V1Handlers) -> Response:
    limit = v1.settings.max_series_per_request
    body: ForecastArgs | ForecastRequest = await parse_body(
        request, lambda raw: parse_forecast(raw, limit), offload=partial(offloaded_forecast, max_series=limit)
    )
    # `response_model` documents the answer; this bytes response passes through FastAPI untouched.
    return Response(encode_forecast(await v1.forecast(name, version, body)), media_type="application/json")


@forecast_router.post(
    "/{name}/forecast",
    response_model=ForecastResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(ForecastRequest),
)
async def forecast(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
    """Forecast one or many series with the model's latest loaded version."""
    return await _forecast(name, None, request, v1)


@forecast_router.post(
    "/{name}/versions/{version}/forecast",
    response_model=ForecastResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(ForecastRequest),
)
async def forecast_version(
    name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
) -> Response:
    """Forecast one or many series with a given model version."""
    return await _forecast(name, version, request, v1)


# A forecast without naming a model: the pretrained model of the series' frequency (zero_shot.py).
zero_shot_router = APIRouter(prefix="/v1", tags=["forecast"])


@zero_shot_router.post(
    "/forecast",
    response_model=ForecastResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(ZeroShotRequest),
)
async def forecast_pretrained(request: Request, v1: V1HandlersDep) -> Response:
    """Forecast series of one frequency (`freq`, or read from each series' `start`) with the pretrained
    model of that frequency; the answer's `model` and `version` name it."""
    limit = v1.settings.max_series_per_request
    body, freq = await parse_body(
        request,
        partial(parse_zero_shot, max_series=limit),
        offload=partial(offloaded_zero_shot, max_series=limit),
    )
    return Response(await zero_shot_forecast(v1, body, freq), media_type="application/json")


# -- attention inspection -------------------------------------------------------------------------------

attention_router = APIRouter(prefix="/v1/models", tags=["attention"])

FormatQuery = Annotated[
    OutputFormat | None, Query(description="json or png; overrides the body's `format` when given.")
]
ATTENTION_RESPONSES: dict[int | str, dict[str, Any]] = {
    **INFERENCE_ERRORS,
    200: {"content": {"image/png": {}}, "description": "JSON, or a PNG heatmap figure with format=png."},
}


async def _attention(
    name: str, version: int | None, request: Request, v1: V1Handlers, fmt: OutputFormat | None
) -> Response:
    body = await parse_body(
        request, AttentionRequest.model_validate_json, offload=partial(offloaded_request, AttentionRequest)
    )
    if (fmt or body.format) == "png":
        return Response(await v1.attention_png(name, version, body), media_type="image/png")
    # JSON bytes encoded by orjson from the arrays (app/protocols/rsa_v1/wire.py); `response_model`
    # stays for the OpenAPI document.
    return Response(await v1.attention(name, version, body), media_type="application/json")


@attention_router.post(
    "/{name}/attention",
    response_model=AttentionResponse,
    responses=ATTENTION_RESPONSES,
    openapi_extra=body_schema(AttentionRequest),
)
async def attention(
    name: ModelName, request: Request, v1: V1HandlersDep, format: FormatQuery = None
) -> AttentionResponse | Response:
    """Attention matrices of one series with the model's latest loaded version."""
    return await _attention(name, None, request, v1, format)


@attention_router.post(
    "/{name}/versions/{version}/attention",
    response_model=AttentionResponse,
    responses=ATTENTION_RESPONSES,
    openapi_extra=body_schema(AttentionRequest),
)
async def attention_version(
    name: ModelName,
    version: ModelVersionNumber,
    request: Request,
    v1: V1HandlersDep,
    format: FormatQuery = None,
) -> AttentionResponse | Response:
    """Attention matrices of one series with a given model version."""
    return await _attention(name, version, request, v1, format)


# -- a read-out fitted on request -----------------------------------------------------------------------

fit_router = APIRouter(prefix="/v1/models", tags=["fit"])
FIT_ERRORS: dict[int | str, dict[str, Any]] = {
    **INFERENCE_ERRORS,
    403: {"model": ErrorResponse, "description": "`publish` without control rights (API key, explicit)."},
    422: {
        "model": ErrorResponse,
        "description": "Invalid input, a limit passed (RSA_MAX_FIT_*), or a version that cannot be refit "
        "(`not_refittable`); `field` and `limit` say what and why.",
    },
}


async def _fit_forecast(name: str, version: int | None, request: Request, v1: V1Handlers) -> Response:
    from app.protocols.rsa_v1.fitting import fit_forecast
    from app.runtime import runtime_of

    body = await parse_body(
        request,
        FitForecastRequest.model_validate_json,
        offload=partial(offloaded_request, FitForecastRequest),
    )
    can_publish = runtime_of(request.app).api_keys.enabled and v1.settings.model_control == "explicit"
    answer = await fit_forecast(v1, name, version, body, can_publish)
    return Response(answer, media_type="application/json")


@fit_router.post(
    "/{name}/fit_forecast",
    response_model=FitForecastResponse,
    responses=FIT_ERRORS,
    openapi_extra=body_schema(FitForecastRequest),
)
async def fit_forecast_route(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
    """Refit the latest version's global read-out on the histories sent and forecast them (publishing
    nothing unless `publish` names a model)."""
    return await _fit_forecast(name, None, request, v1)


@fit_router.post(
    "/{name}/versions/{version}/fit_forecast",
    response_model=FitForecastResponse,
    responses=FIT_ERRORS,
    openapi_extra=body_schema(FitForecastRequest),
)
async def fit_forecast_version(
    name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
) -> Response:
    """Refit a given version's global read-out on the histories sent and forecast them."""
    return await _fit_forecast(name, version, request, v1)


# -- backtests and anomaly checks over a series' own history (evaluation.py) ----------------------------

evaluation_router = APIRouter(prefix="/v1/models", tags=["evaluation"])


async def _cross_validation(name: str, version: int | None, request: Request, v1: V1Handlers) -> Response:
    limit = v1.settings.max_series_per_request
    context = {"max_series": limit}
    body = await parse_body(
        request,
        lambda raw: CrossValidationRequest.model_validate_json(raw, context=context),
        offload=partial(offloaded_request, CrossValidationRequest, context=context),
    )
    return Response(await cross_validation(v1, name, version, body), media_type="application/json")


@evaluation_router.post(
    "/{name}/cross_validation",
    response_model=CrossValidationResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(CrossValidationRequest),
)
async def cross_validation_latest(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
    """Backtest the model's latest loaded version on each series' own history: a forecast from each
    cutoff beside the actual values, with intervals and accuracy per series and pooled."""
    return await _cross_validation(name, None, request, v1)


@evaluation_router.post(
    "/{name}/versions/{version}/cross_validation",
    response_model=CrossValidationResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(CrossValidationRequest),
)
async def cross_validation_version(
    name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
) -> Response:
    """Backtest a given model version on each series' own history."""
    return await _cross_validation(name, version, request, v1)


async def _detect_anomalies(name: str, version: int | None, request: Request, v1: V1Handlers) -> Response:
    limit = v1.settings.max_series_per_request
    context = {"max_series": limit}
    body = await parse_body(
        request,
        lambda raw: AnomalyRequest.model_validate_json(raw, context=context),
        offload=partial(offloaded_request, AnomalyRequest, context=context),
    )
    return Response(await detect_anomalies(v1, name, version, body), media_type="application/json")


@evaluation_router.post(
    "/{name}/detect_anomalies",
    response_model=AnomalyResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(AnomalyRequest),
)
async def detect_anomalies_latest(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
    """Flag the points of each series outside the latest version's calibrated interval (rolling
    forecasts `lead` steps ahead; `last` for the online form)."""
    return await _detect_anomalies(name, None, request, v1)


@evaluation_router.post(
    "/{name}/versions/{version}/detect_anomalies",
    response_model=AnomalyResponse,
    responses=INFERENCE_ERRORS,
    openapi_extra=body_schema(AnomalyRequest),
)
async def detect_anomalies_version(
    name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
) -> Response:
    """Flag the points of each series outside a given version's calibrated interval."""
    return await _detect_anomalies(name, version, request, v1)
