"""How the KServe time-series API renders errors: `{"error": {"code", "message", "param", "type"}}`, the
shape of KServe's `ErrorResponse`. Unlike KServe's own server, every error carries its code: the service's
stable machine-readable code (`invalid_input`, `no_calibrated_intervals`, `interval_not_calibrated`,
`model_not_found`, ...), with `param` the request field at fault and `type` KServe's error class name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.context import note_error
from app.core.errors import (
    ServiceError,
)
from app.protocols.status import HTTP_STATUS, error_headers, log_server_error, lookup
from app.protocols.validation_errors import first_problem

logger = logging.getLogger(__name__)

# HTTP status -> KServe's error type.
KIND = {
    400: "BadRequestError",
    413: "BadRequestError",
    415: "BadRequestError",
    404: "NotFoundError",
    503: "ServiceUnavailableError",
    504: "TimeoutError",
    500: "InternalServerError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
}

_HTTP = {404: ("not_found", "NotFoundError"), 405: ("method_not_allowed", "BadRequestError")}


def _status(exc: ServiceError) -> tuple[int, str]:
    status = lookup(HTTP_STATUS, exc, 500)
    return status, KIND[status]


def error_response(
    status: int, code: str, message: str, param: str | None, kind: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    note_error(code)  # the rejection reason, for the metrics middleware
    body = {"error": {"code": code, "message": message, "param": param, "type": kind}}
    return JSONResponse(body, status_code=status, headers=headers)


def error_response_for(exc: ServiceError) -> JSONResponse:
    status, kind = _status(exc)
    return error_response(status, exc.code, exc.message, exc.field, kind, error_headers(exc))


def field_path(loc: tuple[int | str, ...]) -> str:
    """("body", "inputs", 0, "series") -> "inputs[0].series"."""
    out = ""
    for part in loc[1:] if len(loc) > 1 and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def render_error(request: Request, exc: Exception) -> JSONResponse:
    """The KServe-shaped response for a domain, validation or routing error; re-raises anything else."""
    if isinstance(exc, ServiceError):
        status, _ = _status(exc)
        log_server_error(logger, request.method, request.url.path, status, exc)
        return error_response_for(exc)
    if isinstance(exc, RequestValidationError):
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            return error_response(
                400, "malformed_json", f"malformed JSON body: {first.get('msg')}", "body", "BadRequestError"
            )
        problem = first_problem(errors)
        param = field_path(problem.loc) or None
        message = f"{param}: {problem.message}" if param else problem.message
        if problem.more:
            message += f" (and {problem.more} more)"
        if _null_in_series(errors):
            message += (
                ": a missing value (null); KServe's time series are numbers only, "
                "POST /v1/models/<name>/forecast takes null for a missing value"
            )
        return error_response(400, "invalid_input", message, param, "BadRequestError")
    if isinstance(exc, StarletteHTTPException):
        code, kind = _HTTP.get(exc.status_code, ("bad_request", "BadRequestError"))
        return error_response(exc.status_code, code, str(exc.detail), None, kind)
    raise exc


def _null_in_series(errors: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the first error is a null among a series' values (pydantic keeps the input it refused)."""
    if not errors:
        return False
    first = errors[0]
    return "series" in first.get("loc", ()) and "input" in first and first["input"] is None


def internal_error() -> JSONResponse:
    return error_response(500, "internal_error", "internal server error", None, "InternalServerError")


async def on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return internal_error()
