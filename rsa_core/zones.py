"""Which time zones a model may name, and which wall-clock times a zone skips: the one rule, in the standard
library, by which the service reads a naive `start` (app/inference/windows.py, app/protocols/datetimes.py)
and the exporter checks `--timezone`. `rsa_core.wallclock.localize` flags the same skipped times when it
reads a whole column with pandas (the client, the batch scorer and the exporter's files; the /ui page's
script is tested against it); tests/rsa_core/test_zones.py checks the two agree (issue 46, item 8).
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["HOST_ZONES", "model_zone", "skipped"]

# Names in the zone database that stand for the host's own setting, not a zone: `localtime` is a link to
# /etc/localtime, `posixrules` to whatever the system's POSIX TZ rules default to. A model naming one
# would read its times differently on each machine it is served on.
HOST_ZONES = frozenset({"localtime", "posixrules"})


def model_zone(name: str) -> ZoneInfo:
    """The zone an IANA name names; ValueError saying why for an unknown name, and for a name of the
    host's own zone (`localtime`), which differs from machine to machine."""
    if name.strip().lower() in HOST_ZONES:
        raise ValueError(
            f"time zone {name!r} is the zone of whatever machine reads it (a link to /etc/localtime), not "
            "one zone: a model's times would read differently on each host; name the zone itself, an IANA "
            "name such as Europe/Berlin"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"time zone {name!r} is not an IANA time zone name such as Europe/Berlin") from None


def skipped(wall: datetime, zone: tzinfo) -> bool:
    """Whether the wall-clock time `wall` (its tzinfo ignored) never shows on the clocks of `zone`: the
    spring change of daylight saving skips it (02:30 on 2023-03-26 in Europe/Berlin). Read with either
    fold, such a time comes back from UTC as another one. OverflowError where `wall` read in `zone` is no
    date (years 1 to 9999)."""
    naive = wall.replace(tzinfo=None)
    for fold in (0, 1):
        aware = naive.replace(tzinfo=zone, fold=fold)
        if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive:
            return False
    return True
