"""The request being served, as the layers below the transport see it.

The transport (the HTTP middleware) opens a `RequestRecord` per request with its deadline; the inference
service reads the deadline and notes the model version the request resolved to, and the error rendering
notes the error code, for the metrics. A context variable carries it, so no layer imports another for
it, and calls outside a request (tests, warm-ups) see no record.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any


@dataclass
class RequestRecord:
    deadline: float | None = None  # time.perf_counter() by which the whole answer is due
    timeout_s: float | None = None  # the budget that deadline was set from
    model: str = ""
    version: str = ""
    error_code: str | None = None
    # Rows the engine reserved for this request before its body was read (an engine Reservation): taken
    # by the submit, else released when the request ends.
    reservation: Any = None


_record: ContextVar[RequestRecord | None] = ContextVar("rsa_request_record", default=None)
_open = 0  # records open in this process: the requests being served, of every protocol


def open_record(
    start: float | None = None, timeout_s: float | None = None
) -> tuple[RequestRecord, Token[RequestRecord | None]]:
    """A request that arrived at `start` (perf_counter) and must be answered within `timeout_s`."""
    global _open
    deadline = None if start is None or timeout_s is None else start + timeout_s
    record = RequestRecord(deadline=deadline, timeout_s=timeout_s)
    _open += 1
    return record, _record.set(record)


def close_record(token: Token[RequestRecord | None]) -> None:
    global _open
    _open -= 1
    _record.reset(token)


def requests_in_flight() -> int:
    """Requests being served in this process right now (the current one included)."""
    return _open


def current_deadline() -> tuple[float, float] | None:
    """(deadline, its whole budget in seconds) of the request being served, if any."""
    record = _record.get()
    if record is None or record.deadline is None or record.timeout_s is None:
        return None
    return record.deadline, record.timeout_s


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


def note_reservation(reservation: Any) -> None:
    """The engine reserved rows for the current request (early admission)."""
    record = _record.get()
    if record is not None:
        record.reservation = reservation


def take_reservation(name: str, version: int) -> Any:
    """The current request's reservation, if it was made for this version; it is the caller's from now."""
    record = _record.get()
    if record is None or record.reservation is None:
        return None
    reservation, record.reservation = record.reservation, None
    if (reservation.name, reservation.version) != (name, version):
        record.reservation = reservation  # another version's: left for the middleware to release
        return None
    return reservation
