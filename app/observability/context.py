"""What the layers below the HTTP middleware learn about the request being served.

The metrics middleware opens a `RequestRecord` per request; the data plane notes the model version the
request resolved to and the error rendering notes the error code. A context variable carries it, so
neither side imports the other, and calls outside a request (tests, warm-ups) are no-ops.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass


@dataclass
class RequestRecord:
    model: str = ""
    version: str = ""
    error_code: str | None = None


_record: ContextVar[RequestRecord | None] = ContextVar("rsa_request_record", default=None)


def open_record() -> tuple[RequestRecord, Token[RequestRecord | None]]:
    record = RequestRecord()
    return record, _record.set(record)


def close_record(token: Token[RequestRecord | None]) -> None:
    _record.reset(token)


def note_model_version(model: str, version: int) -> None:
    """The current request is served by this model version."""
    record = _record.get()
    if record is not None:
        record.model, record.version = model, str(version)


def note_error(code: str) -> None:
    """The current request is answered with this error code."""
    record = _record.get()
    if record is not None:
        record.error_code = code
