"""Timestamps in request bodies: ISO 8601 (or a Unix time), with an error that says so.

Pydantic's own message for `"26/01/2018"` is "invalid character in year": true, but it names neither the
format expected nor an example. Every protocol's timestamp fields (`/v1`'s `series[i].start`, KServe's
`inputs[i].start_timestamp`) take `IsoDatetime`, which parses exactly as `datetime` does and only words
the refusal: the format, an example, what was sent and pydantic's reason.

A time may end in an IANA zone name in brackets (RFC 9557): `2023-10-29T02:30:00[Europe/Berlin]` is that
wall-clock time in that zone (in the autumn repeat, the first of the two; add the offset to pick the
second: `2023-10-29T02:30:00+01:00[Europe/Berlin]`, whose offset wins and is then shown in the zone). A
time without offset or zone is read in the model's zone by the codec (UTC for a model without one).
An offset moved into a zone where it is no date (`9999-12-31T23:00:00-05:00[Asia/Tokyo]`, past year 9999
there) is refused here, naming the years (`YEARS`); the codec refuses the same of a start read in the
model's zone (`app.inference.windows.in_model_zone`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from app.inference.windows import YEARS
from rsa_core.zones import HOST_ZONES, model_zone, skipped

EXAMPLE = "2018-01-26T16:00:00Z"
_PYDANTIC_PREFIX = "Input should be a valid datetime or date, "


_ZONE_SUFFIX = re.compile(r"^(?P<time>[^\[\]]+)\[(?P<zone>[^\[\]]{1,64})\]$")


def _zone(name: str, value: str) -> ZoneInfo:
    try:
        return model_zone(name)  # `localtime` is the server's own zone: refused, as a model's is
    except ValueError as e:
        host = name.strip().lower() in HOST_ZONES
        raise PydanticCustomError(
            "datetime_zone",
            "{reason} (in {value})"
            if host
            else "unknown time zone {zone} in {value}: expected an IANA name such as Europe/Berlin",
            {"reason": str(e), "zone": repr(name), "value": repr(value[:80])},
        ) from None


def _iso8601(value: Any, handler: ValidatorFunctionWrapHandler) -> datetime:
    if isinstance(value, str) and (match := _ZONE_SUFFIX.match(value.strip())) is not None:
        zone = _zone(match["zone"], value)
        when = _iso8601(match["time"], handler)
        if when.tzinfo is None:
            try:
                gap = skipped(when, zone)
            except OverflowError:
                gap = False  # no date there: the codec names the years
            if gap:  # the one rule (rsa_core.zones): the client, batch, the exporter and /ui refuse it too
                raise PydanticCustomError(
                    "datetime_skipped",
                    "{value} does not exist in {zone}: the clocks skip it (daylight saving); send the time "
                    "as the clocks showed it, or with its UTC offset",
                    {"value": repr(value[:80]), "zone": match["zone"]},
                )
            return when.replace(tzinfo=zone)
        try:
            return when.astimezone(zone)
        except OverflowError:  # the instant is no date in that zone: before year 1 or after 9999
            raise PydanticCustomError(
                "datetime_range",
                "{value} is not a date in {zone}: times must lie within years 1 to 9999 ({expected})",
                {"value": repr(value[:80]), "zone": match["zone"], "expected": YEARS},
            ) from None
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
            "expected an ISO 8601 datetime such as {example} (or a date, 2018-01-26, or a time ending in a "
            "zone name, 2023-10-29T02:30:00[Europe/Berlin]; without an offset or zone it is in the model's "
            "zone, UTC for most), got {value} ({reason})",
            {"example": EXAMPLE, "value": repr(value[:64]), "reason": reason},
        ) from None


IsoDatetime = Annotated[datetime, WrapValidator(_iso8601)]
