"""Domain errors and their single mapping to HTTP.

Core code (data plane, batcher, registry) raises these; only `register_exception_handlers` knows about
status codes and the JSON shape `{"error": {"code", "message", "field", "limit", "details"}}`, which
every error response uses, FastAPI's own validation errors included.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.observability.context import note_error
from app.protocols.rsa_v1.schemas import COLUMNS_TAG, ROWS_TAG, ErrorBody, ErrorDetail, ErrorResponse

logger = logging.getLogger(__name__)


class ServiceError(Exception):
    """Base of every domain error: a message, optionally the request field and the limit it broke."""

    status_code = 500
    code = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        limit: Any | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.limit = limit
        self.retry_after_s = retry_after_s


class InvalidInput(ServiceError, ValueError):  # noqa: N818  (kserve's names, kept short on purpose)
    status_code = 422
    code = "invalid_input"


class PayloadTooLarge(ServiceError):  # noqa: N818
    status_code = 413
    code = "payload_too_large"


class ModelNotFound(ServiceError, LookupError):  # noqa: N818
    status_code = 404
    code = "model_not_found"


class VersionNotFound(ModelNotFound):
    code = "version_not_found"


class ModelNotReady(ServiceError):  # noqa: N818
    """Still loading, failed to load, or shutting down: 503, worth retrying later."""

    status_code = 503
    code = "model_not_ready"


class Overloaded(ServiceError):  # noqa: N818
    """The batcher's queue is full: 503 with Retry-After."""

    status_code = 503
    code = "overloaded"


class Timeout(ServiceError):  # noqa: N818
    """The request's deadline passed before its forecast was ready: 504."""

    status_code = 504
    code = "timeout"


class InferenceError(ServiceError):
    """The session call failed: a server fault, 500. The batcher keeps serving."""

    status_code = 500
    code = "inference_failed"


def error_response(
    status_code: int,
    body: ErrorBody,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    note_error(body.code)  # the request's rejection reason, for the metrics middleware
    content = ErrorResponse(error=body).model_dump(mode="json")
    return JSONResponse(content, status_code=status_code, headers=headers)


def error_response_for(exc: ServiceError) -> JSONResponse:
    """The response for a domain error; also used by middleware, which runs outside the handlers."""
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
    body = ErrorBody(code=exc.code, message=exc.message, field=exc.field, limit=exc.limit)
    return error_response(exc.status_code, body, headers)


def format_loc(loc: Sequence[int | str]) -> str:
    """("body", "series", 0, "values", "rows", 3, 1) -> "series[0].values[3][1]".

    Drops the location kind (body/path/query/header) and the tag pydantic adds after `values`
    for the rows/columns union, which the client never wrote.
    """
    parts = list(loc)
    if len(parts) > 1 and parts[0] in ("body", "path", "query", "header", "cookie"):
        parts = parts[1:]  # a bare ("body",) stays: the body itself is the problem
    out = ""
    previous: int | str | None = None
    for part in parts:
        if previous == "values" and part in (ROWS_TAG, COLUMNS_TAG):
            previous = part
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        previous = part
    return out


_LIMIT_KEYS = ("ge", "gt", "le", "lt", "min_length", "max_length", "expected")


def _limit_of(error: dict[str, Any]) -> Any | None:
    ctx = error.get("ctx") or {}
    for key in _LIMIT_KEYS:
        if key in ctx:
            value = ctx[key]
            return value if isinstance(value, int | float | str) else str(value)
    return None


def _validation_body(exc: RequestValidationError) -> tuple[int, ErrorBody]:
    errors = list(exc.errors())
    details = [
        ErrorDetail(field=format_loc(e.get("loc", ())) or None, message=str(e.get("msg")), type=e.get("type"))
        for e in errors
    ]
    first = errors[0] if errors else {"msg": "invalid request", "loc": ()}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        position = first.get("loc", ("body", None))[-1]
        message = f"malformed JSON body: {ctx.get('error', 'decode error')} at character {position}"
        return 400, ErrorBody(code="malformed_json", message=message, field="body")
    field = format_loc(first.get("loc", ())) or None
    message = f"{field}: {first.get('msg')}" if field else str(first.get("msg"))
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return 422, ErrorBody(
        code="invalid_input", message=message, field=field, limit=_limit_of(first), details=details
    )


_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def register_exception_handlers(app: FastAPI) -> None:
    """The one place where errors become HTTP responses."""

    async def on_service_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        if exc.status_code >= 500:  # 500 is our fault; 503/504 are load, worth a warning only
            level = logging.ERROR if exc.status_code == 500 else logging.WARNING
            logger.log(
                level,
                "%s %s -> %d %s: %s",
                request.method,
                request.url.path,
                exc.status_code,
                exc.code,
                exc.message,
            )
        return error_response_for(exc)

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        status_code, body = _validation_body(exc)
        return error_response(status_code, body)

    async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        body = ErrorBody(code=code, message=str(exc.detail))
        settings = getattr(request.app.state, "settings", None)
        if exc.status_code == 413 and settings is not None:  # a streamed body counted past the limit
            limit = settings.max_body_bytes
            body = ErrorBody(
                code=code,
                message=f"request body is over the limit of {limit} bytes",
                field="body",
                limit=limit,
            )
        return error_response(exc.status_code, body, dict(exc.headers) if exc.headers else None)

    async def on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        body = ErrorBody(code="internal_error", message="internal server error")
        return error_response(500, body)

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected_error)
