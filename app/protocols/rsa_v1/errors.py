"""How the `/v1` API renders errors: `{"error": {"code", "message", "field", "limit", "details"}}`.

Every error response of this API has that shape, whatever its status: domain errors (mapped to a status
here), FastAPI's validation errors (400 for malformed JSON, 422 otherwise, with the field path as the
client wrote it), and routing errors (404, 405, 413).
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
    InvalidInput,
    PayloadTooLarge,
    ServiceError,
)
from app.protocols.rsa_v1.schemas import (
    COLUMNS_TAG,
    FLAT_TAG,
    ROWS_TAG,
    ErrorBody,
    ErrorDetail,
    ErrorResponse,
)
from app.protocols.status import HTTP_STATUS, error_headers, log_server_error, lookup
from app.protocols.validation_errors import first_problem, union_free

logger = logging.getLogger(__name__)

# Domain error -> HTTP status: the shared table, but a request the schema accepts and the model cannot
# serve is 422 here, as FastAPI answers its own validation errors.
STATUS: dict[type[ServiceError], int] = {**HTTP_STATUS, InvalidInput: 422}


def status_of(exc: ServiceError) -> int:
    return lookup(STATUS, exc, 500)


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
    body = ErrorBody(code=exc.code, message=exc.message, field=exc.field, limit=exc.limit)
    return error_response(status_of(exc), body, error_headers(exc))


VALUES_TAGS = (ROWS_TAG, COLUMNS_TAG, FLAT_TAG)  # a series' values: rows, named columns or a flat list


def format_loc(loc: Sequence[int | str]) -> str:
    """("body", "series", 0, "values", "rows", 3, 1) -> "series[0].values[3][1]".

    Drops the location kind (body/path/query/header) and the union members' parts pydantic adds (the
    values' rows/columns/flat tag, a member's type), which the client never wrote (`union_free`).
    """
    parts = list(union_free(loc, VALUES_TAGS)[0])
    if len(parts) > 1 and parts[0] in ("body", "path", "query", "header", "cookie"):
        parts = parts[1:]  # a bare ("body",) stays: the body itself is the problem
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_LIMIT_KEYS = ("ge", "gt", "le", "lt", "min_length", "max_length", "expected")

# Names other forecasting APIs give to a field of ours (statsforecast's and TimeGPT's `h`, sktime's `fh`,
# GluonTS's `prediction_length`, Chronos' `quantile_levels`): an unknown field by one of them says ours.
HORIZON = "`horizon` (steps)"
OUR_NAME = {
    "h": HORIZON,
    "fh": HORIZON,
    "prediction_length": HORIZON,
    "levels": "`level` (central intervals in percent, e.g. [80, 95])",
    "quantile_levels": "`quantiles` (probabilities, e.g. [0.1, 0.5, 0.9])",
}


def _limit_of(error: Mapping[str, Any]) -> Any | None:
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
    first: Mapping[str, Any] = errors[0] if errors else {"msg": "invalid request", "loc": ()}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        position = first.get("loc", ("body", None))[-1]
        where = f" at character {position}" if isinstance(position, int) else ""
        message = f"malformed JSON body: {ctx.get('error', 'decode error')}{where}"
        return 400, ErrorBody(code="malformed_json", message=message, field="body")
    problem = first_problem(errors, VALUES_TAGS)
    field = format_loc(problem.loc) or None
    message = f"{field}: {problem.message}" if field else problem.message
    name = str((first.get("loc") or ("",))[-1])
    if first.get("type") == "extra_forbidden" and name in OUR_NAME:
        message += f" (this API calls it {OUR_NAME[name]})"
    if problem.more:
        message += f" (and {problem.more} more error{'s' if problem.more > 1 else ''})"
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


async def on_service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    status = status_of(exc)
    log_server_error(logger, request.method, request.url.path, status, exc)
    return error_response_for(exc)


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    status_code, body = _validation_body(exc)
    return error_response(status_code, body)


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    body = ErrorBody(code=code, message=str(exc.detail))
    runtime = getattr(request.app.state, "runtime", None)  # None before start-up
    settings = runtime.settings if runtime is not None else None
    if exc.status_code == 413 and settings is not None:  # a streamed body counted past the limit
        error = PayloadTooLarge.body(settings.max_body_bytes)
        body = ErrorBody(code=code, message=error.message, field=error.field, limit=error.limit)
    return error_response(exc.status_code, body, dict(exc.headers) if exc.headers else None)


async def on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    body = ErrorBody(code="internal_error", message="internal server error")
    return error_response(500, body)


# The renderers by exception class, most specific first: what the app registers as its exception
# handlers, and what `render_error` picks from for code that answers outside FastAPI's routing.
RENDERERS = (
    (ServiceError, on_service_error),
    (RequestValidationError, on_validation_error),
    (StarletteHTTPException, on_http_error),
)


async def render_error(request: Request, exc: Exception) -> JSONResponse:
    """The response the app's exception handlers would give for `exc`; re-raises what none renders
    (an unexpected error, for the server error middleware's 500)."""
    for kind, renderer in RENDERERS:
        if isinstance(exc, kind):
            return await renderer(request, exc)
    raise exc


def register_exception_handlers(app: Any) -> None:
    """Install this API's renderers as the app's exception handlers."""
    for kind, renderer in RENDERERS:
        app.add_exception_handler(kind, renderer)
    app.add_exception_handler(Exception, on_unexpected_error)
