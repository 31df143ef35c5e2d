"""How OIP v2 REST renders errors: `{"error": "<message>"}`, as the protocol specifies, with a 4xx status
for a client's mistake (400 for anything wrong in the request, as Triton answers), 404 for an unknown model
or version, and the service's usual statuses for the rest (401/403, 413, 503 with Retry-After, 504, 500).

tritonclient raises `InferenceServerException` with that message for any status but 200.
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.context import note_error
from app.core.errors import (
    ServiceError,
)
from app.protocols.status import HTTP_STATUS, error_headers, log_server_error, lookup

logger = logging.getLogger(__name__)

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def status_of(exc: ServiceError) -> int:
    return lookup(HTTP_STATUS, exc, 500)


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    note_error(code)  # the rejection reason, for the metrics middleware
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def error_response_for(exc: ServiceError) -> JSONResponse:
    return error_response(status_of(exc), exc.code, exc.message, error_headers(exc))


async def render_error(request: Request, exc: Exception) -> JSONResponse:
    """The v2 response for a domain, validation or routing error; re-raises anything else (a bug: the
    server error middleware answers 500 with `internal_error`)."""
    if isinstance(exc, ServiceError):
        status = status_of(exc)
        log_server_error(logger, request.method, request.url.path, status, exc)
        return error_response_for(exc)
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        return error_response(400, "invalid_input", f"{where}: {first.get('msg')}")
    if isinstance(exc, StarletteHTTPException):
        code = _HTTP_CODES.get(exc.status_code, "bad_request" if exc.status_code < 500 else "http_error")
        return error_response(exc.status_code, code, str(exc.detail))
    raise exc


def internal_error() -> JSONResponse:
    return error_response(500, "internal_error", "internal server error")


async def on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return internal_error()
