"""Timestamps in request bodies: ISO 8601 (or a Unix time), with an error that says so.

Pydantic's own message for `"26/01/2018"` is "invalid character in year": true, but it names neither the
format expected nor an example. Every protocol's timestamp fields (`/v1`'s `series[i].start`, KServe's
`inputs[i].start_timestamp`) take `IsoDatetime`, which parses exactly as `datetime` does and only words
the refusal: the format, an example, what was sent and pydantic's reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

EXAMPLE = "2018-01-26T16:00:00Z"
_PYDANTIC_PREFIX = "Input should be a valid datetime or date, "


def _iso8601(value: Any, handler: ValidatorFunctionWrapHandler) -> datetime:
    try:
        return handler(value)
    except ValidationError as exc:
        if not isinstance(value, str):
            raise
        reason = str(exc.errors()[0].get("msg", "")).removeprefix(
            "Input should be a valid datetime or date, "
        )
        raise PydanticCustomError(
            "datetime_iso8601",
            "expected an ISO 8601 datetime such as {example} (or a date, 2018-01-26; without an offset it "
            "is UTC), got {value} ({reason})",
            {"example": EXAMPLE, "value": repr(value[:64]), "reason": reason},
        ) from None


IsoDatetime = Annotated[datetime, WrapValidator(_iso8601)]
