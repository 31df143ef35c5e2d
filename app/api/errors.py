"""The app's exception handlers: where domain and framework errors become HTTP responses.

Each protocol renders its own error shape, chosen by the request's path: OIP v2 (`/v2...`) answers
`{"error": "<message>"}`, KServe time series (`/v1/timeseries/...`) `{"error": {"code", "message",
"param", "type"}}`, and everything else the `/v1` API's `{"error": {"code", "message", "field", ...}}`.
Middleware that answers before routing (size limit, deadline header, admission) uses `error_response_for`
with the same choice.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.core.errors import ServiceError
from app.protocols.oip_v2 import errors as oip_v2_errors
from app.protocols.rsa_v1 import errors as rsa_v1_errors
from app.protocols.timeseries import errors as timeseries_errors

logger = logging.getLogger(__name__)


def _room(path: str) -> str:
    if path == "/v2" or path.startswith("/v2/"):
        return "oip_v2"
    if path.startswith("/v1/timeseries/"):
        return "timeseries"
    return "rsa_v1"


def error_response_for(path: str, exc: ServiceError) -> Response:
    """The response for a domain error on `path`, in that path's protocol's shape."""
    room = _room(path)
    if room == "oip_v2":
        return oip_v2_errors.error_response_for(exc)
    if room == "timeseries":
        return timeseries_errors.error_response_for(exc)
    return rsa_v1_errors.error_response_for(exc)


async def render_error(request: Request, exc: Exception) -> Response:
    room = _room(request.url.path)
    if room == "oip_v2":
        return await oip_v2_errors.render_error(request, exc)
    if room == "timeseries":
        return await timeseries_errors.render_error(request, exc)
    return await rsa_v1_errors.render_error(request, exc)


async def render_unexpected(request: Request, exc: Exception) -> Response:
    room = _room(request.url.path)
    if room == "rsa_v1":
        return await rsa_v1_errors.on_unexpected_error(request, exc)  # it logs too
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return oip_v2_errors.internal_error() if room == "oip_v2" else timeseries_errors.internal_error()


def register_exception_handlers(app: FastAPI) -> None:
    for kind in (ServiceError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(kind, render_error)
    app.add_exception_handler(Exception, render_unexpected)
