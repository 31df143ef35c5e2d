"""The app's exception handlers: where domain and framework errors become HTTP responses.

Each protocol renders its own error shape; today the service speaks one, the `/v1` API. A protocol
with another shape (OIP v2's `{"error": str}`, KServe time series' `{"error": {...}}`) registers its
renderer here, chosen by the request's path prefix.
"""

from __future__ import annotations

from fastapi import FastAPI

from app.protocols.rsa_v1 import errors as rsa_v1_errors


def register_exception_handlers(app: FastAPI) -> None:
    rsa_v1_errors.register_exception_handlers(app)
