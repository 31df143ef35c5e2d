"""OpenAPI descriptions of the API-key errors (the body is `/v1`'s `ErrorResponse`)."""

from __future__ import annotations

from typing import Any

from app.protocols.rsa_v1.schemas import ErrorResponse

# Every route behind `require_api_key` (app/api/main.py), once RSA_API_KEYS or RSA_API_KEYS_FILE is set.
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "No API key: send `Authorization: Bearer <key>`."},
    403: {"model": ErrorResponse, "description": "The API key is not one of the configured keys."},
}
