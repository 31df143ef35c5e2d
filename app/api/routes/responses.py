"""OpenAPI descriptions of the error responses (the body is always `ErrorResponse`)."""

from __future__ import annotations

from typing import Any

from app.protocols.rsa_v1.schemas import ErrorResponse

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "Unknown model or version."},
    422: {"model": ErrorResponse, "description": "Invalid input; `field` and `limit` say what and why."},
    503: {"model": ErrorResponse, "description": "Model loading/failed, or overloaded (Retry-After)."},
}

INFERENCE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": ErrorResponse, "description": "Malformed JSON body."},
    413: {"model": ErrorResponse, "description": "Request body above RSA_MAX_BODY_BYTES."},
    415: {"model": ErrorResponse, "description": "A Content-Type other than JSON."},
    500: {"model": ErrorResponse, "description": "The model failed (a server fault)."},
    504: {"model": ErrorResponse, "description": "No result within RSA_REQUEST_TIMEOUT_S."},
}

# Every route behind `require_api_key` (app/api/main.py), once RSA_API_KEYS or RSA_API_KEYS_FILE is set.
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "No API key: send `Authorization: Bearer <key>`."},
    403: {"model": ErrorResponse, "description": "The API key is not one of the configured keys."},
}
