"""The app's exception handlers: where domain and framework errors become HTTP responses.

Each protocol renders its own error shape, chosen by the request's path through the protocol registry
(app/protocols/registry.py): OIP v2 (`/v2...`) answers `{"error": "<message>"}`, KServe time series
(`/v1/timeseries/...`) `{"error": {"code", "message", "param", "type"}}`, the `/v1` API `{"error":
{"code", "message", "field", ...}}`, and the service's own paths (and unknown ones) the registry's
`service_errors` (the `/v1` shape). Middleware that answers before routing (size limit, deadline header,
admission) uses `error_response_for` with the same choice.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from app.core.errors import ServiceError
from app.protocols.registry import Registry


def registry_of(app: FastAPI) -> Registry:
    registry: Registry = app.state.protocols
    return registry


def error_response_for(app: FastAPI, path: str, exc: ServiceError) -> Response:
    """The response for a domain error on `path`, in that path's protocol's shape."""
    return registry_of(app).errors_for(path).response_for(exc)


async def render_error(request: Request, exc: Exception) -> Response:
    return await registry_of(request.app).errors_for(request.url.path).render(request, exc)


async def render_unexpected(request: Request, exc: Exception) -> Response:
    return await registry_of(request.app).errors_for(request.url.path).unexpected(request, exc)  # logs


def register_exception_handlers(app: FastAPI) -> None:
    for kind in (ServiceError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(kind, render_error)
    app.add_exception_handler(Exception, render_unexpected)
