"""The request record: the requests in flight counted across open and close, the current one included."""

from __future__ import annotations

from app.core.context import close_record, open_record, requests_in_flight


def test_requests_in_flight_counts_open_records() -> None:
    base = requests_in_flight()
    _, outer = open_record(0.0, 1.0)
    _, inner = open_record(0.0, 1.0)
    assert requests_in_flight() == base + 2
    close_record(inner)
    assert requests_in_flight() == base + 1
    close_record(outer)
    assert requests_in_flight() == base
