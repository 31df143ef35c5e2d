"""Domain errors -> a protocol's status: the one lookup every protocol uses, and the HTTP table they
share. Each protocol keeps its own choices where they differ (/v1 answers 422 for invalid input, OIP v2 and
KServe 400; gRPC has its own codes) by passing its own table."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypeVar

from app.core.errors import (
    BodyTimeout,
    ClientClosed,
    DeviceError,
    InferenceError,
    InvalidInput,
    ModelNotFound,
    ModelNotReady,
    NotServed,
    Overloaded,
    PayloadTooLarge,
    PermissionDenied,
    PublishRefused,
    ServiceError,
    Timeout,
    TooManyVersions,
    Unauthenticated,
    UnsupportedMediaType,
)

T = TypeVar("T")

HTTP_STATUS: dict[type[ServiceError], int] = {
    InvalidInput: 400,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    ModelNotFound: 404,
    NotServed: 404,
    TooManyVersions: 409,  # the server's state, not the request, is in the way: unload something first
    PublishRefused: 409,  # the repository's state (the target model's kind, its room) is in the way
    ModelNotReady: 503,
    Overloaded: 503,
    Timeout: 504,
    InferenceError: 500,
    DeviceError: 503,
    Unauthenticated: 401,
    PermissionDenied: 403,
    ClientClosed: 499,  # nginx's "client closed request": no one reads it, the metrics count it
    BodyTimeout: 408,  # what the connection answered before it closed
}


def lookup(table: Mapping[type[ServiceError], T], exc: ServiceError, default: T) -> T:
    """The entry of the most specific class of `exc` the table lists (through the MRO), else `default`."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return default


def error_headers(exc: ServiceError) -> dict[str, str] | None:
    """The HTTP headers an error answer carries: the challenge for a missing key, Retry-After for a
    refusal that knows when to come back."""
    if isinstance(exc, Unauthenticated):
        return {"WWW-Authenticate": 'Bearer realm="rsa"'}
    return {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None


def log_server_error(logger: logging.Logger, method: str, path: str, status: int, exc: ServiceError) -> None:
    """Log an error answered with a 5xx status: 500 is our fault (ERROR); 503 and 504 are load, worth a
    warning only. A 4xx is the client's and goes unlogged."""
    if status >= 500:
        level = logging.ERROR if status == 500 else logging.WARNING
        logger.log(level, "%s %s -> %d %s: %s", method, path, status, exc.code, exc.message)
