"""The `/v1` API, as the registry (app/protocols/registry.py) wires it."""

from __future__ import annotations

from app.protocols.rsa_v1 import errors
from app.protocols.rsa_v1.handlers import V1Handlers
from app.protocols.rsa_v1.routes import (
    FORECAST_ROUTES,
    attention_router,
    evaluation_router,
    fit_router,
    forecast_router,
    models_router,
    zero_shot_router,
)
from app.protocols.rsa_v1.schemas import (
    AnomalyRequest,
    AttentionRequest,
    CrossValidationRequest,
    FitForecastRequest,
    ForecastRequest,
)
from app.protocols.rsa_v1.wire import fast_forecast, offloaded_forecast, offloaded_request
from app.protocols.rsa_v1.zero_shot import ZeroShotRequest, offloaded_zero_shot
from app.protocols.spec import ErrorRenderer, ProtocolSpec

RSA_V1 = ProtocolSpec(
    name="rsa_v1",
    prefix="/v1",
    errors=ErrorRenderer(errors.error_response_for, errors.render_error, errors.on_unexpected_error),
    handlers=lambda service, draining: V1Handlers(service),
    routers=(
        models_router,
        forecast_router,
        attention_router,
        evaluation_router,
        fit_router,
        zero_shot_router,
    ),
    bodies=(
        ForecastRequest,
        AttentionRequest,
        CrossValidationRequest,
        AnomalyRequest,
        FitForecastRequest,
        ZeroShotRequest,
    ),
    admitted=FORECAST_ROUTES,
    # the parse process's lanes (their modules load as it starts): the forecast's, every other body's
    parsers=(fast_forecast, offloaded_forecast, offloaded_request, offloaded_zero_shot),
)
