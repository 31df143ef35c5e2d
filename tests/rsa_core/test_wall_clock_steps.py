"""rsa_core.steps' rule for a zoned model (issue 44/46 follow-up): calendar months and whole days (daily,
weekly) move the zone's wall clock, so local midnight stays local midnight across a daylight-saving change;
hourly and shorter steps stay elapsed time on the instant. Each case is checked on every form of the rule:
`forecast_timestamps` from a start in the zone (/v1, KServe) and from the same instant in UTC (OIP v2's
Unix-seconds `start`), `steps_after` on arrays (batch, the client, export.panel) in two units, and
`shifted` back to the last value (the client's short-window start). A model without a zone is unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from rsa_core.calendar import CalendarStep
from rsa_core.steps import DAY_S, forecast_timestamps, on_wall_clock, shifted, step, steps_after

BERLIN = ZoneInfo("Europe/Berlin")  # 2023: spring 26 March 02:00 -> 03:00, autumn 29 October 03:00 -> 02:00
NEW_YORK = ZoneInfo(
    "America/New_York"
)  # 2023: spring 12 March 02:00 -> 03:00, autumn 5 November 02:00 -> 01:00
MONTHLY = CalendarStep(1, False)
WEEK_S = 7 * DAY_S

# (zone, step seconds, months, the last value's wall-clock time, the next three as the zone shows them)
CASES = {
    "daily-berlin-spring": (
        BERLIN,
        DAY_S,
        None,
        datetime(2023, 3, 25),
        ["2023-03-26T00:00:00+01:00", "2023-03-27T00:00:00+02:00", "2023-03-28T00:00:00+02:00"],
    ),
    "daily-berlin-autumn": (
        BERLIN,
        DAY_S,
        None,
        datetime(2023, 10, 28),
        ["2023-10-29T00:00:00+02:00", "2023-10-30T00:00:00+01:00", "2023-10-31T00:00:00+01:00"],
    ),
    "daily-new-york-spring": (
        NEW_YORK,
        DAY_S,
        None,
        datetime(2023, 3, 11),
        ["2023-03-12T00:00:00-05:00", "2023-03-13T00:00:00-04:00", "2023-03-14T00:00:00-04:00"],
    ),
    "daily-new-york-autumn": (
        NEW_YORK,
        DAY_S,
        None,
        datetime(2023, 11, 4),
        ["2023-11-05T00:00:00-04:00", "2023-11-06T00:00:00-05:00", "2023-11-07T00:00:00-05:00"],
    ),
    "weekly-berlin-spring": (
        BERLIN,
        WEEK_S,
        None,
        datetime(2023, 3, 19),
        ["2023-03-26T00:00:00+01:00", "2023-04-02T00:00:00+02:00", "2023-04-09T00:00:00+02:00"],
    ),
    "weekly-new-york-autumn": (
        NEW_YORK,
        WEEK_S,
        None,
        datetime(2023, 10, 29),
        ["2023-11-05T00:00:00-04:00", "2023-11-12T00:00:00-05:00", "2023-11-19T00:00:00-05:00"],
    ),
    "monthly-berlin-autumn": (
        BERLIN,
        30 * DAY_S,
        MONTHLY,
        datetime(2023, 9, 1),
        ["2023-10-01T00:00:00+02:00", "2023-11-01T00:00:00+01:00", "2023-12-01T00:00:00+01:00"],
    ),
    "monthly-new-york-spring": (
        NEW_YORK,
        30 * DAY_S,
        MONTHLY,
        datetime(2023, 2, 1),
        ["2023-03-01T00:00:00-05:00", "2023-04-01T00:00:00-04:00", "2023-05-01T00:00:00-04:00"],
    ),
    "hourly-berlin-spring": (
        BERLIN,
        3600,
        None,
        datetime(2023, 3, 26, 1),
        ["2023-03-26T03:00:00+02:00", "2023-03-26T04:00:00+02:00", "2023-03-26T05:00:00+02:00"],
    ),
    "hourly-new-york-autumn": (
        NEW_YORK,
        3600,
        None,
        datetime(2023, 11, 5, 0),
        ["2023-11-05T01:00:00-04:00", "2023-11-05T01:00:00-05:00", "2023-11-05T02:00:00-05:00"],
    ),
    # a daily time the spring change skips: read with the offset before the change (02:30 -> 03:30)
    "daily-0230-berlin-spring-gap": (
        BERLIN,
        DAY_S,
        None,
        datetime(2023, 3, 25, 2, 30),
        ["2023-03-26T03:30:00+02:00", "2023-03-27T02:30:00+02:00", "2023-03-28T02:30:00+02:00"],
    ),
    # a daily time the autumn change repeats: its first (summer-time) reading
    "daily-0130-new-york-autumn-repeat": (
        NEW_YORK,
        DAY_S,
        None,
        datetime(2023, 11, 4, 1, 30),
        ["2023-11-05T01:30:00-04:00", "2023-11-06T01:30:00-05:00", "2023-11-07T01:30:00-05:00"],
    ),
}


def utc64(when: datetime, unit: str = "us") -> np.datetime64:
    return np.datetime64(when.astimezone(UTC).replace(tzinfo=None), unit)


@pytest.mark.parametrize(("zone", "seconds", "months", "wall", "shown"), CASES.values(), ids=CASES.keys())
def test_every_form_of_the_rule_gives_the_zones_steps(
    zone: ZoneInfo, seconds: int, months: CalendarStep | None, wall: datetime, shown: list[str]
) -> None:
    last = wall.replace(tzinfo=zone)
    got = forecast_timestamps(last, 1, 3, seconds, months, zone)
    assert [t.isoformat() for t in got] == shown
    # OIP v2 reads `start` as Unix seconds, a UTC datetime: the same times in the model's zone
    from_utc = forecast_timestamps(last.astimezone(UTC), 1, 3, seconds, months, zone)
    assert [t.isoformat() for t in from_utc] == shown
    want = [datetime.fromisoformat(s) for s in shown]
    for unit in ("us", "ns"):
        arrays = steps_after(np.array([utc64(last, unit)] * 2), 3, seconds, months, zone)
        assert arrays.dtype == np.dtype(f"datetime64[{unit}]")
        assert (arrays == np.array([utc64(w, unit) for w in want])[None, :]).all()
    back = shifted(np.array([utc64(want[-1])]), [-3], seconds, months, zone)
    assert back[0, 0] == utc64(last)
    # days and months keep the time of day; elapsed time is the step itself only where it is not
    elapsed = {b.astimezone(UTC) - a.astimezone(UTC) for a, b in zip([last, *want], want, strict=False)}
    if on_wall_clock(seconds, months, zone):
        assert {t.astimezone(zone).time() for t in want} <= {wall.time(), (wall + timedelta(hours=1)).time()}
        assert elapsed != {timedelta(seconds=seconds)}  # each case crosses a change
    else:
        assert elapsed == {timedelta(seconds=seconds)}


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK], ids=["berlin", "new-york"])
def test_a_zoned_days_step_is_not_elapsed_time_on_the_change_day(zone: ZoneInfo) -> None:
    """The day after the spring change's eve is 23 hours on, after the autumn's 25 (86,400 s on instants
    would land an hour off: 23:00 or 01:00 local)."""
    spring, autumn = (25, 28) if zone is BERLIN else (11, 4)
    for month, day, hours in ((3, spring, 23), (10 if zone is BERLIN else 11, autumn, 25)):
        eve = datetime(2023, month, day, tzinfo=zone)
        got = steps_after(np.array([utc64(eve)]), 2, DAY_S, None, zone)[0]
        assert got[1] - got[0] == np.timedelta64(hours, "h")


def test_without_a_zone_every_step_is_as_before() -> None:
    """A model without a zone: whole days are 86,400 s on the instant, the start's own offset is kept,
    NaT stays NaT; steps that are not whole days stay elapsed time in a zone too."""
    last = np.array(["2023-03-25T23:00", "NaT"], "datetime64[ns]")
    assert on_wall_clock(DAY_S, None, None) is False
    got = steps_after(last, 3, DAY_S)
    np.testing.assert_array_equal(got, last[:, None] + np.timedelta64(DAY_S, "s") * np.arange(1, 4)[None, :])
    start = datetime(2023, 3, 25, 23, 0, tzinfo=UTC)
    assert [t.isoformat() for t in forecast_timestamps(start, 1, 2, DAY_S)] == [
        "2023-03-26T23:00:00+00:00",
        "2023-03-27T23:00:00+00:00",
    ]
    for seconds in (12 * 3600, 36 * 3600, 1800):
        assert on_wall_clock(seconds, None, BERLIN) is False
        zoned = steps_after(last[:1], 3, seconds, None, BERLIN)
        np.testing.assert_array_equal(zoned, steps_after(last[:1], 3, seconds))
    zoned = steps_after(last, 2, DAY_S, None, BERLIN)
    assert np.isnat(zoned[1]).all() and not np.isnat(zoned[0]).any()


def test_a_wall_clock_step_past_year_9999_overflows() -> None:
    with pytest.raises(OverflowError):
        step(datetime(9999, 12, 30, tzinfo=BERLIN), 3, DAY_S, None, BERLIN)
    with pytest.raises(OverflowError):
        steps_after(np.array(["9999-12-30T00:00"], "datetime64[us]"), 3, WEEK_S, None, NEW_YORK)
