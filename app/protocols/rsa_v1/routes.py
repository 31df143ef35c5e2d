"""The `/v1` API's routes: model metadata, forecasts and attention inspection, each for the model's
latest loaded version or an explicit one. The operations are `V1Handlers`' (handlers.py); errors in
`{"error": {"code", "message", "field", "limit", "details"}}` (errors.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel

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
    ZeroShotResponse,
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

# An operation on a model version (None: the latest loaded) that reads its own body.
Operation = Callable[[str, int | None, Request, V1Handlers], Awaitable[Response]]
Endpoint = Callable[..., Awaitable[Response]]


def model_routes(
    router: APIRouter,
    action: str,
    operation: Operation,
    body: type[BaseModel],
    answer: type[BaseModel],
    responses: dict[int | str, dict[str, Any]],
    *,
    latest_doc: str,
    version_doc: str,
    latest_name: str | None = None,
) -> tuple[Endpoint, Endpoint]:
    """Declare `operation` twice on `router`, as every `/v1` model operation is: `POST /{name}/{action}`
    on the model's latest loaded version and `POST /{name}/versions/{version}/{action}` on a given one.
    The endpoints are named `latest_name` (default `action`) and `{action}_version`, which name their
    OpenAPI operations; `body` is parsed by the operation itself (`body_schema` documents it), `answer`
    documents the 200. Returns the two endpoint functions (app/api/dispatch.py calls the forecast's)."""

    async def latest(name: ModelName, request: Request, v1: V1HandlersDep) -> Response:
        return await operation(name, None, request, v1)

    async def versioned(
        name: ModelName, version: ModelVersionNumber, request: Request, v1: V1HandlersDep
    ) -> Response:
        return await operation(name, version, request, v1)

    routes = (
        (f"/{{name}}/{action}", latest, latest_name or action, latest_doc),
        (f"/{{name}}/versions/{{version}}/{action}", versioned, f"{action}_version", version_doc),
    )
    for path, endpoint, name, doc in routes:
        endpoint.__name__ = endpoint.__qualname__ = name
        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            name=name,
            description=doc,
            response_model=answer,
            responses=responses,
            openapi_extra=body_schema(body),
        )
    return latest, versioned


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


forecast, forecast_version = model_routes(
    forecast_router,
    "forecast",
    _forecast,
    ForecastRequest,
    ForecastResponse,
    INFERENCE_ERRORS,
    latest_doc="Forecast one or many series with the model's latest loaded version.",
    version_doc="Forecast one or many series with a given model version.",
)


# A forecast without naming a model: the pretrained model of the series' frequency (zero_shot.py).
zero_shot_router = APIRouter(prefix="/v1", tags=["forecast"])


@zero_shot_router.post(
    "/forecast",
    response_model=ZeroShotResponse,
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
# What both attention routes document (they are declared by hand, not by `model_routes`: they also take
# the `format` query parameter).
ATTENTION_ROUTE: dict[str, Any] = {
    "response_model": AttentionResponse,
    "responses": ATTENTION_RESPONSES,
    "openapi_extra": body_schema(AttentionRequest),
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


@attention_router.post("/{name}/attention", **ATTENTION_ROUTE)
async def attention(
    name: ModelName, request: Request, v1: V1HandlersDep, format: FormatQuery = None
) -> AttentionResponse | Response:
    """Attention matrices of one series with the model's latest loaded version."""
    return await _attention(name, None, request, v1, format)


@attention_router.post("/{name}/versions/{version}/attention", **ATTENTION_ROUTE)
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
    from app.inference.refit import check_fit_slot
    from app.protocols.rsa_v1.fitting import fit_forecast
    from app.runtime import runtime_of

    check_fit_slot(v1.settings)  # no slot free: refused before the body is read and parsed
    body = await parse_body(
        request,
        FitForecastRequest.model_validate_json,
        offload=partial(offloaded_request, FitForecastRequest),
    )
    can_publish = runtime_of(request.app).api_keys.enabled and v1.settings.model_control == "explicit"
    answer = await fit_forecast(v1, name, version, body, can_publish)
    return Response(answer, media_type="application/json")


fit_forecast_route, fit_forecast_version = model_routes(
    fit_router,
    "fit_forecast",
    _fit_forecast,
    FitForecastRequest,
    FitForecastResponse,
    FIT_ERRORS,
    latest_doc="Refit the latest version's global read-out on the histories sent and forecast them"
    " (publishing\nnothing unless `publish` names a model).",
    version_doc="Refit a given version's global read-out on the histories sent and forecast them.",
    latest_name="fit_forecast_route",
)


# -- backtests and anomaly checks over a series' own history (evaluation.py) ----------------------------

evaluation_router = APIRouter(prefix="/v1/models", tags=["evaluation"])


async def _evaluate(
    kind: type[CrossValidationRequest | AnomalyRequest],
    run: Callable[[V1Handlers, str, int | None, Any], Awaitable[bytes]],
    name: str,
    version: int | None,
    request: Request,
    v1: V1Handlers,
) -> Response:
    """A backtest's or an anomaly check's body (`kind`, its series bounded as a forecast's), run by `run`
    (evaluation.py)."""
    context = {"max_series": v1.settings.max_series_per_request}
    body = await parse_body(
        request,
        lambda raw: kind.model_validate_json(raw, context=context),
        offload=partial(offloaded_request, kind, context=context),
    )
    return Response(await run(v1, name, version, body), media_type="application/json")


cross_validation_latest, cross_validation_version = model_routes(
    evaluation_router,
    "cross_validation",
    partial(_evaluate, CrossValidationRequest, cross_validation),
    CrossValidationRequest,
    CrossValidationResponse,
    INFERENCE_ERRORS,
    latest_doc="Backtest the model's latest loaded version on each series' own history: a forecast from each"
    "\ncutoff beside the actual values, with intervals and accuracy per series and pooled.",
    version_doc="Backtest a given model version on each series' own history.",
    latest_name="cross_validation_latest",
)


detect_anomalies_latest, detect_anomalies_version = model_routes(
    evaluation_router,
    "detect_anomalies",
    partial(_evaluate, AnomalyRequest, detect_anomalies),
    AnomalyRequest,
    AnomalyResponse,
    INFERENCE_ERRORS,
    latest_doc="Flag the points of each series outside the latest version's calibrated interval (rolling"
    "\nforecasts `lead` steps ahead; `last` for the online form).",
    version_doc="Flag the points of each series outside a given version's calibrated interval.",
    latest_name="detect_anomalies_latest",
)
